//! `__transaction_state` records, as Kafka's `TransactionLog` writes them: the key is the
//! transactional id, the value the id's state after a transition (`TransactionLogValue`
//! v0, what every release writes until `transaction.version` 1).
//!
//! ```text
//! key    version i16 = 0, TransactionalId string (i16 length)
//! value  version i16 = 0, ProducerId i64, ProducerEpoch i16, TransactionTimeoutMs i32,
//!        TransactionStatus i8, TransactionPartitions: i32 count (-1 = null, for Empty),
//!        each {Topic string, PartitionIds: i32 count, i32...},
//!        TransactionLastUpdateTimestampMs i64, TransactionStartTimestampMs i64
//! ```
//! A null value (a tombstone) removes an expired id.
//!
//! ## Departure
//! Kafka writes the topics and partitions of `TransactionPartitions` in the iteration
//! order of Scala hash collections, which differs between releases and even between two
//! records of one transaction; hightide writes them sorted. Every other byte is Kafka's.

use std::collections::BTreeSet;

use super::metadata::{TxnState, TxnTransit};
use crate::kafka::types::ProducerId;
use crate::types::TopicPartition;

pub const KEY_VERSION: i16 = 0;
const VALUE_VERSION: i16 = 0;

pub fn encode_key(transactional_id: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + transactional_id.len());
    out.extend_from_slice(&KEY_VERSION.to_be_bytes());
    put_string(&mut out, transactional_id);
    out
}

pub fn decode_key(bytes: &[u8]) -> Result<String, String> {
    let mut r = Reader(bytes);
    let version = r.i16("key version")?;
    if version != KEY_VERSION {
        return Err(format!("unknown transaction log key version {version}"));
    }
    let id = r.string("transactional id")?;
    r.end()?;
    Ok(id)
}

/// The value a transition writes. Dead and PrepareEpochFence are never written (an
/// expired id is a tombstone; a fence is written as the PrepareAbort after it).
pub fn encode_value(transit: &TxnTransit) -> Vec<u8> {
    assert!(
        !matches!(transit.state, TxnState::Dead | TxnState::PrepareEpochFence),
        "{} is never written",
        transit.state.name()
    );
    assert!(
        transit.state != TxnState::Empty || transit.partitions.is_empty(),
        "an Empty transaction has no partitions"
    );
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&VALUE_VERSION.to_be_bytes());
    out.extend_from_slice(&transit.producer_id.0.to_be_bytes());
    out.extend_from_slice(&transit.producer_epoch.to_be_bytes());
    out.extend_from_slice(&transit.timeout_ms.to_be_bytes());
    out.push(transit.state.id() as u8);
    if transit.state == TxnState::Empty {
        out.extend_from_slice(&(-1i32).to_be_bytes());
    } else {
        let mut topics: Vec<(&str, Vec<u32>)> = Vec::new();
        for tp in &transit.partitions {
            match topics.last_mut() {
                Some((topic, ids)) if *topic == &*tp.topic => ids.push(tp.partition),
                _ => topics.push((&tp.topic, vec![tp.partition])),
            }
        }
        out.extend_from_slice(&(topics.len() as i32).to_be_bytes());
        for (topic, ids) in topics {
            put_string(&mut out, topic);
            out.extend_from_slice(&(ids.len() as i32).to_be_bytes());
            for id in ids {
                out.extend_from_slice(&(id as i32).to_be_bytes());
            }
        }
    }
    out.extend_from_slice(&transit.last_update_ms.to_be_bytes());
    out.extend_from_slice(&transit.start_ms.to_be_bytes());
    out
}

/// A value as a loading coordinator reads it. The previous producer id and epoch are not
/// in a v0 value.
pub fn decode_value(bytes: &[u8]) -> Result<TxnTransit, String> {
    let mut r = Reader(bytes);
    let version = r.i16("value version")?;
    if version != VALUE_VERSION {
        return Err(format!("unknown transaction log value version {version}"));
    }
    let producer_id = ProducerId(r.i64("producer id")?);
    let producer_epoch = r.i16("producer epoch")?;
    let timeout_ms = r.i32("timeout")?;
    let status = r.take(1, "status")?[0] as i8;
    let state = TxnState::from_id(status)
        .ok_or_else(|| format!("unknown transaction state id {status}"))?;
    let mut partitions = BTreeSet::new();
    let topics = r.i32("topics")?;
    for _ in 0..topics.max(0) {
        let topic = r.string("topic")?;
        let count = r.i32("partition ids")?;
        for _ in 0..count.max(0) {
            let id = r.i32("partition id")?;
            let id = u32::try_from(id).map_err(|_| format!("partition id {id}"))?;
            partitions.insert(TopicPartition::new(&topic, id));
        }
    }
    let last_update_ms = r.i64("last update")?;
    let start_ms = r.i64("start")?;
    r.end()?;
    Ok(TxnTransit {
        producer_id,
        last_producer_id: ProducerId::NONE,
        producer_epoch,
        last_producer_epoch: super::metadata::NO_PRODUCER_EPOCH,
        timeout_ms,
        state,
        // Kafka ignores the partitions of an Empty record.
        partitions: if state == TxnState::Empty {
            BTreeSet::new()
        } else {
            partitions
        },
        start_ms,
        last_update_ms,
    })
}

fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as i16).to_be_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// A bounds-checked cursor: a damaged record is an error, never a panic.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], String> {
        if n > self.0.len() {
            return Err(format!("{what}: need {n} bytes, {} left", self.0.len()));
        }
        let (head, tail) = self.0.split_at(n);
        self.0 = tail;
        Ok(head)
    }

    fn i16(&mut self, what: &str) -> Result<i16, String> {
        Ok(i16::from_be_bytes(
            self.take(2, what)?.try_into().expect("2 bytes"),
        ))
    }

    fn i32(&mut self, what: &str) -> Result<i32, String> {
        Ok(i32::from_be_bytes(
            self.take(4, what)?.try_into().expect("4 bytes"),
        ))
    }

    fn i64(&mut self, what: &str) -> Result<i64, String> {
        Ok(i64::from_be_bytes(
            self.take(8, what)?.try_into().expect("8 bytes"),
        ))
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let len = self.i16(what)?;
        let len = usize::try_from(len).map_err(|_| format!("{what}: length {len}"))?;
        String::from_utf8(self.take(len, what)?.to_vec()).map_err(|_| format!("{what}: not UTF-8"))
    }

    fn end(&self) -> Result<(), String> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(format!("{} bytes after the record", self.0.len()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn transit(
        state: TxnState,
        epoch: i16,
        parts: &[(&str, u32)],
        update: i64,
        start: i64,
    ) -> TxnTransit {
        TxnTransit {
            producer_id: ProducerId(1000),
            last_producer_id: ProducerId::NONE,
            producer_epoch: epoch,
            last_producer_epoch: -1,
            timeout_ms: 60_000,
            state,
            partitions: parts
                .iter()
                .map(|(t, p)| TopicPartition::new(t, *p))
                .collect(),
            start_ms: start,
            last_update_ms: update,
        }
    }

    /// Bytes Kafka's own `TransactionLog` (3.9.0 and 4.1.0 at transaction.version 0)
    /// wrote for transactional id "txn-1", producer 1000, timeout 60 s.
    #[test]
    fn records_match_kafkas_bytes() {
        assert_eq!(hex(&encode_key("txn-1")), "0000000574786e2d31");
        let cases = [
            (
                transit(TxnState::Empty, 2, &[], 1_699_999_999_000, -1),
                "000000000000000003e800020000ea6000ffffffff0000018bcfe56418ffffffffffffffff",
            ),
            (
                transit(TxnState::CompleteCommit, 2, &[], 1_700_000_000_300, 1_700_000_000_000),
                "000000000000000003e800020000ea6004000000000000018bcfe5692c0000018bcfe56800",
            ),
            (
                // A timed-out transaction aborted at the fenced epoch 3.
                transit(
                    TxnState::PrepareAbort,
                    3,
                    &[("out", 1)],
                    1_700_000_061_001,
                    1_700_000_001_000,
                ),
                "000000000000000003e800030000ea60030000000100036f757400000001000000010000018bcfe656490000018bcfe56be8",
            ),
            (
                transit(TxnState::CompleteAbort, 3, &[], 1_700_000_061_100, 1_700_000_001_000),
                "000000000000000003e800030000ea6005000000000000018bcfe656ac0000018bcfe56be8",
            ),
        ];
        for (transit, kafka) in cases {
            assert_eq!(
                hex(&encode_value(&transit)),
                kafka,
                "{}",
                transit.state.name()
            );
            assert_eq!(decode_value(&encode_value(&transit)), Ok(transit));
        }
    }

    /// Kafka's Ongoing record of a transaction on out-0, out-1 and __consumer_offsets-7,
    /// its topics in Scala's hash order, reads back as the same set.
    #[test]
    fn kafkas_partition_order_reads_back() {
        let kafka = "000000000000000003e800020000ea60010000000200036f757400000002000000000000000100125f5f636f6e73756d65725f6f66667365747300000001000000070000018bcfe5687b0000018bcfe56800";
        let bytes: Vec<u8> = (0..kafka.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&kafka[i..i + 2], 16).unwrap())
            .collect();
        let expected = transit(
            TxnState::Ongoing,
            2,
            &[("out", 0), ("out", 1), ("__consumer_offsets", 7)],
            1_700_000_000_123,
            1_700_000_000_000,
        );
        assert_eq!(decode_value(&bytes), Ok(expected.clone()));
        assert_eq!(
            encode_value(&expected).len(),
            bytes.len(),
            "the same fields"
        );
    }

    #[test]
    fn damaged_records_are_errors() {
        let good = encode_value(&transit(TxnState::Ongoing, 0, &[("t", 0)], 1, 1));
        for cut in 0..good.len() {
            assert!(decode_value(&good[..cut]).is_err(), "cut at {cut}");
        }
        let mut bad_state = good.clone();
        bad_state[16] = 9;
        assert!(decode_value(&bad_state).is_err());
        assert!(decode_key(&[0, 1, 0, 0]).is_err(), "key version 1");
    }

    proptest! {
        #[test]
        fn values_round_trip(
            state in prop::sample::select(vec![
                TxnState::Empty, TxnState::Ongoing, TxnState::PrepareCommit,
                TxnState::PrepareAbort, TxnState::CompleteCommit, TxnState::CompleteAbort,
            ]),
            epoch in 0i16..i16::MAX,
            parts in proptest::collection::btree_set((0usize..3, 0u32..50), 0..8),
            times in (any::<i64>(), any::<i64>()),
            id in "[a-z0-9._-]{1,20}",
        ) {
            let names = ["out", "in", "__consumer_offsets"];
            let parts: Vec<(&str, u32)> = if state == TxnState::Empty {
                Vec::new()
            } else {
                parts.iter().map(|(t, p)| (names[*t], *p)).collect()
            };
            let t = transit(state, epoch, &parts, times.0, times.1);
            prop_assert_eq!(decode_value(&encode_value(&t)), Ok(t));
            prop_assert_eq!(decode_key(&encode_key(&id)), Ok(id));
        }
    }
}
