//! Kafka's text checkpoint files, in Kafka's format (`CheckpointFile`): a version line
//! `0`, a line with the number of entries, then one entry per line, fields separated by
//! spaces. Offset checkpoints hold `topic partition offset`; the per-partition
//! `leader-epoch-checkpoint` holds `epoch startOffset` (see `epoch_cache`).
//!
//! A checkpoint is replaced atomically and durably — write `path.tmp`, fsync it, rename it
//! over `path`, fsync the directory — so that a power loss leaves either the old or the new
//! file, never a torn one; a file that is torn anyway (a disk fault) is a `CheckpointError`,
//! which takes the broker's log dir offline, as Kafka's `CheckpointFileWithFailureHandler`.

use std::collections::BTreeMap;

use crate::os::disk::{Disk, DiskError};
use crate::types::{Offset, TopicPartition};

pub const RECOVERY_POINT: &str = "recovery-point-offset-checkpoint";
/// The high watermarks.
pub const REPLICATION: &str = "replication-offset-checkpoint";
pub const LOG_START: &str = "log-start-offset-checkpoint";
/// One per partition directory.
pub const LEADER_EPOCH: &str = "leader-epoch-checkpoint";
pub const CLEAN_SHUTDOWN: &str = ".kafka_cleanshutdown";

const VERSION: &str = "0";

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error("checkpoint is not UTF-8")]
    NotUtf8,
    #[error("unrecognized checkpoint version {0:?}")]
    Version(String),
    #[error("line {line}: malformed {text:?}")]
    Malformed { line: usize, text: String },
    #[error("expected {expected} entries, found {found}")]
    Count { expected: usize, found: usize },
}

/// Write temp, fsync, rename and, with `fsync_dir`, fsync the directory: atomic and
/// durable, as Kafka's `CheckpointFile.write` (from 3.0 `Utils.atomicMoveWithFallback`
/// flushes the parent directory, KAFKA-3968; before, the rename was durable only once the
/// file system committed it).
pub async fn write_atomic(
    disk: &Disk,
    path: &str,
    text: &str,
    fsync_dir: bool,
) -> Result<(), DiskError> {
    let tmp = format!("{path}.tmp");
    disk.write_gate().await;
    disk.create(&tmp)?;
    disk.write(&tmp, 0, text.as_bytes())?;
    disk.fsync(&tmp).await?;
    disk.rename(&tmp, path)?;
    if fsync_dir {
        disk.fsync_dir(parent_dir(path)).await?;
    }
    Ok(())
}

/// The directory part of a `/`-separated path; `""` is the root.
fn parent_dir(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

/// The checkpoint text for `entries`, each already formatted as one line's fields.
pub(crate) fn format_entries<I>(count: usize, lines: I) -> String
where
    I: IntoIterator<Item = String>,
{
    let mut text = format!("{VERSION}\n{count}\n");
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    text
}

/// Parse a checkpoint whose entries have `fields` space-separated fields, each converted
/// by `entry` (`None` = malformed). The number of entries must match the count line.
pub(crate) fn parse_entries<T>(
    text: &str,
    fields: usize,
    entry: impl Fn(&[&str]) -> Option<T>,
) -> Result<Vec<T>, CheckpointError> {
    let mut lines = text.lines().enumerate();
    // Kafka's `CheckpointReadBuffer`: a file that ends before its count line is empty.
    let Some((_, version)) = lines.next() else {
        return Ok(Vec::new());
    };
    if version.trim() != VERSION {
        return Err(CheckpointError::Version(version.to_owned()));
    }
    let Some((count_line, count_text)) = lines.next() else {
        return Ok(Vec::new());
    };
    let expected: usize = count_text
        .trim()
        .parse()
        .map_err(|_| CheckpointError::Malformed {
            line: count_line + 1,
            text: count_text.to_owned(),
        })?;
    let mut out = Vec::with_capacity(expected.min(text.len() / (2 * fields)));
    let mut parts = Vec::with_capacity(fields);
    for (i, line) in lines {
        parts.clear();
        parts.extend(line.split_whitespace());
        let parsed = if parts.len() == fields {
            entry(&parts)
        } else {
            None
        };
        match parsed {
            Some(e) => out.push(e),
            None => {
                return Err(CheckpointError::Malformed {
                    line: i + 1,
                    text: line.to_owned(),
                })
            }
        }
    }
    if out.len() != expected {
        return Err(CheckpointError::Count {
            expected,
            found: out.len(),
        });
    }
    Ok(out)
}

pub fn offsets_to_text(entries: &BTreeMap<TopicPartition, Offset>) -> String {
    format_entries(
        entries.len(),
        entries
            .iter()
            .map(|(tp, offset)| format!("{} {} {}", tp.topic, tp.partition, offset.0)),
    )
}

pub fn offsets_from_text(text: &str) -> Result<BTreeMap<TopicPartition, Offset>, CheckpointError> {
    let entries = parse_entries(text, 3, |f| {
        Some((
            TopicPartition::new(f[0], f[1].parse().ok()?),
            Offset(f[2].parse().ok()?),
        ))
    })?;
    Ok(entries.into_iter().collect())
}

/// The text of a checkpoint file; `None` if it does not exist.
pub fn read_text(disk: &Disk, path: &str) -> Result<Option<String>, CheckpointError> {
    if !disk.exists(path) {
        return Ok(None);
    }
    let bytes = disk.read_all(path)?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| CheckpointError::NotUtf8)
}

/// A missing file is empty, as for Kafka on a fresh log directory.
pub fn read_offsets(
    disk: &Disk,
    path: &str,
) -> Result<BTreeMap<TopicPartition, Offset>, CheckpointError> {
    match read_text(disk, path)? {
        Some(text) => offsets_from_text(&text),
        None => Ok(BTreeMap::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::os::disk::{DiskConfig, PowerLossModel};
    use proptest::prelude::*;

    fn sample() -> BTreeMap<TopicPartition, Offset> {
        BTreeMap::from([
            (TopicPartition::new("orders", 0), Offset(42)),
            (TopicPartition::new("orders", 1), Offset(0)),
            (TopicPartition::new("audit-log", 3), Offset(7)),
        ])
    }

    #[test]
    fn offsets_text_is_kafkas_format() {
        assert_eq!(
            offsets_to_text(&sample()),
            "0\n3\naudit-log 3 7\norders 0 42\norders 1 0\n"
        );
        assert_eq!(offsets_to_text(&BTreeMap::new()), "0\n0\n");
        assert_eq!(offsets_from_text("0\n0\n"), Ok(BTreeMap::new()));
    }

    #[test]
    fn parse_errors_are_values() {
        assert_eq!(
            offsets_from_text("1\n0\n"),
            Err(CheckpointError::Version("1".into()))
        );
        // Kafka reads a file that ends before its count line as empty.
        assert_eq!(offsets_from_text(""), Ok(BTreeMap::new()));
        assert_eq!(offsets_from_text("0\n"), Ok(BTreeMap::new()));
        assert_eq!(
            offsets_from_text("\n"),
            Err(CheckpointError::Version("".into()))
        );
        assert!(matches!(
            offsets_from_text("0\nx\n"),
            Err(CheckpointError::Malformed { line: 2, .. })
        ));
        assert!(matches!(
            offsets_from_text("0\n1\norders 0\n"),
            Err(CheckpointError::Malformed { line: 3, .. })
        ));
        assert!(matches!(
            offsets_from_text("0\n1\norders -1 5\n"),
            Err(CheckpointError::Malformed { line: 3, .. })
        ));
        assert_eq!(
            offsets_from_text("0\n2\norders 0 5\n"),
            Err(CheckpointError::Count {
                expected: 2,
                found: 1
            })
        );
        // A torn write: the count promises more than the file holds.
        let text = offsets_to_text(&sample());
        assert!(offsets_from_text(&text[..text.len() - 5]).is_err());
    }

    proptest! {
        #[test]
        fn offsets_round_trip(entries in proptest::collection::btree_map(
            ("[a-z][a-z0-9._-]{0,10}", 0u32..100).prop_map(|(t, p)| TopicPartition::new(t, p)),
            any::<i64>().prop_map(Offset),
            0..10,
        )) {
            prop_assert_eq!(offsets_from_text(&offsets_to_text(&entries)), Ok(entries));
        }

        #[test]
        fn garbage_never_panics(text in "[0-9a-z \n-]{0,60}") {
            let _ = offsets_from_text(&text);
        }
    }

    fn run<F: std::future::Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("a runtime for the test")
            .block_on(f)
    }

    /// A disk on which a power loss keeps nothing that was not fsynced.
    fn unflushed_lost_at_power_loss(seed: u64) -> Disk {
        let config = DiskConfig {
            power_loss: PowerLossModel::DropUnflushed,
            ..DiskConfig::default()
        };
        Disk::new(config, seed)
    }

    #[test]
    fn write_atomic_replaces_the_file_durably() {
        let disk = Disk::new(DiskConfig::default(), 1);
        let path = format!("data/{REPLICATION}");
        run(write_atomic(&disk, &path, "old", true)).unwrap();
        run(write_atomic(
            &disk,
            &path,
            &offsets_to_text(&sample()),
            true,
        ))
        .unwrap();
        assert!(!disk.exists(&format!("{path}.tmp")));
        assert_eq!(read_offsets(&disk, &path), Ok(sample()));
        disk.power_loss();
        assert_eq!(read_offsets(&disk, &path), Ok(sample()));
    }

    /// Without the directory fsync a power loss could undo the rename; without the file
    /// fsync it could leave the new name pointing at an empty file.
    #[test]
    fn power_loss_after_a_plain_write_loses_it_but_not_after_write_atomic() {
        let disk = unflushed_lost_at_power_loss(2);
        disk.write(RECOVERY_POINT, 0, offsets_to_text(&sample()).as_bytes())
            .unwrap();
        disk.power_loss();
        assert_ne!(read_offsets(&disk, RECOVERY_POINT), Ok(sample()));
        run(write_atomic(
            &disk,
            RECOVERY_POINT,
            &offsets_to_text(&sample()),
            true,
        ))
        .unwrap();
        disk.power_loss();
        assert_eq!(read_offsets(&disk, RECOVERY_POINT), Ok(sample()));
    }

    /// Before 3.0 Kafka did not fsync the directory: where nothing commits the rename, a
    /// power loss brings back the old checkpoint.
    #[test]
    fn without_the_directory_fsync_a_power_loss_undoes_the_rename() {
        let disk = unflushed_lost_at_power_loss(4);
        let empty = offsets_to_text(&BTreeMap::new());
        run(write_atomic(&disk, RECOVERY_POINT, &empty, true)).unwrap();
        let text = offsets_to_text(&sample());
        run(write_atomic(&disk, RECOVERY_POINT, &text, false)).unwrap();
        assert_eq!(read_offsets(&disk, RECOVERY_POINT), Ok(sample()));
        disk.power_loss();
        assert_eq!(read_offsets(&disk, RECOVERY_POINT), Ok(BTreeMap::new()));
    }

    #[test]
    fn missing_file_is_empty_and_binary_is_an_error() {
        let disk = Disk::new(DiskConfig::default(), 3);
        assert_eq!(read_offsets(&disk, LOG_START), Ok(BTreeMap::new()));
        disk.write(LOG_START, 0, &[0xff, 0xfe]).unwrap();
        assert_eq!(
            read_offsets(&disk, LOG_START),
            Err(CheckpointError::NotUtf8)
        );
    }
}
