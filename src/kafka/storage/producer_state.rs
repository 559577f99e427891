//! Producer state (KIP-98), Kafka's `ProducerStateManager` and `ProducerAppendInfo`: per
//! producer id, the producer epoch and the metadata of its last five batches, so that a
//! retried batch is answered with its original offsets instead of being appended twice,
//! and a gap in sequences is refused instead of silently accepted; and per partition, the
//! transactions open on it, which bound what a `read_committed` reader may see.
//!
//! ## Transactions
//! A transactional batch from a producer with nothing open on the partition *starts* a
//! transaction there (its first offset); a marker from that producer ends it. Until the
//! marker is below the high watermark the transaction is *unstable*, and the last stable
//! offset (LSO) is the first offset of the oldest unstable transaction, or the HW. Nothing
//! else ends a partition's transaction: a later batch at a higher epoch simply continues
//! it, which is why a stray batch landing after its transaction's marker can hang the LSO
//! or be committed with the next transaction (KIP-890's motivation).
//!
//! ## Verification (KIP-890 part 1, Kafka 3.6)
//! Before a transactional batch may *start* a transaction here, the leader asks the
//! transaction coordinator whether the partition is in the producer's ongoing transaction
//! (`transaction.partition.verification.enable`). It hands out a [`VerificationGuard`]
//! while it asks; the batch is appended only if the guard is still the producer's then.
//! Any transactional append of that producer (a batch or a marker) clears it, so a marker
//! written while the question was out fails the append. Guards live in memory only, as
//! Kafka's `VerificationStateEntry`: a new leader asks again.
//!
//! ## Model
//! The state is derived from batch headers and markers only: `update` after each append,
//! `rebuild` from the log (recovery, becoming leader, after truncation) — Kafka reaches
//! the same state from its snapshots plus the log suffix. Replayed batches (a follower's,
//! recovery's) are applied without checks, as Kafka applies `AppendOrigin.REPLICATION`.

use std::collections::{BTreeMap, VecDeque};

use crate::kafka::record::{increment_sequence, BatchHeader, EndTxnMarker, TxnResult};
use crate::kafka::types::ProducerId;
use crate::types::Offset;

/// Kafka's `ProducerStateEntry.NUM_BATCHES_TO_RETAIN`: why a producer may have at most five
/// requests in flight with idempotence.
pub const NUM_BATCHES_TO_RETAIN: usize = 5;

/// `ProducerStateEntry`'s coordinator epoch before any marker.
const NO_COORDINATOR_EPOCH: i32 = -1;

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
    /// A plain batch from a producer with a transaction open on the partition (Kafka's
    /// `InvalidTxnStateException`, "Expected transactional write from producer").
    InvalidTxnState,
}

/// Why a marker is refused (a coordinator's append; replayed markers are never refused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerCheck {
    Accept,
    /// The marker's producer epoch is older than the producer's (INVALID_PRODUCER_EPOCH).
    InvalidProducerEpoch,
    /// Written by a coordinator older than the last one that wrote for this producer
    /// (TRANSACTION_COORDINATOR_FENCED): a zombie coordinator.
    CoordinatorFenced,
}

/// Kafka's `VerificationGuard`: the token a leader's verification of one producer's
/// transaction hands out, valid until that producer's next transactional append.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct VerificationGuard(u64);

/// What producer state reads of a batch: its header, and the marker a control batch holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchSummary {
    pub header: BatchHeader,
    pub marker: Option<EndTxnMarker>,
}

impl BatchSummary {
    /// The summary of a whole, validated batch. A control batch whose marker does not read
    /// is kept as a batch without one (Kafka ignores control records it does not know).
    pub fn of(header: BatchHeader, batch: &[u8]) -> BatchSummary {
        let marker = if header.is_control() {
            EndTxnMarker::of(batch).ok().flatten()
        } else {
            None
        };
        BatchSummary { header, marker }
    }
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
    /// The epoch of the last coordinator whose marker this producer's state took.
    pub coordinator_epoch: i32,
    /// Where the transaction this producer has open on the partition starts.
    pub current_txn_first_offset: Option<Offset>,
}

impl ProducerStateEntry {
    fn new(producer_epoch: i16) -> ProducerStateEntry {
        ProducerStateEntry {
            producer_epoch,
            batches: VecDeque::with_capacity(NUM_BATCHES_TO_RETAIN),
            coordinator_epoch: NO_COORDINATOR_EPOCH,
            current_txn_first_offset: None,
        }
    }

    /// Kafka's `maybeUpdateProducerEpoch`: a new epoch starts the batch window afresh.
    fn set_epoch(&mut self, epoch: i16) {
        if self.producer_epoch != epoch {
            self.producer_epoch = epoch;
            self.batches.clear();
        }
    }
}

/// A transaction a marker ended on this partition (Kafka's `CompletedTxn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompletedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    /// The marker's offset.
    pub last_offset: Offset,
    pub result: TxnResult,
    /// Where a reader may stop when it meets this abort: the first offset of the oldest
    /// transaction still open from another producer, or just past the marker (Kafka's
    /// `lastStableOffset(CompletedTxn)`, which ignores the HW). Kept in the `.txnindex`.
    pub last_stable_offset: Offset,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProducerStateManager {
    producers: BTreeMap<ProducerId, ProducerStateEntry>,
    /// Open transactions by first offset (Kafka's `ongoingTxns`).
    ongoing: BTreeMap<Offset, ProducerId>,
    /// Ended transactions whose marker is not yet below the HW, by first offset: the
    /// marker's offset (Kafka's `unreplicatedTxns`).
    unreplicated: BTreeMap<Offset, Offset>,
    /// Producers whose transaction the leader is verifying (Kafka's `verificationStates`).
    verifications: BTreeMap<ProducerId, Verification>,
    /// The next guard handed out: each is new, so a cleared one never matches again.
    next_guard: u64,
}

/// A verification under way (Kafka's `VerificationStateEntry`, less the lowest sequence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Verification {
    guard: VerificationGuard,
    /// Under transaction protocol v2, the highest epoch verified for: a marker at this
    /// epoch ended the producer's previous transaction, so the guard stands.
    v2_epoch: Option<i16>,
}

impl ProducerStateManager {
    /// Kafka's duplicate check followed by `checkProducerEpoch`, `checkSequence` and the
    /// transaction check of `appendDataBatch`. Non-idempotent batches (producer id -1) are
    /// always accepted.
    pub fn check(&self, header: &BatchHeader) -> SequenceCheck {
        debug_assert!(!header.is_control(), "markers are checked by check_marker");
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
        let sequence = Self::check_sequence(entry, header);
        if sequence == SequenceCheck::Accept
            && entry.current_txn_first_offset.is_some()
            && !header.is_transactional()
        {
            return SequenceCheck::InvalidTxnState;
        }
        sequence
    }

    /// Kafka's `maybeStartTransactionVerification`: `None` when the producer has a
    /// transaction open here (its batch continues it: nothing to verify), else its guard,
    /// made if it has none (concurrent requests of one producer share one). `v2_epoch`:
    /// the batch's epoch under transaction protocol v2 (4.0), where a transaction open
    /// at an older epoch is the previous one, whose marker is on its way.
    pub fn start_verification(
        &mut self,
        producer_id: ProducerId,
        v2_epoch: Option<i16>,
    ) -> Option<VerificationGuard> {
        if self.has_ongoing_transaction(producer_id, v2_epoch) {
            return None;
        }
        let next = &mut self.next_guard;
        let verification = self.verifications.entry(producer_id).or_insert_with(|| {
            *next += 1;
            Verification {
                guard: VerificationGuard(*next),
                v2_epoch,
            }
        });
        verification.v2_epoch = verification.v2_epoch.max(v2_epoch);
        Some(verification.guard)
    }

    /// Kafka's check before a client's transactional batch is appended with verification
    /// on: it continues a transaction open here, or carries the producer's current guard
    /// ("Record was not part of an ongoing transaction" otherwise).
    pub fn verified(
        &self,
        header: &BatchHeader,
        guard: Option<VerificationGuard>,
        v2: bool,
    ) -> bool {
        !header.is_transactional()
            || self.has_ongoing_transaction(header.producer_id, v2.then_some(header.producer_epoch))
            || guard.is_some_and(|g| {
                self.verifications
                    .get(&header.producer_id)
                    .is_some_and(|v| v.guard == g)
            })
    }

    /// Whether `producer_id` has a transaction open here (at `epoch`, under v2).
    fn has_ongoing_transaction(&self, producer_id: ProducerId, epoch: Option<i16>) -> bool {
        self.producers.get(&producer_id).is_some_and(|e| {
            e.current_txn_first_offset.is_some()
                && epoch.is_none_or(|epoch| e.producer_epoch == epoch)
        })
    }

    /// A coordinator's own transactional batch (a TxnOffsetCommit's offsets, origin
    /// COORDINATOR): Kafka checks only its producer epoch, never its sequence, which is
    /// always 0 (`GroupMetadataManager.storeOffsets`), and looks for no duplicate.
    pub fn check_coordinator_batch(&self, header: &BatchHeader) -> Result<(), MarkerCheck> {
        debug_assert!(!header.is_control(), "markers are checked by check_marker");
        match self.producers.get(&header.producer_id) {
            Some(entry)
                if header.is_idempotent() && header.producer_epoch < entry.producer_epoch =>
            {
                Err(MarkerCheck::InvalidProducerEpoch)
            }
            _ => Ok(()),
        }
    }

    fn check_sequence(entry: &ProducerStateEntry, header: &BatchHeader) -> SequenceCheck {
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

    /// A coordinator's marker for `producer_id` at `producer_epoch`: Kafka's
    /// `checkProducerEpoch` (an equal epoch is accepted) and `checkCoordinatorEpoch`.
    pub fn check_marker(
        &self,
        producer_id: ProducerId,
        producer_epoch: i16,
        marker: &EndTxnMarker,
    ) -> MarkerCheck {
        let Some(entry) = self.producers.get(&producer_id) else {
            return MarkerCheck::Accept;
        };
        if producer_epoch < entry.producer_epoch {
            MarkerCheck::InvalidProducerEpoch
        } else if marker.coordinator_epoch < entry.coordinator_epoch {
            MarkerCheck::CoordinatorFenced
        } else {
            MarkerCheck::Accept
        }
    }

    /// Record an appended batch (its header carries the assigned offsets); a marker that
    /// ends an open transaction returns it, completed. A different producer epoch starts
    /// the producer's window afresh, as Kafka's `ProducerStateEntry.maybeUpdateProducerEpoch`
    /// does.
    pub fn update(&mut self, batch: &BatchSummary) -> Option<CompletedTxn> {
        let header = &batch.header;
        if !header.is_idempotent() {
            return None;
        }
        // The transaction is now open here, or ended: either way verified no more; except
        // under v2, where the marker at a verification's epoch ended the transaction before.
        let next_started = self
            .verifications
            .get(&header.producer_id)
            .is_some_and(|v| header.is_control() && v.v2_epoch == Some(header.producer_epoch));
        if (header.is_transactional() || header.is_control()) && !next_started {
            self.verifications.remove(&header.producer_id);
        }
        let entry = self
            .producers
            .entry(header.producer_id)
            .or_insert_with(|| ProducerStateEntry::new(header.producer_epoch));
        if header.is_control() {
            let marker = batch.marker?;
            entry.set_epoch(header.producer_epoch);
            entry.coordinator_epoch = marker.coordinator_epoch;
            let first_offset = entry.current_txn_first_offset.take()?;
            return Some(self.complete(CompletedTxn {
                producer_id: header.producer_id,
                first_offset,
                last_offset: header.base_offset,
                result: marker.result,
                last_stable_offset: Offset::NONE,
            }));
        }
        entry.set_epoch(header.producer_epoch);
        if entry.batches.len() == NUM_BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.batches.push_back(BatchMetadata {
            first_seq: header.base_sequence,
            last_seq: header.last_sequence(),
            first_offset: header.base_offset,
            last_offset: header.last_offset(),
        });
        if header.is_transactional() && entry.current_txn_first_offset.is_none() {
            entry.current_txn_first_offset = Some(header.base_offset);
            let previous = self.ongoing.insert(header.base_offset, header.producer_id);
            debug_assert!(previous.is_none(), "two transactions start at one offset");
        }
        None
    }

    /// Kafka's `lastStableOffset(completedTxn)` then `completeTxn`.
    fn complete(&mut self, mut txn: CompletedTxn) -> CompletedTxn {
        txn.last_stable_offset = self
            .ongoing
            .iter()
            .find(|(_, pid)| **pid != txn.producer_id)
            .map_or(txn.last_offset.next(), |(first, _)| *first);
        let started = self.ongoing.remove(&txn.first_offset);
        assert_eq!(
            started,
            Some(txn.producer_id),
            "a transaction completed that was not started"
        );
        self.unreplicated.insert(txn.first_offset, txn.last_offset);
        txn
    }

    /// The first offset a `read_committed` reader may not pass whatever the HW: the start
    /// of the oldest transaction that is open, or ended but not yet replicated.
    pub fn first_unstable_offset(&self) -> Option<Offset> {
        let ongoing = self.ongoing.keys().next();
        let unreplicated = self.unreplicated.keys().next();
        ongoing.into_iter().chain(unreplicated).min().copied()
    }

    /// Transactions whose marker is now below the HW are stable.
    pub fn on_high_watermark_updated(&mut self, high_watermark: Offset) {
        self.unreplicated
            .retain(|_, marker_offset| *marker_offset >= high_watermark);
    }

    /// The state the log's batches imply, oldest batch first (recovery, becoming leader,
    /// after truncation), and the transactions its markers completed, in log order.
    pub fn rebuild<'a>(
        batches: impl IntoIterator<Item = &'a BatchSummary>,
    ) -> (Self, Vec<CompletedTxn>) {
        let mut state = ProducerStateManager::default();
        let completed = batches
            .into_iter()
            .filter_map(|b| state.update(b))
            .collect();
        (state, completed)
    }

    /// This state, rebuilt from the log, with the verifications `old` had under way: they
    /// are not in the log, and Kafka's reload after a truncation keeps them. Guards stay
    /// new, so one handed out before never matches one handed out after.
    pub fn with_verifications_of(mut self, old: ProducerStateManager) -> ProducerStateManager {
        self.verifications = old.verifications;
        self.next_guard = old.next_guard;
        self
    }

    pub fn entry(&self, producer_id: ProducerId) -> Option<&ProducerStateEntry> {
        self.producers.get(&producer_id)
    }

    /// Open transactions, oldest first: (first offset, producer id).
    pub fn ongoing(&self) -> impl Iterator<Item = (Offset, ProducerId)> + '_ {
        self.ongoing.iter().map(|(first, pid)| (*first, *pid))
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
    use std::collections::BTreeMap;

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

    fn plain(header: BatchHeader) -> BatchSummary {
        BatchSummary {
            header,
            marker: None,
        }
    }

    /// Appends `count`-record batches for producer 1, epoch 0, from sequence 0 and offset 0.
    fn appended(batches: usize, count: usize) -> ProducerStateManager {
        let mut s = ProducerStateManager::default();
        for i in 0..batches {
            let h = header(1, 0, (i * count) as i32, count, (i * count) as i64);
            assert_eq!(s.check(&h), SequenceCheck::Accept);
            s.update(&plain(h));
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
        s.update(&plain(h));
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
        s.update(&plain(h));
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
        let batches: Vec<_> = headers.iter().copied().map(plain).collect();
        let (s, _) = ProducerStateManager::rebuild(&batches[..2]);
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

    /// A transactional batch of `count` records at `base_offset`.
    fn txn(pid: i64, epoch: i16, base_seq: i32, count: usize, base_offset: i64) -> BatchSummary {
        let mut b = BatchBuilder::new(0, ProducerId(pid), epoch, base_seq).transactional();
        for _ in 0..count {
            b.push(0, None, Some(b"v"));
        }
        let mut bytes = b.build();
        set_base_offset(&mut bytes, Offset(base_offset));
        plain(parse_header(&bytes).unwrap())
    }

    fn marker(pid: i64, epoch: i16, result: TxnResult, coordinator: i32, at: i64) -> BatchSummary {
        let marker = EndTxnMarker {
            result,
            coordinator_epoch: coordinator,
        };
        let mut bytes = marker.batch(0, ProducerId(pid), epoch);
        set_base_offset(&mut bytes, Offset(at));
        let header = parse_header(&bytes).unwrap();
        BatchSummary::of(header, &bytes)
    }

    #[test]
    fn a_transactional_batch_opens_a_transaction_and_its_marker_ends_it() {
        let mut s = ProducerStateManager::default();
        assert_eq!(s.update(&txn(1, 0, 0, 2, 10)), None);
        assert_eq!(s.update(&txn(1, 0, 2, 3, 12)), None, "continues it");
        assert_eq!(s.first_unstable_offset(), Some(Offset(10)));
        assert_eq!(
            s.entry(ProducerId(1)).unwrap().current_txn_first_offset,
            Some(Offset(10))
        );
        let done = s.update(&marker(1, 0, TxnResult::Commit, 4, 15)).unwrap();
        assert_eq!(
            (
                done.first_offset,
                done.last_offset,
                done.result,
                done.last_stable_offset
            ),
            (Offset(10), Offset(15), TxnResult::Commit, Offset(16))
        );
        let entry = s.entry(ProducerId(1)).unwrap();
        assert_eq!(
            (entry.current_txn_first_offset, entry.coordinator_epoch),
            (None, 4)
        );
        assert_eq!(
            s.first_unstable_offset(),
            Some(Offset(10)),
            "unstable until the marker is below the HW"
        );
        s.on_high_watermark_updated(Offset(15));
        assert_eq!(s.first_unstable_offset(), Some(Offset(10)));
        s.on_high_watermark_updated(Offset(16));
        assert_eq!(s.first_unstable_offset(), None);
    }

    /// The LSO kept with an abort is where the oldest other producer's open transaction
    /// starts, so a reader knows it has every abort it needs before it.
    #[test]
    fn an_abort_records_the_oldest_other_open_transaction() {
        let mut s = ProducerStateManager::default();
        s.update(&txn(1, 0, 0, 1, 0));
        s.update(&txn(2, 0, 0, 1, 1));
        s.update(&txn(3, 0, 0, 1, 2));
        let done = s.update(&marker(2, 0, TxnResult::Abort, 0, 3)).unwrap();
        assert_eq!(done.last_stable_offset, Offset(0));
        let done = s.update(&marker(1, 0, TxnResult::Abort, 0, 4)).unwrap();
        assert_eq!(done.last_stable_offset, Offset(2));
        assert_eq!(
            s.ongoing().collect::<Vec<_>>(),
            vec![(Offset(2), ProducerId(3))]
        );
    }

    #[test]
    fn a_marker_with_nothing_open_completes_nothing() {
        let mut s = appended(1, 1);
        assert_eq!(s.update(&marker(1, 0, TxnResult::Abort, 0, 1)), None);
        assert_eq!(s.update(&marker(9, 0, TxnResult::Commit, 0, 2)), None);
        assert_eq!(s.first_unstable_offset(), None);
    }

    #[test]
    fn a_plain_write_inside_an_open_transaction_is_refused() {
        let mut s = ProducerStateManager::default();
        s.update(&txn(1, 0, 0, 1, 0));
        assert_eq!(
            s.check(&header(1, 0, 1, 1, 1)),
            SequenceCheck::InvalidTxnState
        );
        assert_eq!(s.check(&txn(1, 0, 1, 1, 1).header), SequenceCheck::Accept);
        assert_eq!(
            s.check(&header(2, 0, 0, 1, 1)),
            SequenceCheck::Accept,
            "another producer"
        );
    }

    /// Nothing but a marker ends a partition's transaction: a batch at a higher epoch
    /// continues it (the stray-batch window KIP-890 closed).
    #[test]
    fn a_new_epoch_continues_the_open_transaction() {
        let mut s = ProducerStateManager::default();
        s.update(&txn(1, 0, 0, 1, 0));
        s.update(&txn(1, 1, 0, 1, 1));
        assert_eq!(
            s.entry(ProducerId(1)).unwrap().current_txn_first_offset,
            Some(Offset(0))
        );
        let done = s.update(&marker(1, 1, TxnResult::Commit, 0, 2)).unwrap();
        assert_eq!(
            done.first_offset,
            Offset(0),
            "the stray batch is committed with it"
        );
    }

    /// KIP-890 part 1: a batch may start a transaction only with the guard its
    /// verification was handed; a batch continuing one needs none.
    #[test]
    fn only_a_verified_batch_starts_a_transaction() {
        let mut s = ProducerStateManager::default();
        let first = txn(1, 0, 0, 1, 0).header;
        assert!(!s.verified(&first, None, false), "unverified");
        let guard = s
            .start_verification(ProducerId(1), None)
            .expect("nothing open: verify");
        assert_eq!(
            s.start_verification(ProducerId(1), None),
            Some(guard),
            "concurrent requests share the guard"
        );
        assert!(s.verified(&first, Some(guard), false));
        assert!(
            s.verified(&header(1, 0, 0, 1, 0), None, false),
            "a plain batch is not verified"
        );
        s.update(&plain(first));
        assert_eq!(
            s.start_verification(ProducerId(1), None),
            None,
            "continues its transaction"
        );
        assert!(s.verified(&txn(1, 0, 1, 1, 1).header, None, false));
    }

    /// The race verification closes: the coordinator said yes, but the transaction's
    /// marker landed before the batch; the marker cleared the guard, so the batch (now a
    /// stray) is refused, and a new guard never equals the old one.
    #[test]
    fn a_marker_while_verifying_refuses_the_batch() {
        let mut s = ProducerStateManager::default();
        let guard = s.start_verification(ProducerId(1), None).unwrap();
        s.update(&txn(2, 0, 0, 1, 0));
        assert!(
            s.verified(&txn(1, 0, 0, 1, 1).header, Some(guard), false),
            "another producer's append keeps it"
        );
        s.update(&marker(1, 0, TxnResult::Abort, 0, 1));
        let stray = txn(1, 0, 0, 1, 2).header;
        assert!(!s.verified(&stray, Some(guard), false));
        let again = s.start_verification(ProducerId(1), None).unwrap();
        assert_ne!(again, guard);
        let rebuilt = ProducerStateManager::rebuild([&txn(2, 0, 0, 1, 0)])
            .0
            .with_verifications_of(s);
        assert!(
            rebuilt.verified(&stray, Some(again), false),
            "a reload keeps verifications under way"
        );
        assert!(!rebuilt.verified(&stray, Some(guard), false));
    }

    /// Transaction protocol v2: the next transaction's batch, at the epoch the previous
    /// one's marker will carry, is verified even while that transaction is still open
    /// here, and the marker (at its epoch) leaves the verification standing.
    #[test]
    fn under_v2_the_next_transaction_is_verified_past_the_previous_marker() {
        let mut s = ProducerStateManager::default();
        s.update(&txn(1, 0, 0, 1, 0));
        assert_eq!(
            s.start_verification(ProducerId(1), None),
            None,
            "before v2: continues it"
        );
        let guard = s
            .start_verification(ProducerId(1), Some(1))
            .expect("a new transaction");
        let next = txn(1, 1, 0, 1, 2).header;
        assert!(
            !s.verified(&next, None, true),
            "the open transaction is epoch 0's"
        );
        s.update(&marker(1, 1, TxnResult::Commit, 0, 1));
        assert!(
            s.verified(&next, Some(guard), true),
            "the marker at epoch 1 ended the previous"
        );
        s.update(&txn(1, 1, 0, 1, 2));
        assert!(
            s.verified(&next, None, true),
            "continues its own open transaction"
        );
        assert_eq!(
            s.start_verification(ProducerId(1), Some(1)),
            None,
            "open at its epoch now"
        );
        let stale = s.start_verification(ProducerId(1), Some(2)).unwrap();
        s.update(&marker(1, 3, TxnResult::Abort, 0, 3));
        assert!(
            !s.verified(&txn(1, 2, 0, 1, 4).header, Some(stale), true),
            "a marker of another epoch clears it"
        );
    }

    #[test]
    fn markers_from_older_producers_or_coordinators_are_fenced() {
        let mut s = ProducerStateManager::default();
        s.update(&txn(1, 3, 0, 1, 0));
        s.update(&marker(1, 3, TxnResult::Commit, 5, 1));
        let m = |coordinator| EndTxnMarker {
            result: TxnResult::Abort,
            coordinator_epoch: coordinator,
        };
        assert_eq!(s.check_marker(ProducerId(1), 3, &m(5)), MarkerCheck::Accept);
        assert_eq!(s.check_marker(ProducerId(1), 4, &m(6)), MarkerCheck::Accept);
        assert_eq!(
            s.check_marker(ProducerId(1), 2, &m(5)),
            MarkerCheck::InvalidProducerEpoch
        );
        assert_eq!(
            s.check_marker(ProducerId(1), 3, &m(4)),
            MarkerCheck::CoordinatorFenced
        );
        assert_eq!(s.check_marker(ProducerId(7), 0, &m(0)), MarkerCheck::Accept);
    }

    /// A fencing abort's marker carries the bumped epoch (KAFKA-6119): the zombie's next
    /// batch, at the old epoch, is refused.
    #[test]
    fn a_marker_at_a_higher_epoch_fences_the_old_epoch() {
        let mut s = ProducerStateManager::default();
        s.update(&txn(1, 0, 0, 1, 0));
        s.update(&marker(1, 1, TxnResult::Abort, 0, 1));
        assert_eq!(
            s.check(&txn(1, 0, 1, 1, 2).header),
            SequenceCheck::OutOfOrder
        );
        assert_eq!(s.check(&txn(1, 1, 0, 1, 2).header), SequenceCheck::Accept);
    }

    proptest! {
        /// Over any interleaving of producers' transactional batches and markers: the first
        /// unstable offset is the oldest open or unreplicated transaction, every completion
        /// names a transaction that was open, and rebuilding from the log agrees.
        #[test]
        fn transactions_open_and_close_consistently(
            steps in proptest::collection::vec((0i64..3, any::<bool>(), any::<bool>(), 0i64..4), 0..40)
        ) {
            let mut s = ProducerStateManager::default();
            let mut log = Vec::new();
            let mut seqs = [0i32; 3];
            let mut open: BTreeMap<i64, Offset> = BTreeMap::new();
            let mut offset = 0;
            let mut hw = Offset(0);
            for (pid, is_marker, commit, hw_step) in steps {
                let batch = if is_marker {
                    let result = if commit { TxnResult::Commit } else { TxnResult::Abort };
                    marker(pid, 0, result, 0, offset)
                } else {
                    let b = txn(pid, 0, seqs[pid as usize], 1, offset);
                    seqs[pid as usize] += 1;
                    b
                };
                offset += 1;
                let done = s.update(&batch);
                match (is_marker, open.get(&pid).copied()) {
                    (true, Some(first)) => {
                        let done = done.expect("a marker ends the open transaction");
                        prop_assert_eq!(done.first_offset, first);
                        prop_assert!(done.last_stable_offset <= Offset(offset));
                        open.remove(&pid);
                    }
                    (true, None) => prop_assert_eq!(done, None),
                    (false, None) => {
                        open.insert(pid, Offset(offset - 1));
                    }
                    (false, Some(_)) => prop_assert_eq!(done, None),
                }
                hw = Offset((hw.0 + hw_step).min(offset));
                s.on_high_watermark_updated(hw);
                let oldest_open = open.values().min().copied();
                let unstable = s.first_unstable_offset();
                prop_assert!(unstable <= oldest_open.or(unstable));
                if let Some(first) = oldest_open {
                    prop_assert!(unstable.is_some_and(|u| u <= first));
                }
                log.push(batch);
            }
            let (rebuilt, _) = ProducerStateManager::rebuild(&log);
            let live: Vec<_> = s.ongoing().collect();
            prop_assert_eq!(rebuilt.ongoing().collect::<Vec<_>>(), live);
        }
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
                incremental.update(&plain(h));
                headers.push(plain(h));
                let entry = incremental.entry(ProducerId(pid)).unwrap();
                prop_assert!(entry.batches.len() <= NUM_BATCHES_TO_RETAIN);
            }
            prop_assert_eq!(ProducerStateManager::rebuild(&headers).0, incremental);
        }
    }
}
