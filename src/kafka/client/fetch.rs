//! A reader's position in one partition and what a Fetch answer does to it (consumers and
//! the final read). KIP-320: when the leader's log diverged from what the reader saw (an
//! unclean election, a truncation), the reader moves back to where the leader's log for
//! the reader's last fetched epoch ends, so that it reads the records that replaced the
//! ones it saw. It learns that end from OffsetsForLeaderEpoch after every leader change
//! (Kafka's consumer position validation), and from a Fetch answer's diverging epoch
//! where the broker gives one.

use crate::history::final_state::ReadRecord;
use crate::kafka::client::outcome::invalidates_metadata;
use crate::kafka::protocol::messages::{AbortedTransaction, ErrorCode, FetchedPartition};
use crate::kafka::record::{
    batches, batches_unchecked_crc, record_views, BatchHeader, EndTxnMarker, TxnResult,
};
use crate::kafka::types::{EpochEndOffset, ProducerId};
use crate::types::{Epoch, Offset};
use std::collections::BTreeSet;

/// Records of concatenated batches at or after `from`, stopping at the first invalid or
/// truncated batch; the position after the last whole batch and that batch's leader epoch.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub records: Vec<ReadRecord>,
    /// For each batch that returned records: the offset of its first returned record
    /// and the batch's leader epoch, in offset order.
    pub epochs: Vec<(Offset, Epoch)>,
    pub next_offset: Option<Offset>,
    pub last_epoch: Option<Epoch>,
}

/// Without `check_crcs` (the consumer's `check.crcs`) no batch's CRC is checked, but a
/// batch or record that cannot be parsed still stops the read, as Kafka's
/// `DefaultRecord.readFrom` raises on one. Control batches (transaction markers) are
/// never returned. `aborted` is a read_committed answer's aborted transactions: the
/// batches they cover are dropped ([`AbortFilter`]).
pub fn decode(
    bytes: &[u8],
    from: Offset,
    check_crcs: bool,
    aborted: Option<&[AbortedTransaction]>,
) -> Decoded {
    let mut decoded = Decoded::default();
    let mut filter = aborted.map(AbortFilter::new);
    let batches = if check_crcs {
        batches(bytes)
    } else {
        batches_unchecked_crc(bytes)
    };
    // Kafka's `CompletedFetch` returns a record only at or past the offset after the last
    // one it returned: a batch whose base offset rotted upwards (the CRC does not cover
    // it) hides the records behind it.
    let mut next = from;
    for batch in batches {
        let Ok((_, header, batch)) = batch else { break };
        let Ok(batch_records) = record_views(batch) else {
            break;
        };
        // The filter sees every batch, markers included: an ABORT marker ends its run.
        let aborted = filter
            .as_mut()
            .is_some_and(|f| f.is_aborted(&header, batch));
        if aborted || header.is_control() {
            decoded.next_offset = Some(header.next_offset());
            decoded.last_epoch = Some(header.partition_leader_epoch);
            continue;
        }
        for record in batch_records {
            let offset = Offset(header.base_offset.0 + i64::from(record.offset_delta));
            if offset >= next {
                if decoded
                    .epochs
                    .last()
                    .is_none_or(|(first, _)| *first < header.base_offset)
                {
                    decoded.epochs.push((offset, header.partition_leader_epoch));
                }
                decoded
                    .records
                    .push(ReadRecord::new(offset, record.value.unwrap_or_default()));
                next = Offset(offset.0 + 1);
            }
        }
        decoded.next_offset = Some(header.next_offset());
        decoded.last_epoch = Some(header.partition_leader_epoch);
    }
    decoded
}

/// Kafka's `CompletedFetch` under read_committed: a producer's transactional batches are
/// dropped from where one of its aborted transactions begins until its ABORT marker.
pub struct AbortFilter {
    /// Not yet reached, latest first (so the next is popped from the end).
    pending: Vec<AbortedTransaction>,
    aborted_producers: BTreeSet<ProducerId>,
}

impl AbortFilter {
    pub fn new(aborted: &[AbortedTransaction]) -> AbortFilter {
        let mut pending = aborted.to_vec();
        pending.sort_by_key(|t| std::cmp::Reverse(t.first_offset));
        AbortFilter {
            pending,
            aborted_producers: BTreeSet::new(),
        }
    }

    /// Whether `batch` belongs to an aborted transaction. An ABORT marker ends its
    /// producer's aborted run (it is not returned either: it is a control batch).
    pub fn is_aborted(&mut self, header: &BatchHeader, batch: &[u8]) -> bool {
        if !header.is_idempotent() {
            return false;
        }
        while let Some(next) = self
            .pending
            .last()
            .filter(|t| t.first_offset <= header.last_offset())
        {
            self.aborted_producers.insert(next.producer_id);
            self.pending.pop();
        }
        let marker = EndTxnMarker::of(batch).ok().flatten();
        if marker.is_some_and(|m| m.result == TxnResult::Abort) {
            self.aborted_producers.remove(&header.producer_id);
            return false;
        }
        header.is_transactional() && self.aborted_producers.contains(&header.producer_id)
    }
}

/// Each record with its batch's leader epoch, from [`Decoded::epochs`] (both in offset
/// order); a record before every batch entry has none.
pub fn with_batch_epochs<'a>(
    records: &'a [ReadRecord],
    epochs: &'a [(Offset, Epoch)],
) -> impl Iterator<Item = (&'a ReadRecord, Epoch)> + 'a {
    let mut epochs = epochs.iter().peekable();
    let mut epoch = Epoch::NONE;
    records.iter().map(move |record| {
        while let Some(&&(first, batch_epoch)) = epochs.peek() {
            if first > record.offset {
                break;
            }
            epoch = batch_epoch;
            epochs.next();
        }
        (record, epoch)
    })
}

/// What a Fetch answer means for the reader.
#[derive(Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// New records (possibly none), with their batches' leader epochs ([`Decoded::epochs`]);
    /// the position moved past them.
    Records {
        records: Vec<ReadRecord>,
        epochs: Vec<(Offset, Epoch)>,
    },
    /// The log diverged from what was read: the position moved back to `to`.
    Diverged { to: Offset },
    /// The position was outside the log: it moved to `to`.
    Reset { to: Offset },
    /// An error; look up the leader again first when `refresh_metadata`.
    Retry {
        error: ErrorCode,
        refresh_metadata: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FetchPosition {
    pub offset: Offset,
    pub last_fetched_epoch: Option<Epoch>,
}

impl FetchPosition {
    pub fn new(offset: Offset) -> Self {
        FetchPosition {
            offset,
            last_fetched_epoch: None,
        }
    }

    /// KIP-320 validation after a leader change: `end` is the new leader's end offset for
    /// `last_fetched_epoch`. Returns the offset the position moved back to, if it did.
    pub fn validate(&mut self, end: EpochEndOffset) -> Option<Offset> {
        if end.epoch < Epoch(0) || end.end_offset < Offset(0) {
            // The leader has no epoch this old: start over (an out-of-range answer then
            // moves the position up to the log start).
            *self = FetchPosition::new(Offset(0));
            return Some(self.offset);
        }
        if end.end_offset < self.offset {
            *self = FetchPosition {
                offset: end.end_offset,
                last_fetched_epoch: Some(end.epoch),
            };
            return Some(self.offset);
        }
        None
    }

    /// `check_crcs`: the reader's `check.crcs`.
    pub fn apply(&mut self, response: &FetchedPartition, check_crcs: bool) -> FetchOutcome {
        match response.error {
            None => {}
            Some(ErrorCode::OffsetOutOfRange) => {
                // Kafka's auto.offset.reset: earliest when below the log, else the HW
                // (above the log: it was truncated below what this reader had seen).
                let to = if self.offset < response.log_start_offset
                    || response.high_watermark < Offset(0)
                {
                    response.log_start_offset.max(Offset(0))
                } else {
                    response.high_watermark
                };
                *self = FetchPosition::new(to);
                return FetchOutcome::Reset { to };
            }
            Some(error) => {
                return FetchOutcome::Retry {
                    error,
                    refresh_metadata: invalidates_metadata(error),
                };
            }
        }
        if let Some(diverging) = response.diverging_epoch {
            if diverging.end_offset < Offset(0) || diverging.epoch < Epoch(0) {
                // The leader has no epoch this old: start over from its log start.
                *self = FetchPosition::new(response.log_start_offset.max(Offset(0)));
            } else {
                self.offset = self.offset.min(diverging.end_offset);
                self.last_fetched_epoch = Some(diverging.epoch);
            }
            return FetchOutcome::Diverged { to: self.offset };
        }
        let decoded = decode(
            &response.records,
            self.offset,
            check_crcs,
            response.aborted_transactions.as_deref(),
        );
        if let Some(next) = decoded.next_offset {
            if next > self.offset {
                self.offset = next;
                self.last_fetched_epoch = decoded.last_epoch;
            }
        }
        FetchOutcome::Records {
            records: decoded.records,
            epochs: decoded.epochs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::{set_base_offset, set_partition_leader_epoch, BatchBuilder};

    fn batch(base: i64, epoch: i32, values: &[&str]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        for v in values {
            builder.push(0, None, Some(v.as_bytes()));
        }
        let mut bytes = builder.build();
        set_base_offset(&mut bytes, Offset(base));
        set_partition_leader_epoch(&mut bytes, Epoch(epoch));
        bytes
    }

    fn response(records: Vec<u8>) -> FetchedPartition {
        FetchedPartition {
            tp: crate::types::TopicPartition::new("t", 0),
            error: None,
            high_watermark: Offset(100),
            last_stable_offset: Offset(100),
            aborted_transactions: None,
            log_start_offset: Offset(0),
            records,
            diverging_epoch: None,
        }
    }

    fn offsets(outcome: &FetchOutcome) -> Vec<i64> {
        match outcome {
            FetchOutcome::Records { records, .. } => records.iter().map(|r| r.offset.0).collect(),
            other => panic!("expected records, got {other:?}"),
        }
    }

    /// A one-record batch of producer `pid`'s transaction at `base`.
    fn txn(base: i64, pid: i64, value: &str) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, ProducerId(pid), 0, base as i32).transactional();
        builder.push(0, None, Some(value.as_bytes()));
        let mut bytes = builder.build();
        set_base_offset(&mut bytes, Offset(base));
        bytes
    }

    fn marker(base: i64, pid: i64, result: TxnResult) -> Vec<u8> {
        let marker = EndTxnMarker {
            result,
            coordinator_epoch: 0,
        };
        let mut bytes = marker.batch(0, ProducerId(pid), 0);
        set_base_offset(&mut bytes, Offset(base));
        bytes
    }

    fn aborted(pid: i64, first: i64) -> AbortedTransaction {
        AbortedTransaction {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
        }
    }

    fn values(decoded: &Decoded) -> Vec<String> {
        decoded
            .records
            .iter()
            .map(|r| String::from_utf8(r.unparsed().unwrap().to_vec()).unwrap())
            .collect()
    }

    /// Producers 1 and 2 interleave; 1 aborts, 2 commits, then 1 commits a second
    /// transaction. read_committed drops exactly 1's first transaction; markers are never
    /// records; read_uncommitted sees every data record.
    #[test]
    fn read_committed_drops_aborted_transactions_and_every_marker() {
        let mut log = Vec::new();
        log.extend(txn(0, 1, "1a"));
        log.extend(txn(1, 2, "2a"));
        log.extend(txn(2, 1, "1b"));
        log.extend(marker(3, 1, TxnResult::Abort));
        log.extend(batch(4, 0, &["plain"]));
        log.extend(txn(5, 1, "1c"));
        log.extend(marker(6, 2, TxnResult::Commit));
        log.extend(marker(7, 1, TxnResult::Commit));
        let committed = decode(&log, Offset(0), true, Some(&[aborted(1, 0)]));
        assert_eq!(values(&committed), ["2a", "plain", "1c"]);
        assert_eq!(
            committed.next_offset,
            Some(Offset(8)),
            "markers advance the position"
        );
        let uncommitted = decode(&log, Offset(0), true, None);
        assert_eq!(values(&uncommitted), ["1a", "2a", "1b", "plain", "1c"]);
    }

    /// Kafka's filter acts on an abort only from the batch that reaches its first offset:
    /// a fetch from inside an aborted transaction still drops the rest of it.
    #[test]
    fn an_abort_that_began_before_the_fetch_still_applies() {
        let mut log = Vec::new();
        log.extend(txn(10, 1, "late"));
        log.extend(marker(11, 1, TxnResult::Abort));
        log.extend(txn(12, 1, "next"));
        let decoded = decode(&log, Offset(10), true, Some(&[aborted(1, 4)]));
        assert_eq!(values(&decoded), ["next"]);
    }

    #[test]
    fn records_advance_the_position_and_the_epoch() {
        let mut position = FetchPosition::new(Offset(0));
        let mut bytes = batch(0, 1, &["a", "b"]);
        bytes.extend(batch(2, 3, &["c"]));
        let outcome = position.apply(&response(bytes), true);
        assert_eq!(offsets(&outcome), vec![0, 1, 2]);
        let FetchOutcome::Records { epochs, .. } = &outcome else {
            unreachable!("offsets checked it")
        };
        assert_eq!(
            epochs,
            &vec![(Offset(0), Epoch(1)), (Offset(2), Epoch(3))],
            "each batch's own epoch, from its first record returned"
        );
        let FetchOutcome::Records { records, .. } = &outcome else {
            unreachable!()
        };
        let per_record: Vec<(i64, Epoch)> = with_batch_epochs(records, epochs)
            .map(|(r, e)| (r.offset.0, e))
            .collect();
        assert_eq!(
            per_record,
            vec![(0, Epoch(1)), (1, Epoch(1)), (2, Epoch(3))]
        );
        assert_eq!(
            position,
            FetchPosition {
                offset: Offset(3),
                last_fetched_epoch: Some(Epoch(3))
            }
        );
    }

    #[test]
    fn records_before_the_position_in_a_batch_are_skipped() {
        let mut position = FetchPosition::new(Offset(1));
        let outcome = position.apply(&response(batch(0, 1, &["a", "b", "c"])), true);
        assert_eq!(offsets(&outcome), vec![1, 2]);
        assert!(
            matches!(&outcome, FetchOutcome::Records { epochs, .. } if epochs == &[(Offset(1), Epoch(1))])
        );
    }

    /// The CRC does not cover a batch's base offset: one that rotted upwards passes the
    /// check, and Kafka's consumer then skips every record behind it, as already read.
    #[test]
    fn a_base_offset_rotted_upwards_hides_the_records_behind_it() {
        let mut bytes = batch(4, 1, &["e", "f"]);
        bytes.extend(batch(2, 1, &["c", "d"]));
        bytes.extend(batch(6, 1, &["g"]));
        let mut position = FetchPosition::new(Offset(0));
        assert_eq!(
            offsets(&position.apply(&response(bytes), true)),
            vec![4, 5, 6]
        );
        assert_eq!(position.offset, Offset(7));
    }

    #[test]
    fn a_truncated_trailing_batch_is_left_for_the_next_fetch() {
        let mut position = FetchPosition::new(Offset(0));
        let mut bytes = batch(0, 1, &["a"]);
        let second = batch(1, 1, &["b"]);
        bytes.extend_from_slice(&second[..second.len() - 1]);
        assert_eq!(offsets(&position.apply(&response(bytes), true)), vec![0]);
        assert_eq!(position.offset, Offset(1));
    }

    /// `check.crcs`: rot inside a well-formed record stops a reader that checks CRCs at its
    /// batch and reaches one that does not as data; a record that cannot be parsed stops
    /// both.
    #[test]
    fn only_a_reader_that_checks_crcs_stops_at_rot_inside_a_well_formed_record() {
        let mut bytes = batch(0, 1, &["a"]);
        bytes.extend(batch(1, 1, &["bcd"]));
        let mut rotten = bytes.clone();
        // The value's `c`: one byte, the headers count, follows it.
        let c = rotten.len() - 3;
        rotten[c] ^= 0x20;
        let checked = decode(&rotten, Offset(0), true, None);
        assert_eq!(checked.records.len(), 1);
        assert_eq!(checked.next_offset, Some(Offset(1)));
        let unchecked = decode(&rotten, Offset(0), false, None);
        let values: Vec<_> = unchecked.records.iter().map(|r| r.unparsed()).collect();
        assert_eq!(values, [Some(&b"a"[..]), Some(&b"bCd"[..])]);
        assert_eq!(unchecked.next_offset, Some(Offset(2)));
        let mut broken = bytes;
        // The headers count 0 becomes -1.
        *broken.last_mut().unwrap() ^= 1;
        let unchecked = decode(&broken, Offset(0), false, None);
        assert_eq!(unchecked.records.len(), 1);
        assert_eq!(unchecked.next_offset, Some(Offset(1)));
    }

    /// KIP-320: a consumer that read records later truncated away must go back to the
    /// divergence point and read what replaced them.
    #[test]
    fn a_diverging_epoch_moves_the_position_back() {
        let mut position = FetchPosition {
            offset: Offset(10),
            last_fetched_epoch: Some(Epoch(2)),
        };
        let mut answer = response(Vec::new());
        answer.diverging_epoch = Some(EpochEndOffset {
            epoch: Epoch(2),
            end_offset: Offset(7),
        });
        assert_eq!(
            position.apply(&answer, true),
            FetchOutcome::Diverged { to: Offset(7) }
        );
        assert_eq!(
            position,
            FetchPosition {
                offset: Offset(7),
                last_fetched_epoch: Some(Epoch(2))
            }
        );
    }

    #[test]
    fn an_unknown_diverging_epoch_restarts_from_the_log_start() {
        let mut position = FetchPosition {
            offset: Offset(10),
            last_fetched_epoch: Some(Epoch(2)),
        };
        let mut answer = response(Vec::new());
        answer.log_start_offset = Offset(4);
        answer.diverging_epoch = Some(EpochEndOffset {
            epoch: Epoch::NONE,
            end_offset: Offset::NONE,
        });
        assert_eq!(
            position.apply(&answer, true),
            FetchOutcome::Diverged { to: Offset(4) }
        );
        assert_eq!(position.last_fetched_epoch, None);
    }

    /// KIP-320 after a leader change: a position beyond the new leader's end of the last
    /// fetched epoch read records that were truncated away.
    #[test]
    fn validation_moves_a_position_beyond_the_epoch_end_back() {
        let mut position = FetchPosition {
            offset: Offset(10),
            last_fetched_epoch: Some(Epoch(2)),
        };
        let end = EpochEndOffset {
            epoch: Epoch(2),
            end_offset: Offset(12),
        };
        assert_eq!(position.validate(end), None, "the leader has all we read");
        assert_eq!(position.offset, Offset(10));
        let end = EpochEndOffset {
            epoch: Epoch(1),
            end_offset: Offset(6),
        };
        assert_eq!(position.validate(end), Some(Offset(6)));
        assert_eq!(
            position,
            FetchPosition {
                offset: Offset(6),
                last_fetched_epoch: Some(Epoch(1))
            }
        );
        let unknown = EpochEndOffset {
            epoch: Epoch::NONE,
            end_offset: Offset::NONE,
        };
        assert_eq!(position.validate(unknown), Some(Offset(0)));
        assert_eq!(position.last_fetched_epoch, None);
    }

    #[test]
    fn out_of_range_resets_to_log_start_or_high_watermark() {
        let mut below = FetchPosition::new(Offset(0));
        let mut answer = response(Vec::new());
        answer.error = Some(ErrorCode::OffsetOutOfRange);
        answer.log_start_offset = Offset(5);
        answer.high_watermark = Offset(9);
        assert_eq!(
            below.apply(&answer, true),
            FetchOutcome::Reset { to: Offset(5) }
        );
        let mut above = FetchPosition {
            offset: Offset(20),
            last_fetched_epoch: Some(Epoch(1)),
        };
        assert_eq!(
            above.apply(&answer, true),
            FetchOutcome::Reset { to: Offset(9) }
        );
        assert_eq!(above.last_fetched_epoch, None);
    }

    #[test]
    fn leadership_errors_ask_for_metadata() {
        let mut position = FetchPosition::new(Offset(3));
        let mut answer = response(Vec::new());
        answer.error = Some(ErrorCode::FencedLeaderEpoch);
        assert_eq!(
            position.apply(&answer, true),
            FetchOutcome::Retry {
                error: ErrorCode::FencedLeaderEpoch,
                refresh_metadata: true
            }
        );
        assert_eq!(position.offset, Offset(3));
    }
}
