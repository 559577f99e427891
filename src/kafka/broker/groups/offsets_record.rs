//! The records of `__consumer_offsets`, in Kafka's bytes, so that a dumped offsets
//! partition reads as Kafka's. A committed offset: the key is a 2-byte schema version and
//! `OffsetCommitKey` (group, topic, partition), the value a 2-byte version and
//! `OffsetCommitValue` (offset, leader epoch, metadata, commit timestamp). Kafka writes
//! key version 1 and, without an expire timestamp (gone since KIP-211, 2.1), value
//! version 3; a null value (a tombstone) deletes the offset. A group's membership: key
//! version 2 (`GroupMetadataKey`, the group) and `GroupMetadataValue` version 3 (the
//! generation, its leader, each member with its subscription and assignment in the
//! consumer protocol's bytes, `ConsumerProtocolSubscription` and
//! `ConsumerProtocolAssignment` version 0). Strings are an `int16` length and UTF-8,
//! bytes an `int32` length, arrays an `int32` count, integers big-endian, as in every
//! non-flexible Kafka schema.

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

/// A group's membership as its coordinator stores it after each rebalance, so that a new
/// coordinator knows the generation and its members.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub generation: i32,
    /// The assignor the members agreed on (`range`); `None` while the group is empty.
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp_ms: i64,
    pub members: Vec<MemberValue>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member: String,
    pub client: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    /// Subscribed topics.
    pub subscription: Vec<String>,
    pub assignment: Vec<TopicPartition>,
}

/// A record key of the topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Offset(OffsetKey),
    /// A group's metadata.
    Group(String),
}

const KEY_VERSION: i16 = 1;
const VALUE_VERSION: i16 = 3;
const GROUP_KEY_VERSION: i16 = 2;
const GROUP_VALUE_VERSION: i16 = 3;
/// The consumer protocol's type name, and its subscription and assignment version.
const PROTOCOL_TYPE: &str = "consumer";
const CONSUMER_PROTOCOL_VERSION: i16 = 0;

pub fn encode_group_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(2 + 2 + group.len());
    out.extend(GROUP_KEY_VERSION.to_be_bytes());
    put_string(&mut out, group);
    out
}

pub fn encode_group_value(value: &GroupValue) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(GROUP_VALUE_VERSION.to_be_bytes());
    put_string(&mut out, PROTOCOL_TYPE);
    out.extend(value.generation.to_be_bytes());
    put_nullable_string(&mut out, value.protocol.as_deref());
    put_nullable_string(&mut out, value.leader.as_deref());
    out.extend(value.current_state_timestamp_ms.to_be_bytes());
    out.extend((value.members.len() as i32).to_be_bytes());
    for member in &value.members {
        put_string(&mut out, &member.member);
        put_nullable_string(&mut out, None);
        put_string(&mut out, &member.client);
        put_string(&mut out, "/");
        out.extend(member.rebalance_timeout_ms.to_be_bytes());
        out.extend(member.session_timeout_ms.to_be_bytes());
        put_bytes(&mut out, &subscription_bytes(&member.subscription));
        put_bytes(&mut out, &assignment_bytes(&member.assignment));
    }
    out
}

/// `ConsumerProtocolSubscription` v0: the topics, no user data.
fn subscription_bytes(topics: &[String]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend(CONSUMER_PROTOCOL_VERSION.to_be_bytes());
    out.extend((topics.len() as i32).to_be_bytes());
    for topic in topics {
        put_string(&mut out, topic);
    }
    out.extend((-1i32).to_be_bytes());
    out
}

/// `ConsumerProtocolAssignment` v0: partitions by topic, no user data.
fn assignment_bytes(partitions: &[TopicPartition]) -> Vec<u8> {
    let mut by_topic: Vec<(&str, Vec<u32>)> = Vec::new();
    for tp in partitions {
        match by_topic.last_mut() {
            Some((topic, list)) if *topic == &*tp.topic => list.push(tp.partition),
            _ => by_topic.push((&tp.topic, vec![tp.partition])),
        }
    }
    let mut out = Vec::new();
    out.extend(CONSUMER_PROTOCOL_VERSION.to_be_bytes());
    out.extend((by_topic.len() as i32).to_be_bytes());
    for (topic, list) in by_topic {
        put_string(&mut out, topic);
        out.extend((list.len() as i32).to_be_bytes());
        for partition in list {
            out.extend((partition as i32).to_be_bytes());
        }
    }
    out.extend((-1i32).to_be_bytes());
    out
}

/// A `GroupMetadataValue` of version 3 (the one written; older ones lack fields a
/// restored group needs).
pub fn decode_group_value(bytes: &[u8]) -> Result<GroupValue, String> {
    let mut reader = Reader(bytes);
    let version = reader.i16()?;
    if version != GROUP_VALUE_VERSION {
        return Err(format!(
            "GroupMetadataValue version {version} is not one hightide reads"
        ));
    }
    let protocol_type = reader.string()?;
    if protocol_type != PROTOCOL_TYPE {
        return Err(format!("protocol type `{protocol_type}`, not `consumer`"));
    }
    let generation = reader.i32()?;
    let protocol = reader.nullable_string()?;
    let leader = reader.nullable_string()?;
    let current_state_timestamp_ms = reader.i64()?;
    let count = reader.count()?;
    let mut members = Vec::with_capacity(count.min(1024));
    for _ in 0..count {
        let member = reader.string()?;
        reader.nullable_string()?;
        let client = reader.string()?;
        reader.string()?;
        let rebalance_timeout_ms = reader.i32()?;
        let session_timeout_ms = reader.i32()?;
        let subscription = read_subscription(reader.bytes()?)?;
        let assignment = read_assignment(reader.bytes()?)?;
        members.push(MemberValue {
            member,
            client,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    reader.end()?;
    Ok(GroupValue {
        generation,
        protocol,
        leader,
        current_state_timestamp_ms,
        members,
    })
}

fn read_subscription(bytes: &[u8]) -> Result<Vec<String>, String> {
    let mut reader = Reader(bytes);
    reader.i16()?;
    let topics = (0..reader.count()?)
        .map(|_| reader.string())
        .collect::<Result<_, _>>()?;
    reader.i32()?;
    Ok(topics)
}

fn read_assignment(bytes: &[u8]) -> Result<Vec<TopicPartition>, String> {
    let mut reader = Reader(bytes);
    reader.i16()?;
    let mut out = Vec::new();
    for _ in 0..reader.count()? {
        let topic = reader.string()?;
        for _ in 0..reader.count()? {
            let partition = u32::try_from(reader.i32()?).map_err(|_| "a negative partition")?;
            out.push(TopicPartition::new(&topic, partition));
        }
    }
    reader.i32()?;
    Ok(out)
}

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

/// A key of any offset-commit version (0 and 1 are the same fields) or a group-metadata
/// key (version 2); `Ok(None)` for the record kinds of later releases.
pub fn decode_key(bytes: &[u8]) -> Result<Option<Key>, String> {
    let mut reader = Reader(bytes);
    match reader.i16()? {
        0 | 1 => {}
        GROUP_KEY_VERSION => {
            let group = reader.string()?;
            reader.end()?;
            return Ok(Some(Key::Group(group)));
        }
        _ => return Ok(None),
    }
    let group = reader.string()?;
    let topic = reader.string()?;
    let partition = u32::try_from(reader.i32()?).map_err(|_| "a negative partition")?;
    reader.end()?;
    Ok(Some(Key::Offset(OffsetKey {
        group,
        tp: TopicPartition::new(&topic, partition),
    })))
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

fn put_nullable_string(out: &mut Vec<u8>, text: Option<&str>) {
    match text {
        Some(text) => put_string(out, text),
        None => out.extend((-1i16).to_be_bytes()),
    }
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend((bytes.len() as i32).to_be_bytes());
    out.extend(bytes);
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

    fn nullable_string(&mut self) -> Result<Option<String>, String> {
        if self.0.starts_with(&(-1i16).to_be_bytes()) {
            self.i16()?;
            return Ok(None);
        }
        self.string().map(Some)
    }

    /// An array's element count.
    fn count(&mut self) -> Result<usize, String> {
        usize::try_from(self.i32()?).map_err(|_| "a null array".to_owned())
    }

    fn bytes(&mut self) -> Result<&[u8], String> {
        let length = usize::try_from(self.i32()?).map_err(|_| "null bytes")?;
        if self.0.len() < length {
            return Err(format!("{length} bytes, {} left", self.0.len()));
        }
        let (bytes, rest) = self.0.split_at(length);
        self.0 = rest;
        Ok(bytes)
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
        assert_eq!(
            decode_key(&[0, 2, 0, 1, b'g']),
            Ok(Some(Key::Group("g".into()))),
            "group metadata"
        );
        assert_eq!(decode_key(&[0, 3, 0, 1, b'g']), Ok(None), "a later kind");
        assert!(decode_value(&[0, 4]).is_err());
        assert!(decode_key(&[0, 1, 0, 5, b'g']).is_err(), "cut off");
    }

    /// The bytes, written out by hand from Kafka's `GroupMetadataValue` v3 and the
    /// consumer protocol's v0 schemas.
    #[test]
    fn a_group_s_metadata_is_kafkas_bytes() {
        assert_eq!(encode_group_key("g"), [0, 2, 0, 1, b'g']);
        let value = GroupValue {
            generation: 2,
            protocol: Some("range".into()),
            leader: Some("c-1".into()),
            current_state_timestamp_ms: 9,
            members: vec![MemberValue {
                member: "c-1".into(),
                client: "c".into(),
                rebalance_timeout_ms: 300,
                session_timeout_ms: 45,
                subscription: vec!["t".into()],
                assignment: vec![TopicPartition::new("t", 0), TopicPartition::new("t", 2)],
            }],
        };
        let mut expected = vec![0, 3, 0, 8];
        expected.extend(b"consumer");
        expected.extend(2i32.to_be_bytes());
        expected.extend([0, 5]);
        expected.extend(b"range");
        expected.extend([0, 3, b'c', b'-', b'1']);
        expected.extend(9i64.to_be_bytes());
        expected.extend(1i32.to_be_bytes());
        expected.extend([0, 3, b'c', b'-', b'1']);
        expected.extend([0xff, 0xff]);
        expected.extend([0, 1, b'c', 0, 1, b'/']);
        expected.extend(300i32.to_be_bytes());
        expected.extend(45i32.to_be_bytes());
        let subscription = [0, 0, 0, 0, 0, 1, 0, 1, b't', 0xff, 0xff, 0xff, 0xff];
        expected.extend((subscription.len() as i32).to_be_bytes());
        expected.extend(subscription);
        let mut assignment = vec![0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2];
        assignment.extend([0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0xff, 0xff, 0xff]);
        expected.extend((assignment.len() as i32).to_be_bytes());
        expected.extend(assignment);
        assert_eq!(encode_group_value(&value), expected);
        assert_eq!(decode_group_value(&expected), Ok(value));
    }

    proptest! {
        #[test]
        fn a_group_reads_back(
            generation in 0i32..1000,
            members in proptest::collection::vec(("[a-z0-9-]{1,12}", 0u32..8, 1i32..100_000), 0..4),
        ) {
            let value = GroupValue {
                generation,
                protocol: (!members.is_empty()).then(|| "range".to_owned()),
                leader: members.first().map(|(m, _, _)| m.clone()),
                current_state_timestamp_ms: 1,
                members: members
                    .into_iter()
                    .map(|(member, partitions, timeout)| MemberValue {
                        client: member.clone(),
                        member,
                        rebalance_timeout_ms: timeout,
                        session_timeout_ms: timeout,
                        subscription: vec!["orders".into()],
                        assignment: (0..partitions).map(|p| TopicPartition::new("orders", p)).collect(),
                    })
                    .collect(),
            };
            prop_assert_eq!(decode_group_value(&encode_group_value(&value)).unwrap(), value);
        }

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
            prop_assert_eq!(decode_key(&encode_key(&key)).unwrap(), Some(Key::Offset(key)));
            prop_assert_eq!(decode_value(&encode_value(&value)).unwrap(), value);
        }
    }
}
