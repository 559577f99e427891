//! A `.log` file as Kafka's `dumpLog` prints it: `Log starting offset: N`, one line per
//! batch (`printBatchLevel`), and with deep iteration one `| offset: …` line per record.
//! Unlike Kafka's tool, which stops at the first exception, a damaged file is reported
//! where and why it is damaged: a batch whose CRC fails but whose length is sane is
//! reported and skipped (its records are not shown: nothing in them can be trusted); a
//! header too damaged to find the next batch (bad magic or length) ends the dump, and
//! what is left is counted in Kafka's "Found N invalid bytes at the end of" line.

use std::fmt::Write;

use super::{FileDump, Finding, Options};
use crate::kafka::record::{
    parse_header, record_views, validate, BatchHeader, RecordError, RecordView, TxnResult,
};

// Kafka's `DefaultRecordBatch` attribute bits.
const COMPRESSION_CODEC_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

pub fn dump_log(name: &str, base_offset: i64, bytes: &[u8], options: &Options) -> FileDump {
    let mut dump = FileDump {
        out: format!("Log starting offset: {base_offset}\n"),
        ..FileDump::default()
    };
    // Kafka's `--max-bytes`: only the batches that fit, and the cut is no damage.
    let cut = bytes.len() > options.max_bytes;
    let bytes = &bytes[..bytes.len().min(options.max_bytes)];
    let mut last_offset = None;
    let mut position = 0;
    while position < bytes.len() {
        let rest = &bytes[position..];
        let header = match parse_header(rest) {
            Ok(header) if header.size_bytes() <= rest.len() => header,
            // A torn tail: what is left does not hold a whole batch.
            Ok(_) | Err(RecordError::Truncated { .. }) => break,
            Err(e) => {
                let _ = writeln!(dump.out, "position: {position}: {}", unreadable_reason(&e));
                dump.damaged = true;
                break;
            }
        };
        let size = header.size_bytes();
        let batch = &rest[..size];
        let verdict = validate(batch);
        batch_line(&mut dump.out, position, &header, verdict.is_ok());
        match verdict {
            Ok(_) if options.deep() => records(
                &mut dump,
                position,
                &header,
                batch,
                options,
                &mut last_offset,
            ),
            Ok(_) => {}
            Err(e) => {
                let _ = writeln!(
                    dump.out,
                    "position: {position}: invalid batch: {e}; skipping to position {}",
                    position + size
                );
                dump.damaged = true;
                // Its records are unread: the gap it leaves is not a finding of its own.
                last_offset = None;
            }
        }
        position += size;
    }
    let trailing = bytes.len() - position;
    if trailing > 0 && !cut {
        let _ = writeln!(
            dump.out,
            "Found {trailing} invalid bytes at the end of {name}"
        );
        dump.damaged = true;
    }
    dump
}

/// Kafka's deep iteration over a valid batch: a line per record, and every record offset
/// that does not follow the one before it.
fn records(
    dump: &mut FileDump,
    position: usize,
    header: &BatchHeader,
    batch: &[u8],
    options: &Options,
    last_offset: &mut Option<i64>,
) {
    let codec = header.attributes & COMPRESSION_CODEC_MASK;
    if codec != 0 {
        let _ = writeln!(
            dump.out,
            "position: {position}: records not shown: compresscodec {}, which hightide does not \
             model",
            codec_name(header)
        );
        return;
    }
    match record_views(batch) {
        Ok(records) => {
            for r in &records {
                let offset = header.base_offset.0 + i64::from(r.offset_delta);
                if let Some(last) = *last_offset {
                    if offset != last + 1 {
                        dump.findings.push(Finding::NonConsecutive {
                            first: last,
                            second: offset,
                        });
                        dump.damaged = true;
                    }
                }
                *last_offset = Some(offset);
                record_line(&mut dump.out, header, r, offset, options);
                if header.is_control() && !options.skip_record_metadata {
                    control_record(&mut dump.out, r);
                }
                dump.out.push('\n');
            }
        }
        Err(e) => {
            let _ = writeln!(dump.out, "position: {position}: records unreadable: {e}");
            dump.damaged = true;
        }
    }
}

fn unreadable_reason(e: &RecordError) -> String {
    match e {
        RecordError::BadMagic { magic } => {
            format!("bad magic {magic}, the next batch cannot be found")
        }
        RecordError::BadLength { batch_length } => {
            format!("bad batch length {batch_length}, the next batch cannot be found")
        }
        other => other.to_string(),
    }
}

/// Kafka's `printBatchLevel` for a v2 batch.
fn batch_line(out: &mut String, position: usize, h: &BatchHeader, valid: bool) {
    let delete_horizon = if h.attributes & DELETE_HORIZON_FLAG_MASK != 0 {
        format!("OptionalLong[{}]", h.base_timestamp)
    } else {
        "OptionalLong.empty".to_owned()
    };
    let _ = writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
         producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} \
         deleteHorizonMs: {delete_horizon} position: {position} {}: {} size: {} magic: {} \
         compresscodec: {} crc: {} isvalid: {valid}",
        h.base_offset,
        h.last_offset(),
        h.records_count,
        h.base_sequence,
        h.last_sequence(),
        h.producer_id.0,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.is_transactional(),
        h.is_control(),
        timestamp_type(h),
        h.max_timestamp,
        h.size_bytes(),
        h.magic,
        codec_name(h),
        h.crc,
    );
}

/// Kafka's record line: metadata unless `--skip-record-metadata`, then with
/// `--print-data-log` the key (if not null) and the payload (if not null) as UTF-8, as its
/// default `StringDecoder` shows them. Control records have no key or payload to show.
fn record_line(out: &mut String, h: &BatchHeader, r: &RecordView, offset: i64, options: &Options) {
    let mut prefix = "| ";
    if !options.skip_record_metadata {
        let sequence = if h.base_sequence < 0 {
            crate::kafka::record::NO_SEQUENCE
        } else {
            crate::kafka::record::increment_sequence(h.base_sequence, r.offset_delta)
        };
        let header_keys: Vec<&str> = r.headers.iter().map(|(key, _)| *key).collect();
        let _ = write!(
            out,
            "{prefix}offset: {offset} {}: {} keySize: {} valueSize: {} sequence: {sequence} \
             headerKeys: [{}]",
            timestamp_type(h),
            record_timestamp(h, r),
            r.key.map_or(-1, |k| k.len() as i64),
            r.value.map_or(-1, |v| v.len() as i64),
            header_keys.join(","),
        );
        prefix = " ";
    }
    if options.print_data_log && !h.is_control() {
        if let Some(key) = r.key {
            let _ = write!(out, "{prefix}key: {}", String::from_utf8_lossy(key));
        }
        if let Some(value) = r.value {
            let _ = write!(out, " payload: {}", String::from_utf8_lossy(value));
        }
    }
}

/// What Kafka's tool prints of a control record: a transaction marker, or the type of
/// one it does not decode (KRaft's, as 3.9 prints them).
fn control_record(out: &mut String, r: &RecordView) {
    let type_id = r
        .key
        .filter(|k| k.len() >= 4)
        .map_or(-1, |k| i16::from_be_bytes([k[2], k[3]]));
    let value = r.value.filter(|v| v.len() >= 6);
    let name = match (type_id, value) {
        (0 | 1, Some(v)) => {
            let result = if type_id == 0 {
                TxnResult::Abort
            } else {
                TxnResult::Commit
            };
            let _ = write!(
                out,
                " endTxnMarker: {} coordinatorEpoch: {}",
                result.name(),
                i32::from_be_bytes([v[2], v[3], v[4], v[5]])
            );
            return;
        }
        (0, None) => "ABORT",
        (1, None) => "COMMIT",
        (2, _) => "LEADER_CHANGE",
        (3, _) => "SNAPSHOT_HEADER",
        (4, _) => "SNAPSHOT_FOOTER",
        (5, _) => "KRAFT_VERSION",
        (6, _) => "KRAFT_VOTERS",
        _ => "UNKNOWN",
    };
    let _ = write!(out, " controlType: {name}({type_id})");
}

/// A record's timestamp as Kafka reads it: under LogAppendTime every record has the
/// batch's (broker-stamped) max timestamp.
pub(super) fn record_timestamp(h: &BatchHeader, r: &RecordView) -> i64 {
    if h.attributes & TIMESTAMP_TYPE_MASK != 0 {
        h.max_timestamp
    } else {
        h.base_timestamp + r.timestamp_delta
    }
}

fn timestamp_type(h: &BatchHeader) -> &'static str {
    if h.attributes & TIMESTAMP_TYPE_MASK != 0 {
        "LogAppendTime"
    } else {
        "CreateTime"
    }
}

/// Kafka's `CompressionType` names.
fn codec_name(h: &BatchHeader) -> String {
    match h.attributes & COMPRESSION_CODEC_MASK {
        0 => "none".into(),
        1 => "gzip".into(),
        2 => "snappy".into(),
        3 => "lz4".into(),
        4 => "zstd".into(),
        id => format!("unknown({id})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::{
        set_base_offset, set_partition_leader_epoch, BatchBuilder, EndTxnMarker, Header,
        CONTROL_FLAG, TRANSACTIONAL_FLAG,
    };
    use crate::kafka::types::ProducerId;
    use crate::types::{Epoch, Offset};
    use proptest::prelude::*;

    const NAME: &str = "00000000000000000000.log";

    fn batch(base_offset: i64, values: &[&[u8]]) -> Vec<u8> {
        let mut b = BatchBuilder::new(1000, ProducerId(7), 0, base_offset as i32);
        for (i, v) in values.iter().enumerate() {
            b.push(1000 + i as i64, Some(b"k"), Some(v));
        }
        let mut bytes = b.build();
        set_base_offset(&mut bytes, Offset(base_offset));
        set_partition_leader_epoch(&mut bytes, Epoch(3));
        bytes
    }

    fn two_batch_log() -> (Vec<u8>, usize) {
        let mut log = batch(0, &[b"a", b"b"]);
        let second = log.len();
        log.extend(batch(2, &[b"c"]));
        (log, second)
    }

    fn crc(batch: &[u8]) -> u32 {
        parse_header(batch).unwrap().crc
    }

    fn with(f: impl FnOnce(&mut Options)) -> Options {
        let mut options = Options::default();
        f(&mut options);
        options
    }

    #[test]
    fn dumps_batches_like_kafka_dump_log() {
        let (log, second) = two_batch_log();
        let dump = dump_log(NAME, 0, &log, &Options::default());
        let first_crc = crc(&log);
        let second_crc = crc(&log[second..]);
        let second_size = log.len() - second;
        assert_eq!(
            dump.out,
            format!(
                "Log starting offset: 0\n\
                 baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 \
                 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: false \
                 isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: \
                 1001 size: {second} magic: 2 compresscodec: none crc: {first_crc} isvalid: true\n\
                 baseOffset: 2 lastOffset: 2 count: 1 baseSequence: 2 lastSequence: 2 \
                 producerId: 7 producerEpoch: 0 partitionLeaderEpoch: 3 isTransactional: false \
                 isControl: false deleteHorizonMs: OptionalLong.empty position: {second} \
                 CreateTime: 1000 size: {second_size} magic: 2 compresscodec: none crc: \
                 {second_crc} isvalid: true\n"
            )
        );
        assert!(!dump.damaged);
        assert!(dump.findings.is_empty());
        assert!(dump.err.is_empty());
    }

    #[test]
    fn print_data_log_prints_records_as_kafkas_string_decoder() {
        let mut b = BatchBuilder::new(5, ProducerId::NONE, -1, -1);
        let header = |key: &str| Header {
            key: key.into(),
            value: Some(b"v".to_vec()),
        };
        b.push_with_headers(
            6,
            None,
            Some(&[b'x', 0xff]),
            &[header("trace"), header("id")],
        );
        b.push(7, Some(b"k"), None);
        let dump = dump_log(NAME, 0, &b.build(), &with(|o| o.print_data_log = true));
        let records: Vec<_> = dump.out.lines().skip(2).collect();
        assert_eq!(
            records,
            [
                "| offset: 0 CreateTime: 6 keySize: -1 valueSize: 2 sequence: -1 \
                 headerKeys: [trace,id] payload: x\u{fffd}",
                "| offset: 1 CreateTime: 7 keySize: 1 valueSize: -1 sequence: -1 headerKeys: [] \
                 key: k",
            ]
        );
        let (log, _) = two_batch_log();
        let dump = dump_log(NAME, 0, &log, &with(|o| o.print_data_log = true));
        assert!(dump.out.contains(
            "\n| offset: 1 CreateTime: 1001 keySize: 1 valueSize: 1 sequence: 1 headerKeys: [] \
             key: k payload: b\n"
        ));
    }

    #[test]
    fn deep_iteration_prints_record_metadata_only() {
        let (log, _) = two_batch_log();
        let dump = dump_log(NAME, 0, &log, &with(|o| o.deep_iteration = true));
        assert_eq!(
            dump.out
                .lines()
                .filter(|l| l.starts_with('|'))
                .collect::<Vec<_>>(),
            [
                "| offset: 0 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: 0 headerKeys: []",
                "| offset: 1 CreateTime: 1001 keySize: 1 valueSize: 1 sequence: 1 headerKeys: []",
                "| offset: 2 CreateTime: 1000 keySize: 1 valueSize: 1 sequence: 2 headerKeys: []",
            ]
        );
        let plain = dump_log(NAME, 0, &log, &Options::default());
        assert!(!plain.out.contains('|'), "{}", plain.out);
    }

    /// Kafka's quirk kept: without metadata the `| ` goes before the key, so a record with
    /// no key starts with ` payload:`.
    #[test]
    fn skip_record_metadata_prints_key_and_payload_only() {
        let mut b = BatchBuilder::new(5, ProducerId::NONE, -1, -1);
        b.push(5, Some(b"k"), Some(b"a"));
        b.push(6, None, Some(b"b"));
        let options = with(|o| {
            o.print_data_log = true;
            o.skip_record_metadata = true;
        });
        let dump = dump_log(NAME, 0, &b.build(), &options);
        assert_eq!(
            dump.out.lines().skip(2).collect::<Vec<_>>(),
            ["| key: k payload: a", " payload: b"]
        );
    }

    /// Attributes hightide's producers never set still read as Kafka reads them.
    #[test]
    fn attribute_bits_read_as_kafka_reads_them() {
        let mut log = batch(0, &[b"a"]);
        let attributes: i16 = TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG | CONTROL_FLAG;
        log[21..23].copy_from_slice(&attributes.to_be_bytes());
        let crc = crc32c::crc32c(&log[21..]);
        log[17..21].copy_from_slice(&crc.to_be_bytes());
        let dump = dump_log(NAME, 0, &log, &with(|o| o.print_data_log = true));
        let lines: Vec<_> = dump.out.lines().collect();
        assert!(
            lines[1].contains(
                "isTransactional: true isControl: true deleteHorizonMs: OptionalLong.empty \
                 position: 0 LogAppendTime: 1000 "
            ),
            "{}",
            lines[1]
        );
        assert!(lines[1].ends_with(&format!("crc: {crc} isvalid: true")));
        assert_eq!(
            lines[2],
            "| offset: 0 LogAppendTime: 1000 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] \
             controlType: UNKNOWN(-1)",
            "a control record shows no key or payload"
        );
    }

    /// The COMMIT marker of Kafka's own `withEndTransactionMarker` (producer 1000, epoch 0,
    /// coordinator epoch 0, time 0, leader epoch 0), and the lines its `DumpLogSegments`
    /// prints for it (3.9 and 4.1).
    #[test]
    fn a_marker_dumps_as_kafkas_tool_dumps_it() {
        let marker = EndTxnMarker {
            result: TxnResult::Commit,
            coordinator_epoch: 0,
        };
        let mut bytes = marker.batch(0, ProducerId(1000), 0);
        set_partition_leader_epoch(&mut bytes, Epoch(0));
        let kafka = "0000000000000000000000420000000002339ae2ff0030000000000000000000000000000000\
                     000000000000000000000003e80000ffffffff000000012000000008000000010c0000000000\
                     0000";
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(hex, kafka);
        let dump = dump_log(NAME, 0, &bytes, &with(|o| o.deep_iteration = true));
        assert_eq!(
            dump.out.lines().skip(1).collect::<Vec<_>>(),
            [
                "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 \
                 producerId: 1000 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: true \
                 isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 0 \
                 size: 78 magic: 2 compresscodec: none crc: 865788671 isvalid: true",
                "| offset: 0 CreateTime: 0 keySize: 4 valueSize: 6 sequence: -1 headerKeys: [] \
                 endTxnMarker: COMMIT coordinatorEpoch: 0",
            ]
        );
    }

    /// A bit flip (latent corruption) in one batch must not hide the batches after it.
    #[test]
    fn bad_crc_batch_is_reported_and_skipped() {
        let (mut log, second) = two_batch_log();
        log[second - 1] ^= 0x10;
        let dump = dump_log(NAME, 0, &log, &with(|o| o.print_data_log = true));
        let lines: Vec<_> = dump.out.lines().collect();
        assert!(lines[1].ends_with("isvalid: false"), "{}", dump.out);
        assert!(lines[2].starts_with("position: 0: invalid batch: bad CRC-32C: stored"));
        assert!(lines[2].ends_with(&format!("; skipping to position {second}")));
        assert!(
            dump.out.contains("payload: c"),
            "the next batch is still dumped"
        );
        assert!(
            !dump.out.contains("payload: a"),
            "records of a corrupt batch are not shown"
        );
        assert!(dump.damaged);
        assert!(
            dump.findings.is_empty(),
            "the skipped batch is no offset gap"
        );
    }

    #[test]
    fn torn_tail_is_counted_as_kafka_counts_it() {
        let (log, second) = two_batch_log();
        for cut in [second + 30, log.len() - 1] {
            let dump = dump_log(NAME, 0, &log[..cut], &Options::default());
            let lines: Vec<_> = dump.out.lines().collect();
            assert_eq!(lines.len(), 3, "{}", dump.out);
            assert_eq!(
                lines[2],
                format!("Found {} invalid bytes at the end of {NAME}", cut - second)
            );
            assert!(dump.damaged);
        }
    }

    /// Kafka's `--max-bytes`: the batches within the limit, and the cut is not damage.
    #[test]
    fn max_bytes_reads_only_the_batches_that_fit() {
        let (log, second) = two_batch_log();
        let dump = dump_log(NAME, 0, &log, &with(|o| o.max_bytes = second + 10));
        assert_eq!(dump.out.lines().count(), 2, "{}", dump.out);
        assert!(!dump.damaged);
        let dump = dump_log(NAME, 0, &log, &with(|o| o.max_bytes = log.len()));
        assert_eq!(dump.out.lines().count(), 3);
    }

    #[test]
    fn bad_magic_or_length_ends_the_dump() {
        let (mut log, second) = two_batch_log();
        log[second + 16] = 9;
        let dump = dump_log(NAME, 0, &log, &Options::default());
        let lines: Vec<_> = dump.out.lines().collect();
        assert_eq!(
            lines[2..],
            [
                format!("position: {second}: bad magic 9, the next batch cannot be found"),
                format!(
                    "Found {} invalid bytes at the end of {NAME}",
                    log.len() - second
                ),
            ]
        );
        assert!(dump.damaged);
        let (mut log, second) = two_batch_log();
        log[second + 8..second + 12].copy_from_slice(&3i32.to_be_bytes());
        let dump = dump_log(NAME, 0, &log, &Options::default());
        assert!(dump.out.contains(&format!(
            "position: {second}: bad batch length 3, the next batch cannot be found\n"
        )));
    }

    #[test]
    fn deep_iteration_finds_non_consecutive_offsets() {
        let mut log = batch(0, &[b"a", b"b"]);
        log.extend(batch(5, &[b"c"]));
        let dump = dump_log(NAME, 0, &log, &with(|o| o.deep_iteration = true));
        assert_eq!(
            dump.findings,
            [Finding::NonConsecutive {
                first: 1,
                second: 5
            }]
        );
        assert!(dump.damaged);
        let shallow = dump_log(NAME, 0, &log, &Options::default());
        assert!(shallow.findings.is_empty() && !shallow.damaged);
    }

    proptest! {
        #[test]
        fn never_panics_on_damaged_logs(flips in proptest::collection::vec((0usize..10_000, any::<u8>()), 0..4), cut in 0usize..10_000) {
            let (mut log, _) = two_batch_log();
            for (at, byte) in flips {
                let at = at % log.len();
                log[at] = byte;
            }
            log.truncate(cut % (log.len() + 1));
            let _ = dump_log(NAME, 0, &log, &with(|o| o.print_data_log = true));
        }
    }
}
