//! Kafka's vocabulary as newtypes, so that an offset is never confused with an epoch
//! or a broker id (TigerBeetle-style: units in the type, not in a comment).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

/// A position in a partition's log. Kafka offsets are signed 64-bit; -1 means "none".
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct Offset(pub i64);

/// A leader epoch: bumped by every leader election (KIP-101).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
pub struct Epoch(pub i32);

/// A partition epoch: bumped by every change to a partition's leader or ISR (KIP-497), so
/// an AlterPartition based on an older ISR is recognised as stale. -1 before any metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionEpoch(pub i32);

/// A broker process's incarnation: new at every start, so the controller tells a restarted
/// broker from a late message of its previous process (KRaft's broker epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Incarnation(pub u64);

/// A broker's id; host `broker-N` has id N.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BrokerId(pub u32);

/// An idempotent producer's id, assigned by InitProducerId, unique in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProducerId(pub i64);

impl Offset {
    pub const NONE: Offset = Offset(-1);
    pub fn next(self) -> Offset {
        Offset(self.0 + 1)
    }
}

impl Epoch {
    pub const NONE: Epoch = Epoch(-1);
}

impl PartitionEpoch {
    pub const NONE: PartitionEpoch = PartitionEpoch(-1);
    pub fn next(self) -> PartitionEpoch {
        PartitionEpoch(self.0 + 1)
    }
}

impl Incarnation {
    pub fn next(self) -> Incarnation {
        Incarnation(self.0 + 1)
    }
}

impl ProducerId {
    /// Kafka's "no producer id" for non-idempotent batches.
    pub const NONE: ProducerId = ProducerId(-1);
}

/// A topic partition, written `topic/partition` in scenario files and reports. The name is
/// shared (`Arc<str>`): a partition is named in every request, record and history event,
/// and a clone is then a reference count, not an allocation.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TopicPartition {
    pub topic: Arc<str>,
    pub partition: u32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<Arc<str>>, partition: u32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The log directory name Kafka uses: `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

impl fmt::Display for Offset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for PartitionEpoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for Incarnation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Display for BrokerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "broker-{}", self.0)
    }
}

/// A host of the simulated world. The names are the scenario file's target names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum HostName {
    Controller,
    Broker(u32),
    Producer(u32),
    Consumer(u32),
    /// The client that performs the final read after the heal phase.
    Reader,
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostName::Controller => write!(f, "controller"),
            HostName::Broker(n) => write!(f, "broker-{n}"),
            HostName::Producer(n) => write!(f, "producer-{n}"),
            HostName::Consumer(n) => write!(f, "consumer-{n}"),
            HostName::Reader => write!(f, "reader"),
        }
    }
}

/// Where a leader epoch ends in a log: the first offset of the next epoch, or the LEO for
/// the latest one (OffsetsForLeaderEpoch's answer, and what a diverging fetch carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochEndOffset {
    pub epoch: Epoch,
    pub end_offset: Offset,
}
