//! Kafka's RecordBatch v2 (magic 2), byte for byte as Kafka's protocol guide specifies
//! ("Record Batch", "Record", "Record Header"), so that a hightide `.log` file is a Kafka
//! segment file and every durability question is asked of the real format.
//!
//! ## Layout
//! ```text
//! offset  field                 type
//!      0  baseOffset            i64
//!      8  batchLength           i32   bytes after this field
//!     12  partitionLeaderEpoch  i32
//!     16  magic                 i8    = 2
//!     17  crc                   u32   CRC-32C of bytes 21.. (attributes to the end)
//!     21  attributes            i16   bit 4 transactional, bit 5 control; compression and
//!                                     LogAppendTime are never set by hightide
//!     23  lastOffsetDelta       i32
//!     27  baseTimestamp         i64
//!     35  maxTimestamp          i64
//!     43  producerId            i64
//!     51  producerEpoch         i16
//!     53  baseSequence          i32
//!     57  recordsCount          i32
//!     61  records
//! record: length varint, attributes i8, timestampDelta varlong, offsetDelta varint,
//!         keyLength varint (-1 = null), key, valueLength varint (-1 = null), value,
//!         headersCount varint, headers (keyLength varint, key, valueLength varint, value)
//! ```
//! Fixed-width fields are big-endian; varints are zigzag-encoded LEB128 (Protobuf style).
//!
//! ## Transactions (KIP-98)
//! A transactional producer's batches carry the transactional bit. A transaction ends, on
//! each partition it wrote, with a *marker*: a control batch (transactional and control
//! bits) of one record whose key is `version i16 = 0, type i16` (ABORT 0, COMMIT 1, Kafka's
//! `ControlRecordType`) and whose value is `version i16 = 0, coordinatorEpoch i32` (Kafka's
//! `EndTransactionMarker`), written by `MemoryRecords.withEndTransactionMarker`.
//!
//! ## Not modelled
//! Compression and LogAppendTime: hightide's producers never set them, and a batch that
//! claims them is still stored and CRC-checked like any other.

use crate::kafka::types::ProducerId;
use crate::types::{Epoch, Offset};
use std::borrow::Cow;

pub const MAGIC: i8 = 2;
/// baseOffset i64 + batchLength i32: the part of a batch not counted by `batchLength`.
pub const LOG_OVERHEAD: usize = 12;
pub const BATCH_HEADER_LEN: usize = 61;
/// Kafka's `NO_SEQUENCE` / `NO_PRODUCER_EPOCH`: the values of a non-idempotent batch.
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;

const BATCH_LENGTH_AT: usize = 8;
const PARTITION_LEADER_EPOCH_AT: usize = 12;
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
/// The CRC covers everything from the attributes to the end of the batch, so that the
/// broker can stamp baseOffset and partitionLeaderEpoch without recomputing it.
const ATTRIBUTES_AT: usize = 21;
/// The smallest legal `batchLength`: a header with no records.
const MIN_BATCH_LENGTH: i32 = (BATCH_HEADER_LEN - LOG_OVERHEAD) as i32;
/// `DefaultRecordBatch`'s attribute bits.
pub const TRANSACTIONAL_FLAG: i16 = 0x10;
pub const CONTROL_FLAG: i16 = 0x20;
/// `ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION` and `EndTransactionMarker`'s
/// `CURRENT_END_TXN_MARKER_VERSION`.
const CONTROL_KEY_VERSION: i16 = 0;
const END_TXN_MARKER_VERSION: i16 = 0;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("bad magic {magic} (expected {MAGIC})")]
    BadMagic { magic: i8 },
    #[error("bad CRC-32C: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc { stored: u32, computed: u32 },
    #[error("bad batch length {batch_length}")]
    BadLength { batch_length: i32 },
    #[error("malformed batch: {0}")]
    Malformed(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: Offset,
    pub batch_length: i32,
    pub partition_leader_epoch: Epoch,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
}

impl BatchHeader {
    pub fn last_offset(&self) -> Offset {
        Offset(self.base_offset.0 + i64::from(self.last_offset_delta))
    }

    pub fn next_offset(&self) -> Offset {
        self.last_offset().next()
    }

    /// The whole batch on disk: `batch_length` plus the fields it does not count.
    pub fn size_bytes(&self) -> usize {
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD
    }

    /// The sequence of the batch's last record, wrapping past `i32::MAX` to 0 as Kafka does;
    /// `NO_SEQUENCE` for a non-idempotent batch.
    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    pub fn is_idempotent(&self) -> bool {
        self.producer_id != ProducerId::NONE
    }

    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG != 0
    }

    /// A control batch (a transaction marker): never handed to an application.
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG != 0
    }
}

/// How a transaction ended on a partition: Kafka's `ControlRecordType` ABORT and COMMIT.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum TxnResult {
    Abort,
    Commit,
}

impl TxnResult {
    /// The control record type, as the marker's key holds it.
    pub fn control_type(self) -> i16 {
        match self {
            TxnResult::Abort => 0,
            TxnResult::Commit => 1,
        }
    }

    /// Kafka's name, as `kafka-dump-log.sh` prints it.
    pub fn name(self) -> &'static str {
        match self {
            TxnResult::Abort => "ABORT",
            TxnResult::Commit => "COMMIT",
        }
    }
}

/// A transaction marker's content (Kafka's `EndTransactionMarker`): the outcome, and the
/// epoch of the transaction coordinator that wrote it, so that a partition can refuse
/// markers from a coordinator that has since lost its `__transaction_state` partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub result: TxnResult,
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The marker as a control batch, ready for a leader to stamp with its offset and
    /// epoch: Kafka's `MemoryRecords.withEndTransactionMarker` (no sequence, one record at
    /// offset delta 0 with the batch's timestamp, a 4-byte key, a 6-byte value).
    pub fn batch(self, timestamp: i64, producer_id: ProducerId, producer_epoch: i16) -> Vec<u8> {
        let mut key = [0u8; 4];
        key[..2].copy_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
        key[2..].copy_from_slice(&self.result.control_type().to_be_bytes());
        let mut value = [0u8; 6];
        value[..2].copy_from_slice(&END_TXN_MARKER_VERSION.to_be_bytes());
        value[2..].copy_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut b = BatchBuilder::new(timestamp, producer_id, producer_epoch, NO_SEQUENCE)
            .with_attributes(TRANSACTIONAL_FLAG | CONTROL_FLAG);
        b.push(timestamp, Some(&key), Some(&value));
        b.build()
    }

    /// The marker a control batch holds; `None` for a data batch, or a control record of
    /// another type (KRaft's), which Kafka's partitions ignore too. A control batch whose
    /// record does not read is an error: it would end a transaction no one can name.
    pub fn of(batch: &[u8]) -> Result<Option<EndTxnMarker>, RecordError> {
        let header = parse_header(batch)?;
        if !header.is_control() {
            return Ok(None);
        }
        let records = record_views(batch)?;
        let [record] = records.as_slice() else {
            return Err(RecordError::Malformed(format!(
                "a control batch of {} records",
                records.len()
            )));
        };
        let key = record
            .key
            .filter(|k| k.len() >= 4)
            .ok_or_else(|| RecordError::Malformed("a control record without its type".into()))?;
        // Kafka reads a key of a newer version by its first two fields.
        let result = match i16::from_be_bytes([key[2], key[3]]) {
            0 => TxnResult::Abort,
            1 => TxnResult::Commit,
            _ => return Ok(None),
        };
        let value = record.value.filter(|v| v.len() >= 6).ok_or_else(|| {
            RecordError::Malformed("an end-transaction marker without its value".into())
        })?;
        Ok(Some(EndTxnMarker {
            result,
            coordinator_epoch: i32::from_be_bytes([value[2], value[3], value[4], value[5]]),
        }))
    }
}

/// Kafka's `DefaultRecordBatch.incrementSequence`: sequences are non-negative i32 that wrap
/// from `i32::MAX` to 0.
pub fn increment_sequence(sequence: i32, increment: i32) -> i32 {
    let sum = i64::from(sequence) + i64::from(increment);
    if sum > i64::from(i32::MAX) {
        (sum - i64::from(i32::MAX) - 1) as i32
    } else {
        sum as i32
    }
}

/// Builds one uncompressed batch (producer side). The records are encoded as they are
/// pushed, after a reserved header, so `build` only fills in the header and the CRC.
/// The base offset is 0 and the partition leader epoch -1 until the leader stamps them.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    buf: Vec<u8>,
    base_timestamp: i64,
    /// The largest record timestamp, as Kafka's `MemoryRecordsBuilder` computes it.
    max_timestamp: i64,
    producer_id: ProducerId,
    producer_epoch: i16,
    base_sequence: i32,
    attributes: i16,
    count: i32,
}

impl BatchBuilder {
    pub fn new(
        base_timestamp: i64,
        producer_id: ProducerId,
        producer_epoch: i16,
        base_sequence: i32,
    ) -> Self {
        BatchBuilder {
            buf: vec![0; BATCH_HEADER_LEN],
            base_timestamp,
            max_timestamp: i64::MIN,
            producer_id,
            producer_epoch,
            base_sequence,
            attributes: 0,
            count: 0,
        }
    }

    /// A transactional producer's batch (the transactional bit).
    pub fn transactional(self) -> Self {
        self.with_attributes(TRANSACTIONAL_FLAG)
    }

    fn with_attributes(mut self, attributes: i16) -> Self {
        self.attributes = attributes;
        self
    }

    pub fn push(&mut self, timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) {
        self.push_with_headers(timestamp, key, value, &[]);
    }

    pub fn push_with_headers(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        let record = RecordRef {
            offset_delta: self.count,
            timestamp_delta: timestamp - self.base_timestamp,
            key,
            value,
            headers,
        };
        record.encode(&mut self.buf);
        self.max_timestamp = self.max_timestamp.max(timestamp);
        self.count += 1;
    }

    /// Records pushed so far.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The size of the batch `build` would return now.
    pub fn size_bytes(&self) -> usize {
        if self.is_empty() {
            0
        } else {
            self.buf.len()
        }
    }

    /// The finished batch. An empty builder yields no bytes, as Kafka's
    /// `MemoryRecordsBuilder` does: a batch with no records has no offsets to own.
    pub fn build(self) -> Vec<u8> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut buf = self.buf;
        let batch_length = (buf.len() - LOG_OVERHEAD) as i32;
        let mut w = &mut buf[..BATCH_HEADER_LEN];
        put(&mut w, &0i64.to_be_bytes());
        put(&mut w, &batch_length.to_be_bytes());
        put(&mut w, &Epoch::NONE.0.to_be_bytes());
        put(&mut w, &[MAGIC as u8]);
        put(&mut w, &0u32.to_be_bytes());
        put(&mut w, &self.attributes.to_be_bytes());
        put(&mut w, &(self.count - 1).to_be_bytes());
        put(&mut w, &self.base_timestamp.to_be_bytes());
        put(&mut w, &self.max_timestamp.to_be_bytes());
        put(&mut w, &self.producer_id.0.to_be_bytes());
        put(&mut w, &self.producer_epoch.to_be_bytes());
        put(&mut w, &self.base_sequence.to_be_bytes());
        put(&mut w, &self.count.to_be_bytes());
        debug_assert!(w.is_empty());
        let crc = crc32c::crc32c(&buf[ATTRIBUTES_AT..]);
        buf[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
        // A batch built is a batch read: the header and every record parse back.
        debug_assert!(
            validate(&buf).is_ok_and(|header| header.records_count == self.count
                && header.producer_id == self.producer_id
                && header.base_sequence == self.base_sequence)
                && record_views(&buf).is_ok_and(|records| records.len() == self.count as usize),
            "a built batch of {} records does not read back",
            self.count
        );
        buf
    }
}

/// Copy `bytes` to the front of `w` and advance it; `w` is sized by the caller.
fn put(w: &mut &mut [u8], bytes: &[u8]) {
    let (head, tail) = std::mem::take(w).split_at_mut(bytes.len());
    head.copy_from_slice(bytes);
    *w = tail;
}

/// A record borrowed for encoding, so that pushing does not copy keys and values twice.
struct RecordRef<'a> {
    offset_delta: i32,
    timestamp_delta: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [Header],
}

impl RecordRef<'_> {
    fn body_len(&self) -> usize {
        let mut len = 1 + varlong_len(self.timestamp_delta) + varint_len(self.offset_delta);
        len += nullable_bytes_len(self.key) + nullable_bytes_len(self.value);
        len += varint_len(self.headers.len() as i32);
        for h in self.headers {
            len +=
                nullable_bytes_len(Some(h.key.as_bytes())) + nullable_bytes_len(h.value.as_deref());
        }
        len
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let body_len = self.body_len();
        out.reserve(body_len + 5);
        put_varint(out, body_len as i32);
        out.push(0);
        put_varlong(out, self.timestamp_delta);
        put_varint(out, self.offset_delta);
        put_nullable_bytes(out, self.key);
        put_nullable_bytes(out, self.value);
        put_varint(out, self.headers.len() as i32);
        for h in self.headers {
            put_nullable_bytes(out, Some(h.key.as_bytes()));
            put_nullable_bytes(out, h.value.as_deref());
        }
    }
}

fn nullable_bytes_len(bytes: Option<&[u8]>) -> usize {
    match bytes {
        None => varint_len(-1),
        Some(b) => varint_len(b.len() as i32) + b.len(),
    }
}

fn put_nullable_bytes(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

fn zigzag32(n: i32) -> u32 {
    ((n << 1) ^ (n >> 31)) as u32
}

fn zigzag64(n: i64) -> u64 {
    ((n << 1) ^ (n >> 63)) as u64
}

fn put_varint(out: &mut Vec<u8>, n: i32) {
    put_uvarint(out, u64::from(zigzag32(n)));
}

fn put_varlong(out: &mut Vec<u8>, n: i64) {
    put_uvarint(out, zigzag64(n));
}

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn varint_len(n: i32) -> usize {
    uvarint_len(u64::from(zigzag32(n)))
}

fn varlong_len(n: i64) -> usize {
    uvarint_len(zigzag64(n))
}

fn uvarint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// A cursor over bytes that never panics: every read checks bounds and reports a
/// `Malformed` error naming what it was reading.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], RecordError> {
        if n > self.bytes.len() {
            return Err(RecordError::Malformed(format!(
                "{what}: need {n} bytes, {} left",
                self.bytes.len()
            )));
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, RecordError> {
        Ok(self.take(1, what)?[0])
    }

    /// Unsigned LEB128 of at most `max_bytes` bytes (5 for a varint, 10 for a varlong),
    /// rejecting bits beyond `bits` so that an overlong encoding is an error, not a wrap.
    fn uvarint(&mut self, max_bytes: usize, bits: u32, what: &str) -> Result<u64, RecordError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            let b = self.u8(what)?;
            let shift = 7 * i as u32;
            let chunk = u64::from(b & 0x7f);
            if shift + 7 > bits && chunk >> (bits - shift) != 0 {
                return Err(RecordError::Malformed(format!("{what}: varint overflows")));
            }
            value |= chunk << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(RecordError::Malformed(format!("{what}: varint too long")))
    }

    fn varint(&mut self, what: &str) -> Result<i32, RecordError> {
        let v = self.uvarint(5, 32, what)? as u32;
        Ok(((v >> 1) as i32) ^ -((v & 1) as i32))
    }

    fn varlong(&mut self, what: &str) -> Result<i64, RecordError> {
        let v = self.uvarint(10, 64, what)?;
        Ok(((v >> 1) as i64) ^ -((v & 1) as i64))
    }

    fn nullable_bytes(&mut self, what: &str) -> Result<Option<&'a [u8]>, RecordError> {
        match self.varint(what)? {
            -1 => Ok(None),
            len if len < -1 => Err(RecordError::Malformed(format!("{what}: length {len}"))),
            len => Ok(Some(self.take(len as usize, what)?)),
        }
    }
}

fn be<const N: usize>(bytes: &[u8], at: usize) -> [u8; N] {
    let mut out = [0; N];
    out.copy_from_slice(&bytes[at..at + N]);
    out
}

/// Stamp the base offset (outside the CRC'd range, so the CRC stays valid).
/// `batch` must hold at least `LOG_OVERHEAD` bytes; a shorter slice is left unchanged.
pub fn set_base_offset(batch: &mut [u8], offset: Offset) {
    debug_assert!(batch.len() >= BATCH_HEADER_LEN, "not a batch");
    if let Some(field) = batch.get_mut(..BATCH_LENGTH_AT) {
        field.copy_from_slice(&offset.0.to_be_bytes());
    }
}

/// Stamp the partition leader epoch (outside the CRC'd range, so the CRC stays valid).
/// `batch` must hold at least a batch header; a shorter slice is left unchanged.
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: Epoch) {
    debug_assert!(batch.len() >= BATCH_HEADER_LEN, "not a batch");
    if let Some(field) = batch.get_mut(PARTITION_LEADER_EPOCH_AT..MAGIC_AT) {
        field.copy_from_slice(&epoch.0.to_be_bytes());
    }
}

/// Parse the fixed header at the front of `bytes` without checking the CRC (the cheap path
/// for reads through the index). Checks only what is needed to interpret the header: enough
/// bytes, magic 2 and a `batchLength` of at least an empty batch.
pub fn parse_header(bytes: &[u8]) -> Result<BatchHeader, RecordError> {
    if bytes.len() < BATCH_HEADER_LEN {
        return Err(RecordError::Truncated {
            needed: BATCH_HEADER_LEN,
            available: bytes.len(),
        });
    }
    let magic = bytes[MAGIC_AT] as i8;
    if magic != MAGIC {
        return Err(RecordError::BadMagic { magic });
    }
    let batch_length = i32::from_be_bytes(be(bytes, BATCH_LENGTH_AT));
    if batch_length < MIN_BATCH_LENGTH {
        return Err(RecordError::BadLength { batch_length });
    }
    Ok(BatchHeader {
        base_offset: Offset(i64::from_be_bytes(be(bytes, 0))),
        batch_length,
        partition_leader_epoch: Epoch(i32::from_be_bytes(be(bytes, PARTITION_LEADER_EPOCH_AT))),
        magic,
        crc: u32::from_be_bytes(be(bytes, CRC_AT)),
        attributes: i16::from_be_bytes(be(bytes, 21)),
        last_offset_delta: i32::from_be_bytes(be(bytes, 23)),
        base_timestamp: i64::from_be_bytes(be(bytes, 27)),
        max_timestamp: i64::from_be_bytes(be(bytes, 35)),
        producer_id: ProducerId(i64::from_be_bytes(be(bytes, 43))),
        producer_epoch: i16::from_be_bytes(be(bytes, 51)),
        base_sequence: i32::from_be_bytes(be(bytes, 53)),
        records_count: i32::from_be_bytes(be(bytes, 57)),
    })
}

/// Validate the batch at the front of `bytes`: header, bounds, CRC-32C, and the offset
/// range Kafka's `LogValidator` requires of a v2 batch (at least one record, and
/// `lastOffsetDelta + 1 == recordsCount`), since hightide never compacts batches empty.
/// Bytes after the batch are ignored; the batch is `&bytes[..header.size_bytes()]`.
pub fn validate(bytes: &[u8]) -> Result<BatchHeader, RecordError> {
    check(bytes, true)
}

/// [`validate`], with the CRC check only when `crc`.
fn check(bytes: &[u8], crc: bool) -> Result<BatchHeader, RecordError> {
    let header = parse_header(bytes)?;
    let size = header.size_bytes();
    if bytes.len() < size {
        return Err(RecordError::Truncated {
            needed: size,
            available: bytes.len(),
        });
    }
    if crc {
        let computed = crc32c::crc32c(&bytes[ATTRIBUTES_AT..size]);
        if computed != header.crc {
            return Err(RecordError::BadCrc {
                stored: header.crc,
                computed,
            });
        }
    }
    if header.records_count <= 0
        || i64::from(header.last_offset_delta) + 1 != i64::from(header.records_count)
    {
        return Err(RecordError::Malformed(format!(
            "records count {} does not match last offset delta {}",
            header.records_count, header.last_offset_delta
        )));
    }
    Ok(header)
}

/// A decoded record borrowing its key, value and headers from the batch, so that a reader
/// that wants only values (a consumer, the final state) copies nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordView<'a> {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub key: Option<&'a [u8]>,
    pub value: Option<&'a [u8]>,
    pub headers: Vec<(&'a str, Option<&'a [u8]>)>,
}

impl RecordView<'_> {
    pub fn to_owned(&self) -> Record {
        Record {
            offset_delta: self.offset_delta,
            timestamp_delta: self.timestamp_delta,
            key: self.key.map(<[u8]>::to_vec),
            value: self.value.map(<[u8]>::to_vec),
            headers: self
                .headers
                .iter()
                .map(|&(key, value)| Header {
                    key: key.to_owned(),
                    value: value.map(<[u8]>::to_vec),
                })
                .collect(),
        }
    }
}

/// Decode the records of a batch (validate it first: this does not check the CRC).
/// Every record must lie within the batch, and the records must fill it exactly, as
/// Kafka's `DefaultRecord.readFrom` and batch iterator require.
pub fn records(batch: &[u8]) -> Result<Vec<Record>, RecordError> {
    Ok(record_views(batch)?
        .iter()
        .map(RecordView::to_owned)
        .collect())
}

/// [`records`], borrowing from the batch.
pub fn record_views(batch: &[u8]) -> Result<Vec<RecordView<'_>>, RecordError> {
    let header = parse_header(batch)?;
    let size = header.size_bytes();
    let body = batch
        .get(BATCH_HEADER_LEN..size)
        .ok_or(RecordError::Truncated {
            needed: size,
            available: batch.len(),
        })?;
    let count = usize::try_from(header.records_count)
        .map_err(|_| RecordError::Malformed(format!("records count {}", header.records_count)))?;
    // Each record takes at least 7 bytes: never trust a count to size an allocation.
    let mut out = Vec::with_capacity(count.min(body.len() / 7));
    let mut r = Reader { bytes: body };
    for i in 0..count {
        let len = r.varint("record length")?;
        let len = usize::try_from(len)
            .map_err(|_| RecordError::Malformed(format!("record {i}: length {len}")))?;
        let mut rec = Reader {
            bytes: r.take(len, "record")?,
        };
        out.push(read_record(&mut rec)?);
        if !rec.bytes.is_empty() {
            return Err(RecordError::Malformed(format!(
                "record {i}: {} bytes left over",
                rec.bytes.len()
            )));
        }
    }
    if !r.bytes.is_empty() {
        return Err(RecordError::Malformed(format!(
            "{} bytes after the last of {count} records",
            r.bytes.len()
        )));
    }
    Ok(out)
}

fn read_record<'a>(r: &mut Reader<'a>) -> Result<RecordView<'a>, RecordError> {
    r.u8("record attributes")?;
    let timestamp_delta = r.varlong("timestamp delta")?;
    let offset_delta = r.varint("offset delta")?;
    let key = r.nullable_bytes("key")?;
    let value = r.nullable_bytes("value")?;
    let header_count = r.varint("headers count")?;
    let header_count = usize::try_from(header_count)
        .map_err(|_| RecordError::Malformed(format!("headers count {header_count}")))?;
    let mut headers = Vec::with_capacity(header_count.min(r.bytes.len() / 2));
    for _ in 0..header_count {
        let key = r
            .nullable_bytes("header key")?
            .ok_or_else(|| RecordError::Malformed("null header key".into()))?;
        let key = std::str::from_utf8(key)
            .map_err(|_| RecordError::Malformed("header key is not UTF-8".into()))?;
        let value = r.nullable_bytes("header value")?;
        headers.push((key, value));
    }
    Ok(RecordView {
        offset_delta,
        timestamp_delta,
        key,
        value,
        headers,
    })
}

/// The records of `bytes` (concatenated batches) at and above `offset`, a batch that
/// starts below it cut down to its tail.
///
/// A pre-0.11 log (message format v0/v1) addressed every message by its own offset, so a
/// follower fetching from its LEO got exactly the messages from there. A v2 log serves the
/// whole batch holding the offset. The high-watermark truncation rule can leave a
/// follower's LEO inside a batch of its new leader's (their logs diverged there), and
/// this gives it what 0.10 would have: the leader's records from the LEO on. The cut batch
/// keeps the producer, its epoch and the leader epoch; its base sequence and timestamps
/// move with its first record.
pub fn records_from(bytes: &[u8], offset: Offset) -> Result<Cow<'_, [u8]>, RecordError> {
    let mut out: Option<Vec<u8>> = None;
    for item in batches(bytes) {
        let (position, header, batch) = item?;
        let cut = if header.next_offset() <= offset {
            Some(Vec::new())
        } else if header.base_offset < offset {
            Some(batch_tail(batch, &header, offset)?)
        } else {
            None
        };
        match (cut, &mut out) {
            (Some(cut), None) => {
                let mut bytes_so_far = bytes[..position].to_vec();
                bytes_so_far.extend_from_slice(&cut);
                out = Some(bytes_so_far);
            }
            (Some(cut), Some(out)) => out.extend_from_slice(&cut),
            (None, Some(out)) => out.extend_from_slice(batch),
            (None, None) => {}
        }
    }
    Ok(out.map_or(Cow::Borrowed(bytes), Cow::Owned))
}

/// `batch`'s records from `offset` (inside it) on, as one batch starting there.
fn batch_tail(batch: &[u8], header: &BatchHeader, offset: Offset) -> Result<Vec<u8>, RecordError> {
    let skip = i32::try_from(offset.0 - header.base_offset.0)
        .map_err(|_| RecordError::Malformed(format!("offset {offset} is not in the batch")))?;
    let base_sequence = match header.base_sequence {
        NO_SEQUENCE => NO_SEQUENCE,
        sequence => increment_sequence(sequence, skip),
    };
    let kept: Vec<Record> = records(batch)?
        .into_iter()
        .filter(|r| r.offset_delta >= skip)
        .collect();
    let first_timestamp = kept.first().map_or(header.base_timestamp, |r| {
        header.base_timestamp + r.timestamp_delta
    });
    let mut builder = BatchBuilder::new(
        first_timestamp,
        header.producer_id,
        header.producer_epoch,
        base_sequence,
    )
    .with_attributes(header.attributes);
    for (i, record) in kept.iter().enumerate() {
        if i64::from(record.offset_delta) != i64::from(skip) + i as i64 {
            return Err(RecordError::Malformed(format!(
                "offset delta {} where {} was expected",
                record.offset_delta,
                i64::from(skip) + i as i64
            )));
        }
        builder.push_with_headers(
            header.base_timestamp + record.timestamp_delta,
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        );
    }
    let mut tail = builder.build();
    set_base_offset(&mut tail, offset);
    set_partition_leader_epoch(&mut tail, header.partition_leader_epoch);
    Ok(tail)
}

/// Iterate over concatenated batches (a segment file, a fetch response), validating each
/// (CRC included). Yields `(position, header, batch bytes)`; on the first error yields it
/// and stops, with `position()` telling where the bad batch starts.
pub fn batches(bytes: &[u8]) -> Batches<'_> {
    Batches {
        bytes,
        position: 0,
        failed: false,
        crc: true,
    }
}

/// [`batches`] without the CRC check, as a consumer with `check.crcs = false` reads them:
/// every other check of [`validate`] still stops it.
pub fn batches_unchecked_crc(bytes: &[u8]) -> Batches<'_> {
    Batches {
        crc: false,
        ..batches(bytes)
    }
}

pub struct Batches<'a> {
    bytes: &'a [u8],
    position: usize,
    failed: bool,
    /// Whether each batch's CRC is checked.
    crc: bool,
}

impl Batches<'_> {
    /// Where the next batch starts, or where the failed batch started: after an error this
    /// is the length of the valid prefix.
    pub fn position(&self) -> usize {
        self.position
    }
}

impl<'a> Iterator for Batches<'a> {
    type Item = Result<(usize, BatchHeader, &'a [u8]), RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.position >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.position..];
        match check(rest, self.crc) {
            Ok(header) => {
                let at = self.position;
                let batch = &rest[..header.size_bytes()];
                self.position += batch.len();
                Some(Ok((at, header, batch)))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A varint at the front of `bytes`: the value and the bytes it used.
    fn read_varint(bytes: &[u8]) -> Result<(i32, usize), RecordError> {
        let mut r = Reader { bytes };
        let v = r.varint("varint")?;
        Ok((v, bytes.len() - r.bytes.len()))
    }

    fn read_varlong(bytes: &[u8]) -> Result<(i64, usize), RecordError> {
        let mut r = Reader { bytes };
        let v = r.varlong("varlong")?;
        Ok((v, bytes.len() - r.bytes.len()))
    }

    #[test]
    fn crc32c_known_answer() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    /// One record, key "k", value "v", no headers, non-idempotent; every byte written out
    /// from the spec. The CRC was computed with an independent bitwise CRC-32C.
    #[test]
    fn one_record_batch_bytes_match_the_spec() {
        let mut b = BatchBuilder::new(1000, ProducerId::NONE, NO_PRODUCER_EPOCH, NO_SEQUENCE);
        b.push(1000, Some(b"k"), Some(b"v"));
        assert_eq!(b.size_bytes(), 70);
        let bytes = b.build();
        let mut expected = Vec::new();
        expected.extend_from_slice(&0i64.to_be_bytes()); // baseOffset
        expected.extend_from_slice(&58i32.to_be_bytes()); // batchLength = 70 - 12
        expected.extend_from_slice(&(-1i32).to_be_bytes()); // partitionLeaderEpoch
        expected.push(2); // magic
        expected.extend_from_slice(&[0x71, 0x6a, 0x61, 0x89]); // crc
        expected.extend_from_slice(&0i16.to_be_bytes()); // attributes
        expected.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
        expected.extend_from_slice(&1000i64.to_be_bytes()); // baseTimestamp
        expected.extend_from_slice(&1000i64.to_be_bytes()); // maxTimestamp
        expected.extend_from_slice(&(-1i64).to_be_bytes()); // producerId
        expected.extend_from_slice(&(-1i16).to_be_bytes()); // producerEpoch
        expected.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence
        expected.extend_from_slice(&1i32.to_be_bytes()); // records count
        expected.push(0x10); // record length 8, zigzag
        expected.push(0); // attributes
        expected.push(0); // timestampDelta 0
        expected.push(0); // offsetDelta 0
        expected.extend_from_slice(&[0x02, b'k']); // keyLength 1, key
        expected.extend_from_slice(&[0x02, b'v']); // valueLength 1, value
        expected.push(0); // headers count
        assert_eq!(bytes, expected);
        let h = validate(&bytes).unwrap();
        assert_eq!(h.size_bytes(), 70);
        assert_eq!(h.last_offset(), Offset(0));
    }

    /// CRC-32C (Castagnoli, reflected, polynomial 0x82F63B78) bit by bit: a check of the
    /// known answers below that does not trust the `crc32c` crate.
    fn bitwise_crc32c(bytes: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in bytes {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = if crc & 1 != 0 {
                    (crc >> 1) ^ 0x82F6_3B78
                } else {
                    crc >> 1
                };
            }
        }
        !crc
    }

    /// A COMMIT marker for producer 1000, epoch 5, from coordinator epoch 7, at time 1000,
    /// written out field by field from `MemoryRecords.withEndTransactionMarker`.
    #[test]
    fn commit_marker_bytes_match_kafkas_layout() {
        let marker = EndTxnMarker {
            result: TxnResult::Commit,
            coordinator_epoch: 7,
        };
        let mut bytes = marker.batch(1000, ProducerId(1000), 5);
        set_base_offset(&mut bytes, Offset(42));
        set_partition_leader_epoch(&mut bytes, Epoch(3));
        let mut body = Vec::new(); // from the attributes on: what the CRC covers
        body.extend_from_slice(&0x0030i16.to_be_bytes()); // transactional | control
        body.extend_from_slice(&0i32.to_be_bytes()); // lastOffsetDelta
        body.extend_from_slice(&1000i64.to_be_bytes()); // baseTimestamp
        body.extend_from_slice(&1000i64.to_be_bytes()); // maxTimestamp
        body.extend_from_slice(&1000i64.to_be_bytes()); // producerId
        body.extend_from_slice(&5i16.to_be_bytes()); // producerEpoch
        body.extend_from_slice(&(-1i32).to_be_bytes()); // baseSequence: NO_SEQUENCE
        body.extend_from_slice(&1i32.to_be_bytes()); // one record
        body.push(0x20); // record length 16, zigzag
        body.push(0); // record attributes
        body.push(0); // timestampDelta 0
        body.push(0); // offsetDelta 0
        body.push(0x08); // keyLength 4
        body.extend_from_slice(&[0, 0, 0, 1]); // key: version 0, type COMMIT
        body.push(0x0c); // valueLength 6
        body.extend_from_slice(&[0, 0, 0, 0, 0, 7]); // value: version 0, coordinatorEpoch
        body.push(0); // headers count
        let mut expected = Vec::new();
        expected.extend_from_slice(&42i64.to_be_bytes()); // baseOffset
        expected.extend_from_slice(&((body.len() + 9) as i32).to_be_bytes()); // batchLength
        expected.extend_from_slice(&3i32.to_be_bytes()); // partitionLeaderEpoch
        expected.push(2); // magic
        expected.extend_from_slice(&bitwise_crc32c(&body).to_be_bytes());
        expected.extend_from_slice(&body);
        assert_eq!(bytes, expected);
        assert_eq!(bytes.len(), 78, "a marker is 78 bytes on disk");
        let h = validate(&bytes).unwrap();
        assert!(h.is_control() && h.is_transactional() && h.is_idempotent());
        assert_eq!(EndTxnMarker::of(&bytes), Ok(Some(marker)));
    }

    #[test]
    fn abort_marker_reads_back_and_data_batches_hold_none() {
        let marker = EndTxnMarker {
            result: TxnResult::Abort,
            coordinator_epoch: i32::MAX,
        };
        let bytes = marker.batch(-5, ProducerId(1), 0);
        assert_eq!(EndTxnMarker::of(&bytes), Ok(Some(marker)));
        let mut data = BatchBuilder::new(0, ProducerId(1), 0, 0).transactional();
        data.push(0, None, Some(b"v"));
        let data = data.build();
        let h = validate(&data).unwrap();
        assert!(h.is_transactional() && !h.is_control());
        assert_eq!(EndTxnMarker::of(&data), Ok(None));
    }

    /// A control record of a type partitions do not know (KRaft's LEADER_CHANGE, 2) ends
    /// nothing; one with no type at all is damage.
    #[test]
    fn unknown_control_types_are_ignored_and_typeless_ones_refused() {
        let control = |key: &[u8]| {
            let mut b = BatchBuilder::new(0, ProducerId(1), 0, NO_SEQUENCE)
                .with_attributes(TRANSACTIONAL_FLAG | CONTROL_FLAG);
            b.push(0, Some(key), Some(&[0, 0, 0, 0, 0, 1]));
            b.build()
        };
        assert_eq!(EndTxnMarker::of(&control(&[0, 0, 0, 2])), Ok(None));
        assert!(EndTxnMarker::of(&control(&[0, 0])).is_err());
    }

    /// A cut batch keeps the transactional bit: a stray transactional batch must not turn
    /// into a plain one when a follower reads its tail.
    #[test]
    fn a_cut_transactional_batch_stays_transactional() {
        let mut b = BatchBuilder::new(0, ProducerId(1), 0, 0).transactional();
        for i in 0..3 {
            b.push(i, None, Some(b"v"));
        }
        let mut bytes = b.build();
        set_base_offset(&mut bytes, Offset(10));
        let tail = records_from(&bytes, Offset(11)).unwrap();
        let h = validate(&tail).unwrap();
        assert!(h.is_transactional());
        assert_eq!((h.base_offset, h.records_count), (Offset(11), 2));
    }

    /// Sarama's "uncompressed record" test vector (record_batch_test.go): an encoding made
    /// by another Kafka client, with a header, checked by its CRC.
    #[test]
    fn decodes_sarama_uncompressed_vector() {
        let bytes: Vec<u8> = vec![
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 70, 0, 0, 0, 0, 2, 84, 121, 97, 253, 0, 0, 0, 0, 0, 0,
            0, 0, 1, 88, 141, 205, 89, 56, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 1, 40, 0, 10, 0, 8, 1, 2, 3, 4, 6, 5, 6, 7, 2, 6, 8, 9, 10, 4, 11,
            12,
        ];
        let h = validate(&bytes).unwrap();
        assert_eq!(h.base_timestamp, 1_479_847_795_000);
        assert_eq!(h.records_count, 1);
        let recs = records(&bytes).unwrap();
        assert_eq!(
            recs,
            vec![Record {
                offset_delta: 0,
                timestamp_delta: 5,
                key: Some(vec![1, 2, 3, 4]),
                value: Some(vec![5, 6, 7]),
                headers: vec![Header {
                    key: "\u{8}\u{9}\u{a}".into(),
                    value: Some(vec![11, 12])
                }],
            }]
        );
    }

    #[test]
    fn zigzag_varint_edge_cases() {
        let cases: [(i32, &[u8]); 8] = [
            (0, &[0x00]),
            (-1, &[0x01]),
            (1, &[0x02]),
            (-64, &[0x7f]),
            (64, &[0x80, 0x01]),
            (i32::MAX, &[0xfe, 0xff, 0xff, 0xff, 0x0f]),
            (i32::MIN, &[0xff, 0xff, 0xff, 0xff, 0x0f]),
            (-65, &[0x81, 0x01]),
        ];
        for (n, enc) in cases {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            assert_eq!(out, enc, "{n}");
            assert_eq!(varint_len(n), enc.len());
            assert_eq!(read_varint(enc).unwrap(), (n, enc.len()));
        }
        let mut out = Vec::new();
        put_varlong(&mut out, i64::MIN);
        assert_eq!(
            out,
            [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]
        );
        assert_eq!(read_varlong(&out).unwrap(), (i64::MIN, 10));
        // Too long, overflowing, and cut short.
        assert!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00]).is_err());
        assert!(read_varint(&[0xff, 0xff, 0xff, 0xff, 0x1f]).is_err());
        assert!(
            read_varlong(&[0xff; 9].iter().copied().chain([0x03]).collect::<Vec<_>>()).is_err()
        );
        assert!(read_varint(&[0x80]).is_err());
        assert!(read_varint(&[]).is_err());
    }

    #[test]
    fn last_sequence_wraps_like_kafka() {
        let mut h = sample_header();
        h.base_sequence = i32::MAX - 1;
        h.last_offset_delta = 3;
        assert_eq!(h.last_sequence(), 1);
        h.base_sequence = NO_SEQUENCE;
        assert_eq!(h.last_sequence(), NO_SEQUENCE);
        assert_eq!(increment_sequence(i32::MAX, 1), 0);
        assert_eq!(increment_sequence(5, 4), 9);
    }

    #[test]
    fn stamping_keeps_the_crc_valid() {
        let mut b = BatchBuilder::new(0, ProducerId(7), 0, 0);
        b.push(3, None, Some(b"x"));
        b.push(9, Some(b"key"), None);
        let mut bytes = b.build();
        set_base_offset(&mut bytes, Offset(42));
        set_partition_leader_epoch(&mut bytes, Epoch(5));
        let h = validate(&bytes).unwrap();
        assert_eq!(h.base_offset, Offset(42));
        assert_eq!(h.partition_leader_epoch, Epoch(5));
        assert_eq!((h.last_offset(), h.next_offset()), (Offset(43), Offset(44)));
        assert_eq!((h.max_timestamp, h.last_sequence()), (9, 1));
    }

    #[test]
    fn empty_builder_builds_nothing() {
        let b = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        assert!(b.is_empty());
        assert_eq!(b.size_bytes(), 0);
        assert!(b.build().is_empty());
    }

    #[test]
    fn rejects_truncated_bad_magic_bad_crc_bad_length() {
        let bytes = sample_batch(3);
        assert!(matches!(
            validate(&bytes[..bytes.len() - 1]),
            Err(RecordError::Truncated { .. })
        ));
        assert!(matches!(
            validate(&bytes[..20]),
            Err(RecordError::Truncated { .. })
        ));
        let mut m = bytes.clone();
        m[MAGIC_AT] = 1;
        assert_eq!(validate(&m), Err(RecordError::BadMagic { magic: 1 }));
        let mut c = bytes.clone();
        *c.last_mut().unwrap() ^= 1;
        assert!(matches!(validate(&c), Err(RecordError::BadCrc { .. })));
        let mut l = bytes.clone();
        l[BATCH_LENGTH_AT..MAGIC_AT - 4].copy_from_slice(&10i32.to_be_bytes());
        assert_eq!(
            validate(&l),
            Err(RecordError::BadLength { batch_length: 10 })
        );
    }

    /// A batch whose CRC matches but whose count disagrees with its offsets would make the
    /// leader assign overlapping offsets.
    #[test]
    fn rejects_count_offset_mismatch_even_with_valid_crc() {
        let mut bytes = sample_batch(2);
        bytes[57..61].copy_from_slice(&3i32.to_be_bytes());
        let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
        bytes[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
        assert!(matches!(validate(&bytes), Err(RecordError::Malformed(_))));
        assert!(matches!(records(&bytes), Err(RecordError::Malformed(_))));
    }

    /// What `check.crcs = false` reads: a batch with a wrong CRC passes, one whose count
    /// disagrees with its offsets still stops it.
    #[test]
    fn batches_unchecked_crc_skip_the_crc_alone() {
        let mut rotten = sample_batch(2);
        *rotten.last_mut().unwrap() ^= 1;
        assert!(matches!(
            batches(&rotten).next(),
            Some(Err(RecordError::BadCrc { .. }))
        ));
        assert!(matches!(batches_unchecked_crc(&rotten).next(), Some(Ok(_))));
        rotten[57..61].copy_from_slice(&3i32.to_be_bytes());
        assert!(matches!(
            batches_unchecked_crc(&rotten).next(),
            Some(Err(RecordError::Malformed(_)))
        ));
    }

    #[test]
    fn batches_stop_at_the_torn_tail() {
        let mut log = sample_batch(2);
        let first = log.len();
        log.extend(sample_batch(1));
        log.extend(&sample_batch(4)[..30]);
        let mut it = batches(&log);
        let positions: Vec<_> = it.by_ref().map(|r| r.map(|(p, _, _)| p)).collect();
        assert_eq!(positions.len(), 3);
        assert_eq!(positions[0], Ok(0));
        assert_eq!(positions[1], Ok(first));
        assert!(matches!(positions[2], Err(RecordError::Truncated { .. })));
        assert_eq!(it.position(), first + sample_batch(1).len());
    }

    fn sample_header() -> BatchHeader {
        parse_header(&sample_batch(1)).unwrap()
    }

    fn sample_batch(n: usize) -> Vec<u8> {
        let mut b = BatchBuilder::new(100, ProducerId(1), 0, 0);
        for i in 0..n {
            b.push(
                100 + i as i64,
                Some(format!("k{i}").as_bytes()),
                Some(b"value"),
            );
        }
        b.build()
    }

    fn arb_bytes() -> impl Strategy<Value = Option<Vec<u8>>> {
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40))
    }

    /// (timestamp delta, key, value, headers) of one record to push.
    type RecordSpec = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<Header>);

    fn arb_record() -> impl Strategy<Value = RecordSpec> {
        let header =
            ("[a-z\u{e9}]{0,8}", arb_bytes()).prop_map(|(key, value)| Header { key, value });
        (
            -1_000_000i64..1_000_000,
            arb_bytes(),
            arb_bytes(),
            proptest::collection::vec(header, 0..3),
        )
    }

    proptest! {
        #[test]
        fn round_trip(
            base_ts in any::<i32>(),
            pid in -1i64..1000,
            epoch in any::<i16>(),
            seq in any::<i32>(),
            recs in proptest::collection::vec(arb_record(), 1..20),
            base_offset in 0i64..i64::MAX / 2,
            leader_epoch in any::<i32>(),
        ) {
            let base_ts = i64::from(base_ts);
            let mut b = BatchBuilder::new(base_ts, ProducerId(pid), epoch, seq);
            for (ts, k, v, hs) in &recs {
                b.push_with_headers(base_ts + ts, k.as_deref(), v.as_deref(), hs);
            }
            let size = b.size_bytes();
            let mut bytes = b.build();
            prop_assert_eq!(bytes.len(), size);
            set_base_offset(&mut bytes, Offset(base_offset));
            set_partition_leader_epoch(&mut bytes, Epoch(leader_epoch));
            let h = validate(&bytes).unwrap();
            prop_assert_eq!(h.size_bytes(), bytes.len());
            prop_assert_eq!(h.records_count as usize, recs.len());
            prop_assert_eq!(h.base_offset, Offset(base_offset));
            prop_assert_eq!(h.partition_leader_epoch, Epoch(leader_epoch));
            prop_assert_eq!((h.producer_id, h.producer_epoch, h.base_sequence), (ProducerId(pid), epoch, seq));
            let max_ts = recs.iter().map(|r| base_ts + r.0).max().unwrap();
            prop_assert_eq!(h.max_timestamp, max_ts);
            let decoded = records(&bytes).unwrap();
            for (i, (d, (ts, k, v, hs))) in decoded.iter().zip(&recs).enumerate() {
                prop_assert_eq!(d.offset_delta, i as i32);
                prop_assert_eq!(d.timestamp_delta, *ts);
                prop_assert_eq!(&d.key, k);
                prop_assert_eq!(&d.value, v);
                prop_assert_eq!(&d.headers, hs);
            }
        }

        #[test]
        fn records_from_keeps_exactly_the_records_at_and_above_the_offset(
            sizes in proptest::collection::vec(1usize..6, 1..5),
            seq in prop_oneof![Just(NO_SEQUENCE), 0i32..1000, Just(i32::MAX - 2)],
            cut in 0usize..30,
        ) {
            // Batches of `sizes` records from offset 100, each record stamped with its offset.
            let mut bytes = Vec::new();
            let mut offset = 100i64;
            for size in &sizes {
                let mut b = BatchBuilder::new(offset * 10, ProducerId(7), 3, seq);
                for i in 0..*size as i64 {
                    let o = offset + i;
                    b.push((o * 10) + 1, Some(o.to_string().as_bytes()), Some(b"v"));
                }
                let mut batch = b.build();
                set_base_offset(&mut batch, Offset(offset));
                set_partition_leader_epoch(&mut batch, Epoch(5));
                bytes.extend_from_slice(&batch);
                offset += *size as i64;
            }
            let from = 100 + (cut as i64 % (offset - 100));
            let out = records_from(&bytes, Offset(from)).unwrap();
            let starts: Vec<i64> = sizes.iter().scan(100i64, |start, size| {
                let this = *start;
                *start += *size as i64;
                Some(this)
            }).collect();
            // Untouched exactly when nothing is cut: the offset starts the first batch.
            prop_assert_eq!(matches!(out, Cow::Borrowed(_)), starts[0] == from);
            let mut expected = from;
            for item in batches(&out) {
                let (_, h, batch) = item.unwrap();
                prop_assert_eq!(h.base_offset, Offset(expected));
                prop_assert_eq!((h.producer_id, h.producer_epoch, h.partition_leader_epoch), (ProducerId(7), 3, Epoch(5)));
                for r in records(batch).unwrap() {
                    let o = h.base_offset.0 + i64::from(r.offset_delta);
                    prop_assert_eq!(o, expected);
                    prop_assert_eq!(r.key, Some(o.to_string().into_bytes()));
                    prop_assert_eq!(h.base_timestamp + r.timestamp_delta, o * 10 + 1);
                    expected += 1;
                }
                let sequence_of_first = |base: i64| if seq == NO_SEQUENCE { NO_SEQUENCE } else { increment_sequence(seq, (h.base_offset.0 - base) as i32) };
                let batch_start = {
                    let mut start = 100i64;
                    for size in &sizes {
                        if h.base_offset.0 < start + *size as i64 { break; }
                        start += *size as i64;
                    }
                    start
                };
                prop_assert_eq!(h.base_sequence, sequence_of_first(batch_start));
            }
            prop_assert_eq!(expected, offset);
        }

        #[test]
        fn varints_round_trip(n in any::<i32>(), m in any::<i64>()) {
            let mut out = Vec::new();
            put_varint(&mut out, n);
            prop_assert_eq!(read_varint(&out).unwrap(), (n, varint_len(n)));
            out.clear();
            put_varlong(&mut out, m);
            prop_assert_eq!(read_varlong(&out).unwrap(), (m, varlong_len(m)));
        }

        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_header(&bytes);
            let _ = validate(&bytes);
            let _ = records(&bytes);
            let _ = read_varint(&bytes);
            let _ = read_varlong(&bytes);
            for (_, _, b) in batches(&bytes).flatten() {
                let _ = records(b);
            }
        }

        /// Any single bit flipped inside the CRC'd range (or in the CRC) must be caught;
        /// a flip in magic or length must be rejected; a flip in the stamped fields is
        /// not covered by the CRC, as in Kafka.
        #[test]
        fn single_bit_flips_are_detected(n in 1usize..5, bit in 0usize..10_000) {
            let bytes = sample_batch(n);
            let bit = bit % (bytes.len() * 8);
            let mut m = bytes.clone();
            m[bit / 8] ^= 1 << (bit % 8);
            let byte = bit / 8;
            let result = validate(&m);
            if byte < BATCH_LENGTH_AT || (PARTITION_LEADER_EPOCH_AT..MAGIC_AT).contains(&byte) {
                prop_assert!(result.is_ok());
            } else if byte == MAGIC_AT {
                prop_assert!(matches!(result, Err(RecordError::BadMagic { .. })), "{:?}", result);
            } else {
                prop_assert!(result.is_err());
                if byte >= CRC_AT {
                    prop_assert!(matches!(result, Err(RecordError::BadCrc { .. })), "{:?}", result);
                }
            }
            for (_, _, b) in batches(&m).flatten() {
                let _ = records(b);
            }
        }

        /// Records decoding of a batch with a fixed-up CRC but mutated body: errors, no panic.
        #[test]
        fn mutated_bodies_with_valid_crc_never_panic(n in 1usize..4, at in 0usize..10_000, byte in any::<u8>()) {
            let mut bytes = sample_batch(n);
            let at = BATCH_HEADER_LEN + at % (bytes.len() - BATCH_HEADER_LEN);
            bytes[at] = byte;
            let crc = crc32c::crc32c(&bytes[ATTRIBUTES_AT..]);
            bytes[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
            if validate(&bytes).is_ok() {
                let _ = records(&bytes);
            }
        }
    }
}
