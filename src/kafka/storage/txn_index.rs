//! Kafka's transaction index (`TransactionIndex`, `AbortedTxn`): one `.txnindex` per
//! segment, listing the transactions aborted by a marker in that segment, so that a
//! `read_committed` fetch can tell the consumer which producers' batches to drop without
//! the broker reading them.
//!
//! ## Layout
//! No header and no checksum: a sequence of 34-byte entries, big-endian,
//! `version i16 = 0, producerId i64, firstOffset i64, lastOffset i64 (the ABORT marker),
//! lastStableOffset i64`. Commits are not indexed. The file is created at the first abort.
//! Kafka reads only whole entries: a torn trailing entry is ignored.

use crate::kafka::storage::producer_state::CompletedTxn;
use crate::kafka::types::ProducerId;
use crate::types::Offset;

pub const TXN_INDEX_SUFFIX: &str = ".txnindex";
pub const ENTRY_BYTES: usize = 34;
/// `AbortedTxn.CURRENT_VERSION`.
const VERSION: i16 = 0;

/// One aborted transaction, as the index keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
    /// The ABORT marker's offset.
    pub last_offset: Offset,
    /// The LSO when the abort was written: a reader that reaches it has every aborted
    /// transaction it needs (see [`TxnIndex::collect`]).
    pub last_stable_offset: Offset,
}

impl AbortedTxn {
    pub fn of(txn: &CompletedTxn) -> AbortedTxn {
        AbortedTxn {
            producer_id: txn.producer_id,
            first_offset: txn.first_offset,
            last_offset: txn.last_offset,
            last_stable_offset: txn.last_stable_offset,
        }
    }

    pub fn encode(&self) -> [u8; ENTRY_BYTES] {
        let mut out = [0u8; ENTRY_BYTES];
        out[..2].copy_from_slice(&VERSION.to_be_bytes());
        out[2..10].copy_from_slice(&self.producer_id.0.to_be_bytes());
        out[10..18].copy_from_slice(&self.first_offset.0.to_be_bytes());
        out[18..26].copy_from_slice(&self.last_offset.0.to_be_bytes());
        out[26..].copy_from_slice(&self.last_stable_offset.0.to_be_bytes());
        out
    }

    /// One entry, or why it cannot be one (Kafka throws on a version above its own).
    pub fn decode(bytes: &[u8; ENTRY_BYTES]) -> Result<AbortedTxn, String> {
        let version = i16::from_be_bytes([bytes[0], bytes[1]]);
        if version != VERSION {
            return Err(format!("unexpected aborted transaction version {version}"));
        }
        let long = |at: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[at..at + 8]);
            i64::from_be_bytes(b)
        };
        Ok(AbortedTxn {
            producer_id: ProducerId(long(2)),
            first_offset: Offset(long(10)),
            last_offset: Offset(long(18)),
            last_stable_offset: Offset(long(26)),
        })
    }
}

/// A segment's aborted transactions, in marker order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnIndex {
    entries: Vec<AbortedTxn>,
}

impl TxnIndex {
    /// The entries of a `.txnindex` file (a torn trailing entry ignored, as Kafka reads it),
    /// checked as Kafka's `sanityCheck` does: no marker before the segment's base offset.
    pub fn parse(bytes: &[u8], base_offset: Offset) -> Result<TxnIndex, String> {
        let mut index = TxnIndex::default();
        for chunk in bytes.chunks_exact(ENTRY_BYTES) {
            let entry = AbortedTxn::decode(chunk.try_into().expect("chunks are entry-sized"))?;
            if entry.last_offset < base_offset {
                return Err(format!(
                    "last offset {} of an aborted transaction is before the segment's base \
                     offset {base_offset}",
                    entry.last_offset
                ));
            }
            index.entries.push(entry);
        }
        Ok(index)
    }

    pub fn entries(&self) -> &[AbortedTxn] {
        &self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Add an abort; markers only move forward (Kafka's `append` refuses otherwise).
    /// Returns the entry's bytes, to append to the file.
    pub fn push(&mut self, entry: AbortedTxn) -> [u8; ENTRY_BYTES] {
        assert!(
            self.entries
                .last()
                .is_none_or(|last| last.last_offset < entry.last_offset),
            "aborted transactions are indexed in marker order"
        );
        self.entries.push(entry);
        entry.encode()
    }

    /// Drop the aborts whose marker is at or above `offset` (Kafka's `truncateTo`).
    /// Returns the file's new length.
    pub fn truncate_to(&mut self, offset: Offset) -> u64 {
        let keep = self.entries.partition_point(|e| e.last_offset < offset);
        self.entries.truncate(keep);
        (keep * ENTRY_BYTES) as u64
    }

    /// Kafka's `collectAbortedTxns(fetchOffset, upperBoundOffset)`: the aborts that overlap
    /// `[fetch_offset, upper_bound)`. Returns true when the search is complete: an entry's
    /// LSO reached the bound, so no later segment can hold an abort the reader needs.
    pub fn collect(
        &self,
        fetch_offset: Offset,
        upper_bound: Offset,
        out: &mut Vec<AbortedTxn>,
    ) -> bool {
        for entry in &self.entries {
            if entry.last_offset >= fetch_offset && entry.first_offset < upper_bound {
                out.push(*entry);
            }
            if entry.last_stable_offset >= upper_bound {
                return true;
            }
        }
        false
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        self.entries.iter().flat_map(AbortedTxn::encode).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(pid: i64, first: i64, last: i64, lso: i64) -> AbortedTxn {
        AbortedTxn {
            producer_id: ProducerId(pid),
            first_offset: Offset(first),
            last_offset: Offset(last),
            last_stable_offset: Offset(lso),
        }
    }

    fn index(entries: &[AbortedTxn]) -> TxnIndex {
        let mut index = TxnIndex::default();
        for e in entries {
            index.push(*e);
        }
        index
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The bytes Kafka's own `AbortedTxn` wrote for these two entries (3.9.0 and 4.1.0).
    #[test]
    fn entries_match_kafkas_bytes() {
        let index = index(&[entry(1000, 0, 10, 11), entry(2000, 5, 20, 5)]);
        // As Kafka's tool printed them, one entry a line, field by field.
        let kafka = [
            "0000 00000000000003e8 0000000000000000 000000000000000a 000000000000000b",
            "0000 00000000000007d0 0000000000000005 0000000000000014 0000000000000005",
        ];
        assert_eq!(hex(&index.to_bytes()), kafka.concat().replace(' ', ""));
        assert_eq!(TxnIndex::parse(&index.to_bytes(), Offset(0)), Ok(index));
    }

    /// `collectAbortedTxns` over the two entries above, with the answers Kafka's
    /// `TransactionIndex` gave for the same calls.
    #[test]
    fn collect_answers_as_kafka_does() {
        let index = index(&[entry(1000, 0, 10, 11), entry(2000, 5, 20, 5)]);
        let collect = |from, to| {
            let mut out = Vec::new();
            let complete = index.collect(Offset(from), Offset(to), &mut out);
            let pids: Vec<i64> = out.iter().map(|e| e.producer_id.0).collect();
            (pids, complete)
        };
        assert_eq!(collect(0, 5), (vec![1000], true));
        assert_eq!(collect(11, 21), (vec![2000], false));
        assert_eq!(collect(21, 30), (vec![], false));
        assert_eq!(collect(0, 100), (vec![1000, 2000], false));
        assert_eq!(collect(6, 7), (vec![1000], true));
    }

    #[test]
    fn truncation_drops_markers_at_and_after_the_offset() {
        let mut index = index(&[entry(1000, 0, 10, 11), entry(2000, 5, 20, 5)]);
        assert_eq!(index.truncate_to(Offset(15)), ENTRY_BYTES as u64);
        assert_eq!(index.entries(), &[entry(1000, 0, 10, 11)]);
        assert_eq!(index.truncate_to(Offset(10)), 0);
        assert!(index.is_empty());
    }

    #[test]
    fn a_torn_entry_is_ignored_and_a_bad_one_refused() {
        let bytes = index(&[entry(7, 100, 105, 106)]).to_bytes();
        let mut torn = bytes.clone();
        torn.extend_from_slice(&bytes[..20]);
        assert_eq!(
            TxnIndex::parse(&torn, Offset(100)).unwrap().entries().len(),
            1
        );
        assert!(
            TxnIndex::parse(&bytes, Offset(106)).is_err(),
            "marker before base"
        );
        let mut versioned = bytes;
        versioned[1] = 1;
        assert!(TxnIndex::parse(&versioned, Offset(100)).is_err());
    }

    #[test]
    #[should_panic(expected = "marker order")]
    fn markers_must_move_forward() {
        index(&[entry(1, 0, 10, 11), entry(2, 3, 10, 11)]);
    }

    proptest! {
        /// Whatever is written reads back, and truncation keeps exactly the earlier markers.
        #[test]
        fn round_trip_and_truncation(
            gaps in proptest::collection::vec((1i64..20, 0i64..20, 0i64..30), 0..20),
            cut in 0i64..400,
        ) {
            let mut last = 0;
            let entries: Vec<AbortedTxn> = gaps
                .iter()
                .enumerate()
                .map(|(i, (gap, back, lso))| {
                    last += gap;
                    entry(i as i64, (last - back).max(0), last, last + lso)
                })
                .collect();
            let mut index = index(&entries);
            prop_assert_eq!(TxnIndex::parse(&index.to_bytes(), Offset(0)), Ok(index.clone()));
            let len = index.truncate_to(Offset(cut));
            prop_assert_eq!(len as usize, index.to_bytes().len());
            let kept: Vec<_> = entries.iter().copied().filter(|e| e.last_offset.0 < cut).collect();
            prop_assert_eq!(index.entries(), kept.as_slice());
        }
    }
}
