//! Idempotent producer state (KIP-98), Kafka's `ProducerStateManager` and
//! `ProducerAppendInfo`: per producer id, the producer epoch and the metadata of its last
//! five batches, so that a retried batch is answered with its original offsets instead of
//! being appended twice, and a gap in sequences is refused instead of silently accepted.
//!
//! ## Model
//! The state is derived from batch headers only: `update` after each append, `rebuild` from
//! the headers of the log (recovery, becoming leader, after truncation) — Kafka reaches the
//! same state from its snapshots plus the log suffix. Transactions are not modelled.

use std::collections::{BTreeMap, VecDeque};

use crate::kafka::record::{increment_sequence, BatchHeader};
use crate::kafka::types::ProducerId;
use crate::types::Offset;

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: why a producer may have at most five
/// requests in flight with idempotence.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SequenceCheck {
    Accept,
    /// A retry of a batch already in the log: answer with its offsets, do not append.
    Duplicate {
        first_offset: Offset,
        last_offset: Offset,
    },
    /// A gap, an overlap, a new epoch not starting at 0, or a fenced (older) producer epoch,
    /// which Kafka reports as INVALID_PRODUCER_EPOCH; either way nothing is appended.
    OutOfOrder,
    /// A retry of a batch older than every cached one: it was appended long ago, but its
    /// offsets are no longer known.
    DuplicateSequence,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: Offset,
    pub last_offset: Offset,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerStateEntry {
    pub producer_epoch: i16,
    /// Oldest first, at most `NUM_BATCHES_TO_RETAIN`.
    pub batches: VecDeque<BatchMetadata>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: BTreeMap<ProducerId, ProducerStateEntry>,
}

impl ProducerStateManager {
    /// Kafka's duplicate check followed by `checkProducerEpoch` and `checkSequence`.
    /// Non-idempotent batches (producer id -1) are always accepted.
    pub fn check(&self, header: &BatchHeader) -> SequenceCheck {
        if !header.is_idempotent() {
            return SequenceCheck::Accept;
        }
        if header.base_sequence < 0 {
            return SequenceCheck::OutOfOrder;
        }
        // A producer we know nothing of (new, or all its batches deleted by retention) may
        // start at any sequence, as in Kafka since KIP-360.
        let Some(entry) = self.producers.get(&header.producer_id) else {
            return SequenceCheck::Accept;
        };
        if header.producer_epoch < entry.producer_epoch {
            return SequenceCheck::OutOfOrder;
        }
        if header.producer_epoch > entry.producer_epoch {
            return if header.base_sequence == 0 {
                SequenceCheck::Accept
            } else {
                SequenceCheck::OutOfOrder
            };
        }
        let (first_seq, last_seq) = (header.base_sequence, header.last_sequence());
        if let Some(dup) = entry
            .batches
            .iter()
            .find(|b| b.first_seq == first_seq && b.last_seq == last_seq)
        {
            return SequenceCheck::Duplicate {
                first_offset: dup.first_offset,
                last_offset: dup.last_offset,
            };
        }
        let (Some(oldest), Some(latest)) = (entry.batches.front(), entry.batches.back()) else {
            return if first_seq == 0 {
                SequenceCheck::Accept
            } else {
                SequenceCheck::OutOfOrder
            };
        };
        let expected = increment_sequence(latest.last_seq, 1);
        if first_seq == expected {
            SequenceCheck::Accept
        } else if is_ahead(expected, first_seq) {
            // A gap: batches in between never arrived.
            SequenceCheck::OutOfOrder
        } else if is_ahead(last_seq, oldest.first_seq) {
            SequenceCheck::DuplicateSequence
        } else {
            // Overlaps the window without matching a cached batch.
            SequenceCheck::OutOfOrder
        }
    }

    /// Record an appended batch (its header carries the assigned offsets). A different
    /// producer epoch starts the producer's window afresh, as Kafka's
    /// `ProducerStateEntry.maybeUpdateProducerEpoch` does.
    pub fn update(&mut self, header: &BatchHeader) {
        if !header.is_idempotent() {
            return;
        }
        let entry =
            self.producers
                .entry(header.producer_id)
                .or_insert_with(|| ProducerStateEntry {
                    producer_epoch: header.producer_epoch,
                    batches: VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN),
                });
        if entry.producer_epoch != header.producer_epoch {
            entry.producer_epoch = header.producer_epoch;
            entry.batches.clear();
        }
        if entry.batches.len() == NUM_BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: header.base_sequence,
            last_seq: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
        });
    }

    /// The state the log's batches imply, oldest batch first (recovery, becoming leader,
    /// after truncation).
    pub fn rebuild<'a>(headers: impl IntoIterator<Item = &'a BatchHeader>) -> Self {
        let mut state = ProducerStateManager::default();
        for h in headers {
            state.update(h);
        }
        state
    }

    pub fn entry(&self, producer_id: ProducerId) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }
}

/// Whether sequence `to` lies ahead of `from` in the producer's numbering, which wraps from
/// `i32::MAX` to 0: ahead means less than half the sequence space forward.
fn is_ahead(from: i32, to: i32) -> bool {
    const SPACE: i64 = 1 << 31;
    let forward = (i64::from(to) - i64::from(from)).rem_euclid(SPACE);
    forward > 0 && forward < SPACE / 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::{parse_header, set_base_offset, BatchBuilder};
    use proptest::prelude::*;

    /// A header as the log has it after appending: `count` records at `base_offset`.
    fn header(pid: i64, epoch: i16, base_seq: i32, count: usize, base_offset: i64) -> BatchHeader {
        let mut b = BatchBuilder::new(0, ProducerId(pid), epoch, base_seq);
        for _ in 0..count {
            b.push(0, None, Some(b"v"));
        }
        let mut bytes = b.build();
        set_base_offset(&mut bytes, Offset(base_offset));
        parse_header(&bytes).unwrap()
    }

    /// Appends `count`-record batches for producer 1, epoch 0, from sequence 0 and offset 0.
    fn appended(batches: usize, count: usize) -> ProducerStateManager {
        let mut s = ProducerStateManager::default();
        for i in 0..batches {
            let h = header(1, 0, (i * count) as i32, count, (i * count) as i64);
            assert_eq!(s.check(&h), SequenceCheck::Accept);
            s.update(&h);
        }
        s
    }

    #[test]
    fn non_idempotent_batches_are_always_accepted() {
        let s = appended(2, 1);
        assert_eq!(s.check(&header(-1, -1, -1, 3, 0)), SequenceCheck::Accept);
    }

    #[test]
    fn unknown_producer_is_accepted_at_any_sequence() {
        let s = appended(1, 1);
        assert_eq!(s.check(&header(2, 0, 0, 1, 0)), SequenceCheck::Accept);
        assert_eq!(s.check(&header(2, 0, 17, 1, 0)), SequenceCheck::Accept);
    }

    #[test]
    fn next_sequence_is_accepted_and_gaps_are_not() {
        let s = appended(2, 3); // sequences 0..=5
        assert_eq!(s.check(&header(1, 0, 6, 2, 6)), SequenceCheck::Accept);
        assert_eq!(s.check(&header(1, 0, 7, 1, 6)), SequenceCheck::OutOfOrder);
        assert_eq!(
            s.check(&header(1, 0, 4, 2, 6)),
            SequenceCheck::OutOfOrder,
            "overlap"
        );
    }

    /// A retried batch whose ack was lost must get its original offsets back, not a second
    /// copy in the log (the duplicates idempotence exists to prevent).
    #[test]
    fn retry_of_a_cached_batch_is_a_duplicate_with_its_offsets() {
        let s = appended(3, 2);
        assert_eq!(
            s.check(&header(1, 0, 2, 2, 99)),
            SequenceCheck::Duplicate {
                first_offset: Offset(2),
                last_offset: Offset(3)
            }
        );
        assert_eq!(
            s.check(&header(1, 0, 2, 1, 99)),
            SequenceCheck::OutOfOrder,
            "same base sequence, different range"
        );
    }

    #[test]
    fn only_the_last_five_batches_are_remembered() {
        let s = appended(7, 1);
        assert_eq!(
            s.entry(ProducerId(1)).unwrap().batches.len(),
            NUM_BATCHES_TO_RETAIN
        );
        assert!(matches!(
            s.check(&header(1, 0, 2, 1, 99)),
            SequenceCheck::Duplicate { .. }
        ));
        assert_eq!(
            s.check(&header(1, 0, 1, 1, 99)),
            SequenceCheck::DuplicateSequence
        );
        assert_eq!(
            s.check(&header(1, 0, 0, 1, 99)),
            SequenceCheck::DuplicateSequence
        );
    }

    #[test]
    fn a_new_producer_epoch_must_start_at_zero_and_fences_the_old() {
        let mut s = appended(2, 1);
        assert_eq!(s.check(&header(1, 1, 2, 1, 2)), SequenceCheck::OutOfOrder);
        let h = header(1, 1, 0, 1, 2);
        assert_eq!(s.check(&h), SequenceCheck::Accept);
        s.update(&h);
        let entry = s.entry(ProducerId(1)).unwrap();
        assert_eq!((entry.producer_epoch, entry.batches.len()), (1, 1));
        assert_eq!(
            s.check(&header(1, 0, 2, 1, 3)),
            SequenceCheck::OutOfOrder,
            "fenced"
        );
        assert_eq!(s.check(&header(1, 1, 1, 1, 3)), SequenceCheck::Accept);
    }

    #[test]
    fn sequence_wraps_from_max_to_zero() {
        let mut s = ProducerStateManager::default();
        let h = header(1, 0, i32::MAX - 1, 2, 0);
        assert_eq!(h.last_sequence(), i32::MAX);
        s.update(&h);
        assert_eq!(s.check(&header(1, 0, 0, 1, 2)), SequenceCheck::Accept);
        assert_eq!(s.check(&header(1, 0, 1, 1, 2)), SequenceCheck::OutOfOrder);
        let wrapped = header(1, 0, i32::MAX, 3, 2);
        assert_eq!(wrapped.last_sequence(), 1);
    }

    #[test]
    fn ahead_is_less_than_half_the_sequence_space_forward() {
        assert!(is_ahead(5, 6) && is_ahead(i32::MAX, 0) && is_ahead(i32::MAX - 1, 3));
        assert!(!is_ahead(6, 5) && !is_ahead(0, i32::MAX) && !is_ahead(4, 4));
        assert!(
            is_ahead(0, (1 << 30) - 1) && !is_ahead(0, 1 << 30),
            "half is not less"
        );
    }

    #[test]
    fn rebuild_after_truncation_forgets_truncated_batches() {
        let headers: Vec<_> = (0..4).map(|i| header(1, 0, i, 1, i64::from(i))).collect();
        let s = ProducerStateManager::rebuild(&headers[..2]);
        assert_eq!(
            s.check(&headers[2]),
            SequenceCheck::Accept,
            "re-send after truncation"
        );
        assert!(matches!(
            s.check(&headers[1]),
            SequenceCheck::Duplicate { .. }
        ));
    }

    proptest! {
        /// Rebuilding from the log's headers reaches exactly the state built by updates.
        #[test]
        fn rebuild_equals_incremental_updates(
            batches in proptest::collection::vec((1i64..4, 0i16..3, 0i32..20, 1usize..4), 0..30)
        ) {
            let mut incremental = ProducerStateManager::default();
            let mut headers = Vec::new();
            let mut offset = 0;
            for (pid, epoch, seq, count) in batches {
                let h = header(pid, epoch, seq, count, offset);
                offset += count as i64;
                let _ = incremental.check(&h);
                incremental.update(&h);
                headers.push(h);
                let entry = incremental.entry(ProducerId(pid)).unwrap();
                prop_assert!(entry.batches.len() <= NUM_BATCHES_TO_RETAIN);
            }
            prop_assert_eq!(ProducerStateManager::rebuild(&headers), incremental);
        }
    }
}
