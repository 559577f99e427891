//! A `.log` file as `kafka-dump-log.sh --files … [--print-data-log]` shows it: one line per
//! batch, and with data one `| offset: …` line per record. Unlike Kafka's tool, which stops
//! at the first exception, a damaged file is reported where and why it is damaged: a batch
//! whose CRC fails but whose length is sane is reported and skipped; a torn tail, or a
//! header too damaged to find the next batch (bad magic or length), ends the dump.

use std::fmt::Write;

use crate::record::{self, parse_header, validate, BatchHeader, Record, RecordError, NO_SEQUENCE};

pub fn dump_log(bytes: &[u8], print_data: bool) -> String {
    let mut out = String::new();
    let mut position = 0;
    while position < bytes.len() {
        let rest = &bytes[position..];
        let header = match parse_header(rest) {
            Ok(header) => header,
            Err(e) => {
                let _ = writeln!(
                    out,
                    "position: {position}: {}; stopping",
                    unreadable_reason(&e)
                );
                break;
            }
        };
        let size = header.size_bytes();
        if size > rest.len() {
            let _ = writeln!(
                out,
                "position: {position}: truncated batch (baseOffset: {} size: {size}, only {} bytes \
                 left, a torn tail); stopping",
                header.base_offset,
                rest.len()
            );
            break;
        }
        let batch = &rest[..size];
        let verdict = validate(batch);
        batch_line(&mut out, position, &header, verdict.is_ok());
        match verdict {
            Ok(_) if print_data => match record::records(batch) {
                Ok(records) => {
                    for r in &records {
                        record_line(&mut out, &header, r);
                    }
                }
                Err(e) => {
                    let _ = writeln!(out, "position: {position}: records unreadable: {e}");
                }
            },
            Ok(_) => {}
            Err(e) => {
                let _ = writeln!(
                    out,
                    "position: {position}: invalid batch: {e}; skipping to position {}",
                    position + size
                );
            }
        }
        position += size;
    }
    out
}

fn unreadable_reason(e: &RecordError) -> String {
    match e {
        RecordError::Truncated { available, .. } => {
            format!("truncated batch header ({available} bytes left, a torn tail)")
        }
        RecordError::BadMagic { magic } => {
            format!("bad magic {magic}, the next batch cannot be found")
        }
        RecordError::BadLength { batch_length } => {
            format!("bad batch length {batch_length}, the next batch cannot be found")
        }
        other => other.to_string(),
    }
}

fn batch_line(out: &mut String, position: usize, h: &BatchHeader, valid: bool) {
    let _ = writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} \
         producerEpoch: {} partitionLeaderEpoch: {} position: {position} baseTimestamp: {} \
         maxTimestamp: {} size: {} magic: {} compresscodec: none crc: {} isValid: {valid}",
        h.base_offset,
        h.last_offset(),
        h.records_count,
        h.base_sequence,
        h.last_sequence(),
        h.producer_id.0,
        h.producer_epoch,
        h.partition_leader_epoch,
        h.base_timestamp,
        h.max_timestamp,
        h.size_bytes(),
        h.magic,
        h.crc,
    );
}

fn record_line(out: &mut String, h: &BatchHeader, r: &Record) {
    let sequence = if h.base_sequence == NO_SEQUENCE {
        NO_SEQUENCE
    } else {
        record::increment_sequence(h.base_sequence, r.offset_delta)
    };
    let _ = write!(
        out,
        "| offset: {} CreateTime: {} keySize: {} valueSize: {} sequence: {sequence} headers: [",
        h.base_offset.0 + i64::from(r.offset_delta),
        h.base_timestamp + r.timestamp_delta,
        r.key.as_ref().map_or(-1, |k| k.len() as i64),
        r.value.as_ref().map_or(-1, |v| v.len() as i64),
    );
    for (i, header) in r.headers.iter().enumerate() {
        let sep = if i == 0 { "" } else { ", " };
        let _ = write!(out, "{sep}{}={}", header.key, show(header.value.as_deref()));
    }
    let _ = writeln!(
        out,
        "] key: {} payload: {}",
        show(r.key.as_deref()),
        show(r.value.as_deref())
    );
}

/// Text when the bytes are UTF-8, else `0x` and hex; `null` for a null field.
fn show(bytes: Option<&[u8]>) -> String {
    match bytes {
        None => "null".to_owned(),
        Some(b) => match std::str::from_utf8(b) {
            Ok(text) => text.to_owned(),
            Err(_) => {
                let mut hex = String::with_capacity(2 + 2 * b.len());
                hex.push_str("0x");
                for byte in b {
                    let _ = write!(hex, "{byte:02x}");
                }
                hex
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{set_base_offset, set_partition_leader_epoch, BatchBuilder, Header};
    use crate::types::{Epoch, Offset, ProducerId};
    use proptest::prelude::*;

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

    #[test]
    fn dumps_batches_like_kafka_dump_log() {
        let (log, second) = two_batch_log();
        let out = dump_log(&log, false);
        let lines: Vec<_> = out.lines().collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert!(lines[0].starts_with(
            "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 7 \
             producerEpoch: 0 partitionLeaderEpoch: 3 position: 0 baseTimestamp: 1000 \
             maxTimestamp: 1001 size: "
        ));
        assert!(lines[0].ends_with("isValid: true"));
        assert!(lines[1].contains("baseOffset: 2 lastOffset: 2 count: 1 "));
        assert!(lines[1].contains(&format!("position: {second} ")));
    }

    #[test]
    fn prints_records_as_text_or_hex() {
        let mut b = BatchBuilder::new(5, ProducerId::NONE, -1, -1);
        b.push_with_headers(
            6,
            None,
            Some(&[0xff, 0x00]),
            &[Header {
                key: "trace".into(),
                value: Some(b"t1".to_vec()),
            }],
        );
        let out = dump_log(&b.build(), true);
        let record = out.lines().nth(1).unwrap();
        assert_eq!(
            record,
            "| offset: 0 CreateTime: 6 keySize: -1 valueSize: 2 sequence: -1 headers: [trace=t1] \
             key: null payload: 0xff00"
        );
        let (log, _) = two_batch_log();
        let out = dump_log(&log, true);
        assert!(out.contains("| offset: 1 CreateTime: 1001 keySize: 1 valueSize: 1 sequence: 1 headers: [] key: k payload: b\n"));
    }

    /// A bit flip (latent corruption) in one batch must not hide the batches after it.
    #[test]
    fn bad_crc_batch_is_reported_and_skipped() {
        let (mut log, second) = two_batch_log();
        log[second - 1] ^= 0x10;
        let out = dump_log(&log, true);
        assert!(out.contains("position: 0 "), "{out}");
        assert!(out.lines().next().unwrap().ends_with("isValid: false"));
        assert!(out.contains("position: 0: invalid batch: bad CRC-32C: stored"));
        assert!(out.contains(&format!("skipping to position {second}")));
        assert!(out.contains("payload: c"), "the next batch is still dumped");
        assert!(
            !out.contains("payload: a"),
            "records of a corrupt batch are not shown"
        );
    }

    #[test]
    fn torn_tail_is_reported_and_ends_the_dump() {
        let (log, second) = two_batch_log();
        let out = dump_log(&log[..second + 30], false);
        assert!(out.contains(&format!(
            "position: {second}: truncated batch header (30 bytes left, a torn tail); stopping"
        )));
        let out = dump_log(&log[..log.len() - 1], false);
        assert!(out.contains(&format!(
            "position: {second}: truncated batch (baseOffset: 2"
        )));
        assert!(out.ends_with("stopping\n"));
    }

    #[test]
    fn bad_magic_or_length_ends_the_dump() {
        let (mut log, second) = two_batch_log();
        log[second + 16] = 9;
        let out = dump_log(&log, false);
        assert!(out.contains(&format!(
            "position: {second}: bad magic 9, the next batch cannot be found; stopping"
        )));
        let (mut log, second) = two_batch_log();
        log[second + 8..second + 12].copy_from_slice(&3i32.to_be_bytes());
        assert!(dump_log(&log, false).contains("bad batch length 3"));
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
            let _ = dump_log(&log, true);
        }
    }
}
