//! What a client knows of the cluster: each partition's leader and leader epoch, learned
//! from any broker's Metadata answer. A broker cut off from the controller serves stale
//! metadata, so, as Kafka clients do since KIP-320, an answer never replaces a partition's
//! state with one of an older leader epoch.

use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{ClusterMetadata, PartitionState, Request, Response};
use crate::types::{BrokerId, Epoch, HostName, TopicPartition};
use std::collections::BTreeMap;
use std::time::Duration;

/// Kafka's `socket.connection.setup.timeout.ms` default: how long a connect may take.
pub const CONNECTION_SETUP_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug, Default)]
pub struct MetadataCache {
    partitions: BTreeMap<TopicPartition, PartitionState>,
}

impl MetadataCache {
    /// Take in a broker's answer; returns whether any leader changed.
    pub fn update(&mut self, fresh: ClusterMetadata) -> bool {
        let mut changed = false;
        for (tp, state) in fresh.partitions {
            match self.partitions.get(&tp) {
                Some(known) if known.leader_epoch > state.leader_epoch => {}
                Some(known)
                    if known.leader == state.leader && known.leader_epoch == state.leader_epoch => {
                }
                _ => {
                    self.partitions.insert(tp, state);
                    changed = true;
                }
            }
        }
        changed
    }

    /// The partition's leader and its epoch, if it has one.
    pub fn leader(&self, tp: &TopicPartition) -> Option<(BrokerId, Epoch)> {
        let state = self.partitions.get(tp)?;
        Some((state.leader?, state.leader_epoch))
    }

    /// The partitions of `topic` (below `partitions`) that have a leader.
    pub fn available(&self, topic: &str, partitions: u32) -> Vec<u32> {
        (0..partitions)
            .filter(|&p| {
                self.partitions
                    .get(&TopicPartition::new(topic, p))
                    .is_some_and(|s| s.leader.is_some())
            })
            .collect()
    }
}

/// Ask the brokers, starting with `first` (1-based, wrapping), for metadata; the first
/// answer wins. `None` when no broker answered.
pub async fn fetch_metadata(
    brokers: u32,
    first: u32,
    timeout: Duration,
) -> Option<ClusterMetadata> {
    for i in 0..brokers {
        let broker = (first.saturating_sub(1) + i) % brokers + 1;
        match call(HostName::Broker(broker), &Request::Metadata, timeout).await {
            Some(Response::Metadata(metadata)) => return Some(metadata),
            Some(other) => tracing::debug!(broker, ?other, "unexpected answer to Metadata"),
            None => {}
        }
    }
    None
}

/// One request on a fresh connection, with the connect bounded by
/// [`CONNECTION_SETUP_TIMEOUT`] and the call by `timeout`. `None` on any network error.
pub async fn call(host: HostName, request: &Request, timeout: Duration) -> Option<Response> {
    let mut connection = Connection::connect(host, CONNECTION_SETUP_TIMEOUT.min(timeout))
        .await
        .ok()?;
    connection.call(request, timeout).await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::types::PartitionEpoch;

    fn state(leader: Option<u32>, epoch: i32) -> PartitionState {
        PartitionState {
            replicas: vec![BrokerId(1), BrokerId(2)],
            leader: leader.map(BrokerId),
            leader_epoch: Epoch(epoch),
            partition_epoch: PartitionEpoch(0),
            isr: vec![BrokerId(1)],
            elr: Vec::new(),
            last_known_leader: None,
        }
    }

    fn metadata(entries: &[(u32, Option<u32>, i32)]) -> ClusterMetadata {
        ClusterMetadata {
            version: 1,
            brokers: BTreeMap::new(),
            partitions: entries
                .iter()
                .map(|&(p, leader, epoch)| (TopicPartition::new("t", p), state(leader, epoch)))
                .collect(),
        }
    }

    #[test]
    fn leaders_and_available_partitions() {
        let mut cache = MetadataCache::default();
        assert!(cache.update(metadata(&[(0, Some(1), 3), (1, None, 2)])));
        assert_eq!(
            cache.leader(&TopicPartition::new("t", 0)),
            Some((BrokerId(1), Epoch(3)))
        );
        assert_eq!(cache.leader(&TopicPartition::new("t", 1)), None);
        assert_eq!(cache.available("t", 3), vec![0]);
    }

    /// KIP-320: a stale broker's answer must not move a client back to a deposed leader.
    #[test]
    fn an_older_leader_epoch_never_replaces_a_newer_one() {
        let mut cache = MetadataCache::default();
        cache.update(metadata(&[(0, Some(2), 5)]));
        assert!(!cache.update(metadata(&[(0, Some(1), 4)])));
        assert_eq!(
            cache.leader(&TopicPartition::new("t", 0)),
            Some((BrokerId(2), Epoch(5)))
        );
        assert!(cache.update(metadata(&[(0, Some(3), 6)])));
        assert_eq!(
            cache.leader(&TopicPartition::new("t", 0)),
            Some((BrokerId(3), Epoch(6)))
        );
    }

    #[test]
    fn an_unchanged_answer_reports_no_change() {
        let mut cache = MetadataCache::default();
        cache.update(metadata(&[(0, Some(2), 5)]));
        assert!(!cache.update(metadata(&[(0, Some(2), 5)])));
    }
}
