//! One hosted partition: its log and its replication state, as leader or follower.
//!
//! Everything here is synchronous; the async shell (`replica_manager`, `fetcher`) borrows a
//! partition, calls one of these methods, and never holds the borrow across an `.await`.
//! The partition is the only writer of its state: each method is one event (a produce, a
//! fetch response, a committed ISR) and makes the whole change that event causes. It
//! holds no runtime objects, so it is tested without one: the replica manager's slot
//! (`Hosted`) holds what tasks wait on and lock, and wakes the waiters when a change
//! says so (`take_wake`).

use super::hw;
use super::isr::{self, FollowerState};
use super::truncation::{self, TruncationState};
use crate::config::bugs::Bugs;
use crate::config::kafka::{Rules, Truncation};
use crate::history::facts::kafka::Fact;
use crate::history::facts::Facts;
use crate::kafka::protocol::messages::PartitionState;
use crate::kafka::record::{self, EndTxnMarker};
use crate::kafka::storage::log::{AppendOutcome, Log, StorageError};
use crate::kafka::storage::producer_state::VerificationGuard;
use crate::kafka::types::{EpochEndOffset, Incarnation, PartitionEpoch, ProducerId};
use crate::os::clock::SimTime;
use crate::types::{BrokerId, Epoch, Offset, TopicPartition};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

/// This broker's role for a partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
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
    /// This broker: the leader when `role` is `Leader`.
    me: BrokerId,
    log: Log,
    role: Role,
    leader_epoch: Epoch,
    partition_epoch: PartitionEpoch,
    replicas: Vec<BrokerId>,
    /// The committed ISR (the controller's).
    isr: Vec<BrokerId>,
    /// An AlterPartition in flight: the ISR proposed. One at a time, as in Kafka.
    pending_isr: Option<Vec<BrokerId>>,
    hw: Offset,
    /// Leader only: what each follower's fetches told us.
    followers: BTreeMap<BrokerId, FollowerState>,
    /// Leader only: the LEO when this leader epoch began.
    leader_epoch_start_offset: Offset,
    min_insync_replicas: u32,
    /// What the release does that no key says: under min ISR the HW holds (KAFKA-15583,
    /// 3.7); which leader epochs make a follower truncate (KAFKA-7164, KIP-320).
    rules: Rules,
    /// Bumped at every role change: the partition leaves a fetcher of an older generation.
    generation: u64,
    /// Follower, leader-epoch rule: the log must be reconciled with the leader's before
    /// the next fetch.
    truncation_pending: bool,
    /// An append, a HW move or a role change happened since `take_wake`: what long-polling
    /// fetches and waiting produces wait for.
    wake: bool,
    /// Where truncations are recorded as cluster facts.
    facts: Facts,
    /// Bugs a mutation test injected (none in any real run).
    bugs: Bugs,
}

impl Partition {
    pub fn new(
        me: BrokerId,
        mut log: Log,
        hw: Offset,
        min_insync_replicas: u32,
        rules: Rules,
        facts: Facts,
        bugs: Bugs,
    ) -> Partition {
        let hw = hw.clamp(log.log_start_offset(), log.log_end_offset());
        log.on_high_watermark_updated(hw);
        let partition = Partition {
            me,
            log,
            role: Role::Unassigned,
            leader_epoch: Epoch::NONE,
            partition_epoch: PartitionEpoch::NONE,
            replicas: Vec::new(),
            isr: Vec::new(),
            pending_isr: None,
            hw,
            followers: BTreeMap::new(),
            leader_epoch_start_offset: Offset::NONE,
            min_insync_replicas,
            rules,
            generation: 0,
            truncation_pending: false,
            wake: false,
            facts,
            bugs,
        };
        partition.check_invariants();
        partition
    }

    pub fn tp(&self) -> &TopicPartition {
        self.log.tp()
    }

    pub fn log(&self) -> &Log {
        &self.log
    }

    pub fn is_leader(&self) -> bool {
        self.role == Role::Leader
    }

    pub fn leader_epoch(&self) -> Epoch {
        self.leader_epoch
    }

    pub fn partition_epoch(&self) -> PartitionEpoch {
        self.partition_epoch
    }

    pub fn isr(&self) -> &[BrokerId] {
        &self.isr
    }

    pub fn hw(&self) -> Offset {
        self.hw
    }

    /// The last stable offset: a `read_committed` reader reads below it. The oldest
    /// transaction still open, or ended by a marker not yet below the HW, holds it back;
    /// without one it is the HW (Kafka's `UnifiedLog.lastStableOffset`).
    pub fn last_stable_offset(&self) -> Offset {
        self.log
            .first_unstable_offset()
            .map_or(self.hw, |unstable| unstable.min(self.hw))
    }

    /// Leader: each follower's LEO as its fetches told us.
    pub fn follower_leos(&self) -> Vec<(BrokerId, Offset)> {
        self.followers.iter().map(|(&id, f)| (id, f.leo)).collect()
    }

    pub fn min_insync_replicas(&self) -> u32 {
        self.min_insync_replicas
    }

    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn truncation_pending(&self) -> bool {
        self.truncation_pending
    }

    /// Whether the waiters must be woken for what changed since the last call.
    pub fn take_wake(&mut self) -> bool {
        std::mem::take(&mut self.wake)
    }

    /// Apply the controller's state for this partition (Kafka's makeLeader/makeFollower).
    /// A state with an older leader epoch than ours is stale and ignored. `rule` selects
    /// what becoming follower does to the log.
    pub fn apply(
        &mut self,
        state: &PartitionState,
        rule: Truncation,
        now: SimTime,
    ) -> Result<Transition, StorageError> {
        if state.leader_epoch < self.leader_epoch {
            return Ok(Transition::None);
        }
        let newer_epoch = state.leader_epoch > self.leader_epoch;
        let transition = if state.leader == Some(self.me) {
            if newer_epoch || !self.is_leader() {
                self.become_leader(state, now)?;
                Transition::BecameLeader
            } else {
                self.take_isr(state)
            }
        } else if newer_epoch && self.keeps_fetching(state) {
            self.take_epoch_only(state);
            Transition::None
        } else if newer_epoch
            || self.role
                != (Role::Follower {
                    leader: state.leader,
                })
        {
            self.become_follower(state, rule, now)?;
            Transition::BecameFollower {
                leader: state.leader,
            }
        } else {
            self.take_isr(state)
        };
        self.check_invariants();
        Ok(transition)
    }

    /// Whether a follower told of a newer epoch under the same leader goes on fetching as
    /// it was, without truncating: Kafka's `makeFollower` skipped a follower whose leader
    /// had not changed before KAFKA-7164 (2.0.1), and one whose epoch moved by one until
    /// KIP-320 (2.1) made every epoch change reset the fetcher.
    fn keeps_fetching(&self, state: &PartitionState) -> bool {
        let same_leader = self.role
            == Role::Follower {
                leader: state.leader,
            }
            && state.leader.is_some();
        let skips = if self.rules.fetch_current_leader_epoch {
            false
        } else if self.rules.truncate_at_every_epoch {
            state.leader_epoch.0 == self.leader_epoch.0 + 1
        } else {
            true
        };
        same_leader && skips
    }

    /// The new epoch's state, without a role change: the fetcher goes on as it was.
    fn take_epoch_only(&mut self, state: &PartitionState) {
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        self.replicas.clone_from(&state.replicas);
        self.isr.clone_from(&state.isr);
        tracing::info!(tp = %self.tp(), epoch = %state.leader_epoch, "same leader, new epoch: the follower goes on fetching without truncating (before KAFKA-7164 and KIP-320)");
    }

    /// The same leadership with a newer ISR, if the partition epoch says it is newer.
    fn take_isr(&mut self, state: &PartitionState) -> Transition {
        if state.partition_epoch <= self.partition_epoch {
            return Transition::None;
        }
        self.partition_epoch = state.partition_epoch;
        self.isr.clone_from(&state.isr);
        self.pending_isr = None;
        self.maybe_increment_hw();
        Transition::IsrChanged
    }

    fn take_state(&mut self, state: &PartitionState) {
        // Guarded by `apply`: a stale leader epoch never gets here.
        debug_assert!(
            state.leader_epoch >= self.leader_epoch,
            "{}: leader epoch {} after {}",
            self.tp(),
            state.leader_epoch,
            self.leader_epoch
        );
        self.leader_epoch = state.leader_epoch;
        self.partition_epoch = state.partition_epoch;
        self.replicas.clone_from(&state.replicas);
        self.isr.clone_from(&state.isr);
        self.pending_isr = None;
        self.generation += 1;
        self.wake = true;
    }

    /// The new epoch starts at our LEO; every follower's LEO is unknown until it fetches,
    /// and ISR members get a full lag period to do so. Producer state needs no rebuild
    /// here: the log keeps it on follower appends too, and rebuilds it on truncation.
    fn become_leader(&mut self, state: &PartitionState, now: SimTime) -> Result<(), StorageError> {
        self.take_state(state);
        self.role = Role::Leader;
        self.truncation_pending = false;
        let leo = self.log.log_end_offset();
        // Before KAFKA-7415 the epoch entered the cache with the leader's first append.
        if self.rules.leader_epoch_on_election {
            self.log.assign_epoch(state.leader_epoch, leo)?;
        }
        self.leader_epoch_start_offset = leo;
        self.facts.record(Fact::LeaderStarted {
            tp: self.tp().clone(),
            broker: self.me,
            epoch: state.leader_epoch,
            log_end_offset: leo,
        });
        let me = self.me;
        self.followers = state
            .replicas
            .iter()
            .filter(|&&id| id != me)
            .map(|&id| (id, FollowerState::new_leader(state.isr.contains(&id), now)))
            .collect();
        self.maybe_increment_hw();
        Ok(())
    }

    fn become_follower(
        &mut self,
        state: &PartitionState,
        rule: Truncation,
        now: SimTime,
    ) -> Result<(), StorageError> {
        self.take_state(state);
        self.role = Role::Follower {
            leader: state.leader,
        };
        self.followers.clear();
        self.leader_epoch_start_offset = Offset::NONE;
        match rule {
            Truncation::HighWatermark => {
                let leo = self.log.log_end_offset();
                let to = truncation::high_watermark_truncation(self.hw, leo);
                if to < leo && !self.bugs.skip_follower_truncation {
                    tracing::info!(tp = %self.tp(), from = %leo, to = %to, rule = "high-watermark", "truncating");
                    self.log.truncate_to(to, now)?;
                    self.record_truncation(leo, "high-watermark");
                }
                self.truncation_pending = false;
            }
            // From 2.8 a follower whose log has an epoch fetches at once, with it as its
            // last fetched epoch, and the leader's diverging epoch truncates it
            // (KAFKA-10554); before, or with no epoch, it asks OffsetsForLeaderEpoch first.
            Truncation::LeaderEpoch | Truncation::LeaderEpochSingleRound => {
                self.truncation_pending = !(self.rules.diverging_epoch_in_fetch
                    && rule == Truncation::LeaderEpoch
                    && self.log.epochs().latest_epoch().is_some());
            }
        }
        self.set_hw(self.hw.min(self.log.log_end_offset()));
        Ok(())
    }

    /// The ISR the HW is computed over: the committed ISR plus a proposed addition
    /// (Kafka's maximal ISR: a pending shrink keeps counting the leaving replica).
    fn maximal_isr(&self) -> Vec<BrokerId> {
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

    /// Leader: move the HW to the minimum LEO of the maximal ISR if that is higher, unless
    /// the committed ISR is under min ISR (`hw::under_min_isr`) and the release is strict.
    fn maybe_increment_hw(&mut self) {
        if !self.is_leader()
            || (self.rules.strict_min_isr
                && hw::under_min_isr(
                    self.isr.len(),
                    self.min_insync_replicas,
                    self.replicas.len(),
                ))
        {
            return;
        }
        let leo = self.log.log_end_offset();
        let candidate = if self.bugs.hw_on_leader_leo {
            leo
        } else {
            hw::high_watermark(
                self.maximal_isr()
                    .into_iter()
                    .map(|id| self.replica_leo(id)),
            )
            .unwrap_or(self.hw)
        };
        let new_hw = hw::advance_leader_hw(self.hw, candidate.min(leo), leo);
        if new_hw != self.hw {
            self.set_hw(new_hw);
            self.wake = true;
        }
    }

    /// The only writer of the HW. HW ≤ LEO is bookkeeping. A leader's HW never going back is
    /// Kafka's rule, kept by `hw::advance_leader_hw`; it is checked here because every
    /// leader HW passes through, so a change that breaks that rule on purpose lifts this
    /// check with it.
    fn set_hw(&mut self, hw: Offset) {
        debug_assert!(
            hw <= self.log.log_end_offset(),
            "{}: HW {hw} above the LEO {}",
            self.tp(),
            self.log.log_end_offset()
        );
        debug_assert!(
            !self.is_leader() || hw >= self.hw,
            "{}: leader HW moved back from {} to {hw}",
            self.tp(),
            self.hw
        );
        self.hw = hw;
        self.log.on_high_watermark_updated(hw);
    }

    /// Leader: a produce. Appends in the current leader epoch, then wakes the waiters (a
    /// single-member ISR's HW moves at once).
    pub fn on_produce(
        &mut self,
        batch: Vec<u8>,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        self.on_verified_produce(batch, now, None)
    }

    /// Leader: a producer's batch that went through verification with `guard`.
    pub fn on_verified_produce(
        &mut self,
        batch: Vec<u8>,
        now: SimTime,
        guard: Option<VerificationGuard>,
    ) -> Result<AppendOutcome, StorageError> {
        self.on_leader_append(|log, epoch| log.append_verified_as_leader(batch, epoch, now, guard))
    }

    /// Leader, verification on: the guard a transactional batch of `producer_id` needs to
    /// start a transaction here, `None` if it continues one.
    pub fn start_verification(
        &mut self,
        producer_id: ProducerId,
        epoch: i16,
    ) -> Option<VerificationGuard> {
        self.log.start_verification(producer_id, epoch)
    }

    /// Leader: a coordinator's own batch (its internal topic), appended like a produce.
    pub fn on_coordinator_append(
        &mut self,
        batch: Vec<u8>,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        self.on_leader_append(|log, epoch| log.append_as_coordinator(batch, epoch, now))
    }

    fn on_leader_append(
        &mut self,
        append: impl FnOnce(&mut Log, Epoch) -> Result<AppendOutcome, StorageError>,
    ) -> Result<AppendOutcome, StorageError> {
        let outcome = append(&mut self.log, self.leader_epoch)?;
        if let AppendOutcome::Appended {
            first_offset,
            last_offset,
            ..
        } = outcome
        {
            self.facts.record(Fact::Appended {
                tp: self.tp().clone(),
                leader: self.me,
                epoch: self.leader_epoch,
                first: first_offset,
                last: last_offset,
            });
        }
        self.maybe_increment_hw();
        self.wake = true;
        self.check_invariants();
        Ok(outcome)
    }

    /// Leader: a transaction coordinator's marker for `producer_id` (WriteTxnMarkers),
    /// appended in the current leader epoch like a produce.
    pub fn on_marker(
        &mut self,
        producer_id: ProducerId,
        producer_epoch: i16,
        marker: EndTxnMarker,
        now: SimTime,
    ) -> Result<AppendOutcome, StorageError> {
        let outcome = self.log.append_marker_as_leader(
            producer_id,
            producer_epoch,
            marker,
            self.leader_epoch,
            now,
        )?;
        if let AppendOutcome::Appended { first_offset, .. } = outcome {
            self.facts.record(Fact::Appended {
                tp: self.tp().clone(),
                leader: self.me,
                epoch: self.leader_epoch,
                first: first_offset,
                last: first_offset,
            });
        }
        self.maybe_increment_hw();
        self.wake = true;
        self.check_invariants();
        Ok(outcome)
    }

    /// Leader: a follower's process of `broker_epoch` (if its fetch said) fetched at
    /// `fetch_offset`. Returns an ISR expansion to propose, if `may_join`: the leader's
    /// metadata does not show the replica fenced (KIP-841; always, before 3.3).
    pub fn on_follower_fetch(
        &mut self,
        replica: BrokerId,
        broker_epoch: Option<Incarnation>,
        may_join: bool,
        fetch_offset: Offset,
        now: SimTime,
    ) -> Option<Vec<BrokerId>> {
        let leo = self.log.log_end_offset();
        let follower = self.followers.get_mut(&replica)?;
        follower.on_fetch(fetch_offset, broker_epoch, leo, now);
        if self.bugs.any_fetch_caught_up {
            follower.last_caught_up = now;
        }
        self.maybe_increment_hw();
        let proposal = match self.pending_isr {
            Some(_) => None,
            None if !may_join => None,
            None => isr::expand_proposal(
                &self.isr,
                &self.replicas,
                replica,
                fetch_offset,
                self.hw,
                self.leader_epoch_start_offset,
            ),
        };
        self.propose(proposal)
    }

    /// Leader, the periodic ISR check: the ISR without followers that fell behind, if any
    /// did, proposed.
    pub fn on_isr_expiration(
        &mut self,
        now: SimTime,
        lag_time_max: Duration,
    ) -> Option<Vec<BrokerId>> {
        if !self.is_leader() || self.pending_isr.is_some() || self.bugs.never_shrink_isr {
            return None;
        }
        let proposal = isr::shrink_proposal(
            &self.isr,
            self.me,
            |id| self.followers.get(&id),
            self.log.log_end_offset(),
            now,
            lag_time_max,
        );
        self.propose(proposal)
    }

    /// An ISR change to send becomes the one in flight.
    fn propose(&mut self, proposal: Option<Vec<BrokerId>>) -> Option<Vec<BrokerId>> {
        if let Some(isr) = &proposal {
            self.pending_isr = Some(isr.clone());
        }
        self.check_invariants();
        proposal
    }

    /// Leader: the broker epoch of each of `isr`'s followers, as their last fetches gave
    /// it (KIP-903's `NewIsrWithEpochs`; the leader adds its own).
    pub fn broker_epochs(&self, isr: &[BrokerId]) -> Vec<(BrokerId, Incarnation)> {
        isr.iter()
            .filter_map(|id| Some((*id, self.followers.get(id)?.broker_epoch?)))
            .collect()
    }

    /// Leader: the controller committed an ISR change (ours or a newer one). Returns
    /// whether `state` was newer than what we had; the proposal is settled either way.
    pub fn on_isr_committed(&mut self, state: &PartitionState) -> bool {
        let newer = state.partition_epoch > self.partition_epoch;
        if newer {
            self.partition_epoch = state.partition_epoch;
            self.isr.clone_from(&state.isr);
        }
        self.pending_isr = None;
        self.maybe_increment_hw();
        self.wake = true;
        self.check_invariants();
        newer
    }

    /// Leader: the ISR change was rejected or lost; the next check may propose again.
    pub fn on_isr_rejected(&mut self) {
        self.pending_isr = None;
    }

    /// Follower: the leader's fetch response, at our LEO. Appends what it sent and learns
    /// its HW (capped by our LEO). A rejected append changes nothing.
    pub fn on_fetch_response(
        &mut self,
        records: &[u8],
        leader_hw: Offset,
        rule: Truncation,
        now: SimTime,
    ) -> Result<(), StorageError> {
        if !records.is_empty() {
            let leo = self.log.log_end_offset();
            let records = match rule {
                // Our LEO may sit inside a leader's batch: take its records from there, as
                // 0.10's per-message offsets served them (`record::records_from`). A single
                // round can leave it there too (KAFKA-6361); taking the tail is an
                // approximation of what 0.11 to 1.1 did then.
                Truncation::HighWatermark | Truncation::LeaderEpochSingleRound => {
                    record::records_from(records, leo)
                        .map_err(|e| StorageError::InvalidRecord(e.to_string()))?
                }
                Truncation::LeaderEpoch => Cow::Borrowed(records),
            };
            self.log.append_as_follower(&records, now)?;
            self.wake = true;
        }
        let leo = self.log.log_end_offset();
        self.set_hw(hw::follower_hw(leader_hw, leo));
        self.check_invariants();
        Ok(())
    }

    /// Follower, leader-epoch rule: the leader's answer where an epoch ends on its log
    /// (OffsetsForLeaderEpoch, or a fetch's `diverging_epoch`). Truncates where the rule
    /// says; once both logs agree, the reconciliation is over.
    pub fn on_epoch_end(
        &mut self,
        answer: EpochEndOffset,
        rule: Truncation,
        reason: &'static str,
        now: SimTime,
    ) -> Result<TruncationState, StorageError> {
        let leo = self.log.log_end_offset();
        let step = if rule == Truncation::LeaderEpochSingleRound {
            truncation::single_round_truncation(answer.end_offset, leo, self.hw)
        } else {
            let ours = (answer.epoch != Epoch::NONE)
                .then(|| self.log.epochs().end_offset_for(answer.epoch, leo));
            truncation::leader_epoch_truncation(answer, ours, leo, self.hw)
        };
        self.truncate_to(step.offset, reason, now)?;
        if step.completed {
            self.truncation_pending = false;
        }
        Ok(step)
    }

    /// Follower, leader-epoch rule, with no epoch to ask about (an empty log): keep what
    /// is below the HW, and fetch.
    pub fn reconcile_without_epoch(&mut self, now: SimTime) -> Result<(), StorageError> {
        self.truncate_to(self.hw, "no-epoch", now)?;
        self.truncation_pending = false;
        Ok(())
    }

    /// Follower: the leader answered OFFSET_OUT_OF_RANGE and its LEO is below ours (an
    /// unclean election, or the pre-KIP-101 rule keeping more than the new leader has).
    pub fn on_leader_leo_below_ours(
        &mut self,
        leader_leo: Offset,
        now: SimTime,
    ) -> Result<(), StorageError> {
        self.truncate_to(leader_leo, "offset-out-of-range", now)
    }

    /// Follower: truncate (logging where), keeping HW ≤ LEO.
    fn truncate_to(
        &mut self,
        offset: Offset,
        reason: &'static str,
        now: SimTime,
    ) -> Result<(), StorageError> {
        let leo = self.log.log_end_offset();
        if offset < leo && !self.bugs.skip_follower_truncation {
            tracing::info!(tp = %self.tp(), from = %leo, to = %offset, rule = reason, "truncating");
            self.log.truncate_to(offset, now)?;
            self.record_truncation(leo, reason);
        }
        self.set_hw(self.hw.min(self.log.log_end_offset()));
        self.check_invariants();
        Ok(())
    }

    /// A truncation from `from` happened: the offsets it removed are a cluster fact. (A
    /// batch holding the target offset goes whole, so the log may end below the target.)
    fn record_truncation(&self, from: Offset, rule: &str) {
        self.facts.record(Fact::Truncation {
            tp: self.tp().clone(),
            broker: self.me,
            from,
            to: self.log.log_end_offset(),
            rule: rule.to_string(),
        });
    }

    /// Follower: our LEO is below the leader's log start (retention deleted what we would
    /// fetch next); empty the log and start there.
    pub fn start_over_at(&mut self, offset: Offset, now: SimTime) -> Result<(), StorageError> {
        self.log.truncate_fully_and_start_at(offset, now)?;
        self.check_invariants();
        Ok(())
    }

    /// Fsyncs made everything below `up_to` durable, finishing at `now`.
    pub fn on_flushed(&mut self, up_to: Offset, now: SimTime) {
        self.log.flush_done(up_to, now);
    }

    /// The retention check: delete old segments wholly below the HW. Returns how many.
    pub fn enforce_retention(&mut self, now: SimTime) -> Result<usize, StorageError> {
        let hw = self.hw;
        let deleted = self.log.enforce_retention(hw, now)?;
        self.check_invariants();
        Ok(deleted)
    }

    /// The partition's own bookkeeping, checked after every change. These hold whatever
    /// rule (HW, ISR, truncation, election) decided the change, so a deliberately broken
    /// rule still runs to the checkers; they catch a change applied half-way or to the
    /// wrong field.
    fn check_invariants(&self) {
        let tp = self.tp();
        let leo = self.log.log_end_offset();
        debug_assert!(self.hw <= leo, "{tp}: HW {} above the LEO {leo}", self.hw);
        for (what, members) in [
            ("ISR", Some(&self.isr)),
            ("proposed ISR", self.pending_isr.as_ref()),
        ] {
            for member in members.into_iter().flatten() {
                debug_assert!(
                    self.replicas.contains(member),
                    "{tp}: {what} member {member} is not a replica {:?}",
                    self.replicas
                );
            }
        }
        debug_assert!(
            !self.followers.contains_key(&self.me)
                && self.followers.keys().all(|id| self.replicas.contains(id)),
            "{tp}: followers {:?} are not the other replicas {:?}",
            self.followers.keys(),
            self.replicas
        );
        if self.is_leader() {
            debug_assert!(
                self.isr.contains(&self.me),
                "{tp}: leader {} outside its ISR {:?}",
                self.me,
                self.isr
            );
            debug_assert!(
                self.pending_isr
                    .as_ref()
                    .is_none_or(|p| p.contains(&self.me)),
                "{tp}: leader {} proposed an ISR without itself",
                self.me
            );
            debug_assert!(
                self.leader_epoch_start_offset <= leo,
                "{tp}: epoch start {} above the LEO {leo}",
                self.leader_epoch_start_offset
            );
        } else {
            debug_assert!(
                self.followers.is_empty(),
                "{tp}: a follower tracking followers"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::kafka::{BrokerConfig, LogConfig};
    use crate::kafka::record::BatchBuilder;
    use crate::kafka::types::ProducerId;
    use crate::os::disk::{Disk, DiskConfig};

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
            SimTime::ZERO,
        )
        .expect("a new log opens");
        let mut partition = Partition::new(
            ME,
            log,
            Offset(0),
            1,
            BrokerConfig::default().rules,
            Facts::default(),
            Bugs::default(),
        );
        for i in 0..records {
            let mut batch = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
            batch.push(0, None, Some(format!("m{i}").as_bytes()));
            partition
                .log
                .append_as_leader(batch.build(), Epoch(0), SimTime::ZERO)
                .expect("append");
        }
        partition
    }

    /// The rules of a Kafka release, as `hightide config --kafka` names it.
    fn rules_of(release: &str) -> Rules {
        crate::config::kafka::Release::parse(release)
            .expect("known")
            .era()
            .broker
            .rules
    }

    fn state(leader: u32, epoch: i32, partition_epoch: i32, isr: &[u32]) -> PartitionState {
        PartitionState {
            replicas: vec![BrokerId(1), BrokerId(2), BrokerId(3)],
            leader: Some(BrokerId(leader)),
            leader_epoch: Epoch(epoch),
            partition_epoch: PartitionEpoch(partition_epoch),
            isr: isr.iter().map(|&id| BrokerId(id)).collect(),
            elr: Vec::new(),
            last_known_leader: None,
        }
    }

    /// Metadata can arrive late; an older leader epoch must not undo a newer one.
    #[test]
    fn stale_leader_epoch_is_ignored() {
        let mut p = partition_with(0);
        assert_eq!(
            p.apply(
                &state(1, 2, 2, &[1, 2]),
                Truncation::LeaderEpoch,
                SimTime::ZERO
            )
            .ok(),
            Some(Transition::BecameLeader)
        );
        assert_eq!(
            p.apply(
                &state(2, 1, 1, &[1, 2]),
                Truncation::LeaderEpoch,
                SimTime::ZERO
            )
            .ok(),
            Some(Transition::None)
        );
        assert!(p.is_leader());
    }

    #[test]
    fn new_leader_starts_its_epoch_at_its_leo() {
        let mut p = partition_with(3);
        p.apply(
            &state(1, 4, 4, &[1, 2, 3]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        assert_eq!(p.log.epochs().latest_epoch(), Some(Epoch(4)));
        assert_eq!(p.leader_epoch_start_offset, Offset(3));
        assert_eq!(p.hw, Offset(0), "followers' LEOs are unknown: the HW waits");
    }

    #[test]
    fn hw_is_the_slowest_isr_member_and_waits_for_a_pending_addition() {
        let mut p = partition_with(2);
        p.apply(
            &state(1, 0, 0, &[1, 2]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        p.on_follower_fetch(BrokerId(2), None, true, Offset(1), SimTime::ZERO);
        assert_eq!(p.hw, Offset(1));
        p.on_follower_fetch(BrokerId(3), None, true, Offset(0), SimTime::ZERO);
        p.on_follower_fetch(BrokerId(2), None, true, Offset(2), SimTime::ZERO);
        assert_eq!(p.hw, Offset(2), "broker 3 is not in the ISR");
        p.pending_isr = Some(vec![BrokerId(1), BrokerId(2), BrokerId(3)]);
        p.log
            .append_as_leader(
                BatchBuilder::new(0, ProducerId::NONE, -1, -1).build(),
                Epoch(0),
                SimTime::ZERO,
            )
            .ok();
        p.on_follower_fetch(
            BrokerId(2),
            None,
            true,
            p.log.log_end_offset(),
            SimTime::ZERO,
        );
        assert_eq!(
            p.hw,
            Offset(2),
            "broker 3 is being added: counted in the maximal ISR"
        );
    }

    /// Kafka 3.7's strict min ISR: with min ISR 2, a leader left alone in the ISR appends
    /// (acks=1 still succeeds) but its HW stays, so no consumer reads a record only it has.
    /// A leader with min ISR 2 whose ISR shrank to itself, after one append.
    fn leader_alone_after_an_append(strict_min_isr: bool) -> Partition {
        let mut p = partition_with(0);
        p.min_insync_replicas = 2;
        p.rules.strict_min_isr = strict_min_isr;
        p.apply(
            &state(1, 0, 0, &[1, 2]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        p.on_follower_fetch(BrokerId(2), None, true, Offset(0), SimTime::ZERO);
        p.on_isr_committed(&state(1, 0, 1, &[1]));
        let mut batch = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        batch.push(0, None, Some(b"m0"));
        p.on_produce(batch.build(), SimTime::ZERO).expect("append");
        assert_eq!(p.log.log_end_offset(), Offset(1));
        p
    }

    #[test]
    fn a_leader_under_min_isr_holds_its_hw_until_the_isr_is_back() {
        let mut p = leader_alone_after_an_append(true);
        assert_eq!(
            p.hw,
            Offset(0),
            "the ISR is the leader alone, under min ISR 2"
        );
        p.on_follower_fetch(BrokerId(2), None, true, Offset(1), SimTime::ZERO);
        assert!(
            p.pending_isr.is_some(),
            "broker 2 caught up: expansion proposed"
        );
        assert_eq!(p.hw, Offset(0), "a proposed expansion does not count");
        p.on_isr_committed(&state(1, 0, 2, &[1, 2]));
        assert_eq!(p.hw, Offset(1), "back at min ISR, the HW catches up");
    }

    /// Before Kafka 3.7 the HW follows the ISR alone: a leader left alone commits what it
    /// appends, and a consumer may read a record no other replica has.
    #[test]
    fn before_kafka_3_7_a_leader_alone_commits_its_appends() {
        let p = leader_alone_after_an_append(false);
        assert_eq!(p.hw, Offset(1), "the ISR is the leader alone: its LEO");
    }

    #[test]
    fn expansion_is_proposed_once_the_follower_reaches_the_hw() {
        let mut p = partition_with(2);
        p.apply(
            &state(1, 0, 0, &[1]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        assert_eq!(p.hw, Offset(2));
        assert_eq!(
            p.on_follower_fetch(BrokerId(2), None, true, Offset(1), SimTime::ZERO),
            None
        );
        assert_eq!(
            p.on_follower_fetch(BrokerId(2), None, true, Offset(2), SimTime::ZERO),
            Some(vec![BrokerId(1), BrokerId(2)])
        );
        assert_eq!(
            p.on_follower_fetch(BrokerId(3), None, true, Offset(2), SimTime::ZERO),
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
        p.apply(
            &state(2, 1, 1, &[1, 2]),
            Truncation::HighWatermark,
            SimTime::ZERO,
        )
        .expect("become follower");
        assert_eq!(p.log.log_end_offset(), Offset(1));
        let truncations: Vec<Fact> = p
            .facts
            .take()
            .events()
            .iter()
            .filter_map(|e| e.fact.kafka().cloned())
            .collect();
        assert_eq!(
            truncations,
            [Fact::Truncation {
                tp: TopicPartition::new("orders", 0),
                broker: ME,
                from: Offset(3),
                to: Offset(1),
                rule: "high-watermark".to_string(),
            }],
            "the truncation is a cluster fact, with the offsets it removed"
        );

        let mut p = partition_with(3);
        p.hw = Offset(1);
        p.apply(
            &state(2, 1, 1, &[1, 2]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become follower");
        assert_eq!(p.log.log_end_offset(), Offset(3));
    }

    /// KAFKA-10554: from 2.8 a new follower whose log has an epoch fetches at once (the
    /// leader's diverging epoch truncates it); before, or with an empty log, it first asks
    /// OffsetsForLeaderEpoch.
    #[test]
    fn a_new_follower_skips_the_epoch_round_from_kafka_10554() {
        for (release, records, asks) in [("2.7", 3, true), ("2.8", 3, false), ("2.8", 0, true)] {
            let mut p = partition_with(records);
            p.rules = rules_of(release);
            p.apply(
                &state(2, 1, 1, &[1, 2]),
                Truncation::LeaderEpoch,
                SimTime::ZERO,
            )
            .expect("become follower");
            assert_eq!(p.truncation_pending, asks, "{release}, {records} records");
            assert_eq!(p.log.log_end_offset(), Offset(records as i64));
        }
    }

    /// KAFKA-7415: a leader records its epoch when elected from 2.0 (2.0.1); before, at its
    /// first append in it.
    #[test]
    fn a_new_leader_records_its_epoch_at_election_from_kafka_7415() {
        for (release, at_election) in [("1.1", false), ("2.0", true)] {
            let mut p = partition_with(2);
            p.rules = rules_of(release);
            p.apply(
                &state(1, 3, 3, &[1]),
                Truncation::LeaderEpoch,
                SimTime::ZERO,
            )
            .expect("become leader");
            let latest = p.log.epochs().latest_epoch();
            let expected = if at_election {
                Some(Epoch(3))
            } else {
                Some(Epoch(0))
            };
            assert_eq!(latest, expected, "{release}");
        }
    }

    /// KAFKA-7164 and KIP-320: told of a newer epoch under the same leader, a follower
    /// truncates (its fetcher starts again) from 2.1 at every epoch; in 2.0 (2.0.1) unless
    /// the epoch moved by exactly one; before, never.
    #[test]
    fn a_new_epoch_under_the_same_leader_truncates_by_release() {
        let cases = [
            ("1.1", false, false),
            ("2.0", false, true),
            ("2.1", true, true),
        ];
        for (release, after_one, after_two) in cases {
            for (bump, truncates) in [(1, after_one), (2, after_two)] {
                let mut p = partition_with(3);
                p.rules = rules_of(release);
                p.apply(
                    &state(2, 1, 1, &[1, 2]),
                    Truncation::LeaderEpoch,
                    SimTime::ZERO,
                )
                .expect("follow");
                p.truncation_pending = false;
                let generation = p.generation;
                let transition = p
                    .apply(
                        &state(2, 1 + bump, 1 + bump, &[1, 2]),
                        Truncation::LeaderEpoch,
                        SimTime::ZERO,
                    )
                    .expect("a new epoch");
                let case = format!("{release}, epoch +{bump}");
                assert_eq!(p.leader_epoch, Epoch(1 + bump), "{case}");
                assert_eq!(p.truncation_pending, truncates, "{case}");
                assert_eq!(p.generation != generation, truncates, "{case}");
                let expected = if truncates {
                    Transition::BecameFollower {
                        leader: Some(BrokerId(2)),
                    }
                } else {
                    Transition::None
                };
                assert_eq!(transition, expected, "{case}");
            }
        }
    }

    /// KIP-903: the leader passes on the broker epoch each follower's fetches carried,
    /// where they carried one.
    #[test]
    fn the_leader_knows_each_followers_broker_epoch_from_its_fetches() {
        let mut p = partition_with(2);
        p.apply(
            &state(1, 0, 0, &[1]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        let proposal = p.on_follower_fetch(
            BrokerId(2),
            Some(Incarnation(3)),
            true,
            Offset(2),
            SimTime::ZERO,
        );
        let isr = proposal.expect("caught up");
        p.on_follower_fetch(BrokerId(3), None, true, Offset(0), SimTime::ZERO);
        assert_eq!(p.broker_epochs(&isr), vec![(BrokerId(2), Incarnation(3))]);
        assert_eq!(
            p.broker_epochs(&[BrokerId(1), BrokerId(2), BrokerId(3)]),
            vec![(BrokerId(2), Incarnation(3))],
            "none for the leader itself, nor for a fetch that carried none"
        );
    }

    /// KIP-841: a replica the leader's metadata shows fenced is not proposed.
    #[test]
    fn a_replica_that_may_not_join_is_not_proposed() {
        let mut p = partition_with(2);
        p.apply(
            &state(1, 0, 0, &[1]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        assert_eq!(
            p.on_follower_fetch(BrokerId(2), None, false, Offset(2), SimTime::ZERO),
            None
        );
        assert_eq!(p.pending_isr, None);
        assert_eq!(
            p.on_follower_fetch(BrokerId(2), None, true, Offset(2), SimTime::ZERO),
            Some(vec![BrokerId(1), BrokerId(2)])
        );
    }

    /// The leader's batch [0, 5) in epoch 1, as a fetch from offset 3 would return it.
    fn leader_batch() -> Vec<u8> {
        let mut batch = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
        for i in 0..5 {
            batch.push(0, None, Some(format!("new{i}").as_bytes()));
        }
        let mut bytes = batch.build();
        record::set_partition_leader_epoch(&mut bytes, Epoch(1));
        bytes
    }

    /// KIP-101 scenario 2 under the HW rule: the follower kept offsets 0-2 from the old
    /// leader, where the new leader wrote a batch of its own. It takes the leader's records
    /// from its LEO on, as 0.10 did, and its log diverges below (it does not wedge).
    #[test]
    fn a_legacy_follower_whose_leo_is_inside_a_leader_batch_takes_its_tail() {
        let mut p = partition_with(3);
        p.hw = Offset(3);
        p.apply(
            &state(2, 1, 1, &[1, 2]),
            Truncation::HighWatermark,
            SimTime::ZERO,
        )
        .expect("become follower");
        p.on_fetch_response(
            &leader_batch(),
            Offset(0),
            Truncation::HighWatermark,
            SimTime::ZERO,
        )
        .expect("the tail of the leader's batch is appended");
        assert_eq!(p.log.log_end_offset(), Offset(5));
        let bytes = p.log.read(Offset(0), u64::MAX, Offset(5)).expect("read");
        let values: Vec<String> = record::batches(&bytes)
            .flat_map(|b| record::records(b.expect("valid batch").2).expect("records"))
            .map(|r| String::from_utf8(r.value.expect("a value")).expect("utf-8"))
            .collect();
        assert_eq!(values, ["m0", "m1", "m2", "new3", "new4"]);
    }

    /// Under leader epochs the follower has truncated to a batch boundary of the leader's
    /// before it fetches: a batch starting below its LEO is refused, as Kafka's v2 path does.
    #[test]
    fn a_leader_epoch_follower_refuses_a_batch_starting_below_its_leo() {
        let mut p = partition_with(3);
        p.apply(
            &state(2, 1, 1, &[1, 2]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become follower");
        let refused = p.on_fetch_response(
            &leader_batch(),
            Offset(0),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        );
        assert!(refused.is_err(), "appended over offsets 0-2");
        assert_eq!(p.log.log_end_offset(), Offset(3));
    }

    /// The invariant checks can fail: metadata the controller never sends (a leader outside
    /// its ISR) is caught where it is applied.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "outside its ISR")]
    fn a_leader_outside_its_isr_is_caught() {
        let mut p = partition_with(0);
        let _ = p.apply(
            &state(1, 0, 0, &[2]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        );
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "is not a replica")]
    fn an_isr_member_outside_the_replicas_is_caught() {
        let mut p = partition_with(0);
        p.apply(
            &state(1, 0, 0, &[1]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        p.on_isr_committed(&state(1, 0, 1, &[1, 4]));
    }

    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "leader HW moved back")]
    fn a_leader_hw_moving_back_is_caught() {
        let mut p = partition_with(2);
        p.apply(
            &state(1, 0, 0, &[1]),
            Truncation::LeaderEpoch,
            SimTime::ZERO,
        )
        .expect("become leader");
        assert_eq!(p.hw, Offset(2));
        p.set_hw(Offset(1));
    }
}
