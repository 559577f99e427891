//! What the cluster did, as its programs recorded it when they did it: each system's own
//! facts in its own words (`kafka`: elections, ISR changes, appends, acknowledgements,
//! truncations, recoveries; `rocketmq`: recoveries, flushes), the producers' retries, and the faults the harness injected.
//! Like the history they live outside the hosts, so a crash does not erase them. The
//! checkers count them in the terms every system shares ([`Tally`]); each system's teller
//! tells from them why an anomaly happened. Nothing reads a program's memory.

pub mod kafka;
pub mod rocketmq;

use crate::history::MessageId;
use crate::os::clock::{self, SimTime};
use crate::types::{HostName, TopicPartition};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fact {
    /// What a Kafka program recorded.
    Kafka(kafka::Fact),
    /// What a RocketMQ program recorded.
    RocketMq(rocketmq::Fact),
    /// A producer put a batch of its sends `first..=last` back to send again, after
    /// `error`.
    Retried {
        producer: u32,
        tp: TopicPartition,
        first: MessageId,
        last: MessageId,
        error: String,
    },
    /// A producer's request carrying a batch for `tp` got no answer within its request
    /// timeout (whether the batch is then retried or given up).
    RequestTimedOut { producer: u32, tp: TopicPartition },
    /// The harness injected a fault (the scenario's action, its targets resolved to the
    /// hosts it struck), or lifted every fault for the heal phase.
    Fault { what: String, hosts: Vec<HostName> },
}

impl From<kafka::Fact> for Fact {
    fn from(fact: kafka::Fact) -> Fact {
        Fact::Kafka(fact)
    }
}

impl From<rocketmq::Fact> for Fact {
    fn from(fact: rocketmq::Fact) -> Fact {
        Fact::RocketMq(fact)
    }
}

impl Fact {
    /// What the fact adds to the counts every system shares, if anything.
    pub fn tally(&self) -> Option<Tally> {
        match self {
            Fact::Kafka(fact) => fact.tally(),
            Fact::RocketMq(fact) => fact.tally(),
            Fact::Retried { .. } => Some(Tally::Retry),
            Fact::RequestTimedOut { .. } => Some(Tally::RequestTimeout),
            Fact::Fault { .. } => None,
        }
    }

    /// The Kafka fact, if it is one.
    pub fn kafka(&self) -> Option<&kafka::Fact> {
        match self {
            Fact::Kafka(fact) => Some(fact),
            Fact::RocketMq(_)
            | Fact::Retried { .. }
            | Fact::RequestTimedOut { .. }
            | Fact::Fault { .. } => None,
        }
    }

    /// The RocketMQ fact, if it is one.
    pub fn rocketmq(&self) -> Option<&rocketmq::Fact> {
        match self {
            Fact::RocketMq(fact) => Some(fact),
            _ => None,
        }
    }
}

/// A fact's part in the cluster counts (`elections`, `isr_shrinks`, ...), in terms every
/// system shares: a Kafka ISR and a RocketMQ SyncStateSet both shrink and grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tally {
    /// A new leader was elected; unclean: it may lack acknowledged writes.
    Election { unclean: bool },
    /// The set of replicas in sync, as committed, lost a member.
    InSyncShrink,
    /// The set of replicas in sync, as committed, gained a member.
    InSyncExpand,
    /// A replica removed this many records from the end of its log.
    Truncated(u64),
    /// A server opened its log after an unclean stop, so recovery scanned it.
    Recovery,
    /// A producer put a batch back to send again.
    Retry,
    /// A producer's request got no answer in time.
    RequestTimeout,
    /// A transactional producer was fenced and its open transaction aborted; `timed_out`:
    /// by the coordinator's timeout.
    Fenced { timed_out: bool },
    /// A transaction's markers were written on this many partitions.
    Markers(u64),
    /// A transactional batch refused by partition verification.
    Unverified,
}

/// One fact and when it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactEvent {
    #[serde(with = "super::millis")]
    pub time: SimTime,
    pub fact: Fact,
}

/// The facts of a run as they are kept: a system's most frequent facts in its compact
/// rows (Kafka's appends and acknowledgements), every other fact as it came.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactLog {
    events: Vec<FactEvent>,
    kafka: kafka::Rows,
}

impl FactLog {
    /// Keeps one fact.
    pub fn push(&mut self, event: FactEvent) {
        let FactEvent { time, fact } = event;
        let fact = match fact {
            Fact::Kafka(fact) => match self.kafka.push(time, fact) {
                Some(fact) => Fact::Kafka(fact),
                None => return,
            },
            fact => fact,
        };
        self.events.push(FactEvent { time, fact });
    }

    /// Every fact not kept as a row, in the order recorded.
    pub fn events(&self) -> &[FactEvent] {
        &self.events
    }

    /// Kafka's appends and acknowledgements.
    pub fn kafka(&self) -> &kafka::Rows {
        &self.kafka
    }
}

impl FromIterator<FactEvent> for FactLog {
    fn from_iter<I: IntoIterator<Item = FactEvent>>(events: I) -> FactLog {
        let mut log = FactLog::default();
        for event in events {
            log.push(event);
        }
        log
    }
}

/// Where the cluster's programs record facts; cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct Facts(Rc<RefCell<FactLog>>);

impl Facts {
    pub fn record(&self, fact: impl Into<Fact>) {
        self.0.borrow_mut().push(FactEvent {
            time: clock::now(),
            fact: fact.into(),
        });
    }

    /// Every fact recorded, leaving none: read once when the run ends, where a copy would
    /// double the memory they take.
    pub fn take(&self) -> FactLog {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}
