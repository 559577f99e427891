//! What the cluster did, as its programs recorded it when they did it: the controller's
//! elections and ISR changes; the leaders' appends and acknowledgements; the brokers'
//! follower truncations and log recoveries; the producers' retries; the faults the
//! harness injected. Like the history it lives outside the hosts, so a crash does not
//! erase it; the checkers count it (`elections`, `isr_shrinks`, ...) and tell from it why
//! each anomaly happened, and never read a program's memory.

use crate::config::Acks;
use crate::history::MessageId;
use crate::os::clock::{self, SimTime};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// The controller gave a partition a new leader, for a new leader epoch.
    Election {
        tp: TopicPartition,
        leader: BrokerId,
        epoch: Epoch,
        from: ElectedFrom,
    },
    /// The controller found no replica it may elect: the partition is offline.
    NoLeader { tp: TopicPartition },
    /// A broker took up the leadership of an epoch, with its log ending at
    /// `log_end_offset`: the offset the new epoch starts at.
    LeaderStarted {
        tp: TopicPartition,
        broker: BrokerId,
        epoch: Epoch,
        log_end_offset: Offset,
    },
    /// A leader appended a producer's batch at `first..=last` (an idempotent duplicate,
    /// which it answers without appending, is not one).
    Appended {
        tp: TopicPartition,
        leader: BrokerId,
        epoch: Epoch,
        first: Offset,
        last: Offset,
    },
    /// A leader answered a produce of `first..=last` with success, seeing the HW and its
    /// followers' LEOs (their last fetch offsets; `Offset::NONE`: no fetch yet) as given.
    Acknowledged {
        tp: TopicPartition,
        leader: BrokerId,
        epoch: Epoch,
        acks: Acks,
        first: Offset,
        last: Offset,
        high_watermark: Offset,
        followers: Box<[(BrokerId, Offset)]>,
    },
    /// The controller committed a smaller ISR.
    IsrShrink { tp: TopicPartition },
    /// The controller committed a larger ISR.
    IsrExpand { tp: TopicPartition },
    /// A follower removed the offsets `to..from` from the end of its log to match its
    /// leader, by `rule` (a truncation rule, or its LEO past the leader's).
    Truncation {
        tp: TopicPartition,
        broker: BrokerId,
        from: Offset,
        to: Offset,
        rule: String,
    },
    /// A broker opened a log after an unclean stop, so recovery scanned it; the log ends
    /// at `log_end_offset` (what the page cache held and the disk did not is gone).
    Recovery {
        tp: TopicPartition,
        broker: BrokerId,
        log_end_offset: Offset,
    },
    /// A broker back from an unclean stop found no log of a partition it hosts: its
    /// directory never reached the disk. It starts the log again, empty.
    LogMissing {
        tp: TopicPartition,
        broker: BrokerId,
    },
    /// A follower's fetch from its leader failed, with an error other than the previous
    /// round's: what keeps a replica out of the ISR, recorded once per change.
    FetchFailed {
        tp: TopicPartition,
        broker: BrokerId,
        leader: BrokerId,
        error: String,
    },
    /// A follower's fetch succeeded again after failing.
    FetchResumed {
        tp: TopicPartition,
        broker: BrokerId,
        leader: BrokerId,
    },
    /// A producer put a batch of its sends `first..=last` back to send again, after
    /// `error`.
    Retried {
        producer: u32,
        tp: TopicPartition,
        first: MessageId,
        last: MessageId,
        error: String,
    },
    /// The harness injected a fault (the scenario's action, its targets resolved to the
    /// hosts it struck), or lifted every fault for the heal phase.
    Fault { what: String, hosts: Vec<HostName> },
}

/// Where an election's leader came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ElectedFrom {
    /// Clean: a member of the ISR.
    Isr,
    /// Clean: the ISR was empty, and an eligible leader replica (KIP-966) was live.
    Elr,
    /// Unclean: ISR and ELR were empty, and the last leader came back (KIP-966).
    LastKnownLeader,
    /// Unclean: a replica from outside the ISR (`unclean.leader.election.enable`).
    OutOfSync,
}

impl ElectedFrom {
    /// Whether the leader may lack acknowledged writes.
    pub fn unclean(self) -> bool {
        matches!(self, ElectedFrom::LastKnownLeader | ElectedFrom::OutOfSync)
    }
}

/// One fact and when it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactEvent {
    #[serde(with = "super::millis")]
    pub time: SimTime,
    #[serde(flatten)]
    pub fact: Fact,
}

/// Where the cluster's programs record facts; cloning shares it.
#[derive(Clone, Debug, Default)]
pub struct Facts(Rc<RefCell<Vec<FactEvent>>>);

impl Facts {
    pub fn record(&self, fact: Fact) {
        self.0.borrow_mut().push(FactEvent {
            time: clock::now(),
            fact,
        });
    }

    /// Every fact in the order recorded, leaving none: read once when the run ends, where a copy would double
    /// the memory they take (a fact per leader append and per acknowledgement).
    pub fn take_events(&self) -> Vec<FactEvent> {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}
