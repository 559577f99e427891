//! The idempotent producer's client side (`enable.idempotence`): a producer id from
//! InitProducerId and a sequence number per partition, assigned to a batch when it is first
//! drained and kept by its retries, so the broker can drop a retry of a batch it already has.
//!
//! Model, simplified from Kafka's `TransactionManager`: when a sequenced batch of the current
//! producer id completes without an ack (failed, or unknown), the broker's expected sequence
//! and ours no longer agree, so the producer takes a new producer id and restarts every
//! partition's sequence at 0 before it drains another new batch (KIP-360 bumps the epoch
//! instead; a new id has the same effect on the broker's checks). Batches already stamped
//! keep their old id and sequence for their retries.
//!
//! A partition takes no batch under the new id while a batch of an older id is still
//! unresolved there (Kafka's `hasStaleProducerIdAndEpoch` check in the accumulator's drain):
//! the broker orders sequences only within one producer id, so a new id's batch sent
//! beside an old id's retry could be appended before it and acknowledged sends would land
//! out of send order.

use crate::kafka::client::accumulator::Sequenced;
use crate::kafka::types::ProducerId;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Default)]
pub struct IdempotenceState {
    identity: Option<(ProducerId, i16)>,
    next_sequence: BTreeMap<u32, i32>,
    /// Sequenced batches not yet completed, per partition: (producer id, base sequence).
    unresolved: BTreeMap<u32, BTreeSet<(ProducerId, i32)>>,
    reset_needed: bool,
}

impl IdempotenceState {
    /// Whether the producer must (re)acquire a producer id before draining new batches.
    pub fn needs_producer_id(&self) -> bool {
        self.identity.is_none() || self.reset_needed
    }

    /// Take a producer id from InitProducerId; every partition's sequence restarts at 0.
    pub fn set_producer_id(&mut self, producer_id: ProducerId, producer_epoch: i16) {
        self.identity = Some((producer_id, producer_epoch));
        self.next_sequence.clear();
        self.reset_needed = false;
    }

    /// Whether a new batch for `partition` may be stamped now: a usable producer id is held
    /// and every unresolved batch of the partition carries it. All unresolved batches of a
    /// partition share one id (this check keeps it so), so the set's ends suffice.
    pub fn can_assign(&self, partition: u32) -> bool {
        let Some((current, _)) = self.identity else {
            return false;
        };
        !self.reset_needed
            && self.unresolved.get(&partition).is_none_or(|set| {
                set.first().is_none_or(|&(id, _)| id == current)
                    && set.last().is_none_or(|&(id, _)| id == current)
            })
    }

    /// Whether the partition's front batch may be drained now: a new batch (`front` has no
    /// sequence yet) when `can_assign`; a retried one only once every lower sequence of its
    /// producer id has completed. Kafka's accumulator does the same
    /// (`shouldStopDrainBatchesForPartition`: "this effectively reduces our in flight request
    /// count to 1"), so retries go one at a time, in sequence order, and a retry is never
    /// sent behind later batches that could push it out of the broker's 5-batch cache.
    pub fn may_drain(&self, partition: u32, front: Option<&Sequenced>) -> bool {
        match front {
            None => self.can_assign(partition),
            Some(sequenced) => !self.earlier_unresolved(partition, sequenced),
        }
    }

    /// Stamp a batch of `records` records for `partition` being drained for the first time.
    /// `None` while `can_assign` is false.
    pub fn assign(&mut self, partition: u32, records: usize) -> Option<Sequenced> {
        if !self.can_assign(partition) {
            return None;
        }
        let (producer_id, producer_epoch) = self.identity?;
        let next = self.next_sequence.entry(partition).or_insert(0);
        let base_sequence = *next;
        // Kafka's sequences wrap from Integer.MAX_VALUE to 0.
        *next = ((i64::from(base_sequence) + records as i64) % (i64::from(i32::MAX) + 1)) as i32;
        let unresolved = self.unresolved.entry(partition).or_default();
        unresolved.insert((producer_id, base_sequence));
        debug_assert!(
            unresolved.iter().all(|&(id, _)| id == producer_id),
            "the unresolved batches of partition {partition} carry one producer id: {unresolved:?}"
        );
        Some(Sequenced {
            producer_id,
            producer_epoch,
            base_sequence,
        })
    }

    /// Whether a batch of the same producer id with a lower sequence is still unresolved.
    pub fn earlier_unresolved(&self, partition: u32, sequenced: &Sequenced) -> bool {
        self.unresolved.get(&partition).is_some_and(|set| {
            set.range(
                (sequenced.producer_id, i32::MIN)..(sequenced.producer_id, sequenced.base_sequence),
            )
            .next()
            .is_some()
        })
    }

    /// A sequenced batch completed; `acked` false (failed or unknown) under the current
    /// producer id forces a new producer id.
    pub fn resolve(&mut self, partition: u32, sequenced: &Sequenced, acked: bool) {
        self.forget(partition, sequenced);
        let current = self.identity.map(|(id, _)| id);
        if !acked && current == Some(sequenced.producer_id) {
            self.reset_needed = true;
        }
    }

    /// A sequenced batch completed, and the caller decides what its failure means (the
    /// transactional producer: its transaction manager).
    pub fn forget(&mut self, partition: u32, sequenced: &Sequenced) {
        if let Some(set) = self.unresolved.get_mut(&partition) {
            set.remove(&(sequenced.producer_id, sequenced.base_sequence));
            if set.is_empty() {
                self.unresolved.remove(&partition);
            }
        }
    }

    /// A batch the broker refused (nothing written) gives its sequences back, so the next
    /// batch takes them (Kafka's `adjustSequencesDueToFailedBatch`). Only when it was the
    /// partition's last stamped batch: Kafka renumbers later batches in flight too, which
    /// this model does not; `false` then, and the caller treats the failure as fatal.
    pub fn rewind(&mut self, partition: u32, sequenced: &Sequenced, records: usize) -> bool {
        if self.identity.map(|(id, _)| id) != Some(sequenced.producer_id) {
            return true;
        }
        let next = self.next_sequence.entry(partition).or_insert(0);
        let end = i64::from(sequenced.base_sequence) + records as i64;
        if i64::from(*next) != end % (i64::from(i32::MAX) + 1) {
            return false;
        }
        *next = sequenced.base_sequence;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_sequences_without_a_producer_id() {
        let mut state = IdempotenceState::default();
        assert!(state.needs_producer_id());
        assert_eq!(state.assign(0, 3), None);
    }

    #[test]
    fn sequences_advance_per_partition_by_record_count() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(7), 0);
        assert_eq!(state.assign(0, 3).map(|s| s.base_sequence), Some(0));
        assert_eq!(state.assign(0, 2).map(|s| s.base_sequence), Some(3));
        assert_eq!(state.assign(1, 1).map(|s| s.base_sequence), Some(0));
        assert_eq!(
            state.assign(0, 1).map(|s| s.producer_id),
            Some(ProducerId(7))
        );
    }

    #[test]
    fn earlier_unresolved_sees_only_lower_sequences_of_the_same_producer_id() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(1), 0);
        let first = state.assign(0, 1).expect("sequenced");
        let second = state.assign(0, 1).expect("sequenced");
        assert!(state.earlier_unresolved(0, &second));
        assert!(!state.earlier_unresolved(0, &first));
        state.resolve(0, &first, true);
        assert!(!state.earlier_unresolved(0, &second));
    }

    #[test]
    fn a_failed_batch_forces_a_new_producer_id_and_fresh_sequences() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(1), 0);
        let first = state.assign(0, 5).expect("sequenced");
        state.resolve(0, &first, false);
        assert!(state.needs_producer_id());
        assert_eq!(state.assign(0, 1), None, "no new batch before the new id");
        state.set_producer_id(ProducerId(2), 0);
        assert_eq!(
            state.assign(0, 1).map(|s| (s.producer_id, s.base_sequence)),
            Some((ProducerId(2), 0))
        );
    }

    /// Retries go one at a time from the lowest sequence: the second and third batches wait
    /// while the first is unresolved, whatever the in-flight limit, as Kafka's accumulator
    /// holds them. New batches are not held by retries of the current id.
    #[test]
    fn a_retried_batch_is_drained_only_as_the_first_unresolved_sequence() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(1), 0);
        let batches: Vec<_> = (0..3)
            .map(|_| state.assign(0, 2).expect("sequenced"))
            .collect();
        assert!(state.may_drain(0, Some(&batches[0])));
        assert!(!state.may_drain(0, Some(&batches[1])));
        assert!(!state.may_drain(0, Some(&batches[2])));
        assert!(
            state.may_drain(0, None),
            "a new batch needs only can_assign"
        );
        state.resolve(0, &batches[0], true);
        assert!(state.may_drain(0, Some(&batches[1])));
        assert!(!state.may_drain(0, Some(&batches[2])));
        state.resolve(0, &batches[1], true);
        assert!(state.may_drain(0, Some(&batches[2])));
    }

    /// Guards against reordering after a delivery-timeout failure: a batch of the old id
    /// still being retried must resolve before the partition sends under the new id, or the
    /// new id's batches (which the broker does not order against the old id's) are
    /// appended ahead of it.
    #[test]
    fn no_new_id_batch_while_an_old_id_batch_of_the_partition_is_unresolved() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(1), 0);
        let expired = state.assign(0, 1).expect("sequenced");
        let retrying = state.assign(0, 1).expect("sequenced");
        state.resolve(0, &expired, false);
        state.set_producer_id(ProducerId(2), 0);
        assert!(!state.can_assign(0));
        assert_eq!(state.assign(0, 1), None, "the old id's retry goes first");
        assert!(state.can_assign(1), "other partitions are not held back");
        assert_eq!(
            state.assign(1, 1).map(|s| (s.producer_id, s.base_sequence)),
            Some((ProducerId(2), 0))
        );
        state.resolve(0, &retrying, true);
        assert!(state.can_assign(0));
        assert_eq!(
            state.assign(0, 1).map(|s| (s.producer_id, s.base_sequence)),
            Some((ProducerId(2), 0))
        );
    }

    #[test]
    fn a_stale_producer_ids_failure_does_not_reset_again() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(1), 0);
        let old = state.assign(0, 1).expect("sequenced");
        state.set_producer_id(ProducerId(2), 0);
        state.resolve(0, &old, false);
        assert!(!state.needs_producer_id());
    }

    #[test]
    fn sequences_wrap_like_kafka() {
        let mut state = IdempotenceState::default();
        state.set_producer_id(ProducerId(1), 0);
        state.next_sequence.insert(0, i32::MAX - 1);
        assert_eq!(
            state.assign(0, 2).map(|s| s.base_sequence),
            Some(i32::MAX - 1)
        );
        assert_eq!(state.assign(0, 1).map(|s| s.base_sequence), Some(0));
    }
}
