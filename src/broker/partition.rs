//! One hosted partition: its log and its replication state, as leader or follower.
//!
//! Everything here is synchronous; the async shell (`replica_manager`, `fetcher`) borrows a
//! partition, calls one of these methods, and never holds the borrow across an `.await`.

use super::hw;
use super::isr::{self, FollowerState};
use crate::protocol::messages::PartitionState;
use crate::storage::log::{Log, StorageError};
use crate::types::{BrokerId, Epoch, Offset, TopicPartition};
use std::collections::BTreeMap;
use std::rc::Rc;
use tokio::sync::{Mutex, Notify};

/// This broker's role for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Not told yet (just started) — serves nothing.
    Unassigned,
    Leader,
    /// `None`: the partition is offline; nothing to fetch from.
    Follower {
        leader: Option<BrokerId>,
    },
}

/// What applying a metadata image did to a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    None,
    BecameLeader,
    BecameFollower { leader: Option<BrokerId> },
    IsrChanged,
}

pub struct Partition {
    pub log: Log,
    pub role: Role,
    pub leader_epoch: Epoch,
    pub partition_epoch: i32,
    pub replicas: Vec<BrokerId>,
    /// The committed ISR (the controller's).
    pub isr: Vec<BrokerId>,
    /// An AlterPartition in flight: the ISR proposed. One at a time, as in Kafka.
    pub pending_isr: Option<Vec<BrokerId>>,
    pub hw: Offset,
    /// Leader only: what each follower's fetches told us.
    pub followers: BTreeMap<BrokerId, FollowerState>,
    /// Leader only: the LEO when this leader epoch began.
    pub leader_epoch_start_offset: Offset,
    pub min_insync_replicas: u32,
    /// Bumped at every role change: a fetcher of an older generation stops.
    pub generation: u64,
    /// Follower, leader-epoch rule: the log must be reconciled with the leader's before
    /// the next fetch.
    pub truncation_pending: bool,
    /// Woken on appends, HW moves and role changes (long-polling fetches, waiting produces).
    pub notify: Rc<Notify>,
    /// Serialises this log's flushes: a flush plan is confirmed only by its own fsyncs.
    pub flush_lock: Rc<Mutex<()>>,
}

impl Partition {
    pub fn new(log: Log, hw: Offset, min_insync_replicas: u32) -> Partition {
        let hw = hw.clamp(log.log_start_offset(), log.log_end_offset());
        Partition {
            log,
            role: Role::Unassigned,
            leader_epoch: Epoch::NONE,
            partition_epoch: -1,
            replicas: Vec::new(),
            isr: Vec::new(),
            pending_isr: None,
            hw,
            followers: BTreeMap::new(),
            leader_epoch_start_offset: Offset::NONE,
            min_insync_replicas,
            generation: 0,
            truncation_pending: false,
            notify: Rc::new(Notify::new()),
            flush_lock: Rc::new(Mutex::new(())),
        }
    }

    pub fn tp(&self) -> &TopicPartition {
        self.log.tp()
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    /// Apply the controller's state for this partition (Kafka's makeLeader/makeFollower).
    /// A state with an older leader epoch than ours is stale and ignored. `hw_truncation`
    /// selects the pre-KIP-101 rule: truncate to the HW on becoming follower.
    pub fn apply(
        &mut self,
        me: BrokerId,
        state: &PartitionState,
        hw_truncation: bool,
        now_ms: i64,
    ) -> Result<Transition, StorageError> {
        if state.leader_epoch < self.leader_epoch {
            return Ok(Transition::None);
        }
        let newer_epoch = state.leader_epoch > self.leader_epoch;
        if state.leader == Some(me) {
            if newer_epoch || !self.is_leader() {
                self.become_leader(me, state, now_ms)?;
                return Ok(Transition::BecameLeader);
            }
        } else if newer_epoch
            || self.role
                != (Role::Follower {
                    leader: state.leader,
                })
        {
            self.become_follower(state, hw_truncation)?;
            return Ok(Transition::BecameFollower {
                leader: state.leader,
            });
        }
        if state.partition_epoch > self.partition_epoch {
            self.partition_epoch = state.partition_epoch;
            self.isr.clone_from(&state.isr);
            self.pending_isr = None;
            self.maybe_increment_hw();
            return Ok(Transition::IsrChanged);
        }
        Ok(Transition::None)
    }

    fn take_state(&mut self, state: &PartitionState) {
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        self.replicas.clone_from(&state.replicas);
        self.isr.clone_from(&state.isr);
        self.pending_isr = None;
        self.generation += 1;
        self.notify.notify_waiters();
    }

    /// The new epoch starts at our LEO; every follower's LEO is unknown until it fetches,
    /// and ISR members get a full lag period to do so. Producer state needs no rebuild
    /// here: the log keeps it on follower appends too, and rebuilds it on truncation.
    fn become_leader(
        &mut self,
        me: BrokerId,
        state: &PartitionState,
        now_ms: i64,
    ) -> Result<(), StorageError> {
        self.take_state(state);
        self.role = Role::Leader;
        self.truncation_pending = false;
        let leo = self.log.log_end_offset();
        self.log.assign_epoch(state.leader_epoch, leo)?;
        self.leader_epoch_start_offset = leo;
        self.followers = state
            .replicas
            .iter()
            .filter(|&&id| id != me)
            .map(|&id| {
                (
                    id,
                    FollowerState::new_leader(state.isr.contains(&id), now_ms),
                )
            })
            .collect();
        self.maybe_increment_hw();
        Ok(())
    }

    fn become_follower(
        &mut self,
        state: &PartitionState,
        hw_truncation: bool,
    ) -> Result<(), StorageError> {
        self.take_state(state);
        self.role = Role::Follower {
            leader: state.leader,
        };
        self.followers.clear();
        self.leader_epoch_start_offset = Offset::NONE;
        if hw_truncation {
            let leo = self.log.log_end_offset();
            let to = super::truncation::high_watermark_truncation(self.hw, leo);
            if to < leo {
                tracing::info!(tp = %self.tp(), from = %leo, to = %to, rule = "high-watermark", "truncating");
                self.log.truncate_to(to)?;
            }
            self.truncation_pending = false;
        } else {
            self.truncation_pending = true;
        }
        self.hw = self.hw.min(self.log.log_end_offset());
        Ok(())
    }

    /// The ISR the HW is computed over: the committed ISR plus a proposed addition
    /// (Kafka's maximal ISR: a pending shrink keeps counting the leaving replica).
    pub fn maximal_isr(&self) -> Vec<BrokerId> {
        let mut isr = self.isr.clone();
        for id in self.pending_isr.iter().flatten() {
            if !isr.contains(id) {
                isr.push(*id);
            }
        }
        isr
    }

    fn replica_leo(&self, id: BrokerId) -> Offset {
        match self.followers.get(&id) {
            Some(f) => f.leo,
            None => self.log.log_end_offset(),
        }
    }

    /// Leader: move the HW to the minimum LEO of the maximal ISR if that is higher.
    pub fn maybe_increment_hw(&mut self) -> bool {
        if !self.is_leader() {
            return false;
        }
        let leo = self.log.log_end_offset();
        let candidate = hw::high_watermark(
            self.maximal_isr()
                .into_iter()
                .map(|id| self.replica_leo(id)),
        )
        .unwrap_or(self.hw);
        let new_hw = hw::advance_leader_hw(self.hw, candidate.min(leo), leo);
        if new_hw == self.hw {
            return false;
        }
        self.hw = new_hw;
        self.notify.notify_waiters();
        true
    }

    /// Leader: a follower fetched at `fetch_offset`. Returns an ISR expansion to propose.
    pub fn on_follower_fetch(
        &mut self,
        replica: BrokerId,
        fetch_offset: Offset,
        now_ms: i64,
    ) -> Option<Vec<BrokerId>> {
        let leo = self.log.log_end_offset();
        let follower = self.followers.get_mut(&replica)?;
        follower.on_fetch(fetch_offset, leo, now_ms);
        self.maybe_increment_hw();
        if self.pending_isr.is_some() {
            return None;
        }
        let proposal = isr::expand_proposal(
            &self.isr,
            &self.replicas,
            replica,
            fetch_offset,
            self.hw,
            self.leader_epoch_start_offset,
        )?;
        self.pending_isr = Some(proposal.clone());
        Some(proposal)
    }

    /// Leader: the ISR without followers that fell behind, if any did.
    pub fn shrink_check(
        &mut self,
        me: BrokerId,
        now_ms: i64,
        lag_time_max_ms: u64,
    ) -> Option<Vec<BrokerId>> {
        if !self.is_leader() || self.pending_isr.is_some() {
            return None;
        }
        let proposal = isr::shrink_proposal(
            &self.isr,
            me,
            |id| self.followers.get(&id),
            self.log.log_end_offset(),
            now_ms,
            lag_time_max_ms,
        )?;
        self.pending_isr = Some(proposal.clone());
        Some(proposal)
    }

    /// Follower: truncate (logging where), keeping HW ≤ LEO.
    pub fn truncate_to(
        &mut self,
        offset: Offset,
        reason: &'static str,
    ) -> Result<(), StorageError> {
        let leo = self.log.log_end_offset();
        if offset < leo {
            tracing::info!(tp = %self.tp(), from = %leo, to = %offset, rule = reason, "truncating");
            self.log.truncate_to(offset)?;
        }
        self.hw = self.hw.min(self.log.log_end_offset());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogConfig;
    use crate::os::disk::{Disk, DiskConfig};
    use crate::record::BatchBuilder;
    use crate::types::ProducerId;

    const ME: BrokerId = BrokerId(1);

    fn partition_with(records: usize) -> Partition {
        let disk = Disk::new(DiskConfig::default(), 1);
        let tp = TopicPartition::new("orders", 0);
        let log = Log::open(
            &disk,
            &tp,
            LogConfig::default(),
            Offset(0),
            Offset(0),
            true,
            0,
        )
        .expect("a new log opens");
        let mut partition = Partition::new(log, Offset(0), 1);
        for i in 0..records {
            let mut batch = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
            batch.push(0, None, Some(format!("m{i}").as_bytes()));
            partition
                .log
                .append_as_leader(batch.build(), Epoch(0), 0)
                .expect("append");
        }
        partition
    }

    fn state(leader: u32, epoch: i32, partition_epoch: i32, isr: &[u32]) -> PartitionState {
        PartitionState {
            replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
            leader: Some(BrokerId(leader)),
            leader_epoch: Epoch(epoch),
            partition_epoch,
            isr: isr.iter().map(|&id| BrokerId(id)).collect(),
        }
    }

    /// Metadata can arrive late; an older leader epoch must not undo a newer one.
    #[test]
    fn stale_leader_epoch_is_ignored() {
        let mut p = partition_with(0);
        assert_eq!(
            p.apply(ME, &state(1, 2, 2, &[1, 2]), false, 0).ok(),
            Some(Transition::BecameLeader)
        );
        assert_eq!(
            p.apply(ME, &state(2, 1, 1, &[1, 2]), false, 0).ok(),
            Some(Transition::None)
        );
        assert!(p.is_leader());
    }

    #[test]
    fn new_leader_starts_its_epoch_at_its_leo() {
        let mut p = partition_with(3);
        p.apply(ME, &state(1, 4, 4, &[1, 2, 3]), false, 0)
            .expect("become leader");
        assert_eq!(p.log.epochs().latest_epoch(), Some(Epoch(4)));
        assert_eq!(p.leader_epoch_start_offset, Offset(3));
        assert_eq!(p.hw, Offset(0), "followers' LEOs are unknown: the HW waits");
    }

    #[test]
    fn hw_is_the_slowest_isr_member_and_waits_for_a_pending_addition() {
        let mut p = partition_with(2);
        p.apply(ME, &state(1, 0, 0, &[1, 2]), false, 0)
            .expect("become leader");
        p.on_follower_fetch(BrokerId(2), Offset(1), 0);
        assert_eq!(p.hw, Offset(1));
        p.on_follower_fetch(BrokerId(3), Offset(0), 0);
        p.on_follower_fetch(BrokerId(2), Offset(2), 0);
        assert_eq!(p.hw, Offset(2), "broker 3 is not in the ISR");
        p.pending_isr = Some(vec![BrokerId(1), BrokerId(2), BrokerId(3)]);
        p.log
            .append_as_leader(
                BatchBuilder::new(0, ProducerId::NONE, -1, -1).build(),
                Epoch(0),
                0,
            )
            .ok();
        p.on_follower_fetch(BrokerId(2), p.log.log_end_offset(), 0);
        assert_eq!(
            p.hw,
            Offset(2),
            "broker 3 is being added: counted in the maximal ISR"
        );
    }

    #[test]
    fn expansion_is_proposed_once_the_follower_reaches_the_hw() {
        let mut p = partition_with(2);
        p.apply(ME, &state(1, 0, 0, &[1]), false, 0)
            .expect("become leader");
        assert_eq!(p.hw, Offset(2));
        assert_eq!(p.on_follower_fetch(BrokerId(2), Offset(1), 0), None);
        assert_eq!(
            p.on_follower_fetch(BrokerId(2), Offset(2), 0),
            Some(vec![BrokerId(1), BrokerId(2)])
        );
        assert_eq!(
            p.on_follower_fetch(BrokerId(3), Offset(2), 0),
            None,
            "one change at a time"
        );
    }

    /// KIP-101's precondition: under the HW rule a follower cuts everything above its HW
    /// at once; under the leader-epoch rule it waits to ask the leader.
    #[test]
    fn becoming_follower_truncates_to_hw_only_under_the_hw_rule() {
        let mut p = partition_with(3);
        p.hw = Offset(1);
        p.apply(ME, &state(2, 1, 1, &[1, 2]), true, 0)
            .expect("become follower");
        assert_eq!(p.log.log_end_offset(), Offset(1));

        let mut p = partition_with(3);
        p.hw = Offset(1);
        p.apply(ME, &state(2, 1, 1, &[1, 2]), false, 0)
            .expect("become follower");
        assert_eq!(p.log.log_end_offset(), Offset(3));
        assert!(p.truncation_pending);
    }
}
