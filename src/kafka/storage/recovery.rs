//! Log recovery decisions, as plain functions over bytes and offsets.
//!
//! After an unclean shutdown Kafka trusts what lies below the recovery point (it was
//! fsynced) and re-validates everything from the segment holding the recovery point to the
//! end: each batch must be within bounds, carry magic 2 and a matching CRC-32C. We also
//! require that offsets continue exactly where the previous batch ended: the base offset
//! and the partition leader epoch sit outside the CRC, so a flipped bit there — or a lost
//! page between two segments written back out of order — would otherwise pass unseen,
//! leaving a hole or a repeated offset in the log. Every log hightide writes is contiguous
//! (leaders assign offsets from the LEO, followers must append at their LEO), so a gap is
//! always damage. The first invalid byte ends the log: the segment is truncated there and
//! every later segment is deleted.

use crate::kafka::record::{self, BatchHeader, RecordError};
use crate::types::Offset;

/// A batch found by a scan: where it starts in its segment, and its header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScannedBatch {
    pub position: u32,
    pub header: BatchHeader,
}

/// What a scan of one segment's bytes found.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentScan {
    pub batches: Vec<ScannedBatch>,
    /// Length of the valid prefix: where the segment must be cut if `invalid` is set.
    pub valid_bytes: u64,
    /// Why scanning stopped before the end, if it did.
    pub invalid: Option<String>,
    /// The segment runs on into the next segment's offsets: the tail of a truncation
    /// that never became durable (it is cut at `valid_bytes`; the next segment is kept).
    pub stale_tail: bool,
}

impl SegmentScan {
    /// The offset after the last valid batch, or `start` if there is none.
    pub fn next_offset(&self, start: Offset) -> Offset {
        self.batches
            .last()
            .map_or(start, |b| b.header.next_offset())
    }
}

/// How much checking a scan does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanMode {
    /// Below the recovery point after a clean shutdown: headers only, the cheap pass that
    /// finds the LEO and feeds the epoch cache and producer state.
    Trusted,
    /// From the recovery point after a crash: bounds, magic, CRC-32C and contiguity.
    Validate,
}

/// The index of the first segment recovery must scan: the one holding the recovery point
/// (the greatest base offset ≤ it), or the first segment if the point lies before them all.
pub fn first_segment_to_scan(segment_bases: &[Offset], recovery_point: Offset) -> usize {
    segment_bases
        .partition_point(|base| *base <= recovery_point)
        .saturating_sub(1)
}

/// Where a segment sits in the log: its name, where the log so far ends, and the base
/// offset of the next segment (if any), which its batches must stay below.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentBounds {
    pub base: Offset,
    pub expected: Offset,
    pub next_base: Option<Offset>,
}

/// Scan a segment. In `Validate` mode it must start where the log so far ends, and so must
/// each of its batches; in both modes a batch reaching into the next segment's offsets
/// ends the scan as a stale tail (a power loss undid the truncation that removed it, but
/// not the roll or the follower appends that came after).
pub fn scan_segment(bytes: &[u8], bounds: SegmentBounds, mode: ScanMode) -> SegmentScan {
    if mode == ScanMode::Validate && bounds.base != bounds.expected {
        return SegmentScan {
            batches: Vec::new(),
            valid_bytes: 0,
            invalid: Some(format!(
                "segment {} does not start at {}",
                bounds.base, bounds.expected
            )),
            stale_tail: false,
        };
    }
    let mut batches = Vec::new();
    let mut position = 0usize;
    let mut expected = bounds.expected;
    let mut invalid = None;
    let mut stale_tail = false;
    while position < bytes.len() {
        match check_batch(&bytes[position..], expected, mode) {
            Ok(header)
                if bounds
                    .next_base
                    .is_some_and(|next| header.next_offset() > next) =>
            {
                stale_tail = true;
                break;
            }
            Ok(header) => {
                let Ok(at) = u32::try_from(position) else {
                    invalid = Some(format!("batch at {position} is beyond a 4 GiB segment"));
                    break;
                };
                batches.push(ScannedBatch {
                    position: at,
                    header,
                });
                position += header.size_bytes();
                expected = header.next_offset();
            }
            Err(reason) => {
                invalid = Some(format!("at position {position}: {reason}"));
                break;
            }
        }
    }
    SegmentScan {
        batches,
        valid_bytes: position as u64,
        invalid,
        stale_tail,
    }
}

fn check_batch(bytes: &[u8], expected: Offset, mode: ScanMode) -> Result<BatchHeader, String> {
    let header = match mode {
        ScanMode::Trusted => record::parse_header(bytes).and_then(|h| {
            if bytes.len() < h.size_bytes() {
                Err(RecordError::Truncated {
                    needed: h.size_bytes(),
                    available: bytes.len(),
                })
            } else {
                Ok(h)
            }
        }),
        ScanMode::Validate => record::validate(bytes),
    }
    .map_err(|e| e.to_string())?;
    if mode == ScanMode::Validate && header.base_offset != expected {
        return Err(format!(
            "base offset {} where {expected} was expected",
            header.base_offset
        ));
    }
    if header.last_offset_delta < 0 {
        return Err(format!(
            "negative last offset delta {}",
            header.last_offset_delta
        ));
    }
    Ok(header)
}

/// What recovery does with the segments, given their scans in log order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryPlan {
    /// The segment to cut at its `valid_bytes`, if any.
    pub truncate: Option<usize>,
    /// This segment and every later one are deleted (`scans.len()` deletes none).
    pub delete_from: usize,
}

/// Decide where the log ends: at the first scan that found an invalid byte. A segment
/// whose very first batch is invalid is deleted altogether, unless it would leave the log
/// without segments (a log always has an active segment), so that no empty segment is left
/// whose name does not match the offset its predecessor ends at.
pub fn plan_recovery(scans: &[SegmentScan]) -> RecoveryPlan {
    match scans.iter().position(|s| s.invalid.is_some()) {
        None => RecoveryPlan {
            truncate: None,
            delete_from: scans.len(),
        },
        Some(i) if scans[i].valid_bytes == 0 && i > 0 => RecoveryPlan {
            truncate: None,
            delete_from: i,
        },
        Some(i) => RecoveryPlan {
            truncate: Some(i),
            delete_from: i + 1,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::BatchBuilder;
    use crate::kafka::types::ProducerId;

    fn batch(base: i64, records: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new(1_000, ProducerId::NONE, -1, -1);
        for i in 0..records {
            builder.push(1_000 + i as i64, Some(b"k"), Some(b"value"));
        }
        let mut bytes = builder.build();
        record::set_base_offset(&mut bytes, Offset(base));
        bytes
    }

    fn bounds(base: i64, expected: i64) -> SegmentBounds {
        SegmentBounds {
            base: Offset(base),
            expected: Offset(expected),
            next_base: None,
        }
    }

    fn log_of(batches: &[(i64, usize)]) -> Vec<u8> {
        batches
            .iter()
            .flat_map(|(base, n)| batch(*base, *n))
            .collect()
    }

    #[test]
    fn scan_starts_at_the_segment_holding_the_recovery_point() {
        let bases = [Offset(0), Offset(100), Offset(200)];
        assert_eq!(first_segment_to_scan(&bases, Offset(0)), 0);
        assert_eq!(first_segment_to_scan(&bases, Offset(99)), 0);
        assert_eq!(first_segment_to_scan(&bases, Offset(100)), 1);
        assert_eq!(first_segment_to_scan(&bases, Offset(250)), 2);
        assert_eq!(first_segment_to_scan(&[Offset(50)], Offset(0)), 0);
        assert_eq!(first_segment_to_scan(&[], Offset(7)), 0);
    }

    #[test]
    fn valid_contiguous_segment_scans_to_the_end() {
        let bytes = log_of(&[(10, 3), (13, 1), (14, 5)]);
        let scan = scan_segment(&bytes, bounds(10, 10), ScanMode::Validate);
        assert_eq!(scan.invalid, None);
        assert_eq!(scan.valid_bytes, bytes.len() as u64);
        assert_eq!(scan.batches.len(), 3);
        assert_eq!(scan.next_offset(Offset(10)), Offset(19));
    }

    #[test]
    fn torn_tail_is_cut_at_the_last_whole_batch() {
        let bytes = log_of(&[(0, 2), (2, 2)]);
        let first_len = batch(0, 2).len();
        for cut in [first_len + 1, first_len + 20, bytes.len() - 1] {
            let scan = scan_segment(&bytes[..cut], bounds(0, 0), ScanMode::Validate);
            assert_eq!(scan.valid_bytes, first_len as u64, "cut at {cut}");
            assert!(scan.invalid.is_some());
        }
    }

    #[test]
    fn flipped_payload_bit_fails_the_crc() {
        let mut bytes = log_of(&[(0, 2), (2, 2)]);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x10;
        let scan = scan_segment(&bytes, bounds(0, 0), ScanMode::Validate);
        assert_eq!(scan.batches.len(), 1);
        assert!(scan.invalid.as_deref().is_some_and(|r| r.contains("CRC")));
        // The trusted pass does not read the payload, as Kafka's clean-shutdown load does not.
        assert_eq!(
            scan_segment(&bytes, bounds(0, 0), ScanMode::Trusted).invalid,
            None
        );
    }

    /// A base offset lies outside the CRC: a flipped bit there, or a lost page, must still
    /// end the log rather than leave a hole in its offsets.
    #[test]
    fn offset_gap_ends_the_log() {
        let bytes = log_of(&[(0, 2), (5, 1)]);
        let scan = scan_segment(&bytes, bounds(0, 0), ScanMode::Validate);
        assert_eq!(scan.batches.len(), 1);
        assert!(scan.invalid.is_some());
        let scan = scan_segment(&log_of(&[(3, 1)]), bounds(0, 0), ScanMode::Validate);
        assert_eq!((scan.valid_bytes, scan.batches.len()), (0, 0));
        let scan = scan_segment(&[], bounds(100, 80), ScanMode::Validate);
        assert!(
            scan.invalid.is_some(),
            "an empty segment after a lost tail is a gap too"
        );
    }

    /// Regression: a truncation undone by a power loss left a segment's old tail overlapping
    /// the next segment, and the log served offsets twice.
    #[test]
    fn stale_tail_overlapping_the_next_segment_is_cut() {
        let bytes = log_of(&[(0, 2), (2, 3), (5, 1)]);
        let next_base = Some(Offset(2));
        for mode in [ScanMode::Trusted, ScanMode::Validate] {
            let bounds = SegmentBounds {
                base: Offset(0),
                expected: Offset(0),
                next_base,
            };
            let scan = scan_segment(&bytes, bounds, mode);
            assert!(scan.stale_tail);
            assert_eq!(scan.invalid, None);
            assert_eq!(scan.valid_bytes, batch(0, 2).len() as u64);
        }
    }

    fn scan(valid_bytes: u64, invalid: bool) -> SegmentScan {
        SegmentScan {
            batches: Vec::new(),
            valid_bytes,
            invalid: invalid.then(|| "bad".into()),
            stale_tail: false,
        }
    }

    #[test]
    fn recovery_keeps_everything_when_all_scans_are_valid() {
        let plan = plan_recovery(&[scan(10, false), scan(0, false)]);
        assert_eq!(
            plan,
            RecoveryPlan {
                truncate: None,
                delete_from: 2
            }
        );
    }

    #[test]
    fn recovery_truncates_the_first_invalid_segment_and_deletes_the_rest() {
        let plan = plan_recovery(&[scan(10, false), scan(5, true), scan(10, false)]);
        assert_eq!(
            plan,
            RecoveryPlan {
                truncate: Some(1),
                delete_from: 2
            }
        );
    }

    #[test]
    fn segment_invalid_from_its_first_byte_is_deleted_unless_it_is_the_only_one() {
        let plan = plan_recovery(&[scan(10, false), scan(0, true), scan(10, false)]);
        assert_eq!(
            plan,
            RecoveryPlan {
                truncate: None,
                delete_from: 1
            }
        );
        let plan = plan_recovery(&[scan(0, true), scan(10, false)]);
        assert_eq!(
            plan,
            RecoveryPlan {
                truncate: Some(0),
                delete_from: 1
            }
        );
    }
}
