//! What the cluster did, as its programs recorded it when they did it: the controller's
//! elections and ISR changes; the leaders' appends and acknowledgements; the brokers'
//! follower truncations and log recoveries; the producers' retries; the faults the
//! harness injected. Like the history it lives outside the hosts, so a crash does not
//! erase it; the checkers count it (`elections`, `isr_shrinks`, ...) and tell from it why
//! each anomaly happened, and never read a program's memory.

use crate::config::kafka::Acks;
use crate::history::MessageId;
use crate::os::clock::{self, SimTime};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use std::collections::BTreeMap;
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

/// The facts of a run as they are kept. The two that come once per produce request, the
/// leader's append and its acknowledgement, are most of them (some 65,000 in the
/// canonical load): they are kept as compact rows, their partition interned and the
/// followers' LEOs in one shared list, a third of the size of a [`FactEvent`]. Every
/// other fact is kept as it came.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactLog {
    events: Vec<FactEvent>,
    partitions: Vec<TopicPartition>,
    #[serde(skip)]
    partition_index: BTreeMap<TopicPartition, u32>,
    appends: Vec<AppendRow>,
    acks: Vec<AckRow>,
    followers: Vec<(BrokerId, Offset)>,
}

/// An `Appended` fact as kept. A batch's records are at most `i32::MAX` apart (Kafka's
/// `lastOffsetDelta` is an int32), so `last` is kept as its distance from `first`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct AppendRow {
    #[serde(with = "super::millis")]
    time: SimTime,
    first: Offset,
    last_delta: u32,
    partition: u32,
    leader: BrokerId,
    epoch: Epoch,
}

/// An `Acknowledged` fact as kept: its followers are `followers[start..start + count]`
/// of the log's shared list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct AckRow {
    #[serde(with = "super::millis")]
    time: SimTime,
    first: Offset,
    high_watermark: Offset,
    last_delta: u32,
    partition: u32,
    leader: BrokerId,
    epoch: Epoch,
    followers_start: u32,
    followers_count: u8,
    acks: Acks,
}

/// A leader's append of `first..=last`, read back from a [`FactLog`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendFact<'a> {
    pub time: SimTime,
    pub tp: &'a TopicPartition,
    pub leader: BrokerId,
    pub epoch: Epoch,
    pub first: Offset,
    pub last: Offset,
}

/// A leader's acknowledgement of `first..=last`, read back from a [`FactLog`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckFact<'a> {
    pub time: SimTime,
    pub tp: &'a TopicPartition,
    pub leader: BrokerId,
    pub epoch: Epoch,
    pub acks: Acks,
    pub first: Offset,
    pub last: Offset,
    pub high_watermark: Offset,
    pub followers: &'a [(BrokerId, Offset)],
}

fn last_delta(first: Offset, last: Offset) -> u32 {
    u32::try_from(last.0 - first.0).expect("a batch spans at most i32::MAX offsets")
}

impl FactLog {
    /// Keep one fact: an append or an acknowledgement as a row, any other as it is.
    pub fn push(&mut self, event: FactEvent) {
        let time = event.time;
        match event.fact {
            Fact::Appended {
                tp,
                leader,
                epoch,
                first,
                last,
            } => {
                let partition = self.intern(tp);
                self.appends.push(AppendRow {
                    time,
                    first,
                    last_delta: last_delta(first, last),
                    partition,
                    leader,
                    epoch,
                });
            }
            Fact::Acknowledged {
                tp,
                leader,
                epoch,
                acks,
                first,
                last,
                high_watermark,
                followers,
            } => {
                let partition = self.intern(tp);
                let followers_start =
                    u32::try_from(self.followers.len()).expect("fewer than 2^32 follower LEOs");
                self.followers.extend_from_slice(&followers);
                self.acks.push(AckRow {
                    time,
                    first,
                    high_watermark,
                    last_delta: last_delta(first, last),
                    partition,
                    leader,
                    epoch,
                    followers_start,
                    followers_count: u8::try_from(followers.len())
                        .expect("a partition has fewer than 256 replicas"),
                    acks,
                });
            }
            fact => self.events.push(FactEvent { time, fact }),
        }
    }

    fn intern(&mut self, tp: TopicPartition) -> u32 {
        if let Some(&index) = self.partition_index.get(&tp) {
            return index;
        }
        let index = u32::try_from(self.partitions.len()).expect("fewer than 2^32 partitions");
        self.partitions.push(tp.clone());
        self.partition_index.insert(tp, index);
        index
    }

    /// Every fact but the appends and acknowledgements, in the order recorded.
    pub fn events(&self) -> &[FactEvent] {
        &self.events
    }

    /// The leaders' appends, in the order recorded.
    pub fn appends(&self) -> impl Iterator<Item = AppendFact<'_>> {
        self.appends.iter().map(|row| AppendFact {
            time: row.time,
            tp: &self.partitions[row.partition as usize],
            leader: row.leader,
            epoch: row.epoch,
            first: row.first,
            last: Offset(row.first.0 + i64::from(row.last_delta)),
        })
    }

    /// The leaders' acknowledgements, in the order recorded.
    pub fn acknowledgements(&self) -> impl Iterator<Item = AckFact<'_>> {
        self.acks.iter().map(|row| {
            let start = row.followers_start as usize;
            AckFact {
                time: row.time,
                tp: &self.partitions[row.partition as usize],
                leader: row.leader,
                epoch: row.epoch,
                acks: row.acks,
                first: row.first,
                last: Offset(row.first.0 + i64::from(row.last_delta)),
                high_watermark: row.high_watermark,
                followers: &self.followers[start..start + usize::from(row.followers_count)],
            }
        })
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
    pub fn record(&self, fact: Fact) {
        self.0.borrow_mut().push(FactEvent {
            time: clock::now(),
            fact,
        });
    }

    /// Every fact recorded, leaving none: read once when the run ends, where a copy would
    /// double the memory they take.
    pub fn take(&self) -> FactLog {
        std::mem::take(&mut *self.0.borrow_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ms: u64, fact: Fact) -> FactEvent {
        FactEvent {
            time: SimTime::after_start(Duration::from_millis(ms)),
            fact,
        }
    }

    fn tp(partition: u32) -> TopicPartition {
        TopicPartition::new("orders", partition)
    }

    #[test]
    fn appends_and_acknowledgements_come_back_as_recorded_and_the_rest_stays_in_order() {
        let followers = [(BrokerId(2), Offset(9)), (BrokerId(3), Offset::NONE)];
        let log: FactLog = [
            at(1, Fact::IsrShrink { tp: tp(0) }),
            at(
                2,
                Fact::Appended {
                    tp: tp(1),
                    leader: BrokerId(1),
                    epoch: Epoch(3),
                    first: Offset(10),
                    last: Offset(12),
                },
            ),
            at(
                3,
                Fact::Acknowledged {
                    tp: tp(1),
                    leader: BrokerId(1),
                    epoch: Epoch(3),
                    acks: Acks::All,
                    first: Offset(10),
                    last: Offset(12),
                    high_watermark: Offset(13),
                    followers: Box::new(followers),
                },
            ),
            at(4, Fact::IsrExpand { tp: tp(0) }),
            at(
                5,
                Fact::Appended {
                    tp: tp(0),
                    leader: BrokerId(2),
                    epoch: Epoch(0),
                    first: Offset(0),
                    last: Offset(0),
                },
            ),
        ]
        .into_iter()
        .collect();
        let others: Vec<&Fact> = log.events().iter().map(|e| &e.fact).collect();
        assert_eq!(
            others,
            [
                &Fact::IsrShrink { tp: tp(0) },
                &Fact::IsrExpand { tp: tp(0) }
            ]
        );
        let appends: Vec<_> = log
            .appends()
            .map(|a| (a.tp.clone(), a.first, a.last))
            .collect();
        assert_eq!(
            appends,
            [
                (tp(1), Offset(10), Offset(12)),
                (tp(0), Offset(0), Offset(0))
            ]
        );
        let ack = log.acknowledgements().next().unwrap();
        assert_eq!(
            (ack.tp, ack.leader, ack.epoch, ack.acks),
            (&tp(1), BrokerId(1), Epoch(3), Acks::All)
        );
        assert_eq!(
            (ack.first, ack.last, ack.high_watermark),
            (Offset(10), Offset(12), Offset(13))
        );
        assert_eq!(ack.followers, followers);
        assert_eq!(ack.time, SimTime::after_start(Duration::from_millis(3)));
        assert_eq!(log.partitions.len(), 2, "each partition is kept once");
    }
}
