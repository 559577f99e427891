//! `.index` and `.timeindex` files as Kafka's `dumpIndex` and `dumpTimeIndex` print them:
//! one line per entry (none with `--verify-index-only`), each entry checked against the
//! `.log` beside it, the disagreements left for the summary; or with
//! `--index-sanity-check` only the check that decides, when a broker starts, whether it
//! trusts an index or rebuilds it (`OffsetIndex::parse`, `TimeIndex::parse`).
//!
//! Entries are read whole, as many as the length holds, so a damaged file is still listed;
//! bytes after the last whole entry are a torn write (hightide's index files are exactly
//! their entries; Kafka's are preallocated and it ignores the rest).

use std::fmt::Write;

use super::log::record_timestamp;
use super::{FileDump, Finding, Options};
use crate::kafka::record::{parse_header, record_views, BatchHeader};
use crate::kafka::storage::index::{
    IndexError, OffsetIndex, TimeIndex, OFFSET_ENTRY_BYTES, TIME_ENTRY_BYTES,
};

/// Kafka's `RecordBatch.NO_TIMESTAMP`: where its time index checks start.
const NO_TIMESTAMP: i64 = -1;

pub fn dump_offset_index(
    file: &str,
    base_offset: i64,
    bytes: &[u8],
    log: Option<&[u8]>,
    options: &Options,
) -> FileDump {
    let mut dump = FileDump::default();
    let entries = bytes.chunks_exact(OFFSET_ENTRY_BYTES);
    if entries.len() == 0 {
        let _ = writeln!(dump.out, "{file} is empty.");
        torn_write(&mut dump, file, bytes.len(), OFFSET_ENTRY_BYTES);
        return dump;
    }
    if options.index_sanity_check {
        sanity_check(&mut dump, file, OffsetIndex::parse(bytes).err(), "index");
        return dump;
    }
    for entry in entries {
        let offset = base_offset + i64::from(be_u32(&entry[..4]));
        let position = be_u32(&entry[4..]);
        if let Some(log) = log {
            dump.findings.extend(check_offset_entry(
                log,
                offset,
                position,
                options.max_message_size,
            ));
        }
        if !options.verify_index_only {
            let _ = writeln!(dump.out, "offset: {offset} position: {position}");
        }
    }
    torn_write(&mut dump, file, bytes.len(), OFFSET_ENTRY_BYTES);
    dump.damaged |= !dump.findings.is_empty();
    dump
}

/// Kafka's `dumpIndex`: read the batch at the entry's position within `--max-message-size`
/// bytes and compare the entry's offset with the batch's last offset, the one brokers
/// write since 2.0 (`storage::index`). Its tool checks that since 2.3 (KAFKA-7487; before,
/// it compared the first record's offset and so misreported 2.0's own indexes). Where
/// there is no such batch Kafka's tool throws; this says why.
fn check_offset_entry(
    log: &[u8],
    index_offset: i64,
    position: u32,
    max_message_size: usize,
) -> Option<Finding> {
    let unreachable = |why: String| {
        Some(Finding::IndexPosition {
            index_offset,
            position,
            why,
        })
    };
    let rest = match log.get(position as usize..) {
        Some(rest) if !rest.is_empty() => rest,
        _ => return unreachable(format!("past the end of the log ({} bytes)", log.len())),
    };
    let header = match parse_header(rest) {
        Ok(header) => header,
        Err(e) => return unreachable(format!("no batch starts there: {e}")),
    };
    if header.size_bytes() > max_message_size {
        return unreachable(format!(
            "the batch there ({} bytes) is larger than --max-message-size ({max_message_size})",
            header.size_bytes()
        ));
    }
    if header.size_bytes() > rest.len() {
        return unreachable("the batch there is cut off by the end of the log".into());
    }
    let last_offset = header.last_offset().0;
    (last_offset != index_offset).then_some(Finding::IndexMismatch {
        index_offset,
        log_offset: last_offset,
    })
}

pub fn dump_time_index(
    file: &str,
    base_offset: i64,
    bytes: &[u8],
    log: Option<&[u8]>,
    options: &Options,
) -> FileDump {
    let mut dump = FileDump::default();
    if options.index_sanity_check {
        sanity_check(&mut dump, file, TimeIndex::parse(bytes).err(), "time index");
        return dump;
    }
    let mut previous = NO_TIMESTAMP;
    for entry in bytes.chunks_exact(TIME_ENTRY_BYTES) {
        let mut timestamp = [0; 8];
        timestamp.copy_from_slice(&entry[..8]);
        let timestamp = i64::from_be_bytes(timestamp);
        let offset = base_offset + i64::from(be_u32(&entry[8..]));
        if let Some(log) = log {
            check_time_entry(&mut dump, file, log, timestamp, offset, previous);
        }
        if !options.verify_index_only {
            let _ = writeln!(dump.out, "timestamp: {timestamp} offset: {offset}");
        }
        previous = timestamp;
    }
    torn_write(&mut dump, file, bytes.len(), TIME_ENTRY_BYTES);
    dump.damaged |= !dump.findings.is_empty();
    dump
}

/// Kafka's checks of a time index entry: its offset is the last offset of a batch, whose
/// largest record timestamp is the entry's, which is above the entry before it. The batch
/// is found by a scan of the log, not through the `.index` as Kafka's tool does, so that
/// a damaged `.index` shows in its own check and not here.
fn check_time_entry(
    dump: &mut FileDump,
    file: &str,
    log: &[u8],
    timestamp: i64,
    offset: i64,
    previous: i64,
) {
    let Some((position, header)) = batch_holding(log, offset) else {
        dump.findings.push(Finding::OffsetNotFound {
            index_offset: offset,
            log_offset: -1,
        });
        return;
    };
    if header.last_offset().0 != offset {
        dump.findings.push(Finding::OffsetNotFound {
            index_offset: offset,
            log_offset: header.last_offset().0,
        });
        return;
    }
    let batch = &log[position..position + header.size_bytes()];
    let records = match record_views(batch) {
        Ok(records) => records,
        Err(e) => {
            let _ = writeln!(
                dump.err,
                "{file}: indexed offset {offset}: the records of the batch at position \
                 {position} are unreadable: {e}"
            );
            dump.damaged = true;
            return;
        }
    };
    let largest = records
        .iter()
        .map(|r| record_timestamp(&header, r))
        .fold(NO_TIMESTAMP, i64::max);
    if largest != timestamp {
        dump.findings.push(Finding::TimestampMismatch {
            index_timestamp: timestamp,
            log_timestamp: largest,
        });
    }
    if previous >= timestamp {
        dump.findings.push(Finding::OutOfOrderTimestamp {
            index_timestamp: timestamp,
            previous_timestamp: previous,
        });
    }
}

/// The first whole batch of `log` whose last offset is ≥ `offset`, with its position;
/// `None` if the readable batches end before it.
fn batch_holding(log: &[u8], offset: i64) -> Option<(usize, BatchHeader)> {
    let mut position = 0;
    while let Ok(header) = parse_header(log.get(position..)?) {
        if header.size_bytes() > log.len() - position {
            return None;
        }
        if header.last_offset().0 >= offset {
            return Some((position, header));
        }
        position += header.size_bytes();
    }
    None
}

/// `--index-sanity-check`: Kafka's "passed sanity check." line, or why the broker would
/// rebuild the index, worded as Kafka's `CorruptIndexException` where it has the case.
fn sanity_check(dump: &mut FileDump, file: &str, error: Option<IndexError>, what: &str) {
    match error {
        None => {
            let _ = writeln!(dump.out, "{file} passed sanity check.");
        }
        Some(IndexError::BadLength { len, entry_bytes }) => {
            let _ = writeln!(
                dump.err,
                "{} file {file} is corrupt, found {len} bytes which is neither positive nor a \
                 multiple of {entry_bytes}",
                capitalized(what)
            );
            dump.damaged = true;
        }
        Some(IndexError::NotIncreasing { entry }) => {
            let _ = writeln!(
                dump.err,
                "Corrupt {what} found, {what} file ({file}) has entry {entry} not above the one \
                 before it"
            );
            dump.damaged = true;
        }
    }
}

/// Bytes after the last whole entry: a torn write (see the module doc).
fn torn_write(dump: &mut FileDump, file: &str, len: usize, entry_bytes: usize) {
    let torn = len % entry_bytes;
    if torn != 0 {
        let _ = writeln!(
            dump.err,
            "{file}: {torn} bytes after the last whole {entry_bytes}-byte entry (a torn write)"
        );
        dump.damaged = true;
    }
}

fn capitalized(what: &str) -> String {
    let mut chars = what.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

fn be_u32(bytes: &[u8]) -> u32 {
    let mut out = [0; 4];
    out.copy_from_slice(bytes);
    u32::from_be_bytes(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::record::{set_base_offset, BatchBuilder};
    use crate::kafka::storage::index::{OffsetPosition, TimestampOffset};
    use crate::kafka::types::ProducerId;
    use crate::types::Offset;

    const FILE: &str = "d/00000000000000000100.index";
    const TIME_FILE: &str = "d/00000000000000000100.timeindex";

    /// A segment at base offset 100: batches of two records at offsets 100, 102, 104 (last
    /// offsets 101, 103, 105), stamped 10, 20, 30 (+1 for the second record), and its
    /// positions.
    fn segment() -> (Vec<u8>, Vec<u32>) {
        let mut log = Vec::new();
        let mut positions = Vec::new();
        for i in 0..3i64 {
            let mut b = BatchBuilder::new(10 * (i + 1), ProducerId::NONE, -1, -1);
            b.push(10 * (i + 1), None, Some(b"v"));
            b.push(10 * (i + 1) + 1, None, Some(b"w"));
            let mut batch = b.build();
            set_base_offset(&mut batch, Offset(100 + 2 * i));
            positions.push(log.len() as u32);
            log.extend(batch);
        }
        (log, positions)
    }

    fn offset_index(entries: &[(u32, u32)]) -> Vec<u8> {
        let mut index = OffsetIndex::default();
        for &(relative_offset, position) in entries {
            index.push(OffsetPosition {
                relative_offset,
                position,
            });
        }
        index.to_bytes()
    }

    fn time_index(entries: &[(i64, u32)]) -> Vec<u8> {
        let mut index = TimeIndex::default();
        for &(timestamp, relative_offset) in entries {
            index
                .maybe_push(TimestampOffset {
                    timestamp,
                    relative_offset,
                })
                .expect("increasing");
        }
        index.to_bytes()
    }

    fn verify_only() -> Options {
        Options {
            verify_index_only: true,
            ..Options::default()
        }
    }

    /// Entries name the batch at their position by its last offset, as brokers write them.
    #[test]
    fn offset_index_lines_are_kafkas() {
        let (log, p) = segment();
        let index = offset_index(&[(3, p[1]), (5, p[2])]);
        let dump = dump_offset_index(FILE, 100, &index, Some(&log), &Options::default());
        assert_eq!(
            dump.out,
            format!(
                "offset: 103 position: {}\noffset: 105 position: {}\n",
                p[1], p[2]
            )
        );
        assert!(dump.findings.is_empty() && dump.err.is_empty() && !dump.damaged);
    }

    /// An entry naming its batch by the base offset, as Kafka up to 1.1 wrote them, is a
    /// mismatch to Kafka's tool since 2.3.
    #[test]
    fn verify_index_only_finds_a_planted_mismatch() {
        let (log, p) = segment();
        let index = offset_index(&[(2, p[1]), (5, p[2])]);
        let dump = dump_offset_index(FILE, 100, &index, Some(&log), &verify_only());
        assert_eq!(dump.out, "", "verify-index-only prints no entries");
        assert_eq!(
            dump.findings,
            [Finding::IndexMismatch {
                index_offset: 102,
                log_offset: 103
            }]
        );
        assert!(dump.damaged);
    }

    #[test]
    fn entries_leading_to_no_batch_say_why() {
        let (mut log, p) = segment();
        let zeros = log.len() as u32;
        log.extend([0; 64]);
        let index = offset_index(&[(5, p[2]), (6, zeros), (8, log.len() as u32)]);
        let small = Options {
            max_message_size: 20,
            ..verify_only()
        };
        let dump = dump_offset_index(FILE, 100, &index, Some(&log), &small);
        let why: Vec<_> = dump
            .findings
            .iter()
            .map(|f| match f {
                Finding::IndexPosition { why, .. } => why.clone(),
                other => panic!("{other:?}"),
            })
            .collect();
        let size = zeros - p[2];
        assert_eq!(
            why,
            [
                format!("the batch there ({size} bytes) is larger than --max-message-size (20)"),
                "no batch starts there: bad magic 0 (expected 2)".to_owned(),
                format!("past the end of the log ({} bytes)", log.len()),
            ]
        );
        assert!(dump.damaged);
    }

    #[test]
    fn empty_index_and_sanity_check_are_kafkas_lines() {
        let (log, p) = segment();
        let empty = dump_offset_index(FILE, 100, &[], Some(&log), &Options::default());
        assert_eq!(empty.out, format!("{FILE} is empty.\n"));
        let sanity = Options {
            index_sanity_check: true,
            ..Options::default()
        };
        let index = offset_index(&[(3, p[1]), (5, p[2])]);
        let dump = dump_offset_index(FILE, 100, &index, None, &sanity);
        assert_eq!(dump.out, format!("{FILE} passed sanity check.\n"));
        assert!(!dump.damaged);
        let torn = dump_offset_index(FILE, 100, &index[..11], None, &sanity);
        assert_eq!(torn.out, "");
        assert_eq!(
            torn.err,
            format!(
                "Index file {FILE} is corrupt, found 11 bytes which is neither positive nor a \
                 multiple of 8\n"
            )
        );
        assert!(torn.damaged);
        let mut swapped = index[8..].to_vec();
        swapped.extend_from_slice(&index[..8]);
        let unordered = dump_offset_index(FILE, 100, &swapped, None, &sanity);
        assert_eq!(
            unordered.err,
            format!(
                "Corrupt index found, index file ({FILE}) has entry 1 not above the one before \
                 it\n"
            )
        );
    }

    #[test]
    fn torn_index_is_listed_and_reported() {
        let (log, p) = segment();
        let index = offset_index(&[(3, p[1]), (5, p[2])]);
        let dump = dump_offset_index(FILE, 100, &index[..13], Some(&log), &Options::default());
        assert_eq!(dump.out, format!("offset: 103 position: {}\n", p[1]));
        assert!(dump.findings.is_empty(), "{:?}", dump.findings);
        assert_eq!(
            dump.err,
            format!("{FILE}: 5 bytes after the last whole 8-byte entry (a torn write)\n")
        );
        assert!(dump.damaged);
    }

    #[test]
    fn time_index_lines_are_kafkas() {
        let (log, _) = segment();
        let index = time_index(&[(21, 3), (31, 5)]);
        let dump = dump_time_index(TIME_FILE, 100, &index, Some(&log), &Options::default());
        assert_eq!(
            dump.out,
            "timestamp: 21 offset: 103\ntimestamp: 31 offset: 105\n"
        );
        assert!(dump.findings.is_empty() && !dump.damaged, "{dump:?}");
    }

    #[test]
    fn time_index_verification_finds_kafkas_three_errors() {
        let (log, _) = segment();
        // 21 at 103: right; 25 at 105: the batch's largest is 31; 40 at 104: not a last
        // offset (and out of order, unchecked since not found); 99 at 200: past the end.
        let mut index = time_index(&[(21, 3), (25, 5)]);
        index.extend_from_slice(&time_index(&[(20, 4), (99, 100)]));
        let dump = dump_time_index(TIME_FILE, 100, &index, Some(&log), &verify_only());
        assert_eq!(dump.out, "");
        assert_eq!(
            dump.findings,
            [
                Finding::TimestampMismatch {
                    index_timestamp: 25,
                    log_timestamp: 31
                },
                Finding::OffsetNotFound {
                    index_offset: 104,
                    log_offset: 105
                },
                Finding::OffsetNotFound {
                    index_offset: 200,
                    log_offset: -1
                },
            ]
        );
        assert!(dump.damaged);
        let repeated = time_index(&[(21, 3)]).repeat(2);
        let dump = dump_time_index(TIME_FILE, 100, &repeated, Some(&log), &verify_only());
        assert_eq!(
            dump.findings,
            [Finding::OutOfOrderTimestamp {
                index_timestamp: 21,
                previous_timestamp: 21
            }]
        );
    }

    #[test]
    fn time_index_sanity_check() {
        let sanity = Options {
            index_sanity_check: true,
            ..Options::default()
        };
        let index = time_index(&[(21, 3), (31, 5)]);
        let dump = dump_time_index(TIME_FILE, 100, &index, None, &sanity);
        assert_eq!(dump.out, format!("{TIME_FILE} passed sanity check.\n"));
        let torn = dump_time_index(TIME_FILE, 100, &index[..20], None, &sanity);
        assert_eq!(
            torn.err,
            format!(
                "Time index file {TIME_FILE} is corrupt, found 20 bytes which is neither \
                 positive nor a multiple of 12\n"
            )
        );
    }

    /// Without the `.log` (it could not be read) the entries are still listed.
    #[test]
    fn without_the_log_entries_are_only_listed() {
        let index = offset_index(&[(2, 999)]);
        let dump = dump_offset_index(FILE, 100, &index, None, &Options::default());
        assert_eq!(dump.out, "offset: 102 position: 999\n");
        assert!(!dump.damaged);
    }
}
