//! A committed offset as a record of `__consumer_offsets`, in Kafka's bytes, so that a
//! dumped offsets partition reads as Kafka's: the key is a 2-byte schema version and
//! `OffsetCommitKey` (group, topic, partition), the value a 2-byte version and
//! `OffsetCommitValue` (offset, leader epoch, metadata, commit timestamp). Kafka writes
//! key version 1 and, without an expire timestamp (gone since KIP-211, 2.1), value
//! version 3; a null value (a tombstone) deletes the offset. Strings are an `int16`
//! length and UTF-8, integers big-endian, as in every non-flexible Kafka schema.

use crate::types::{Epoch, Offset, TopicPartition};

/// Which group's offset for which partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetKey {
    pub group: String,
    pub tp: TopicPartition,
}

/// What was committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    /// The next offset the group will read.
    pub offset: Offset,
    /// The leader epoch of the record before `offset`, for KIP-320 fencing; `Epoch::NONE`
    /// when unknown.
    pub leader_epoch: Epoch,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

const KEY_VERSION: i16 = 1;
const VALUE_VERSION: i16 = 3;

pub fn encode_key(key: &OffsetKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 + key.group.len() + 2 + key.tp.topic.len() + 4);
    out.extend(KEY_VERSION.to_be_bytes());
    put_string(&mut out, &key.group);
    put_string(&mut out, &key.tp.topic);
    out.extend((key.tp.partition as i32).to_be_bytes());
    out
}

pub fn encode_value(value: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 8 + 4 + 2 + value.metadata.len() + 8);
    out.extend(VALUE_VERSION.to_be_bytes());
    out.extend(value.offset.0.to_be_bytes());
    out.extend(value.leader_epoch.0.to_be_bytes());
    put_string(&mut out, &value.metadata);
    out.extend(value.commit_timestamp_ms.to_be_bytes());
    out
}

/// A key of any offset-commit version (0 and 1 are the same fields); `Ok(None)` for the
/// other record kinds of the topic (group metadata is key version 2).
pub fn decode_key(bytes: &[u8]) -> Result<Option<OffsetKey>, String> {
    let mut reader = Reader(bytes);
    match reader.i16()? {
        0 | 1 => {}
        _ => return Ok(None),
    }
    let group = reader.string()?;
    let topic = reader.string()?;
    let partition = u32::try_from(reader.i32()?).map_err(|_| "a negative partition")?;
    reader.end()?;
    Ok(Some(OffsetKey {
        group,
        tp: TopicPartition::new(&topic, partition),
    }))
}

/// A value of versions 0 to 3 (version 1's expire timestamp is read and dropped; the
/// versions before 3 have no leader epoch). Version 4 on (flexible) is not read.
pub fn decode_value(bytes: &[u8]) -> Result<OffsetValue, String> {
    let mut reader = Reader(bytes);
    let version = reader.i16()?;
    if !(0..=3).contains(&version) {
        return Err(format!(
            "OffsetCommitValue version {version} is not one hightide reads"
        ));
    }
    let offset = Offset(reader.i64()?);
    let leader_epoch = if version >= 3 {
        Epoch(reader.i32()?)
    } else {
        Epoch::NONE
    };
    let metadata = reader.string()?;
    let commit_timestamp_ms = reader.i64()?;
    if version == 1 {
        reader.i64()?;
    }
    reader.end()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    let length = i16::try_from(text.len()).unwrap_or(i16::MAX);
    out.extend(length.to_be_bytes());
    out.extend(&text.as_bytes()[..length as usize]);
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or_else(|| format!("cut off: {N} more bytes expected, {} left", self.0.len()))?;
        self.0 = rest;
        Ok(*head)
    }

    fn i16(&mut self) -> Result<i16, String> {
        self.take().map(i16::from_be_bytes)
    }

    fn i32(&mut self) -> Result<i32, String> {
        self.take().map(i32::from_be_bytes)
    }

    fn i64(&mut self) -> Result<i64, String> {
        self.take().map(i64::from_be_bytes)
    }

    fn string(&mut self) -> Result<String, String> {
        let length = usize::try_from(self.i16()?).map_err(|_| "a null string")?;
        if self.0.len() < length {
            return Err(format!("a string of {length} bytes, {} left", self.0.len()));
        }
        let (text, rest) = self.0.split_at(length);
        self.0 = rest;
        String::from_utf8(text.to_vec()).map_err(|_| "a string that is not UTF-8".to_owned())
    }

    fn end(&self) -> Result<(), String> {
        match self.0.len() {
            0 => Ok(()),
            n => Err(format!("{n} bytes past the record")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bytes, written out by hand from Kafka's schemas.
    #[test]
    fn an_offset_commit_is_kafkas_bytes() {
        let key = OffsetKey {
            group: "g".into(),
            tp: TopicPartition::new("t", 2),
        };
        assert_eq!(
            encode_key(&key),
            [0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 2],
            "version 1, group, topic, partition"
        );
        let value = OffsetValue {
            offset: Offset(4100),
            leader_epoch: Epoch(3),
            metadata: String::new(),
            commit_timestamp_ms: 12_300,
        };
        let mut expected = vec![0, 3];
        expected.extend(4100i64.to_be_bytes());
        expected.extend(3i32.to_be_bytes());
        expected.extend([0, 0]);
        expected.extend(12_300i64.to_be_bytes());
        assert_eq!(encode_value(&value), expected);
    }

    #[test]
    fn older_values_read_without_a_leader_epoch_and_other_keys_are_not_offsets() {
        let mut v1 = vec![0, 1];
        v1.extend(7i64.to_be_bytes());
        v1.extend([0, 2, b'h', b'i']);
        v1.extend(99i64.to_be_bytes());
        v1.extend((-1i64).to_be_bytes());
        let value = decode_value(&v1).unwrap();
        assert_eq!((value.offset, value.leader_epoch), (Offset(7), Epoch::NONE));
        assert_eq!(
            (value.metadata.as_str(), value.commit_timestamp_ms),
            ("hi", 99)
        );
        assert_eq!(decode_key(&[0, 2, 0, 1, b'g']), Ok(None), "group metadata");
        assert!(decode_value(&[0, 4]).is_err());
        assert!(decode_key(&[0, 1, 0, 5, b'g']).is_err(), "cut off");
    }

    proptest! {
        #[test]
        fn what_is_written_reads_back(
            group in "[a-z0-9._-]{0,20}",
            topic in "[a-z]{1,12}",
            partition in 0u32..1000,
            offset in 0i64..i64::MAX,
            epoch in -1i32..1000,
            metadata in ".{0,10}",
            at in 0i64..i64::MAX,
        ) {
            let key = OffsetKey { group, tp: TopicPartition::new(&topic, partition) };
            let value = OffsetValue {
                offset: Offset(offset),
                leader_epoch: Epoch(epoch),
                metadata,
                commit_timestamp_ms: at,
            };
            prop_assert_eq!(decode_key(&encode_key(&key)).unwrap(), Some(key));
            prop_assert_eq!(decode_value(&encode_value(&value)).unwrap(), value);
        }
    }
}
