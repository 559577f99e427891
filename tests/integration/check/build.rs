//! The checkers' two inputs built the way a test tells them: sends and their outcomes, and
//! reads, for the history; how each partition ended up, for the final state.

use hightide::history::final_state::{FinalState, PartitionFinal, ReadRecord, ReplicaLog};
use hightide::history::{Event, MessageId, Op, TxnOutcome};
use hightide::os::clock::SimTime;
use hightide::types::{BrokerId, Epoch, Offset, TopicPartition};
use std::time::Duration;

/// A simulated time, in ms since the start of the run.
pub fn ms(ms: u64) -> SimTime {
    SimTime::from_millis(ms)
}

/// A history, its events in the order of the calls. Its clock starts at 0 and moves 1 ms
/// on after each send, the pace of a steady producer, unless `at` sets it.
pub struct HistoryBuilder {
    events: Vec<Event>,
    now: SimTime,
}

impl HistoryBuilder {
    pub fn new() -> Self {
        HistoryBuilder {
            events: Vec::new(),
            now: SimTime::ZERO,
        }
    }

    /// The next send or read happens at `time`.
    pub fn at(mut self, time: SimTime) -> Self {
        self.now = time;
        self
    }

    /// `id`'s producer invokes a send of it to `tp`; the send's outcome comes next.
    pub fn send(mut self, id: MessageId, tp: &TopicPartition) -> InFlight {
        let invoked = self.now;
        self.push(invoked, producer(id), Op::Invoke { id, tp: tp.clone() });
        self.now += Duration::from_millis(1);
        InFlight {
            history: self,
            id,
            tp: tp.clone(),
            completes: invoked + Duration::from_millis(2),
        }
    }

    /// Consumer `consumer` read the record at `tp`@`offset`, carrying `id` if it had one.
    pub fn read(
        mut self,
        consumer: u32,
        tp: &TopicPartition,
        offset: i64,
        id: Option<MessageId>,
    ) -> Self {
        let op = Op::Read {
            consumer,
            tp: tp.clone(),
            offset: Offset(offset),
            id,
        };
        self.push(self.now, format!("consumer-{consumer}"), op);
        self
    }

    /// `first`..=`last`'s producer ended their transaction with `outcome`; the sends'
    /// completions, which follow it in a real history, come from `send`.
    pub fn transaction(mut self, first: MessageId, last: MessageId, outcome: TxnOutcome) -> Self {
        let op = Op::Txn {
            first,
            last,
            outcome,
            error: None,
        };
        self.push(self.now, producer(first), op);
        self
    }

    pub fn build(self) -> Vec<Event> {
        self.events
    }

    fn push(&mut self, time: SimTime, process: String, op: Op) {
        self.events.push(Event {
            time,
            process: process.into(),
            op,
        });
    }
}

fn producer(id: MessageId) -> String {
    format!("producer-{}", id.producer)
}

/// A send invoked and not yet answered. The answer comes 2 ms after the invoke unless
/// `completes_at` says when.
pub struct InFlight {
    history: HistoryBuilder,
    id: MessageId,
    tp: TopicPartition,
    completes: SimTime,
}

impl InFlight {
    pub fn completes_at(mut self, time: SimTime) -> Self {
        self.completes = time;
        self
    }

    /// Acknowledged at `offset` of the partition it was sent to.
    pub fn acked_at(self, offset: i64) -> HistoryBuilder {
        let op = Op::Ok {
            id: self.id,
            tp: self.tp.clone(),
            offset: Offset(offset),
            degraded: None,
        };
        self.complete(op)
    }

    /// A definite failure: the client knows nothing was written.
    pub fn failed(self, error: &str) -> HistoryBuilder {
        let op = Op::Fail {
            id: self.id,
            error: error.to_string(),
        };
        self.complete(op)
    }

    /// An unknown outcome: it may have been written.
    pub fn indeterminate(self, error: &str) -> HistoryBuilder {
        let op = Op::Info {
            id: self.id,
            error: error.to_string(),
        };
        self.complete(op)
    }

    /// The run ended before any answer.
    pub fn unanswered(self) -> HistoryBuilder {
        self.history
    }

    fn complete(self, op: Op) -> HistoryBuilder {
        let InFlight {
            mut history,
            id,
            completes,
            ..
        } = self;
        history.push(completes, producer(id), op);
        history
    }
}

/// The size of every value the histories' producers send.
pub const VALUE_BYTES: usize = 32;

/// A record of a final read or a replica's log: `id` in its value at `offset`.
pub fn record(offset: i64, id: MessageId) -> ReadRecord {
    ReadRecord::new(Offset(offset), &id.value(VALUE_BYTES))
}

/// The log of `broker`, a member of the ISR, holding `records`.
pub fn in_isr(broker: u32, records: Vec<ReadRecord>) -> ReplicaLog {
    replica(broker, true, records)
}

/// The log of `broker`, out of the ISR, holding `records`.
pub fn out_of_isr(broker: u32, records: Vec<ReadRecord>) -> ReplicaLog {
    replica(broker, false, records)
}

fn replica(broker: u32, in_isr: bool, records: Vec<ReadRecord>) -> ReplicaLog {
    ReplicaLog {
        broker: BrokerId(broker),
        in_isr,
        running: true,
        log_start_offset: records.first().map(|r| r.offset).unwrap_or(Offset(0)),
        log_end_offset: records.last().map(|r| r.offset.next()).unwrap_or(Offset(0)),
        records,
        epochs: vec![(Epoch(0), Offset(0))],
    }
}

/// How `tp` ended, healthy unless the test says otherwise: led by broker-1, brokers 1 to 3
/// in the ISR each holding the final read `read`, the HW just past its last record.
pub fn partition(tp: TopicPartition, read: Vec<ReadRecord>) -> PartitionBuilder {
    let hw = read.last().map(|r| r.offset.next()).unwrap_or(Offset(0));
    let replicas = (1..=3).map(|b| in_isr(b, read.clone())).collect();
    PartitionBuilder(PartitionFinal {
        tp,
        leader: Some(BrokerId(1)),
        high_watermark: hw,
        log_start_offset: Offset(0),
        last_stable_offset: None,
        read,
        complete: true,
        beyond_lso: None,
        replicas,
    })
}

pub struct PartitionBuilder(PartitionFinal);

impl PartitionBuilder {
    pub fn leader(mut self, broker: u32) -> Self {
        self.0.leader = Some(BrokerId(broker));
        self
    }

    pub fn no_leader(mut self) -> Self {
        self.0.leader = None;
        self
    }

    pub fn high_watermark(mut self, offset: i64) -> Self {
        self.0.high_watermark = Offset(offset);
        self
    }

    /// The final read ran out of time: what it holds is all it got.
    pub fn unreadable(mut self) -> Self {
        self.0.complete = false;
        self
    }

    /// Read read_committed up to the LSO `offset`; below the HW, a transaction was still
    /// open and the read is incomplete, as the final read reports it.
    pub fn last_stable_offset(mut self, offset: i64) -> Self {
        self.0.last_stable_offset = Some(Offset(offset));
        self.0.complete &= Offset(offset) >= self.0.high_watermark;
        self
    }

    /// The read past the LSO, as read_uncommitted, up to the HW: `records`.
    pub fn beyond_lso(mut self, records: Vec<ReadRecord>) -> Self {
        self.0.beyond_lso = Some(records);
        self
    }

    pub fn log_start(mut self, offset: i64) -> Self {
        self.0.log_start_offset = Offset(offset);
        self
    }

    /// `replica` in place of its broker's log.
    pub fn replica(mut self, replica: ReplicaLog) -> Self {
        let slot = self
            .0
            .replicas
            .iter_mut()
            .find(|r| r.broker == replica.broker)
            .expect("the partition has a replica on that broker");
        *slot = replica;
        self
    }

    /// Exactly these replicas.
    pub fn replicas(mut self, replicas: Vec<ReplicaLog>) -> Self {
        self.0.replicas = replicas;
        self
    }
}

/// The final state of these partitions, in this order.
pub fn final_state(partitions: impl IntoIterator<Item = PartitionBuilder>) -> FinalState {
    FinalState {
        partitions: partitions.into_iter().map(|p| p.0).collect(),
        outputs: Vec::new(),
        facts: Default::default(),
        group: None,
    }
}
