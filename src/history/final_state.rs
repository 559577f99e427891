//! What the checkers read besides the history: the final read and each replica's log,
//! taken after the heal phase, and the facts the cluster recorded. Nothing here comes from
//! a broker's in-memory state.

use super::facts::FactLog;
use super::MessageId;
use crate::types::{BrokerId, Epoch, Offset, TopicPartition};
use serde::{Deserialize, Serialize};

/// One record as read back, reduced to what the checkers compare: its offset, the message
/// id its value starts with, and the CRC-32C of the whole value, so that two copies that
/// differ anywhere (a flipped bit included) compare unequal. Only a value without an id is
/// kept whole, for its example. Every value of every replica, kept whole, took more
/// memory than the rest of a run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadRecord {
    pub offset: Offset,
    pub id: Option<MessageId>,
    pub crc: u32,
    /// The value, when it carries no id. Rare, so behind a thin pointer: eight bytes per
    /// record instead of sixteen, and a run holds four records per message.
    unparsed: Option<Box<Box<[u8]>>>,
}

impl ReadRecord {
    pub fn new(offset: Offset, value: &[u8]) -> ReadRecord {
        let id = MessageId::parse_value(value);
        ReadRecord {
            offset,
            id,
            crc: crc32c::crc32c(value),
            unparsed: id.is_none().then(|| Box::new(value.into())),
        }
    }

    /// The value, when it carries no id.
    pub fn unparsed(&self) -> Option<&[u8]> {
        self.unparsed.as_deref().map(|value| &**value)
    }

    /// The message this record is a copy of: the id its value starts with, if the value
    /// is exactly the one that id's producer sent (`value_bytes` long, see
    /// [`MessageId::value`]). A bit flipped anywhere in it, the id included, makes it no
    /// copy at all, rather than a copy of whatever id it now spells.
    pub fn copy_of(&self, value_bytes: usize) -> Option<MessageId> {
        self.id
            .filter(|id| crc32c::crc32c(&id.value(value_bytes)) == self.crc)
    }
}

/// A replica's log as it stands on its broker's disk after healing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaLog {
    pub broker: BrokerId,
    /// In the ISR the controller holds at the end.
    pub in_isr: bool,
    /// Its broker's process is running at the end (not killed, not without power).
    pub running: bool,
    pub log_start_offset: Offset,
    pub log_end_offset: Offset,
    /// Every record of the log, in offset order.
    pub records: Vec<ReadRecord>,
    /// The leader epoch its batches carry, as (epoch, first offset) per run of batches of
    /// one epoch: the log's lineage, from which the explanations tell who wrote a record.
    #[serde(default)]
    pub epochs: Vec<(Epoch, Offset)>,
}

impl ReplicaLog {
    /// The leader epoch of the batch holding `offset`, if the log holds it.
    pub fn epoch_at(&self, offset: Offset) -> Option<Epoch> {
        if offset < self.log_start_offset || offset >= self.log_end_offset {
            return None;
        }
        let i = self.epochs.partition_point(|&(_, start)| start <= offset);
        i.checked_sub(1).map(|i| self.epochs[i].0)
    }
}

/// One partition after the heal phase.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionFinal {
    pub tp: TopicPartition,
    /// `None`: offline at the end of the heal phase.
    pub leader: Option<BrokerId>,
    pub high_watermark: Offset,
    pub log_start_offset: Offset,
    /// In a run with transactions, the LSO the read_committed final read stopped at: below
    /// the HW, a transaction was still open when the heal phase ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stable_offset: Option<Offset>,
    /// The final read: a consumer's read from the log start offset up to the HW (the LSO,
    /// without aborted transactions, in a run with transactions).
    pub read: Vec<ReadRecord>,
    /// Whether the final read got all of it; if not, what it lacks is unknown, not absent.
    /// A read_committed read that stopped at an LSO below the HW did not.
    #[serde(default = "read_whole")]
    pub complete: bool,
    /// With the LSO below the HW at the end: the records from the LSO to the HW, read a
    /// second time as a read_uncommitted consumer reads them (aborted ones included), once
    /// the read_committed read was whole. What the LSO hides: the checkers judge `lost`
    /// there by it, and name the transaction holding the LSO. `None`: no such read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beyond_lso: Option<Vec<ReadRecord>>,
    pub replicas: Vec<ReplicaLog>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalState {
    pub partitions: Vec<PartitionFinal>,
    /// The stream processors' output topic (`[workload] output`), read as the others:
    /// its records carry their inputs' ids, so it is checked against the inputs
    /// (`eos_duplicates`, `eos_missing`), not as sends.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outputs: Vec<PartitionFinal>,
    /// What the cluster did along the way, as its programs recorded it.
    #[serde(default)]
    pub facts: FactLog,
    /// The consumer group of the workload, if it has one.
    #[serde(default)]
    pub group: Option<GroupFinal>,
}

/// How far the workload's consumer group got: consumers go on consuming after the heal
/// phase until every partition's position reaches its HW, up to a bound.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupFinal {
    /// `group.id`.
    pub name: String,
    /// Every partition was owned, and its owner's position had reached the HW its last
    /// fetch saw, before the bound ran out.
    pub caught_up: bool,
}

impl FinalState {
    /// The partitions of every topic, the processors' output topic included.
    pub fn every_partition(&self) -> impl Iterator<Item = &PartitionFinal> {
        self.partitions.iter().chain(&self.outputs)
    }
}

fn read_whole() -> bool {
    true
}
