//! What happened to the cluster over time, as the harness saw it, for the timeline picture.

use super::world::HostChange;
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Epoch, HostName, TopicPartition};
use std::time::Duration;

#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub duration: Duration,
    pub heal: Duration,
    pub hosts: Vec<HostName>,
    pub host_changes: Vec<HostChange>,
    /// Each fault as it fired, described as in the scenario file.
    pub faults: Vec<(SimTime, String)>,
    /// Each change of a partition's leader, leader epoch or ISR, as the controller saw it.
    pub leadership: Vec<LeadershipChange>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeadershipChange {
    pub time: SimTime,
    pub tp: TopicPartition,
    pub leader: Option<BrokerId>,
    /// The leader's host (Kafka's `broker-N`, RocketMQ's master `broker-a-0`).
    pub leader_host: Option<HostName>,
    pub leader_epoch: Epoch,
    pub isr: Vec<BrokerId>,
}
