//! The controller's durable metadata: one snapshot file on the controller's own disk.
//!
//! KRaft keeps a metadata log plus snapshots; one atomically replaced snapshot gives the
//! same guarantee at this scale: what the controller told anyone survives a crash or a
//! power loss. A save writes a temporary file, fsyncs it, renames it over the snapshot
//! and fsyncs the directory, so a crash leaves either the old or the new snapshot.
//!
//! The file is text, for people reading a `--dump-disks` copy: a `crc32c=<hex>` line
//! (CRC-32C of the rest, so a flipped bit is detected rather than believed), then JSON.

use crate::kafka::controller::state::Snapshot;
use crate::kafka::protocol::messages::{BrokerRegistration, ClusterMetadata, PartitionState};
use crate::kafka::types::ProducerId;
use crate::os::disk::{Disk, DiskError};
use crate::types::TopicPartition;
use serde::{Deserialize, Serialize};

/// The controller's directory, named after KRaft's metadata topic.
pub const METADATA_DIR: &str = "__cluster_metadata";
/// The current snapshot.
pub const SNAPSHOT: &str = "__cluster_metadata/snapshot.json";
/// Written in full and fsynced before it replaces `SNAPSHOT`.
const SNAPSHOT_TEMP: &str = "__cluster_metadata/snapshot.json.tmp";
const CRC_PREFIX: &str = "crc32c=";

#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum StoreError {
    #[error(transparent)]
    Disk(#[from] DiskError),
    #[error("corrupt metadata snapshot {SNAPSHOT}: {0}")]
    Corrupt(String),
}

/// The file's JSON shape: maps keyed by structs become lists.
#[derive(Serialize, Deserialize)]
struct StoredSnapshot {
    version: u64,
    next_producer_id: ProducerId,
    brokers: Vec<BrokerRegistration>,
    partitions: Vec<StoredPartition>,
}

#[derive(Serialize, Deserialize)]
struct StoredPartition {
    #[serde(flatten)]
    tp: TopicPartition,
    #[serde(flatten)]
    state: PartitionState,
}

/// Write `snapshot` durably (temp, fsync, rename, fsync dir).
pub async fn save(disk: &Disk, snapshot: &Snapshot) -> Result<(), DiskError> {
    let text = encode(snapshot);
    let first = !disk.exists(SNAPSHOT);
    disk.write_gate().await;
    disk.create(SNAPSHOT_TEMP)?;
    disk.write(SNAPSHOT_TEMP, 0, text.as_bytes())?;
    disk.fsync(SNAPSHOT_TEMP).await?;
    disk.rename(SNAPSHOT_TEMP, SNAPSHOT)?;
    disk.fsync_dir(METADATA_DIR).await?;
    if first {
        // The directory itself is new: make its entry in the root durable too.
        disk.fsync_dir("").await?;
    }
    Ok(())
}

/// The last saved snapshot, or `None` on a fresh disk. A leftover temporary file (a
/// crash mid-save) is ignored: the rename never happened.
pub fn load(disk: &Disk) -> Result<Option<Snapshot>, StoreError> {
    if !disk.exists(SNAPSHOT) {
        return Ok(None);
    }
    let bytes = disk.read_all(SNAPSHOT)?;
    decode(&bytes).map(Some)
}

pub fn encode(snapshot: &Snapshot) -> String {
    let stored = StoredSnapshot {
        version: snapshot.metadata.version,
        next_producer_id: snapshot.next_producer_id,
        brokers: snapshot.metadata.brokers.values().cloned().collect(),
        partitions: snapshot
            .metadata
            .partitions
            .iter()
            .map(|(tp, state)| StoredPartition {
                tp: tp.clone(),
                state: state.clone(),
            })
            .collect(),
    };
    // Serializing plain structs with string keys cannot fail.
    let body = serde_json::to_string_pretty(&stored).unwrap_or_default();
    format!(
        "{CRC_PREFIX}{:08x}\n{body}\n",
        crc32c::crc32c(body.as_bytes())
    )
}

pub fn decode(bytes: &[u8]) -> Result<Snapshot, StoreError> {
    let text = std::str::from_utf8(bytes).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    let (header, rest) = text
        .split_once('\n')
        .ok_or_else(|| StoreError::Corrupt("no header line".into()))?;
    let expected = header
        .strip_prefix(CRC_PREFIX)
        .and_then(|hex| u32::from_str_radix(hex, 16).ok())
        .ok_or_else(|| StoreError::Corrupt(format!("bad header {header:?}")))?;
    let body = rest.strip_suffix('\n').unwrap_or(rest);
    let actual = crc32c::crc32c(body.as_bytes());
    if actual != expected {
        return Err(StoreError::Corrupt(format!(
            "CRC-32C {actual:08x}, header says {expected:08x}"
        )));
    }
    let stored: StoredSnapshot =
        serde_json::from_str(body).map_err(|e| StoreError::Corrupt(e.to_string()))?;
    Ok(Snapshot {
        metadata: ClusterMetadata {
            version: stored.version,
            brokers: stored.brokers.into_iter().map(|b| (b.id, b)).collect(),
            partitions: stored
                .partitions
                .into_iter()
                .map(|p| (p.tp, p.state))
                .collect(),
        },
        next_producer_id: stored.next_producer_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::types::{Incarnation, PartitionEpoch};
    use crate::types::{BrokerId, Epoch};

    fn snapshot() -> Snapshot {
        let mut metadata = ClusterMetadata {
            version: 9,
            ..ClusterMetadata::default()
        };
        metadata.brokers.insert(
            BrokerId(2),
            BrokerRegistration {
                id: BrokerId(2),
                incarnation: Incarnation(3),
                fenced: true,
            },
        );
        metadata.partitions.insert(
            TopicPartition::new("orders", 1),
            PartitionState {
                replicas: vec![BrokerId(2), BrokerId(1)],
                leader: None,
                leader_epoch: Epoch(4),
                partition_epoch: PartitionEpoch(6),
                isr: vec![BrokerId(2)],
                elr: Vec::new(),
                last_known_leader: None,
            },
        );
        Snapshot {
            metadata,
            next_producer_id: ProducerId(17),
        }
    }

    #[test]
    fn a_snapshot_survives_encoding() {
        let original = snapshot();
        assert_eq!(decode(encode(&original).as_bytes()), Ok(original));
    }

    #[test]
    fn a_flipped_bit_is_detected_not_believed() {
        let text = encode(&snapshot());
        // Turn the producer id counter 17 into 57: valid JSON, wrong content.
        let flipped = text.replacen("17", "57", 1);
        assert_ne!(flipped, text);
        assert!(matches!(
            decode(flipped.as_bytes()),
            Err(StoreError::Corrupt(_))
        ));
        assert!(matches!(decode(b"garbage"), Err(StoreError::Corrupt(_))));
    }
}
