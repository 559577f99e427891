//! Produce purgatory: when an `acks=all` write may be acknowledged, and how it fails.
//!
//! The ack-after-HW contract: an `acks=all` produce is answered with success only once the
//! leader's HW has passed the batch's last offset, i.e. every member of the ISR has it,
//! and the ISR still has at least `min.insync.replicas` members. Before appending, a
//! leader whose ISR is already below `min.insync.replicas` rejects the write
//! (NOT_ENOUGH_REPLICAS); if the ISR shrank below it while the write waited, the write is
//! in the log but the producer is told NOT_ENOUGH_REPLICAS_AFTER_APPEND. A write whose
//! HW never comes within the request's timeout gets REQUEST_TIMED_OUT (it may still be
//! committed later: the producer cannot know). Kafka's `DelayedProduce`.

use crate::config::kafka::Acks;
use crate::kafka::protocol::messages::ErrorCode;
use crate::os::clock::SimTime;
use crate::types::{Epoch, Offset};

/// The check before appending (Kafka's `Partition.appendRecordsToLeader`).
pub fn check_before_append(
    acks: Acks,
    isr_len: usize,
    min_insync_replicas: u32,
) -> Result<(), ErrorCode> {
    if acks == Acks::All && (isr_len as u64) < u64::from(min_insync_replicas) {
        Err(ErrorCode::NotEnoughReplicas)
    } else {
        Ok(())
    }
}

/// The leader's state, as a waiting produce sees it each time it is woken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaderView {
    /// `Some(epoch)` while this broker leads the partition; `None` once it does not.
    pub leader_epoch: Option<Epoch>,
    pub hw: Offset,
    pub isr_len: usize,
    /// The log dir went offline (a failed fsync, a full disk).
    pub offline: bool,
}

/// One `acks=all` produce waiting for the HW.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayedProduce {
    /// The batch's last offset + 1: the HW that makes it committed.
    pub required_offset: Offset,
    /// The epoch the batch was appended in; a new epoch means a new leader's log.
    pub leader_epoch: Epoch,
    pub deadline: SimTime,
    pub min_insync_replicas: u32,
}

impl DelayedProduce {
    /// The produce's answer if it is complete: `Some(None)` success, `Some(Some(error))`
    /// failure, `None` keep waiting.
    pub fn try_complete(&self, view: LeaderView, now: SimTime) -> Option<Option<ErrorCode>> {
        if view.offline {
            return Some(Some(ErrorCode::KafkaStorageError));
        }
        if view.leader_epoch != Some(self.leader_epoch) {
            return Some(Some(ErrorCode::NotLeaderOrFollower));
        }
        if view.hw >= self.required_offset {
            return Some(
                ((view.isr_len as u64) < u64::from(self.min_insync_replicas))
                    .then_some(ErrorCode::NotEnoughReplicasAfterAppend),
            );
        }
        (now >= self.deadline).then_some(Some(ErrorCode::RequestTimedOut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting() -> DelayedProduce {
        DelayedProduce {
            required_offset: Offset(10),
            leader_epoch: Epoch(3),
            deadline: SimTime::from_millis(30_000),
            min_insync_replicas: 2,
        }
    }

    fn view(hw: i64, isr_len: usize) -> LeaderView {
        LeaderView {
            leader_epoch: Some(Epoch(3)),
            hw: Offset(hw),
            isr_len,
            offline: false,
        }
    }

    #[test]
    fn acks_all_below_min_isr_is_rejected_before_append() {
        assert_eq!(
            check_before_append(Acks::All, 1, 2),
            Err(ErrorCode::NotEnoughReplicas)
        );
        assert_eq!(check_before_append(Acks::All, 2, 2), Ok(()));
        assert_eq!(
            check_before_append(Acks::Leader, 1, 2),
            Ok(()),
            "acks=1 ignores min.insync.replicas"
        );
    }

    /// The batch's last offset is 9: HW 9 means offset 9 is not yet on every ISR member.
    #[test]
    fn waits_until_hw_passes_the_last_offset() {
        assert_eq!(waiting().try_complete(view(9, 3), SimTime::ZERO), None);
        assert_eq!(
            waiting().try_complete(view(10, 3), SimTime::ZERO),
            Some(None)
        );
    }

    #[test]
    fn isr_shrunk_below_min_after_append() {
        assert_eq!(
            waiting().try_complete(view(10, 1), SimTime::ZERO),
            Some(Some(ErrorCode::NotEnoughReplicasAfterAppend))
        );
        assert_eq!(
            waiting().try_complete(view(10, 2), SimTime::ZERO),
            Some(None),
            "an ISR of exactly min.insync.replicas acknowledges"
        );
    }

    #[test]
    fn times_out_and_fails_on_leader_change_or_storage_error() {
        assert_eq!(
            waiting().try_complete(view(5, 3), SimTime::from_millis(30_000)),
            Some(Some(ErrorCode::RequestTimedOut))
        );
        let mut v = view(12, 3);
        v.leader_epoch = Some(Epoch(4));
        assert_eq!(
            waiting().try_complete(v, SimTime::ZERO),
            Some(Some(ErrorCode::NotLeaderOrFollower))
        );
        v.leader_epoch = None;
        assert_eq!(
            waiting().try_complete(v, SimTime::ZERO),
            Some(Some(ErrorCode::NotLeaderOrFollower))
        );
        let mut v = view(12, 3);
        v.offline = true;
        assert_eq!(
            waiting().try_complete(v, SimTime::ZERO),
            Some(Some(ErrorCode::KafkaStorageError))
        );
    }
}
