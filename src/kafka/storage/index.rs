//! Kafka's sparse segment indexes, kept in memory and appended to their files.
//!
//! `.index`: 8-byte entries (offset relative to the segment's base offset u32, byte
//! position in the `.log` u32), big-endian, one per `index.interval.bytes` of log.
//! `.timeindex`: 12-byte entries (timestamp i64, relative offset u32), appended when a
//! segment's largest timestamp grows. Both are sorted by construction, so a lookup is a
//! binary search for the greatest entry ≤ the target followed by a short forward scan of
//! batch headers in the `.log`.
//!
//! An `.index` entry names the batch at its position by the batch's *last* offset, as
//! Kafka's `LogSegment.append` and `recover` have since 2.0 (`batch.lastOffset`), so that
//! Kafka's tools and brokers read the files as their own. The batch an entry found by a
//! lookup points at therefore ends at or before the target, and the scan starts there.
//! Kafka up to 1.1 wrote the base offset; hightide writes the last in every release it
//! models (storage has one format, RecordBatch v2, whatever the release), so a 0.10–1.1
//! run's index entries are 2.0's, not those releases'. No lookup result differs: an index
//! only says where a scan may start.
//!
//! Unlike Kafka we do not preallocate and memory-map the files: an index file is exactly
//! its entries, so its length tells how many there are, and a length that is not a
//! multiple of the entry size is a sign of a torn write.

use crate::types::Offset;

/// One `.index` entry: the batch whose last offset is `base + relative_offset` starts at `position`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OffsetPosition {
    pub relative_offset: u32,
    pub position: u32,
}

/// One `.timeindex` entry: the batch ending at `base + relative_offset` holds the
/// segment's largest timestamp so far, `timestamp`. That offset is the batch's last, as
/// Kafka's `recover` records it in every release and its `append` since 3.8 (KAFKA-16310;
/// 2.0–3.7 appended the offset of the record itself when the batch was not compressed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimestampOffset {
    pub timestamp: i64,
    pub relative_offset: u32,
}

pub const OFFSET_ENTRY_BYTES: usize = 8;
pub const TIME_ENTRY_BYTES: usize = 12;

/// Why an index file cannot be trusted (it is then rebuilt from its log).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    #[error("index length {len} is not a multiple of {entry_bytes}")]
    BadLength { len: usize, entry_bytes: usize },
    #[error("index entry {entry} does not increase")]
    NotIncreasing { entry: usize },
}

/// The relative offset of `offset` in a segment starting at `base`, if it fits in an entry.
pub fn relative_offset(base: Offset, offset: Offset) -> Option<u32> {
    u32::try_from(offset.0.checked_sub(base.0)?).ok()
}

/// A segment's `.index` in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OffsetIndex {
    entries: Vec<OffsetPosition>,
}

impl OffsetIndex {
    /// Parse an index file, refusing one that a torn write or corruption left inconsistent:
    /// relative offsets and positions must both strictly increase.
    pub fn parse(bytes: &[u8]) -> Result<OffsetIndex, IndexError> {
        if !bytes.len().is_multiple_of(OFFSET_ENTRY_BYTES) {
            return Err(IndexError::BadLength {
                len: bytes.len(),
                entry_bytes: OFFSET_ENTRY_BYTES,
            });
        }
        let mut entries = Vec::with_capacity(bytes.len() / OFFSET_ENTRY_BYTES);
        for (i, chunk) in bytes.chunks_exact(OFFSET_ENTRY_BYTES).enumerate() {
            let entry = OffsetPosition {
                relative_offset: u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                position: u32::from_be_bytes([chunk[4], chunk[5], chunk[6], chunk[7]]),
            };
            if let Some(last) = entries.last() {
                let last: &OffsetPosition = last;
                if entry.relative_offset <= last.relative_offset || entry.position <= last.position
                {
                    return Err(IndexError::NotIncreasing { entry: i });
                }
            }
            entries.push(entry);
        }
        Ok(OffsetIndex { entries })
    }

    pub fn entries(&self) -> &[OffsetPosition] {
        &self.entries
    }

    pub fn last(&self) -> Option<OffsetPosition> {
        self.entries.last().copied()
    }

    /// Add an entry; returns its file encoding (the caller appends it to the `.index`).
    pub fn push(&mut self, entry: OffsetPosition) -> [u8; OFFSET_ENTRY_BYTES] {
        debug_assert!(self.last().is_none_or(|last| {
            last.relative_offset < entry.relative_offset && last.position < entry.position
        }));
        self.entries.push(entry);
        encode_offset_entry(entry)
    }

    /// The greatest entry with relative offset ≤ `relative`, if any: the position from which
    /// a forward scan finds the batch holding that offset (the batch there ends at or
    /// before it, as Kafka's `translateOffset` relies on).
    pub fn lookup(&self, relative: u32) -> Option<OffsetPosition> {
        let count = self
            .entries
            .partition_point(|e| e.relative_offset <= relative);
        count.checked_sub(1).map(|i| self.entries[i])
    }

    /// Drop entries that point at or past `position` (the log was truncated there).
    pub fn truncate_to_position(&mut self, position: u32) {
        let keep = self.entries.partition_point(|e| e.position < position);
        self.entries.truncate(keep);
    }

    /// The file's bytes (for a rewrite after truncation or rebuild).
    pub fn to_bytes(&self) -> Vec<u8> {
        self.entries
            .iter()
            .flat_map(|e| encode_offset_entry(*e))
            .collect()
    }
}

fn encode_offset_entry(entry: OffsetPosition) -> [u8; OFFSET_ENTRY_BYTES] {
    let mut out = [0u8; OFFSET_ENTRY_BYTES];
    out[..4].copy_from_slice(&entry.relative_offset.to_be_bytes());
    out[4..].copy_from_slice(&entry.position.to_be_bytes());
    out
}

/// A segment's `.timeindex` in memory.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TimeIndex {
    entries: Vec<TimestampOffset>,
}

impl TimeIndex {
    /// Parse a time index file: timestamps and relative offsets must strictly increase
    /// (entries are only appended when the segment's largest timestamp grows).
    pub fn parse(bytes: &[u8]) -> Result<TimeIndex, IndexError> {
        if !bytes.len().is_multiple_of(TIME_ENTRY_BYTES) {
            return Err(IndexError::BadLength {
                len: bytes.len(),
                entry_bytes: TIME_ENTRY_BYTES,
            });
        }
        let mut entries: Vec<TimestampOffset> = Vec::with_capacity(bytes.len() / TIME_ENTRY_BYTES);
        for (i, chunk) in bytes.chunks_exact(TIME_ENTRY_BYTES).enumerate() {
            let mut ts = [0u8; 8];
            ts.copy_from_slice(&chunk[..8]);
            let entry = TimestampOffset {
                timestamp: i64::from_be_bytes(ts),
                relative_offset: u32::from_be_bytes([chunk[8], chunk[9], chunk[10], chunk[11]]),
            };
            if let Some(last) = entries.last() {
                if entry.timestamp <= last.timestamp
                    || entry.relative_offset <= last.relative_offset
                {
                    return Err(IndexError::NotIncreasing { entry: i });
                }
            }
            entries.push(entry);
        }
        Ok(TimeIndex { entries })
    }

    pub fn entries(&self) -> &[TimestampOffset] {
        &self.entries
    }

    pub fn last(&self) -> Option<TimestampOffset> {
        self.entries.last().copied()
    }

    /// Kafka's `maybeAppend`: add an entry only if both the timestamp and the offset grow;
    /// returns the bytes to append to the `.timeindex`, if an entry was added.
    pub fn maybe_push(&mut self, entry: TimestampOffset) -> Option<[u8; TIME_ENTRY_BYTES]> {
        if self.last().is_some_and(|last| {
            entry.timestamp <= last.timestamp || entry.relative_offset <= last.relative_offset
        }) {
            return None;
        }
        self.entries.push(entry);
        Some(encode_time_entry(entry))
    }

    /// The earliest entry whose timestamp is ≥ `timestamp` (offsetsForTimes), if any.
    pub fn lookup(&self, timestamp: i64) -> Option<TimestampOffset> {
        let i = self.entries.partition_point(|e| e.timestamp < timestamp);
        self.entries.get(i).copied()
    }

    /// Drop entries for offsets ≥ `relative` (the log was truncated there).
    pub fn truncate_to_offset(&mut self, relative: u32) {
        let keep = self
            .entries
            .partition_point(|e| e.relative_offset < relative);
        self.entries.truncate(keep);
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.entries
            .iter()
            .flat_map(|e| encode_time_entry(*e))
            .collect()
    }
}

fn encode_time_entry(entry: TimestampOffset) -> [u8; TIME_ENTRY_BYTES] {
    let mut out = [0u8; TIME_ENTRY_BYTES];
    out[..8].copy_from_slice(&entry.timestamp.to_be_bytes());
    out[8..].copy_from_slice(&entry.relative_offset.to_be_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(relative_offset: u32, position: u32) -> OffsetPosition {
        OffsetPosition {
            relative_offset,
            position,
        }
    }

    #[test]
    fn offset_entries_round_trip_big_endian() {
        let mut index = OffsetIndex::default();
        let bytes = index.push(op(0x0102_0304, 0x0506_0708));
        assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8]);
        index.push(op(0x0102_0305, 0x0506_0800));
        assert_eq!(OffsetIndex::parse(&index.to_bytes()), Ok(index));
    }

    #[test]
    fn time_entries_round_trip_big_endian() {
        let mut index = TimeIndex::default();
        let bytes = index.maybe_push(TimestampOffset {
            timestamp: 1,
            relative_offset: 2,
        });
        assert_eq!(bytes, Some([0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2]));
        assert_eq!(TimeIndex::parse(&index.to_bytes()), Ok(index));
    }

    #[test]
    fn lookup_finds_greatest_entry_at_or_below_target() {
        let mut index = OffsetIndex::default();
        for (rel, pos) in [(10, 100), (20, 200), (30, 300)] {
            index.push(op(rel, pos));
        }
        assert_eq!(index.lookup(9), None);
        assert_eq!(index.lookup(10), Some(op(10, 100)));
        assert_eq!(index.lookup(19), Some(op(10, 100)));
        assert_eq!(index.lookup(20), Some(op(20, 200)));
        assert_eq!(index.lookup(u32::MAX), Some(op(30, 300)));
        assert_eq!(OffsetIndex::default().lookup(5), None);
    }

    #[test]
    fn torn_or_unordered_index_files_are_refused() {
        let mut index = OffsetIndex::default();
        index.push(op(1, 10));
        index.push(op(2, 20));
        let bytes = index.to_bytes();
        assert!(matches!(
            OffsetIndex::parse(&bytes[..11]),
            Err(IndexError::BadLength { .. })
        ));
        let mut swapped = bytes[8..].to_vec();
        swapped.extend_from_slice(&bytes[..8]);
        assert_eq!(
            OffsetIndex::parse(&swapped),
            Err(IndexError::NotIncreasing { entry: 1 })
        );
        assert!(matches!(
            TimeIndex::parse(&[0; 13]),
            Err(IndexError::BadLength { .. })
        ));
        assert_eq!(
            TimeIndex::parse(&[0; 24]),
            Err(IndexError::NotIncreasing { entry: 1 })
        );
    }

    #[test]
    fn time_index_appends_only_growing_timestamps() {
        let mut index = TimeIndex::default();
        assert!(index
            .maybe_push(TimestampOffset {
                timestamp: 5,
                relative_offset: 0
            })
            .is_some());
        assert!(index
            .maybe_push(TimestampOffset {
                timestamp: 5,
                relative_offset: 3
            })
            .is_none());
        assert!(index
            .maybe_push(TimestampOffset {
                timestamp: 4,
                relative_offset: 4
            })
            .is_none());
        assert!(index
            .maybe_push(TimestampOffset {
                timestamp: 9,
                relative_offset: 7
            })
            .is_some());
        assert_eq!(
            index.lookup(6),
            Some(TimestampOffset {
                timestamp: 9,
                relative_offset: 7
            })
        );
        index.truncate_to_offset(7);
        assert_eq!(index.entries().len(), 1);
    }

    #[test]
    fn truncation_drops_entries_at_or_past_the_cut() {
        let mut index = OffsetIndex::default();
        for (rel, pos) in [(10, 100), (20, 200), (30, 300)] {
            index.push(op(rel, pos));
        }
        index.truncate_to_position(200);
        assert_eq!(index.entries(), &[op(10, 100)]);
    }

    #[test]
    fn relative_offsets_must_fit_u32() {
        assert_eq!(relative_offset(Offset(10), Offset(12)), Some(2));
        assert_eq!(relative_offset(Offset(10), Offset(9)), None);
        assert_eq!(relative_offset(Offset(0), Offset(1 << 32)), None);
    }
}
