//! `__transaction_state` records, as Kafka's `TransactionLog` writes them: the key is the
//! transactional id, the value the id's state after a transition (`TransactionLogValue`:
//! v0 until the cluster's `transaction.version` is 1 or more, as from 4.0; v1 after).
//!
//! ```text
//! key       version i16 = 0, TransactionalId string (i16 length)
//! value v0  version i16 = 0, ProducerId i64, ProducerEpoch i16, TransactionTimeoutMs i32,
//!           TransactionStatus i8, TransactionPartitions: i32 count (-1 = null, for Empty),
//!           each {Topic string, PartitionIds: i32 count, i32...},
//!           TransactionLastUpdateTimestampMs i64, TransactionStartTimestampMs i64
//! value v1  the same fields, flexible: the partitions' count, each topic's length and
//!           each ids' count as an unsigned varint of n + 1 (0 = null), each partitions
//!           entry ending with an empty tagged-field section (a 0 byte); then the value's
//!           tagged fields: a varint count, then (tag, size, data) in tag order, of
//!           PreviousProducerId i64 (tag 0), NextProducerId i64 (tag 1) and
//!           ClientTransactionVersion i16 (tag 2), each written only when not its
//!           default (-1, -1, 0)
//! ```
//! Kafka 4.0 to 4.2 never set the two producer ids in what they write (KAFKA-20310), so
//! only ClientTransactionVersion appears: 2 once a transaction protocol v2 client has
//! used the id. A null value (a tombstone) removes an expired id.
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

/// The value version a cluster writes: `TransactionVersion.transactionLogValueVersion`.
fn value_version(transaction_version: i16) -> i16 {
    i16::from(transaction_version >= 1)
}

const PREVIOUS_PRODUCER_ID_TAG: u32 = 0;
const NEXT_PRODUCER_ID_TAG: u32 = 1;
const CLIENT_TRANSACTION_VERSION_TAG: u32 = 2;

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

/// The value a transition writes, in the version a cluster at `transaction_version`
/// writes. Dead and PrepareEpochFence are never written (an expired id is a tombstone; a
/// fence is written as the PrepareAbort after it).
pub fn encode_value(transit: &TxnTransit, transaction_version: i16) -> Vec<u8> {
    assert!(
        !matches!(transit.state, TxnState::Dead | TxnState::PrepareEpochFence),
        "{} is never written",
        transit.state.name()
    );
    assert!(
        transit.state != TxnState::Empty || transit.partitions.is_empty(),
        "an Empty transaction has no partitions"
    );
    let version = value_version(transaction_version);
    let flexible = version >= 1;
    assert!(
        flexible || transit.client_transaction_version == 0,
        "a v0 value has no client transaction version"
    );
    // The count of a flexible array: an unsigned varint of n + 1, 0 for null.
    let put_count = |out: &mut Vec<u8>, n: Option<usize>| {
        if flexible {
            put_uvarint(out, n.map_or(0, |n| n as u32 + 1));
        } else {
            out.extend_from_slice(&n.map_or(-1, |n| n as i32).to_be_bytes());
        }
    };
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&version.to_be_bytes());
    out.extend_from_slice(&transit.producer_id.0.to_be_bytes());
    out.extend_from_slice(&transit.producer_epoch.to_be_bytes());
    out.extend_from_slice(&transit.timeout_ms.to_be_bytes());
    out.push(transit.state.id() as u8);
    if transit.state == TxnState::Empty {
        put_count(&mut out, None);
    } else {
        let mut topics: Vec<(&str, Vec<u32>)> = Vec::new();
        for tp in &transit.partitions {
            match topics.last_mut() {
                Some((topic, ids)) if *topic == &*tp.topic => ids.push(tp.partition),
                _ => topics.push((&tp.topic, vec![tp.partition])),
            }
        }
        put_count(&mut out, Some(topics.len()));
        for (topic, ids) in topics {
            if flexible {
                put_uvarint(&mut out, topic.len() as u32 + 1);
                out.extend_from_slice(topic.as_bytes());
            } else {
                put_string(&mut out, topic);
            }
            put_count(&mut out, Some(ids.len()));
            for id in ids {
                out.extend_from_slice(&(id as i32).to_be_bytes());
            }
            if flexible {
                put_uvarint(&mut out, 0);
            }
        }
    }
    out.extend_from_slice(&transit.last_update_ms.to_be_bytes());
    out.extend_from_slice(&transit.start_ms.to_be_bytes());
    if flexible {
        let client_version = transit.client_transaction_version;
        if client_version == 0 {
            put_uvarint(&mut out, 0);
        } else {
            put_uvarint(&mut out, 1);
            put_uvarint(&mut out, CLIENT_TRANSACTION_VERSION_TAG);
            put_uvarint(&mut out, 2);
            out.extend_from_slice(&client_version.to_be_bytes());
        }
    }
    out
}

/// A value as a loading coordinator reads it, of either version. The previous producer
/// id and epoch are not read back (Kafka sets the epoch to -1 on load).
pub fn decode_value(bytes: &[u8]) -> Result<TxnTransit, String> {
    let mut r = Reader(bytes);
    let version = r.i16("value version")?;
    if !(0..=1).contains(&version) {
        return Err(format!("unknown transaction log value version {version}"));
    }
    let flexible = version == 1;
    let count = |r: &mut Reader, what: &str| -> Result<Option<usize>, String> {
        if flexible {
            let n = r.uvarint(what)?;
            Ok(n.checked_sub(1).map(|n| n as usize))
        } else {
            let n = r.i32(what)?;
            Ok(usize::try_from(n).ok())
        }
    };
    let producer_id = ProducerId(r.i64("producer id")?);
    let producer_epoch = r.i16("producer epoch")?;
    let timeout_ms = r.i32("timeout")?;
    let status = r.take(1, "status")?[0] as i8;
    let state = TxnState::from_id(status)
        .ok_or_else(|| format!("unknown transaction state id {status}"))?;
    let mut partitions = BTreeSet::new();
    let topics = count(&mut r, "topics")?;
    for _ in 0..topics.unwrap_or(0) {
        let topic = if flexible {
            let len = r.uvarint("topic")?.checked_sub(1).ok_or("topic: null")?;
            String::from_utf8(r.take(len as usize, "topic")?.to_vec())
                .map_err(|_| "topic: not UTF-8".to_owned())?
        } else {
            r.string("topic")?
        };
        for _ in 0..count(&mut r, "partition ids")?.unwrap_or(0) {
            let id = r.i32("partition id")?;
            let id = u32::try_from(id).map_err(|_| format!("partition id {id}"))?;
            partitions.insert(TopicPartition::new(&topic, id));
        }
        if flexible {
            r.skip_tagged_fields()?;
        }
    }
    let last_update_ms = r.i64("last update")?;
    let start_ms = r.i64("start")?;
    let mut client_transaction_version = 0;
    if flexible {
        for _ in 0..r.uvarint("tagged fields")? {
            let tag = r.uvarint("tag")?;
            let size = r.uvarint("tag size")? as usize;
            let data = r.take(size, "tagged field")?;
            match tag {
                CLIENT_TRANSACTION_VERSION_TAG if size == 2 => {
                    client_transaction_version = i16::from_be_bytes([data[0], data[1]]);
                }
                PREVIOUS_PRODUCER_ID_TAG | NEXT_PRODUCER_ID_TAG if size == 8 => {}
                PREVIOUS_PRODUCER_ID_TAG
                | NEXT_PRODUCER_ID_TAG
                | CLIENT_TRANSACTION_VERSION_TAG => return Err(format!("tag {tag}: {size} bytes")),
                // Fields of later releases (4.2's NextProducerEpoch): skipped, as Kafka does.
                _ => {}
            }
        }
    }
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
        client_transaction_version,
    })
}

/// An unsigned varint (LEB128), as flexible versions count with.
fn put_uvarint(out: &mut Vec<u8>, mut n: u32) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
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

    fn uvarint(&mut self, what: &str) -> Result<u32, String> {
        let mut n: u32 = 0;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1, what)?[0];
            n |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(format!("{what}: varint longer than 5 bytes"))
    }

    /// A struct's tagged fields, none of which this release knows.
    fn skip_tagged_fields(&mut self) -> Result<(), String> {
        for _ in 0..self.uvarint("tagged fields")? {
            self.uvarint("tag")?;
            let size = self.uvarint("tag size")?;
            self.take(size as usize, "tagged field")?;
        }
        Ok(())
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
            client_transaction_version: 0,
        }
    }

    fn unhex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
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
                hex(&encode_value(&transit, 0)),
                kafka,
                "{}",
                transit.state.name()
            );
            assert_eq!(decode_value(&encode_value(&transit, 0)), Ok(transit));
        }
    }

    /// Kafka's Ongoing record of a transaction on out-0, out-1 and __consumer_offsets-7,
    /// its topics in Scala's hash order, reads back as the same set.
    #[test]
    fn kafkas_partition_order_reads_back() {
        let kafka = "000000000000000003e800020000ea60010000000200036f757400000002000000000000000100125f5f636f6e73756d65725f6f66667365747300000001000000070000018bcfe5687b0000018bcfe56800";
        let bytes = unhex(kafka);
        let expected = transit(
            TxnState::Ongoing,
            2,
            &[("out", 0), ("out", 1), ("__consumer_offsets", 7)],
            1_700_000_000_123,
            1_700_000_000_000,
        );
        assert_eq!(decode_value(&bytes), Ok(expected.clone()));
        assert_eq!(
            encode_value(&expected, 0).len(),
            bytes.len(),
            "the same fields"
        );
    }

    /// Version 1 values (4.0+, `transaction.version` 2), laid out by hand from
    /// `TransactionLogValue.json` (flexible from version 1) and the rules of Kafka's
    /// generated serializers: compact arrays and strings, a tagged-field section per
    /// struct, ClientTransactionVersion (tag 2) only when not 0.
    #[test]
    fn version_1_values_are_flexible_with_the_client_transaction_version_tagged() {
        let update = 0x0192_d1a2_b3c4;
        let empty = transit(TxnState::Empty, 0, &[], update, -1);
        assert_eq!(
            hex(&encode_value(&empty, 2)),
            "0001".to_owned()
                + "00000000000003e8" // producer id 1000
                + "0000" // epoch 0
                + "0000ea60" // timeout 60 s
                + "00" // Empty
                + "00" // partitions: null
                + "00000192d1a2b3c4" // last update
                + "ffffffffffffffff" // start: -1
                + "00", // no tagged fields
        );
        let mut commit = transit(
            TxnState::PrepareCommit,
            5,
            &[("out", 0), ("out", 2)],
            update,
            update - 1,
        );
        commit.client_transaction_version = 2;
        let expected = "0001".to_owned()
            + "00000000000003e8"
            + "0005"
            + "0000ea60"
            + "02" // PrepareCommit
            + "02" // one topic
            + "04" + "6f7574" // "out"
            + "03" + "00000000" + "00000002" // partitions 0 and 2
            + "00" // the entry's tagged fields
            + "00000192d1a2b3c4"
            + "00000192d1a2b3c3"
            + "01" + "02" + "02" + "0002"; // ClientTransactionVersion = 2
        assert_eq!(hex(&encode_value(&commit, 2)), expected);
        assert_eq!(decode_value(&unhex(&expected)), Ok(commit.clone()));
        let mut complete = transit(TxnState::CompleteCommit, 5, &[], update, update - 1);
        complete.client_transaction_version = 2;
        assert_eq!(
            &hex(&encode_value(&complete, 2))[34..36],
            "01",
            "an empty list, not null"
        );
        // A later release's tagged field (4.2's NextProducerEpoch, tag 3) is skipped.
        let later = format!(
            "{}{}",
            &expected[..expected.len() - 10],
            "02020200020302ffff"
        );
        assert_eq!(decode_value(&unhex(&later)), Ok(commit));
    }

    #[test]
    fn damaged_records_are_errors() {
        let good = encode_value(&transit(TxnState::Ongoing, 0, &[("t", 0)], 1, 1), 0);
        for cut in 0..good.len() {
            assert!(decode_value(&good[..cut]).is_err(), "cut at {cut}");
        }
        let flexible = encode_value(&transit(TxnState::Ongoing, 0, &[("t", 0)], 1, 1), 2);
        for cut in 0..flexible.len() {
            assert!(decode_value(&flexible[..cut]).is_err(), "v1 cut at {cut}");
        }
        assert!(decode_value(&[0, 2]).is_err(), "value version 2");
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
            let mut t = transit(state, epoch, &parts, times.0, times.1);
            prop_assert_eq!(decode_value(&encode_value(&t, 0)), Ok(t.clone()));
            for client_version in [0, 2] {
                t.client_transaction_version = client_version;
                prop_assert_eq!(decode_value(&encode_value(&t, 2)), Ok(t.clone()));
            }
            prop_assert_eq!(decode_key(&encode_key(&id)), Ok(id));
        }
    }
}
