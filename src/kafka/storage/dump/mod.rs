//! `hightide dump-log`: the files of a broker's log directory as Kafka's
//! `kafka-dump-log.sh` (`DumpLogSegments`) prints them, so that a dumped disk reads like a
//! real one. Kind by name, as Kafka's tool: `.log` (batches, and with deep iteration one
//! `| offset: …` line per record, a marker's `endTxnMarker: COMMIT coordinatorEpoch: N`),
//! `.index` and `.timeindex` (entries, checked against the `.log` beside them), and
//! `.txnindex` (one line per aborted transaction). hightide adds the checkpoint files, which Kafka's tool cannot read
//! (their names have no suffix): `leader-epoch-checkpoint` and the three offset
//! checkpoints.
//!
//! Where it departs from Kafka's tool, on purpose:
//! - Kafka's stops at the first exception (a stack trace); this reports where and why a
//!   file is damaged, goes on where it can, and says so in the exit status.
//! - Findings are listed in file order (Kafka's lists come out reversed, or in hash order).
//!
//! Each kind is a plain function over bytes returning a [`FileDump`]; the command line
//! reads the files and prints.

mod checkpoint;
mod index;
mod log;
mod txn_index;

use std::fmt::Write;

use crate::kafka::storage::segment::{INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX};
use crate::kafka::storage::txn_index::TXN_INDEX_SUFFIX;

pub use checkpoint::Checkpoint;

/// Kafka's options that mean something for hightide's files (decoders do not: there is
/// no Java class to load, and no internal topic to decode).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub print_data_log: bool,
    pub deep_iteration: bool,
    pub skip_record_metadata: bool,
    pub verify_index_only: bool,
    pub index_sanity_check: bool,
    /// The largest batch an `.index` entry may point at.
    pub max_message_size: usize,
    /// Read only the batches within the first `max_bytes` of a `.log`.
    pub max_bytes: usize,
}

/// Kafka's `--max-message-size` default.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 5 * 1024 * 1024;
/// Kafka's `--max-bytes` default: the whole file.
pub const DEFAULT_MAX_BYTES: usize = i32::MAX as usize;

impl Default for Options {
    fn default() -> Options {
        Options {
            print_data_log: false,
            deep_iteration: false,
            skip_record_metadata: false,
            verify_index_only: false,
            index_sanity_check: false,
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

impl Options {
    /// Kafka's `isDeepIteration`: records are read when asked, or when they are printed.
    fn deep(&self) -> bool {
        self.deep_iteration || self.print_data_log
    }
}

/// What a file is, by its name. Segment files carry the base offset their name gives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Log { base_offset: i64 },
    Index { base_offset: i64 },
    TimeIndex { base_offset: i64 },
    TxnIndex { base_offset: i64 },
    Checkpoint(Checkpoint),
}

impl Kind {
    /// Kafka's rule: the suffix after the last dot, the base offset before the first; a
    /// segment file whose name does not start with an offset is unknown (Kafka's tool
    /// throws on it). `None`: Kafka's "Ignoring unknown file".
    pub fn of(file_name: &str) -> Option<Kind> {
        if let Some(checkpoint) = Checkpoint::of(file_name) {
            return Some(Kind::Checkpoint(checkpoint));
        }
        let suffix = &file_name[file_name.rfind('.')?..];
        let base_offset = file_name.split('.').next()?.parse().ok()?;
        match suffix {
            LOG_SUFFIX => Some(Kind::Log { base_offset }),
            INDEX_SUFFIX => Some(Kind::Index { base_offset }),
            TIME_INDEX_SUFFIX => Some(Kind::TimeIndex { base_offset }),
            TXN_INDEX_SUFFIX => Some(Kind::TxnIndex { base_offset }),
            _ => None,
        }
    }

    /// Whether dumping this file reads the `.log` beside it ([`log_file_name`]): indexes
    /// are checked against it, except by the sanity check, which reads the index alone.
    pub fn reads_log(self, options: &Options) -> bool {
        matches!(self, Kind::Index { .. } | Kind::TimeIndex { .. }) && !options.index_sanity_check
    }
}

/// The `.log` an index belongs to: the same name up to the first dot, as Kafka finds it.
pub fn log_file_name(index_file_name: &str) -> String {
    let stem = index_file_name.split('.').next().unwrap_or_default();
    format!("{stem}{LOG_SUFFIX}")
}

/// One file's dump: `out` for stdout, `err` for stderr at once, `findings` for the summary
/// Kafka prints on stderr after the last file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileDump {
    pub out: String,
    pub err: String,
    pub findings: Vec<Finding>,
    /// Anything wrong with the file (in `out`, `err` or `findings`): exit status 1.
    pub damaged: bool,
}

/// A disagreement between an index or a log and what it should say, in Kafka's summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Finding {
    /// An `.index` entry's offset is not the last offset of the batch at its position.
    IndexMismatch { index_offset: i64, log_offset: i64 },
    /// An `.index` entry's position leads to no batch (Kafka's tool throws there).
    IndexPosition {
        index_offset: i64,
        position: u32,
        why: String,
    },
    /// A `.timeindex` timestamp is not the largest record timestamp of its batch.
    TimestampMismatch {
        index_timestamp: i64,
        log_timestamp: i64,
    },
    /// A `.timeindex` timestamp not above the one before it.
    OutOfOrderTimestamp {
        index_timestamp: i64,
        previous_timestamp: i64,
    },
    /// A `.timeindex` offset that is no batch's last offset (`-1`: past the log's end).
    OffsetNotFound { index_offset: i64, log_offset: i64 },
    /// A record offset in a `.log` not one above the record before it.
    NonConsecutive { first: i64, second: i64 },
}

/// Dump one file of `kind`, named `file` in messages; `log` is the `.log` beside an index
/// when [`Kind::reads_log`] (`None`: it could not be read, and the entries are only listed).
pub fn dump(
    kind: Kind,
    file: &str,
    bytes: &[u8],
    log: Option<&[u8]>,
    options: &Options,
) -> FileDump {
    let name = std::path::Path::new(file)
        .file_name()
        .map_or(file.into(), |name| name.to_string_lossy());
    match kind {
        Kind::Log { base_offset } => log::dump_log(&name, base_offset, bytes, options),
        Kind::Index { base_offset } => {
            index::dump_offset_index(file, base_offset, bytes, log, options)
        }
        Kind::TimeIndex { base_offset } => {
            index::dump_time_index(file, base_offset, bytes, log, options)
        }
        Kind::TxnIndex { base_offset } => txn_index::dump_txn_index(base_offset, bytes),
        Kind::Checkpoint(checkpoint) => checkpoint::dump_checkpoint(file, checkpoint, bytes),
    }
}

/// The findings of every file, printed after the last one as Kafka's tool does: index
/// mismatches, then time index errors, then non-consecutive offsets.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    files: Vec<(String, Vec<Finding>)>,
}

impl Summary {
    /// `path` as Kafka names the file in its summary: absolute.
    pub fn add(&mut self, path: String, findings: Vec<Finding>) {
        if !findings.is_empty() {
            self.files.push((path, findings));
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        self.section(
            &mut out,
            |path| format!("Mismatches in :{path}"),
            |f| match f {
                Finding::IndexMismatch {
                    index_offset,
                    log_offset,
                } => Some(format!(
                    "  Index offset: {index_offset}, log offset: {log_offset}"
                )),
                Finding::IndexPosition {
                    index_offset,
                    position,
                    why,
                } => Some(format!(
                    "  Index offset: {index_offset}, position: {position}: {why}"
                )),
                _ => None,
            },
        );
        self.section(
            &mut out,
            |path| format!("Found timestamp mismatch in :{path}"),
            |f| match f {
                Finding::TimestampMismatch {
                    index_timestamp,
                    log_timestamp,
                } => Some(format!(
                    "  Index timestamp: {index_timestamp}, log timestamp: {log_timestamp}"
                )),
                _ => None,
            },
        );
        self.section(
            &mut out,
            |path| format!("Found out of order timestamp in :{path}"),
            |f| match f {
                Finding::OutOfOrderTimestamp {
                    index_timestamp,
                    previous_timestamp,
                } => Some(format!(
                    "  Index timestamp: {index_timestamp}, Previously indexed timestamp: \
                     {previous_timestamp}"
                )),
                _ => None,
            },
        );
        self.section(
            &mut out,
            |_| "The following indexed offsets are not found in the log.".to_owned(),
            |f| match f {
                Finding::OffsetNotFound {
                    index_offset,
                    log_offset,
                } => Some(format!(
                    "Indexed offset: {index_offset}, found log offset: {log_offset}"
                )),
                _ => None,
            },
        );
        self.section(
            &mut out,
            |path| format!("Non-consecutive offsets in {path}"),
            |f| match f {
                Finding::NonConsecutive { first, second } => {
                    Some(format!("  {first} is followed by {second}"))
                }
                _ => None,
            },
        );
        out
    }

    /// For each file with findings that `line` shows, its `heading` and those lines.
    fn section(
        &self,
        out: &mut String,
        heading: impl Fn(&str) -> String,
        line: impl Fn(&Finding) -> Option<String>,
    ) {
        for (path, findings) in &self.files {
            let mut lines = findings.iter().filter_map(&line).peekable();
            if lines.peek().is_some() {
                let _ = writeln!(out, "{}", heading(path));
                for l in lines {
                    let _ = writeln!(out, "{l}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_by_name_as_kafka_finds_them() {
        assert_eq!(
            Kind::of("00000000000000000042.log"),
            Some(Kind::Log { base_offset: 42 })
        );
        assert_eq!(
            Kind::of("00000000000000000042.index"),
            Some(Kind::Index { base_offset: 42 })
        );
        assert_eq!(
            Kind::of("00000000000000000007.timeindex"),
            Some(Kind::TimeIndex { base_offset: 7 })
        );
        assert_eq!(
            Kind::of("00000000000000000009.txnindex"),
            Some(Kind::TxnIndex { base_offset: 9 })
        );
        assert_eq!(
            Kind::of("leader-epoch-checkpoint"),
            Some(Kind::Checkpoint(Checkpoint::LeaderEpoch))
        );
        assert_eq!(
            Kind::of("replication-offset-checkpoint"),
            Some(Kind::Checkpoint(Checkpoint::Replication))
        );
        for unknown in [
            "00000000000000000000.snapshot",
            "00000000000000000000.log.deleted",
            "damaged.log",
            "partition.metadata",
            ".kafka_cleanshutdown",
            "README",
            "",
        ] {
            assert_eq!(Kind::of(unknown), None, "{unknown}");
        }
        assert_eq!(
            log_file_name("00000000000000000042.timeindex"),
            "00000000000000000042.log"
        );
    }

    #[test]
    fn summary_lists_findings_in_kafkas_order_and_words() {
        let mut summary = Summary::default();
        summary.add("/d/0.log".into(), Vec::new());
        summary.add(
            "/d/0.timeindex".into(),
            vec![
                Finding::OffsetNotFound {
                    index_offset: 9,
                    log_offset: -1,
                },
                Finding::TimestampMismatch {
                    index_timestamp: 5,
                    log_timestamp: 6,
                },
                Finding::OutOfOrderTimestamp {
                    index_timestamp: 5,
                    previous_timestamp: 5,
                },
            ],
        );
        summary.add(
            "/d/0.index".into(),
            vec![
                Finding::IndexMismatch {
                    index_offset: 3,
                    log_offset: 2,
                },
                Finding::IndexPosition {
                    index_offset: 8,
                    position: 900,
                    why: "past the end of the log (800 bytes)".into(),
                },
            ],
        );
        summary.add(
            "/d/1.log".into(),
            vec![Finding::NonConsecutive {
                first: 4,
                second: 6,
            }],
        );
        assert_eq!(
            summary.render(),
            "Mismatches in :/d/0.index\n  Index offset: 3, log offset: 2\n  Index offset: 8, \
             position: 900: past the end of the log (800 bytes)\nFound timestamp mismatch in \
             :/d/0.timeindex\n  Index timestamp: 5, log timestamp: 6\nFound out of order \
             timestamp in :/d/0.timeindex\n  Index timestamp: 5, Previously indexed timestamp: \
             5\nThe following indexed offsets are not found in the log.\nIndexed offset: 9, \
             found log offset: -1\nNon-consecutive offsets in /d/1.log\n  4 is followed by 6\n"
        );
        assert_eq!(Summary::default().render(), "");
    }
}
