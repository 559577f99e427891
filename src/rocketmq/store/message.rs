//! A CommitLog record, byte for byte as RocketMQ's broker writes it
//! (`MessageExtEncoder.encode`) and reads it back (`CommitLog.checkMessageAndReturnSize`,
//! which recovery and dispatch both use). Every field is big-endian:
//!
//! ```text
//! TOTALSIZE 4 | MAGICCODE 4 | BODYCRC 4 | QUEUEID 4 | FLAG 4 | QUEUEOFFSET 8 |
//! PHYSICALOFFSET 8 | SYSFLAG 4 | BORNTIMESTAMP 8 | BORNHOST 8 | STORETIMESTAMP 8 |
//! STOREHOSTADDRESS 8 | RECONSUMETIMES 4 | PREPARED_TX_OFFSET 8 | bodyLength 4 | body |
//! topicLength 1 (2 in V2) | topic | propertiesLength 2 | properties
//! ```
//!
//! BODYCRC covers the body alone (Java's CRC32, its sign bit cleared: `UtilAll.crc32`), so
//! a rotten byte in a header or a topic passes the check unless it breaks the length
//! arithmetic. A file that cannot take the next record ends with a BLANK record: its free
//! length and the BLANK magic code, the rest of the file left as it was.
//!
//! Left out: IPv6 hosts (`BORNHOST_V6_FLAG`, 20-byte hosts), the properties CRC that
//! `forceVerifyPropCRC` checks (off by default), batch and inner-batch messages, and the
//! schedule topic's delivery time in place of the tags code.

use crate::config::rocketmq::Rules;
use crate::types::java_string_hash;

/// `MessageDecoder.MESSAGE_MAGIC_CODE` (0xDAA320A7): a record whose topic length is a byte.
pub const MESSAGE_MAGIC_CODE: i32 = 0xDAA3_20A7_u32 as i32;
/// `MESSAGE_MAGIC_CODE_V2` (0xDAA320AB): a topic longer than 127 bytes, its length a short.
pub const MESSAGE_MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// `CommitLog.BLANK_MAGIC_CODE` (0xCBD43194): the end-of-file filler.
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// `END_FILE_MIN_BLANK_LENGTH`: a file always keeps room for the BLANK record's two ints.
pub const END_FILE_MIN_BLANK_LENGTH: u64 = 8;

/// Between a property's name and its value (`MessageDecoder.NAME_VALUE_SEPARATOR`).
pub const NAME_VALUE_SEPARATOR: u8 = 1;
/// After each property's value (`PROPERTY_SEPARATOR`).
pub const PROPERTY_SEPARATOR: u8 = 2;

/// The properties a store reads back (`MessageConst`).
pub const PROPERTY_KEYS: &str = "KEYS";
pub const PROPERTY_TAGS: &str = "TAGS";
pub const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";

/// Bytes from TOTALSIZE to the body's length field, with IPv4 hosts.
const FIXED_BEFORE_BODY: usize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8;

/// A host as a record holds it: an IPv4 address and a port, 8 bytes
/// (`MessageExt.socketAddress2ByteBuffer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Host {
    pub ip: [u8; 4],
    pub port: i32,
}

/// One message as the CommitLog stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub topic: String,
    pub queue_id: i32,
    pub flag: i32,
    /// Its position in its ConsumeQueue, assigned at append.
    pub queue_offset: i64,
    /// Where the record starts in the CommitLog, assigned at append.
    pub physical_offset: i64,
    pub sys_flag: i32,
    pub born_timestamp: i64,
    pub born_host: Host,
    pub store_timestamp: i64,
    pub store_host: Host,
    pub reconsume_times: i32,
    pub prepared_transaction_offset: i64,
    pub body: Vec<u8>,
    /// The properties string's bytes as the broker serialised them (see [`properties`]).
    pub properties: Vec<u8>,
}

impl Message {
    /// `calMsgLength`: the record's TOTALSIZE.
    pub fn encoded_len(&self) -> usize {
        record_len(
            self.topic_length_size(),
            self.body.len(),
            self.topic.len(),
            self.properties.len(),
        )
    }

    /// The record's bytes, appended to `out`; BODYCRC is computed from the body, as the
    /// broker does on receipt.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let total = self.encoded_len();
        debug_assert!(
            self.properties.len() <= i16::MAX as usize,
            "PROPERTIES_SIZE_EXCEEDED"
        );
        let start = out.len();
        out.reserve(total);
        let v2 = self.topic_length_size() == 2;
        put_i32(out, total as i32);
        put_i32(
            out,
            if v2 {
                MESSAGE_MAGIC_CODE_V2
            } else {
                MESSAGE_MAGIC_CODE
            },
        );
        put_i32(out, body_crc(&self.body));
        put_i32(out, self.queue_id);
        put_i32(out, self.flag);
        put_i64(out, self.queue_offset);
        put_i64(out, self.physical_offset);
        put_i32(out, self.sys_flag);
        put_i64(out, self.born_timestamp);
        put_host(out, self.born_host);
        put_i64(out, self.store_timestamp);
        put_host(out, self.store_host);
        put_i32(out, self.reconsume_times);
        put_i64(out, self.prepared_transaction_offset);
        put_i32(out, self.body.len() as i32);
        out.extend_from_slice(&self.body);
        if v2 {
            out.extend_from_slice(&(self.topic.len() as u16).to_be_bytes());
        } else {
            out.push(self.topic.len() as u8);
        }
        out.extend_from_slice(self.topic.as_bytes());
        out.extend_from_slice(&(self.properties.len() as u16).to_be_bytes());
        out.extend_from_slice(&self.properties);
        debug_assert_eq!(
            out.len() - start,
            total,
            "calMsgLength agrees with the bytes"
        );
    }

    /// A topic longer than a signed byte holds is written in `MESSAGE_VERSION_V2`.
    fn topic_length_size(&self) -> usize {
        if self.topic.len() > i8::MAX as usize {
            2
        } else {
            1
        }
    }
}

/// `calMsgLength` with IPv4 hosts.
fn record_len(topic_length_size: usize, body: usize, topic: usize, properties: usize) -> usize {
    FIXED_BEFORE_BODY + 4 + body + topic_length_size + topic + 2 + properties
}

/// The BLANK record that ends a file with `free` bytes left (at least
/// [`END_FILE_MIN_BLANK_LENGTH`]): its length and the magic code.
pub fn blank(free: u64) -> [u8; 8] {
    debug_assert!(free >= END_FILE_MIN_BLANK_LENGTH);
    let mut out = [0; 8];
    out[..4].copy_from_slice(&(free as i32).to_be_bytes());
    out[4..].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    out
}

/// `UtilAll.crc32`: CRC-32 (IEEE), its sign bit cleared.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// What a record says about itself when read at a position: what a ConsumeQueue entry
/// and the recovery scan need (`DispatchRequest`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dispatch {
    pub topic: String,
    pub queue_id: i32,
    /// The PHYSICALOFFSET field, where the record says it starts.
    pub commit_log_offset: i64,
    pub msg_size: u32,
    /// The tags' `String.hashCode`, 0 without tags: what a ConsumeQueue entry carries
    /// for server-side filtering.
    pub tags_code: i64,
    pub store_timestamp: i64,
    pub queue_offset: i64,
    pub keys: String,
    pub uniq_key: Option<String>,
    pub sys_flag: i32,
    pub prepared_transaction_offset: i64,
}

/// A record read back (`checkMessageAndReturnSize`'s three answers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// A whole message.
    Message(Dispatch),
    /// The end-of-file filler: the log goes on at the start of the next file.
    Blank,
    /// No message here, which ends the log: zeros, a bad magic code, a short or
    /// failed read, a body whose CRC does not match. `half` is the TOTALSIZE of a record
    /// whose magic code was right but whose lengths disagree with it (Java's "half
    /// message", which recovery truncates too).
    End { half: Option<u32> },
}

/// Read the record at the start of `buf` (which runs to the end of what the file holds),
/// as `checkMessageAndReturnSize` does: every failure, including one Java meets as an
/// exception (a negative or oversized length), ends the log.
pub fn check(buf: &[u8], check_crc: bool) -> Checked {
    check_fields(buf, check_crc).unwrap_or(Checked::End { half: None })
}

fn check_fields(buf: &[u8], check_crc: bool) -> Option<Checked> {
    if buf.len() <= 4 {
        return None;
    }
    let mut r = Reader { buf, at: 0 };
    let total_size = r.i32()?;
    if ((buf.len() - 4) as i64) < i64::from(total_size) - 4 {
        return None;
    }
    let topic_length_size = match r.i32()? {
        MESSAGE_MAGIC_CODE => 1,
        MESSAGE_MAGIC_CODE_V2 => 2,
        BLANK_MAGIC_CODE => return Some(Checked::Blank),
        _ => return None,
    };
    // Java reads each variable part into a scratch array of TOTALSIZE bytes.
    let scratch = usize::try_from(total_size).ok()?;
    let body_crc_field = r.i32()?;
    let queue_id = r.i32()?;
    let _flag = r.i32()?;
    let queue_offset = r.i64()?;
    let commit_log_offset = r.i64()?;
    let sys_flag = r.i32()?;
    let _born_timestamp = r.i64()?;
    if scratch < 8 {
        return None; // The hosts are read into the scratch array too.
    }
    r.take(8)?;
    let store_timestamp = r.i64()?;
    r.take(8)?;
    let _reconsume_times = r.i32()?;
    let prepared_transaction_offset = r.i64()?;
    let body_len = r.i32()?;
    if body_len > 0 {
        let body = r.take(usize::try_from(body_len).ok().filter(|&n| n <= scratch)?)?;
        if check_crc && body_crc(body) != body_crc_field {
            return None;
        }
    }
    let topic_len = if topic_length_size == 2 {
        i32::from(r.i16()?)
    } else {
        i32::from(r.u8()? as i8)
    };
    let topic = r.take(usize::try_from(topic_len).ok().filter(|&n| n <= scratch)?)?;
    let topic = String::from_utf8_lossy(topic).into_owned();
    let properties_len = r.i16()?;
    let mut keys = String::new();
    let mut uniq_key = None;
    let mut tags_code = 0;
    if properties_len > 0 {
        let bytes = r.take(
            usize::try_from(properties_len)
                .ok()
                .filter(|&n| n <= scratch)?,
        )?;
        for (name, value) in properties(bytes) {
            match name.as_str() {
                PROPERTY_KEYS => keys = value,
                PROPERTY_UNIQ_KEY => uniq_key = Some(value),
                PROPERTY_TAGS => tags_code = i64::from(java_string_hash(&value)),
                _ => {}
            }
        }
    }
    let read = record_len(
        topic_length_size,
        body_len.max(0) as usize,
        topic_len as usize,
        properties_len.max(0) as usize,
    );
    if read != scratch {
        return Some(Checked::End {
            half: Some(total_size as u32),
        });
    }
    Some(Checked::Message(Dispatch {
        topic,
        queue_id,
        commit_log_offset,
        msg_size: total_size as u32,
        tags_code,
        store_timestamp,
        queue_offset,
        keys,
        uniq_key,
        sys_flag,
        prepared_transaction_offset,
    }))
}

/// The body of a record [`check`] read as a whole message (IPv4 hosts, as every record
/// here has).
pub fn body(record: &[u8]) -> Vec<u8> {
    let at = FIXED_BEFORE_BODY;
    let len = i32::from_be_bytes(record[at..at + 4].try_into().expect("4 bytes"));
    record[at + 4..at + 4 + len.max(0) as usize].to_vec()
}

/// A properties string's entries, as `MessageDecoder.string2messageProperties` reads
/// them: entries of at least 3 bytes with a non-empty name and value, a later entry of a
/// name replacing an earlier one (returned in first-seen order).
pub fn properties(bytes: &[u8]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for entry in bytes.split(|&b| b == PROPERTY_SEPARATOR) {
        let Some(sep) = entry.iter().position(|&b| b == NAME_VALUE_SEPARATOR) else {
            continue;
        };
        if entry.len() < 3 || sep == 0 || sep + 1 >= entry.len() {
            continue;
        }
        let name = String::from_utf8_lossy(&entry[..sep]).into_owned();
        let value = String::from_utf8_lossy(&entry[sep + 1..]).into_owned();
        match out.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => out.push((name, value)),
        }
    }
    out
}

/// `messageProperties2String` over entries in the order given: each as name,
/// NAME_VALUE_SEPARATOR, value, PROPERTY_SEPARATOR (the last one kept or not, by release).
pub fn properties_string<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    trailing_separator: bool,
) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in entries {
        out.extend_from_slice(name.as_bytes());
        out.push(NAME_VALUE_SEPARATOR);
        out.extend_from_slice(value.as_bytes());
        out.push(PROPERTY_SEPARATOR);
    }
    if !trailing_separator {
        out.pop();
    }
    out
}

/// The properties as the broker stores them: it reads the client's string into a
/// `HashMap`, adds its own (the cluster's name; in 5.x a unique key if the client sent
/// none, the region and the trace switch; 4.9 drops WAIT) and writes the map back
/// (`SendMessageProcessor`), so they come out in [`java_hash_map_order`].
pub fn stored_properties<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    rules: &Rules,
) -> Vec<u8> {
    properties_string(
        java_hash_map_order(entries, rules.properties_map_capacity),
        rules.properties_trailing_separator,
    )
}

/// The order a Java `HashMap` created with `capacity` buckets iterates entries put in the
/// order given: by bucket (`hashCode` spread as `h ^ (h >>> 16)`, masked), then in
/// insertion order within a bucket; putting a name again replaces its value in place.
/// Holds while the map stays under its resize threshold (¾ of `capacity`).
pub fn java_hash_map_order<'a>(
    entries: impl IntoIterator<Item = (&'a str, &'a str)>,
    capacity: usize,
) -> Vec<(&'a str, &'a str)> {
    debug_assert!(capacity.is_power_of_two());
    let mut buckets: std::collections::BTreeMap<usize, Vec<(&str, &str)>> = Default::default();
    let mut count = 0;
    for (name, value) in entries {
        let h = java_string_hash(name) as u32;
        let bucket = ((h ^ (h >> 16)) as usize) & (capacity - 1);
        let chain = buckets.entry(bucket).or_default();
        match chain.iter_mut().find(|(n, _)| *n == name) {
            Some(slot) => slot.1 = value,
            None => {
                chain.push((name, value));
                count += 1;
            }
        }
    }
    debug_assert!(count <= capacity / 4 * 3, "past HashMap's resize threshold");
    buckets.into_values().flatten().collect()
}

fn put_i32(out: &mut Vec<u8>, v: i32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_i64(out: &mut Vec<u8>, v: i64) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_host(out: &mut Vec<u8>, host: Host) {
    out.extend_from_slice(&host.ip);
    put_i32(out, host.port);
}

/// Big-endian reads that fail past the end, as Java's `BufferUnderflowException`.
struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let bytes = self.buf.get(self.at..self.at.checked_add(n)?)?;
        self.at += n;
        Some(bytes)
    }

    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }

    fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }

    fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }

    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    fn hello() -> Message {
        Message {
            topic: "orders".into(),
            queue_id: 1,
            flag: 0,
            queue_offset: 7,
            physical_offset: 4096,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: Host {
                ip: [10, 0, 0, 2],
                port: 40000,
            },
            store_timestamp: 1_700_000_000_123,
            store_host: Host {
                ip: [10, 0, 0, 1],
                port: 10911,
            },
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"hello".to_vec(),
            properties: properties_string([("UNIQ_KEY", "ABC"), ("TAGS", "a")], true),
        }
    }

    /// The record laid out field by field from the format, not from the encoder.
    #[test]
    fn a_message_is_written_as_rocketmq_lays_it_out() {
        let expected = hex(
            "0000007a daa320a7 3610a686 00000001 00000000 0000000000000007
             0000000000001000 00000000 0000018bcfe56800 0a000002 00009c40
             0000018bcfe5687b 0a000001 00002a9f 00000000 0000000000000000
             00000005 68656c6c6f 06 6f7264657273
             0014 554e49515f4b4559 01 414243 02 54414753 01 61 02",
        );
        let mut out = Vec::new();
        hello().encode(&mut out);
        assert_eq!(out, expected);
        assert_eq!(hello().encoded_len(), 122);
        assert_eq!(
            check(&out, true),
            Checked::Message(Dispatch {
                topic: "orders".into(),
                queue_id: 1,
                commit_log_offset: 4096,
                msg_size: 122,
                tags_code: 97, // "a".hashCode()
                store_timestamp: 1_700_000_000_123,
                queue_offset: 7,
                keys: String::new(),
                uniq_key: Some("ABC".into()),
                sys_flag: 0,
                prepared_transaction_offset: 0,
            })
        );
    }

    /// Java's `CRC32` values, with `UtilAll.crc32` clearing the sign bit.
    #[test]
    fn the_body_crc_is_java_s_crc32_without_its_sign_bit() {
        assert_eq!(body_crc(b"hello"), 0x3610_A686);
        assert_eq!(body_crc(b"123456789"), 0xCBF4_3926_u32 as i32 & 0x7FFF_FFFF);
        assert_eq!(body_crc(b""), 0);
    }

    #[test]
    fn a_topic_longer_than_127_bytes_is_written_in_version_2() {
        let mut message = hello();
        message.topic = "t".repeat(128);
        let mut out = Vec::new();
        message.encode(&mut out);
        assert_eq!(out[4..8], hex("daa320ab")[..]);
        let topic_at = FIXED_BEFORE_BODY + 4 + 5;
        assert_eq!(out[topic_at..topic_at + 2], [0, 128]);
        let Checked::Message(dispatch) = check(&out, true) else {
            panic!("{:?}", check(&out, true))
        };
        assert_eq!(dispatch.topic, message.topic);
        assert_eq!(dispatch.msg_size as usize, out.len());
    }

    #[test]
    fn the_blank_record_sends_the_reader_to_the_next_file() {
        assert_eq!(blank(100), hex("00000064 cbd43194")[..]);
        let mut file_end = blank(100).to_vec();
        file_end.resize(100, 0xAB); // Whatever the file held after it stays.
        assert_eq!(check(&file_end, true), Checked::Blank);
    }

    /// Each way a record fails, as recovery meets it.
    #[test]
    fn zeros_torn_records_and_rotten_bodies_end_the_log() {
        let mut good = Vec::new();
        hello().encode(&mut good);
        assert_eq!(check(&[0; 200], true), Checked::End { half: None });
        assert_eq!(check(&good[..4], true), Checked::End { half: None });
        for torn in [5, 60, 121] {
            assert_eq!(
                check(&good[..torn], true),
                Checked::End { half: None },
                "{torn} bytes"
            );
        }
        let body_at = FIXED_BEFORE_BODY + 4;
        let mut rotten = good.clone();
        rotten[body_at] ^= 0x20;
        assert_eq!(check(&rotten, true), Checked::End { half: None });
        assert!(
            matches!(check(&rotten, false), Checked::Message(_)),
            "checkCRCOnRecover = false reads it"
        );
        // A rotten QUEUEID: the body CRC does not cover it, so the record reads, wrong.
        let mut header = good.clone();
        header[15] ^= 0x01;
        let Checked::Message(read) = check(&header, true) else {
            panic!("{:?}", check(&header, true))
        };
        assert_eq!(read.queue_id, 0);
        // TOTALSIZE shrunk but still within the buffer: the lengths disagree with it.
        let mut half = good.clone();
        half[3] = 116;
        assert_eq!(check(&half, true), Checked::End { half: Some(116) });
        // A negative body length is Java's exception.
        let mut negative = good;
        negative[body_at - 4] = 0xFF;
        assert_eq!(check(&negative, true), Checked::End { half: None });
    }

    #[test]
    fn properties_are_read_as_string2message_properties_reads_them() {
        // Kept: KEYS (replaced by its later entry), TAGS, and the unterminated last one;
        // skipped: an empty value, an empty name, an empty value again.
        let bytes = b"KEYS\x01k1\x02a\x01\x02\x01bc\x02ab\x01\x02TAGS\x01x\x02KEYS\x01k2\x02x\x01y";
        assert_eq!(
            properties(bytes),
            [
                ("KEYS".to_string(), "k2".to_string()),
                ("TAGS".to_string(), "x".to_string()),
                ("x".to_string(), "y".to_string()),
            ]
        );
    }

    /// Orders printed by Java 21's `HashMap(128)` after these puts (`UNIQ_KEY` and
    /// `CLUSTER` share bucket 28, so their insertion order shows).
    #[test]
    fn stored_properties_come_out_in_java_s_hash_map_order() {
        let client = [
            ("TAGS", "a"),
            ("KEYS", "k"),
            ("WAIT", "true"),
            ("UNIQ_KEY", "AC1400"),
            ("CLUSTER", "DefaultCluster"),
        ];
        let names: Vec<&str> = java_hash_map_order(client, 128)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]);
        let names: Vec<&str> = java_hash_map_order([("CLUSTER", "c"), ("UNIQ_KEY", "u")], 128)
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["CLUSTER", "UNIQ_KEY"]);
        use crate::config::rocketmq::Release;
        let five = Release::parse("5.3.3").unwrap().rules();
        assert_eq!(
            stored_properties([("TAGS", "a"), ("TAGS", "b"), ("WAIT", "true")], &five),
            b"TAGS\x01b\x02WAIT\x01true\x02"
        );
        // 4.9.8: a 16-bucket map, the last separator cut off. Java 21's `HashMap()` puts
        // KEYS (bucket 7) before UNIQ_KEY and CLUSTER (both 12), TAGS last (14).
        let four = Release::parse("4.9.8").unwrap().rules();
        assert_eq!(
            stored_properties(
                [
                    ("TAGS", "t"),
                    ("KEYS", "k"),
                    ("UNIQ_KEY", "u"),
                    ("CLUSTER", "c")
                ],
                &four
            ),
            b"KEYS\x01k\x02UNIQ_KEY\x01u\x02CLUSTER\x01c\x02TAGS\x01t"
        );
    }

    fn message() -> impl Strategy<Value = Message> {
        (
            "[a-z%]{1,200}",
            any::<i32>(),
            0..i64::MAX,
            0..i64::MAX,
            proptest::collection::vec(any::<u8>(), 0..300),
            proptest::collection::vec(("[A-Z_]{1,8}", "[a-z0-9]{1,8}"), 0..4),
        )
            .prop_map(
                |(topic, queue_id, queue_offset, physical_offset, body, props)| {
                    let mut m = hello();
                    m.topic = topic;
                    m.queue_id = queue_id;
                    m.queue_offset = queue_offset;
                    m.physical_offset = physical_offset;
                    m.body = body;
                    let props = props.iter().map(|(n, v)| (n.as_str(), v.as_str()));
                    m.properties = properties_string(props, true);
                    m
                },
            )
    }

    proptest! {
        /// Whatever a message holds, it reads back as itself, and no prefix of it reads
        /// as a message.
        #[test]
        fn a_record_reads_back_and_no_torn_prefix_does(m in message(), cut in 0.0..1.0f64) {
            let mut out = Vec::new();
            m.encode(&mut out);
            let Checked::Message(d) = check(&out, true) else {
                return Err(TestCaseError::fail(format!("{:?}", check(&out, true))));
            };
            prop_assert_eq!(
                (&d.topic, d.queue_id, d.queue_offset, d.commit_log_offset, d.msg_size as usize),
                (&m.topic, m.queue_id, m.queue_offset, m.physical_offset, out.len())
            );
            let torn = ((out.len() as f64) * cut) as usize;
            let torn_read = check(&out[..torn], true);
            prop_assert!(matches!(torn_read, Checked::End { .. }), "{:?}", torn_read);
        }
    }
}
