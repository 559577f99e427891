//! The Jepsen-style history of a run: every client call as an invoke and its completion
//! (ok / fail / info), with simulated times. It lives outside the hosts (a crash must not
//! erase what the clients were told) and is all the checkers know of the clients.
//! `final_state` holds the rest of what they read: the final read and each replica's log.

pub mod budget;
pub mod facts;
pub mod final_state;

use crate::os::clock::{self, SimTime};
use crate::types::{Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

/// A produced message's unique id: producer number and that producer's send sequence.
/// It is written at the start of the message value as `producer-2:000417`. Eight bytes:
/// the history, the final state and the checkers each hold one per message, and four
/// billion sends per producer is more than any run makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct MessageId {
    pub producer: u32,
    pub seq: u32,
}

impl fmt::Display for MessageId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "producer-{}:{:06}", self.producer, self.seq)
    }
}

impl MessageId {
    /// The id at the start of a message value, if the value carries one.
    pub fn parse_value(value: &[u8]) -> Option<MessageId> {
        let end = value.iter().position(|&b| b == b'|').unwrap_or(value.len());
        let text = std::str::from_utf8(&value[..end]).ok()?;
        let rest = text.strip_prefix("producer-")?;
        let (producer, seq) = rest.split_once(':')?;
        Some(MessageId {
            producer: producer.parse().ok()?,
            seq: seq.parse().ok()?,
        })
    }

    /// A value of `len` bytes (at least the id) starting with this id, then `|` padding.
    pub fn value(&self, len: usize) -> Vec<u8> {
        let mut v = format!("{self}|").into_bytes();
        v.resize(len.max(v.len()), b'.');
        v
    }
}

/// What happened, per Jepsen: an invocation and its completion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Op {
    /// A send was invoked (the application called `send`).
    Invoke { id: MessageId, tp: TopicPartition },
    /// The send was acknowledged at this offset.
    Ok {
        id: MessageId,
        tp: TopicPartition,
        offset: Offset,
        /// A stored status that promises less than a plain acknowledgement: RocketMQ's
        /// FLUSH_DISK_TIMEOUT (stored, its flush unconfirmed).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        degraded: Option<String>,
    },
    /// The send definitely failed: nothing was written.
    Fail { id: MessageId, error: String },
    /// The outcome is unknown (timeout, disconnect, error after append, acks=0).
    Info { id: MessageId, error: String },
    /// A consumer read a record during the run.
    Read {
        consumer: u32,
        tp: TopicPartition,
        offset: Offset,
        id: Option<MessageId>,
    },
    /// A group member got a partition and starts reading it at `offset`: the group's
    /// committed offset (`committed`), or where `auto.offset.reset` put it.
    Resume {
        consumer: u32,
        tp: TopicPartition,
        offset: Offset,
        committed: bool,
    },
    /// A group member's position was out of the leader's range (its log was truncated
    /// below it, or retention passed it): `auto.offset.reset` moved it to `to`.
    Reset {
        consumer: u32,
        tp: TopicPartition,
        from: Offset,
        to: Offset,
    },
    /// A group member finished processing a record (its `processing` time spent).
    Processed {
        consumer: u32,
        tp: TopicPartition,
        offset: Offset,
        id: Option<MessageId>,
    },
    /// The coordinator acknowledged a member's commit: the group resumes the partition at
    /// `offset`, the next record to process.
    Committed {
        consumer: u32,
        tp: TopicPartition,
        offset: Offset,
    },
    /// A transactional producer's transaction ended, with the sends `first..=last` (one
    /// producer's consecutive sequence numbers). Its sends' completions follow: ok if it
    /// committed, fail if it aborted, info if its outcome is unknown.
    Txn {
        first: MessageId,
        last: MessageId,
        outcome: TxnOutcome,
        /// Why it aborted or why its outcome is unknown.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
}

/// How a transaction ended, as its producer learned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TxnOutcome {
    /// commitTransaction returned.
    Committed,
    /// abortTransaction returned, or the transaction failed before its commit was sent.
    Aborted,
    /// The commit was sent and no answer says what became of it.
    Unknown,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// When the client saw it happen.
    #[serde(with = "millis")]
    pub time: SimTime,
    /// The host that recorded the event (`producer-1`, `consumer-2`), shared by its events.
    pub process: Arc<str>,
    #[serde(flatten)]
    pub op: Op,
}

/// A shared, append-only history. Cloning shares it.
#[derive(Clone, Default)]
pub struct History {
    events: Rc<RefCell<Vec<Event>>>,
    /// Sends invoked and not yet completed, so the harness can wait for them cheaply.
    unresolved: Rc<Cell<u64>>,
}

impl History {
    /// A history with room for `events`, so that a run that records about that many never
    /// moves them (growing by doubling holds the old and the new buffer at once).
    pub fn with_capacity(events: usize) -> History {
        History {
            events: Rc::new(RefCell::new(Vec::with_capacity(events))),
            unresolved: Rc::default(),
        }
    }

    pub fn record(&self, process: &Arc<str>, op: Op) {
        let unresolved = self.unresolved.get();
        match op {
            Op::Invoke { .. } => self.unresolved.set(unresolved + 1),
            Op::Ok { .. } | Op::Fail { .. } | Op::Info { .. } => {
                self.unresolved.set(unresolved.saturating_sub(1))
            }
            Op::Read { .. }
            | Op::Resume { .. }
            | Op::Reset { .. }
            | Op::Processed { .. }
            | Op::Committed { .. }
            | Op::Txn { .. } => {}
        }
        self.events.borrow_mut().push(Event {
            time: clock::now(),
            process: process.clone(),
            op,
        });
    }

    /// Sends invoked so far that have no outcome yet.
    pub fn unresolved(&self) -> u64 {
        self.unresolved.get()
    }

    /// The events so far, in order, leaving the history empty: it is read once, when the
    /// run ends, and a copy would double its memory.
    pub fn take_events(&self) -> Vec<Event> {
        std::mem::take(&mut *self.events.borrow_mut())
    }
}

/// Event times in JSON: milliseconds since the run began.
pub(crate) mod millis {
    use crate::os::clock::SimTime;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(t: &SimTime, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(t.since_start().as_secs_f64() * 1000.0)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SimTime, D::Error> {
        let ms = f64::deserialize(d)?;
        Ok(SimTime::after_start(Duration::from_secs_f64(ms / 1000.0)))
    }
}
