//! Kafka's own words, as newtypes: the ones no other system shares (an epoch per
//! partition's metadata, a broker process's incarnation, a producer id, the end of a
//! leader epoch). The words every system shares are in `crate::types`.

use crate::types::{BrokerId, Epoch, Offset};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A partition epoch: bumped by every change to a partition's leader or ISR (KIP-497), so
/// an AlterPartition based on an older ISR is recognised as stale. -1 before any metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PartitionEpoch(pub i32);

/// A broker process's incarnation: new at every start, so the controller tells a restarted
/// broker from a late message of its previous process (KRaft's broker epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Incarnation(pub u64);

/// The internal-topic partition a coordinator key lives on, as both of Kafka's
/// coordinators compute it (`partitionFor`): `Utils.abs(key.hashCode) % partitions`, with
/// Java's `String.hashCode` and `Utils.abs(Integer.MIN_VALUE) = 0`.
pub fn coordinator_partition(key: &str, partitions: u32) -> u32 {
    let hash = crate::types::java_string_hash(key);
    let abs = if hash == i32::MIN {
        0
    } else {
        hash.unsigned_abs()
    };
    abs % partitions.max(1)
}

/// A list of brokers as Kafka's tools print it: `[1,2,3]`.
pub struct Brokers<'a>(pub &'a [BrokerId]);

impl std::fmt::Display for Brokers<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, broker) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}", broker.0)?;
        }
        f.write_str("]")
    }
}

/// An idempotent producer's id, assigned by InitProducerId, unique in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ProducerId(pub i64);

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

/// Where a leader epoch ends in a log: the first offset of the next epoch, or the LEO for
/// the latest one (OffsetsForLeaderEpoch's answer, and what a diverging fetch carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EpochEndOffset {
    pub epoch: Epoch,
    pub end_offset: Offset,
}
