//! What the cluster did, as its programs recorded it when they did it: the controller's
//! elections and ISR changes, the brokers' follower truncations and log recoveries. Like
//! the history it lives outside the hosts, so a crash does not erase it; the checkers
//! count it (`elections`, `isr_shrinks`, ...) and never read a program's memory.

use crate::os::clock::{self, SimTime};
use crate::types::{BrokerId, TopicPartition};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::rc::Rc;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// The controller gave a partition a new leader; `unclean` when it came from outside
    /// the ISR.
    Election { tp: TopicPartition, unclean: bool },
    /// The controller committed a smaller ISR.
    IsrShrink { tp: TopicPartition },
    /// The controller committed a larger ISR.
    IsrExpand { tp: TopicPartition },
    /// A follower removed `records` offsets from the end of its log to match its leader
    /// (either truncation rule, or its LEO past the leader's).
    Truncation {
        tp: TopicPartition,
        broker: BrokerId,
        records: u64,
    },
    /// A broker opened a log after an unclean stop, so recovery scanned it.
    Recovery {
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

    /// Every fact so far, in the order recorded.
    pub fn events(&self) -> Vec<FactEvent> {
        self.0.borrow().clone()
    }
}
