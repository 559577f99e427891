//! Kafka's facts, in Kafka's words: the controller's elections and ISR changes; the
//! leaders' appends and acknowledgements (with what the leader knew: its HW, its
//! followers' LEOs); the brokers' truncations, log recoveries and fetch failures. The
//! checkers count them through [`Fact::tally`]; Kafka's teller tells them.

use super::Tally;
use crate::config::kafka::Acks;
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Epoch, Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
        /// The last stable offset then: below the HW while a transaction is open.
        last_stable_offset: Offset,
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
    /// A broker's log dir went offline on a storage error (a failed write or fsync, a full
    /// disk, a checkpoint it cannot read): the broker halts, as Kafka's does when its only
    /// log dir fails.
    LogDirOffline { broker: BrokerId, error: String },
    /// A follower's log ended past its leader's while unclean election was off, and the
    /// release (before KAFKA-7414, 2.0.1) does not let it truncate: the broker exits.
    TruncationNotAllowed {
        tp: TopicPartition,
        broker: BrokerId,
        leader_end_offset: Offset,
        log_end_offset: Offset,
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
    /// The transaction coordinator fenced a producer of `transactional_id` (the epoch is
    /// now `epoch`) and aborted its open transaction: a new instance's InitProducerId, or
    /// (`timed_out`) the transaction outlived `transaction.timeout.ms`.
    TxnFenced {
        transactional_id: String,
        epoch: i16,
        timed_out: bool,
    },
    /// A partition leader refused a producer's transactional batch that would have started
    /// a transaction there: its coordinator did not have the partition in the producer's
    /// ongoing transaction (KIP-890 partition verification, Kafka 3.6). Typically a produce
    /// delayed past its transaction's end.
    TxnUnverified {
        tp: TopicPartition,
        broker: BrokerId,
        transactional_id: String,
        error: String,
    },
    /// Every marker of a transaction the coordinator opened at `started` is written, on
    /// `partitions` partitions: none of them holds its LSO for it any longer.
    TxnMarked {
        transactional_id: String,
        /// A COMMIT marker (else ABORT).
        committed: bool,
        partitions: u32,
        #[serde(with = "crate::history::millis")]
        started: SimTime,
    },
}

impl Fact {
    /// What the fact adds to the counts every system shares, if anything.
    pub fn tally(&self) -> Option<Tally> {
        match self {
            Fact::Election { from, .. } => Some(Tally::Election {
                unclean: from.unclean(),
            }),
            Fact::IsrShrink { .. } => Some(Tally::InSyncShrink),
            Fact::IsrExpand { .. } => Some(Tally::InSyncExpand),
            Fact::Truncation { from, to, .. } => {
                Some(Tally::Truncated(u64::try_from(from.0 - to.0).unwrap_or(0)))
            }
            Fact::Recovery { .. } => Some(Tally::Recovery),
            Fact::TxnFenced { timed_out, .. } => Some(Tally::Fenced {
                timed_out: *timed_out,
            }),
            Fact::TxnMarked { partitions, .. } => Some(Tally::Markers(u64::from(*partitions))),
            Fact::TxnUnverified { .. } => Some(Tally::Unverified),
            Fact::NoLeader { .. }
            | Fact::LogMissing { .. }
            | Fact::LogDirOffline { .. }
            | Fact::TruncationNotAllowed { .. }
            | Fact::LeaderStarted { .. }
            | Fact::Appended { .. }
            | Fact::Acknowledged { .. }
            | Fact::FetchFailed { .. }
            | Fact::FetchResumed { .. } => None,
        }
    }
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

/// The two facts that come once per produce request, the leader's append and its
/// acknowledgement, are most of a run's (some 65,000 in the canonical load): they are kept
/// as compact rows, their partition interned and the followers' LEOs in one shared list, a
/// third of the size of a fact kept as it came.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rows {
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
    #[serde(with = "crate::history::millis")]
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
    #[serde(with = "crate::history::millis")]
    time: SimTime,
    first: Offset,
    high_watermark: Offset,
    last_stable_offset: Offset,
    last_delta: u32,
    partition: u32,
    leader: BrokerId,
    epoch: Epoch,
    followers_start: u32,
    followers_count: u8,
    acks: Acks,
}

/// A leader's append of `first..=last`, read back from the [`Rows`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendFact<'a> {
    pub time: SimTime,
    pub tp: &'a TopicPartition,
    pub leader: BrokerId,
    pub epoch: Epoch,
    pub first: Offset,
    pub last: Offset,
}

/// A leader's acknowledgement of `first..=last`, read back from the [`Rows`].
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
    pub last_stable_offset: Offset,
    pub followers: &'a [(BrokerId, Offset)],
}

fn last_delta(first: Offset, last: Offset) -> u32 {
    u32::try_from(last.0 - first.0).expect("a batch spans at most i32::MAX offsets")
}

impl Rows {
    /// Keeps an append or an acknowledgement as a row; hands any other fact back.
    pub(super) fn push(&mut self, time: SimTime, fact: Fact) -> Option<Fact> {
        match fact {
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
                last_stable_offset,
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
                    last_stable_offset,
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
            fact => return Some(fact),
        }
        None
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
                last_stable_offset: row.last_stable_offset,
                followers: &self.followers[start..start + usize::from(row.followers_count)],
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{FactEvent, FactLog};
    use super::*;
    use std::time::Duration;

    fn at(ms: u64, fact: Fact) -> FactEvent {
        FactEvent {
            time: SimTime::after_start(Duration::from_millis(ms)),
            fact: fact.into(),
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
                    last_stable_offset: Offset(11),
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
        let others: Vec<Option<&Fact>> = log.events().iter().map(|e| e.fact.kafka()).collect();
        assert_eq!(
            others,
            [
                Some(&Fact::IsrShrink { tp: tp(0) }),
                Some(&Fact::IsrExpand { tp: tp(0) })
            ]
        );
        let appends: Vec<_> = log
            .kafka()
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
        let ack = log.kafka().acknowledgements().next().unwrap();
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
        assert_eq!(log.kafka.partitions.len(), 2, "each partition is kept once");
    }
}
