//! RocketMQ's facts, in RocketMQ's words: how a broker's store recovered at start (the
//! `abort` file, the start file, where the CommitLog ended), where its flushed position
//! stood, and its clean shutdowns. The checkers count them through [`Fact::tally`];
//! RocketMQ's teller tells them.

use super::Tally;
use crate::types::HostName;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "fact", rename_all = "snake_case")]
pub enum Fact {
    /// A broker's store opened: recovered normally (no `abort` file) or abnormally,
    /// scanning the CommitLog from `start_file` to its `end`, with `dispatched` records
    /// indexed again and `undispatched` whole records that no ConsumeQueue holds.
    Recovered {
        broker: HostName,
        normal: bool,
        start_file: u64,
        end: u64,
        dispatched: u64,
        undispatched: u64,
        /// Where the ConsumeQueues were cut back to, if they reached past the end.
        queues_truncated: Option<u64>,
    },
    /// A broker loaded its consumer groups' offsets at start from `source`
    /// (`consumerOffset.json`, its `.bak`, or nothing), holding `queues` queues' offsets.
    OffsetsLoaded {
        broker: HostName,
        source: String,
        queues: u64,
    },
    /// A broker's store did not open, and the broker did not start.
    NotOpened { broker: HostName, reason: String },
    /// Where a broker's CommitLog stood at a pass of its flush service, when it had moved
    /// since the last: its end (`getMaxOffset`) and its flushed position (`flushedWhere`).
    CommitLog {
        broker: HostName,
        max_offset: u64,
        flushed_where: u64,
    },
    /// A broker stopped cleanly; `abort_deleted`: its store was writable and dispatch had
    /// caught up, so the next start is a normal one.
    ShutDown {
        broker: HostName,
        abort_deleted: bool,
    },
}

impl Fact {
    /// What the fact adds to the counts every system shares.
    pub fn tally(&self) -> Option<Tally> {
        match self {
            Fact::Recovered { normal: false, .. } => Some(Tally::Recovery),
            Fact::Recovered { .. }
            | Fact::OffsetsLoaded { .. }
            | Fact::NotOpened { .. }
            | Fact::CommitLog { .. }
            | Fact::ShutDown { .. } => None,
        }
    }
}
