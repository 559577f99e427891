//! hightide's addition: the checkpoint files, which Kafka's `DumpLogSegments` does not
//! read (it takes a file's kind from the suffix after its last dot, and these names have
//! none). A heading with the version and the number of entries, then one line per entry
//! with Kafka's field names; a file the broker could not load, or a leader epoch entry it
//! would drop on load (out of order), is reported.

use std::fmt::Write;

use super::FileDump;
use crate::kafka::storage::checkpoint::{
    offsets_from_text, CheckpointError, LEADER_EPOCH, LOG_START, RECOVERY_POINT, REPLICATION,
};
use crate::kafka::storage::epoch_cache::{parse_checkpoint, LeaderEpochCache};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checkpoint {
    /// A partition's `leader-epoch-checkpoint`: `epoch startOffset` entries.
    LeaderEpoch,
    /// The log directory's offset checkpoints: `topic partition offset` entries.
    RecoveryPoint,
    /// The high watermarks.
    Replication,
    LogStart,
}

impl Checkpoint {
    pub fn of(file_name: &str) -> Option<Checkpoint> {
        match file_name {
            LEADER_EPOCH => Some(Checkpoint::LeaderEpoch),
            RECOVERY_POINT => Some(Checkpoint::RecoveryPoint),
            REPLICATION => Some(Checkpoint::Replication),
            LOG_START => Some(Checkpoint::LogStart),
            _ => None,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Checkpoint::LeaderEpoch => "Leader epoch checkpoint",
            Checkpoint::RecoveryPoint => "Recovery point offset checkpoint",
            Checkpoint::Replication => "Replication offset checkpoint (high watermarks)",
            Checkpoint::LogStart => "Log start offset checkpoint",
        }
    }
}

pub fn dump_checkpoint(file: &str, checkpoint: Checkpoint, bytes: &[u8]) -> FileDump {
    let mut dump = FileDump::default();
    if let Err(error) = lines(&mut dump, checkpoint, bytes) {
        let _ = writeln!(dump.err, "{file}: {error}");
        dump.damaged = true;
    }
    dump
}

fn lines(dump: &mut FileDump, checkpoint: Checkpoint, bytes: &[u8]) -> Result<(), CheckpointError> {
    let text = std::str::from_utf8(bytes).map_err(|_| CheckpointError::NotUtf8)?;
    let heading = |count: usize| {
        let entries = if count == 1 { "entry" } else { "entries" };
        format!("{}, version 0, {count} {entries}\n", checkpoint.title())
    };
    if checkpoint == Checkpoint::LeaderEpoch {
        let entries = parse_checkpoint(text)?;
        dump.out.push_str(&heading(entries.len()));
        let mut cache = LeaderEpochCache::default();
        for e in entries {
            let _ = write!(
                dump.out,
                "epoch: {} startOffset: {}",
                e.epoch.0, e.start_offset.0
            );
            if !cache.assign(e.epoch, e.start_offset) {
                dump.out
                    .push_str(" (out of order: dropped when the broker loads the file)");
                dump.damaged = true;
            }
            dump.out.push('\n');
        }
    } else {
        let entries = offsets_from_text(text)?;
        dump.out.push_str(&heading(entries.len()));
        for (tp, offset) in entries {
            let _ = writeln!(
                dump.out,
                "topic: {} partition: {} offset: {}",
                tp.topic, tp.partition, offset.0
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_epoch_checkpoint_lines() {
        let dump = dump_checkpoint(
            "p/leader-epoch-checkpoint",
            Checkpoint::LeaderEpoch,
            b"0\n2\n0 0\n3 17\n",
        );
        assert_eq!(
            dump.out,
            "Leader epoch checkpoint, version 0, 2 entries\nepoch: 0 startOffset: 0\nepoch: 3 \
             startOffset: 17\n"
        );
        assert!(dump.err.is_empty() && !dump.damaged);
    }

    #[test]
    fn an_entry_the_broker_would_drop_is_marked() {
        let dump = dump_checkpoint("x", Checkpoint::LeaderEpoch, b"0\n3\n0 0\n2 10\n1 12\n");
        assert_eq!(
            dump.out.lines().nth(3),
            Some("epoch: 1 startOffset: 12 (out of order: dropped when the broker loads the file)")
        );
        assert!(dump.damaged);
    }

    #[test]
    fn offset_checkpoint_lines() {
        let text = b"0\n2\norders 0 42\naudit-log 3 7\n";
        let dump = dump_checkpoint(
            "d/replication-offset-checkpoint",
            Checkpoint::Replication,
            text,
        );
        assert_eq!(
            dump.out,
            "Replication offset checkpoint (high watermarks), version 0, 2 entries\ntopic: \
             audit-log partition: 3 offset: 7\ntopic: orders partition: 0 offset: 42\n"
        );
        let one = dump_checkpoint("r", Checkpoint::RecoveryPoint, b"0\n1\norders 1 5\n");
        assert_eq!(
            one.out,
            "Recovery point offset checkpoint, version 0, 1 entry\ntopic: orders partition: 1 \
             offset: 5\n"
        );
    }

    #[test]
    fn a_file_the_broker_cannot_load_is_an_error() {
        let torn = dump_checkpoint(
            "d/log-start-offset-checkpoint",
            Checkpoint::LogStart,
            b"0\n2\norders 0 5\n",
        );
        assert_eq!(torn.out, "");
        assert_eq!(
            torn.err,
            "d/log-start-offset-checkpoint: expected 2 entries, found 1\n"
        );
        assert!(torn.damaged);
        let binary = dump_checkpoint("e", Checkpoint::LeaderEpoch, &[0xff, 0]);
        assert_eq!(binary.err, "e: checkpoint is not UTF-8\n");
    }
}
