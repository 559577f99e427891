//! Where a follower cuts its log when it follows a (new) leader.
//!
//! Three rules, chosen by `replication.truncation` (which follows the Kafka release):
//! - [`Truncation::HighWatermark`], the pre-KIP-101 rule: truncate to the HW the follower
//!   knows (after a restart, the checkpointed one). Because a follower learns the HW one
//!   fetch round after the leader, this can cut messages every ISR member had and that
//!   were acknowledged (KIP-101 scenario 1), and it cannot see logs that diverged above
//!   the HW (scenario 2).
//! - [`Truncation::LeaderEpoch`], KIP-101 with KIP-279's fix: ask the leader where the
//!   follower's last epoch ends on the leader, and truncate there. When the leader answers
//!   with an older epoch than the one asked (the follower has epochs the leader never
//!   saw), truncate to the end of the follower's own largest epoch ≤ that answer and ask
//!   again, until both logs agree on an epoch (Kafka's `getOffsetTruncationState`).
//! - [`Truncation::LeaderEpochSingleRound`], KIP-101 as Kafka 0.11 to 1.1 ran it: one
//!   round, truncating to where the leader says the follower's last epoch ends. When the
//!   follower has epochs the leader never had, that offset can lie past where the logs
//!   diverge, and the follower keeps records the leader does not have (KIP-279's case).
//!
//! The same decision serves a leader's `diverging_epoch` answer to a fetch (KIP-320/595),
//! which the leader computes with [`diverging_epoch`].

use crate::kafka::types::EpochEndOffset;
use crate::types::{Epoch, Offset};

#[cfg(doc)]
use crate::config::kafka::Truncation;

/// Where to truncate, and whether the follower then agrees with the leader or must ask
/// again with its (new) latest epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TruncationState {
    pub offset: Offset,
    pub completed: bool,
}

/// The pre-KIP-101 rule: truncate to the follower's HW (never above its LEO).
pub fn high_watermark_truncation(hw: Offset, leo: Offset) -> Offset {
    hw.min(leo)
}

/// The leader-epoch rule, one step. `leader` is the leader's answer: the largest epoch it
/// has ≤ the one asked, and where that epoch ends in its log. `follower_end` is the
/// follower's own largest epoch ≤ `leader.epoch` and its end offset (`None` when the
/// follower has no epoch that low).
pub fn leader_epoch_truncation(
    leader: EpochEndOffset,
    follower_end: Option<EpochEndOffset>,
    follower_leo: Offset,
    follower_hw: Offset,
) -> TruncationState {
    if leader.end_offset == Offset::NONE {
        // The leader has no epoch this old: nothing to match on; fall back to the HW.
        return done(follower_hw.min(follower_leo));
    }
    if leader.epoch == Epoch::NONE {
        return done(leader.end_offset.min(follower_leo));
    }
    match follower_end {
        Some(ours) if ours.epoch != Epoch::NONE && ours.epoch != leader.epoch => {
            // We never had the leader's epoch: our log past the end of our older epoch is
            // not the leader's; cut there and ask about that older epoch.
            TruncationState {
                offset: ours.end_offset.min(follower_leo),
                completed: false,
            }
        }
        Some(ours) if ours.epoch == leader.epoch => {
            done(ours.end_offset.min(leader.end_offset).min(follower_leo))
        }
        _ => done(leader.end_offset.min(follower_leo)),
    }
}

/// The single-round rule (Kafka 0.11–1.1): the leader's end offset for the follower's last
/// epoch is where the follower cuts, whatever epochs lie below it; an answer without an
/// offset (the leader has no epoch that old) falls back to the HW.
pub fn single_round_truncation(
    leader_end_offset: Offset,
    follower_leo: Offset,
    follower_hw: Offset,
) -> TruncationState {
    if leader_end_offset == Offset::NONE {
        return done(follower_hw.min(follower_leo));
    }
    done(leader_end_offset.min(follower_leo))
}

fn done(offset: Offset) -> TruncationState {
    TruncationState {
        offset,
        completed: true,
    }
}

/// The leader's check of a follower fetch (KIP-595-style, Kafka 2.7+): `ours` is the
/// leader's largest epoch ≤ the follower's last fetched epoch and its end. The follower
/// diverges when the leader never had that epoch, or had it end before the fetch offset.
pub fn diverging_epoch(
    ours: EpochEndOffset,
    last_fetched_epoch: Epoch,
    fetch_offset: Offset,
) -> Option<EpochEndOffset> {
    (ours.epoch < last_fetched_epoch || ours.end_offset < fetch_offset).then_some(ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log's epoch history as (epoch, start offset), oldest first; KIP-279's lookup.
    fn end_for(history: &[(i32, i64)], requested: i32, leo: i64) -> EpochEndOffset {
        let Some(pos) = history.iter().rposition(|&(e, _)| e <= requested) else {
            return EpochEndOffset {
                epoch: Epoch::NONE,
                end_offset: Offset::NONE,
            };
        };
        let end = history.get(pos + 1).map_or(leo, |&(_, start)| start);
        EpochEndOffset {
            epoch: Epoch(history[pos].0),
            end_offset: Offset(end),
        }
    }

    /// Run the follower's loop against a leader to its end, as the fetcher does.
    fn converge(
        follower: &[(i32, i64)],
        mut follower_leo: i64,
        follower_hw: i64,
        leader: &[(i32, i64)],
        leader_leo: i64,
    ) -> (Offset, usize) {
        let mut history = follower.to_vec();
        for round in 1..10 {
            let Some(&(asked, _)) = history.last() else {
                return (Offset(follower_hw), round);
            };
            let answer = end_for(leader, asked, leader_leo);
            let ours = (answer.epoch != Epoch::NONE)
                .then(|| end_for(&history, answer.epoch.0, follower_leo));
            let step =
                leader_epoch_truncation(answer, ours, Offset(follower_leo), Offset(follower_hw));
            follower_leo = step.offset.0;
            history.retain(|&(_, start)| start < follower_leo);
            if step.completed {
                return (step.offset, round);
            }
        }
        panic!("truncation did not converge");
    }

    /// KIP-101 scenario 1. Leader A and follower B both have m0 and m1 (LEO 2), both
    /// acknowledged: A's HW is 2, but B learnt only HW 1 (one fetch behind). B restarts.
    /// The HW rule cuts m1 from B, so if A then dies B leads without an acknowledged
    /// message. The leader-epoch rule keeps it.
    #[test]
    fn kip101_scenario1_hw_rule_truncates_acked_data_leader_epoch_rule_does_not() {
        let b_leo = Offset(2);
        let b_checkpointed_hw = Offset(1);
        assert_eq!(
            high_watermark_truncation(b_checkpointed_hw, b_leo),
            Offset(1)
        );

        let a_answer = end_for(&[(0, 0)], 0, 2);
        let b_end = end_for(&[(0, 0)], a_answer.epoch.0, 2);
        let step = leader_epoch_truncation(a_answer, Some(b_end), b_leo, b_checkpointed_hw);
        assert_eq!(
            step,
            TruncationState {
                offset: Offset(2),
                completed: true
            }
        );
    }

    /// KIP-101 scenario 2 as KIP-279 fixes it: after both brokers lost power, A and B
    /// have different messages at offset 1 written in different epochs. The follower
    /// must drop its offset-1 message instead of keeping a log that differs from the leader's.
    #[test]
    fn kip101_scenario2_divergent_epochs_truncate_at_the_divergence() {
        // B was leader in epoch 1 and wrote offset 1; A (new leader, epoch 2) wrote its own offset 1.
        let (offset, _) = converge(&[(0, 0), (1, 1)], 2, 1, &[(0, 0), (2, 1)], 2);
        assert_eq!(offset, Offset(1));
    }

    /// KIP-279: the follower has epochs the leader never had (it led epoch 1 and 3 alone);
    /// one round is not enough, the second round finds where the logs agree.
    #[test]
    fn kip279_iterates_when_epoch_histories_diverge() {
        let follower = [(0, 0), (1, 5), (3, 8)];
        let leader = [(0, 0), (2, 6)];
        let first = leader_epoch_truncation(
            end_for(&leader, 3, 12),
            Some(end_for(&follower, 2, 10)),
            Offset(10),
            Offset(4),
        );
        assert_eq!(
            first,
            TruncationState {
                offset: Offset(8),
                completed: false
            }
        );
        assert_eq!(converge(&follower, 10, 4, &leader, 12), (Offset(5), 2));
    }

    /// KIP-279's case for the single round: the follower led epochs 1 and 3 alone; the
    /// leader says epoch 2 (its largest ≤ 3) ends at 12, so the follower keeps all 10 of
    /// its records, 5..10 of which the leader never had. The repeated rounds cut at 5.
    #[test]
    fn a_single_round_keeps_records_of_epochs_the_leader_never_had() {
        let leader = [(0, 0), (2, 6)];
        let answer = end_for(&leader, 3, 12);
        assert_eq!(
            single_round_truncation(answer.end_offset, Offset(10), Offset(4)),
            TruncationState {
                offset: Offset(10),
                completed: true
            }
        );
        assert_eq!(
            converge(&[(0, 0), (1, 5), (3, 8)], 10, 4, &leader, 12).0,
            Offset(5)
        );
        assert_eq!(
            single_round_truncation(Offset::NONE, Offset(10), Offset(4)).offset,
            Offset(4),
            "no epoch to match on: the HW"
        );
        assert_eq!(
            single_round_truncation(Offset(7), Offset(10), Offset(4)).offset,
            Offset(7)
        );
    }

    #[test]
    fn follower_behind_leader_keeps_its_whole_log() {
        assert_eq!(
            converge(&[(0, 0), (2, 4)], 7, 3, &[(0, 0), (2, 4)], 20),
            (Offset(7), 1)
        );
    }

    #[test]
    fn leader_without_the_epoch_falls_back_to_hw() {
        let none = EpochEndOffset {
            epoch: Epoch::NONE,
            end_offset: Offset::NONE,
        };
        assert_eq!(
            leader_epoch_truncation(none, None, Offset(9), Offset(4)).offset,
            Offset(4)
        );
    }

    /// A follower with an empty epoch cache has no epoch of its own to match (its cache
    /// answers undefined): it cuts at the leader's end, as Kafka's
    /// `getOffsetTruncationState` does for a follower that did not track epochs.
    #[test]
    fn follower_without_epochs_truncates_to_the_leaders_end() {
        let undefined = EpochEndOffset {
            epoch: Epoch::NONE,
            end_offset: Offset::NONE,
        };
        let leader = end_for(&[(0, 0), (2, 6)], 1, 12);
        assert_eq!(
            leader_epoch_truncation(leader, Some(undefined), Offset(9), Offset(4)),
            TruncationState {
                offset: Offset(6),
                completed: true
            }
        );
    }

    #[test]
    fn leader_reports_divergence_on_fetch() {
        let leader = [(0, 0), (2, 6)];
        // Follower last fetched epoch 1, which the leader never had.
        assert_eq!(
            diverging_epoch(end_for(&leader, 1, 12), Epoch(1), Offset(8)),
            Some(EpochEndOffset {
                epoch: Epoch(0),
                end_offset: Offset(6)
            })
        );
        // Follower at offset 7 of epoch 2: in agreement.
        assert_eq!(
            diverging_epoch(end_for(&leader, 2, 12), Epoch(2), Offset(7)),
            None
        );
        // Epoch 0 ends at 6 on the leader, the follower is at 8 with epoch-0 data.
        assert!(diverging_epoch(end_for(&leader, 0, 12), Epoch(0), Offset(8)).is_some());
        // Follower at offset 5 whose last record is of epoch 1: below the end of the
        // leader's epoch 0, yet of an epoch the leader never had.
        assert_eq!(
            diverging_epoch(end_for(&leader, 1, 12), Epoch(1), Offset(5)),
            Some(EpochEndOffset {
                epoch: Epoch(0),
                end_offset: Offset(6)
            })
        );
    }
}
