//! One consumer group as its coordinator keeps it, in Kafka's classic protocol
//! (`GroupMetadata` and `GroupCoordinator` before KIP-848): JoinGroup, SyncGroup,
//! Heartbeat and LeaveGroup over generations, KIP-62's two timeouts (`session.timeout.ms`
//! for heartbeats, the member's rebalance timeout, its `max.poll.interval.ms`, for
//! rejoining), and `group.initial.rebalance.delay.ms` for a group's first members (each
//! member that joins in it delays it again, up to the rebalance timeout, KIP-134).
//!
//! A plain state machine: each request, and each tick of the clock, returns the answers it
//! releases, to whichever members they are for (a JoinGroup is answered only when the
//! join phase ends, a follower's SyncGroup only when the leader's arrives). Left out, as
//! the model of one release line: static membership (KIP-345) and KIP-394's extra round
//! trip for a member id (a new member gets its id in its first join's answer, as before
//! Kafka 2.2). Answers come out in member-id order, so a run is a function of its seed.

use super::offsets_record::{GroupValue, MemberValue};
use crate::os::clock::SimTime;
use crate::types::TopicPartition;
use std::collections::BTreeMap;
use std::time::Duration;

pub type MemberId = String;

/// The `__consumer_offsets` partition that holds a group's offsets, and whose leader is
/// the group's coordinator: Kafka's `Utils.abs(groupId.hashCode()) %
/// offsets.topic.num.partitions`, with Java's `String.hashCode` over UTF-16 code units
/// (and `Utils.abs` taking `Integer.MIN_VALUE` to 0), so a group lands where Kafka puts it.
pub fn offsets_partition(group: &str, partitions: u32) -> u32 {
    crate::kafka::types::coordinator_partition(group, partitions)
}

/// `GroupState`, without `Dead` (a group here is never deleted).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

/// The errors of the group protocol this models, by Kafka's names. The last three are a
/// failed store of the group's metadata, as Kafka's `storeGroup` reads its append's error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupError {
    UnknownMemberId,
    IllegalGeneration,
    RebalanceInProgress,
    NotCoordinator,
    CoordinatorNotAvailable,
    UnknownServerError,
}

/// A JoinGroup's answer: the generation the member is now in, and for the leader alone
/// every member's subscription, from which it assigns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joined {
    pub generation: i32,
    pub leader: MemberId,
    pub members: Vec<(MemberId, Vec<String>)>,
}

impl From<GroupError> for crate::kafka::protocol::messages::ErrorCode {
    fn from(error: GroupError) -> Self {
        use crate::kafka::protocol::messages::ErrorCode;
        match error {
            GroupError::UnknownMemberId => ErrorCode::UnknownMemberId,
            GroupError::IllegalGeneration => ErrorCode::IllegalGeneration,
            GroupError::RebalanceInProgress => ErrorCode::RebalanceInProgress,
            GroupError::NotCoordinator => ErrorCode::NotCoordinator,
            GroupError::CoordinatorNotAvailable => ErrorCode::CoordinatorNotAvailable,
            GroupError::UnknownServerError => ErrorCode::UnknownServerError,
        }
    }
}

/// An answer for a member, released by a request or a tick.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    Join {
        member: MemberId,
        result: Result<Joined, GroupError>,
    },
    Sync {
        member: MemberId,
        result: Result<Vec<TopicPartition>, GroupError>,
    },
}

/// The leader's assignment of a generation, on its way to the log: the group stays in
/// CompletingRebalance until [`Group::assignment_stored`] says how the append went
/// (Kafka's `storeGroup` callback).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Storing {
    pub generation: i32,
    /// Every current member's partitions, an empty list for any the leader left out.
    pub assignment: BTreeMap<MemberId, Vec<TopicPartition>>,
}

/// What a JoinGroup carries.
#[derive(Clone, Debug)]
pub struct JoinRequest {
    /// `None` for a consumer joining for the first time.
    pub member: Option<MemberId>,
    /// The consumer's `client.id`, the stem of a new member's id.
    pub client: String,
    pub subscription: Vec<String>,
    pub session_timeout: Duration,
    /// The consumer's `max.poll.interval.ms`.
    pub rebalance_timeout: Duration,
}

#[derive(Clone, Debug)]
struct Member {
    client: String,
    subscription: Vec<String>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    last_heard: SimTime,
    awaiting_join: bool,
    awaiting_sync: bool,
}

impl Member {
    fn waiting(&self) -> bool {
        self.awaiting_join || self.awaiting_sync
    }
}

#[derive(Clone, Debug)]
pub struct Group {
    state: State,
    generation: i32,
    leader: Option<MemberId>,
    members: BTreeMap<MemberId, Member>,
    assignment: BTreeMap<MemberId, Vec<TopicPartition>>,
    /// When the join phase ends whoever has rejoined by then.
    join_deadline: SimTime,
    /// The first join phase of an empty group waits out the initial delay even once
    /// every member is in, so that members starting together land in one generation.
    delayed: bool,
    /// When that phase began: each member joining it delays it again, up to the longest
    /// rebalance timeout after this.
    delay_started: SimTime,
    initial_delay: Duration,
    members_created: u64,
}

impl Group {
    /// An empty group; `initial_delay` is `group.initial.rebalance.delay.ms`.
    pub fn new(initial_delay: Duration) -> Group {
        Group {
            state: State::Empty,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            assignment: BTreeMap::new(),
            join_deadline: SimTime::LAST,
            delayed: false,
            delay_started: SimTime::ZERO,
            initial_delay,
            members_created: 0,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn generation(&self) -> i32 {
        self.generation
    }

    /// Only the tests ask: the leader is told in its JoinGroup answer.
    #[cfg(test)]
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    pub fn members(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
    }

    /// A JoinGroup: the member's id (a new member's is made here) and the answers it
    /// releases, its own among them unless it must wait for the join phase to end.
    pub fn join(&mut self, request: JoinRequest, now: SimTime) -> (MemberId, Vec<Answer>) {
        let id = match request.member {
            Some(id) if !self.members.contains_key(&id) => {
                let answer = Answer::Join {
                    member: id.clone(),
                    result: Err(GroupError::UnknownMemberId),
                };
                return (id, vec![answer]);
            }
            Some(id) => id,
            None => {
                self.members_created += 1;
                format!("{}-{}", request.client, self.members_created)
            }
        };
        let existing = self.members.get(&id);
        let unchanged = existing.is_some_and(|m| m.subscription == request.subscription);
        // A SyncGroup it is waiting on stays waiting: only a rebalance answers it.
        let awaiting_sync = existing.is_some_and(|m| m.awaiting_sync);
        self.members.insert(
            id.clone(),
            Member {
                client: request.client,
                subscription: request.subscription,
                session_timeout: request.session_timeout,
                rebalance_timeout: request.rebalance_timeout,
                last_heard: now,
                awaiting_join: true,
                awaiting_sync,
            },
        );
        let leader = self.leader.as_deref() == Some(id.as_str());
        match self.state {
            // A member that rejoins unchanged, as when it lost its JoinGroup answer, is
            // told the generation it is in again (the leader with every subscription,
            // to assign from) while the leader's assignment is awaited; once the group is
            // stable, only a follower is: the leader's join reassigns.
            State::CompletingRebalance | State::Stable
                if unchanged && (self.state == State::CompletingRebalance || !leader) =>
            {
                if let Some(member) = self.members.get_mut(&id) {
                    member.awaiting_join = false;
                }
                let answer = Answer::Join {
                    member: id.clone(),
                    result: Ok(self.joined(leader)),
                };
                return (id, vec![answer]);
            }
            State::PreparingRebalance => {
                if self.delayed {
                    let longest = self.members.values().map(|m| m.rebalance_timeout).max();
                    let cap = self.delay_started + longest.unwrap_or_default();
                    self.join_deadline = (now + self.initial_delay).min(cap);
                }
            }
            State::Empty | State::Stable | State::CompletingRebalance => {
                let mut answers = Vec::new();
                self.prepare_rebalance(now, &mut answers);
                answers.extend(self.try_complete_join(now));
                return (id, answers);
            }
        }
        (id, self.try_complete_join(now))
    }

    /// A SyncGroup: a follower's waits for the leader's assignment, and the leader's
    /// assignment is returned to be stored; no one hears it before
    /// [`assignment_stored`](Self::assignment_stored). In a stable group, the member's
    /// assignment at once.
    pub fn sync(
        &mut self,
        member: &str,
        generation: i32,
        assignment: Option<BTreeMap<MemberId, Vec<TopicPartition>>>,
        now: SimTime,
    ) -> (Vec<Answer>, Option<Storing>) {
        let refuse = |error| {
            let answer = Answer::Sync {
                member: member.to_owned(),
                result: Err(error),
            };
            (vec![answer], None)
        };
        if let Err(error) = self.check(member, generation) {
            return refuse(error);
        }
        if self.state == State::PreparingRebalance {
            return refuse(GroupError::RebalanceInProgress);
        }
        let Some(m) = self.members.get_mut(member) else {
            return refuse(GroupError::UnknownMemberId);
        };
        m.last_heard = now;
        if self.state == State::Stable {
            let answer = Answer::Sync {
                member: member.to_owned(),
                result: Ok(self.assignment.get(member).cloned().unwrap_or_default()),
            };
            return (vec![answer], None);
        }
        m.awaiting_sync = true;
        let from_leader = self.leader.as_deref() == Some(member);
        let Some(assignment) = assignment.filter(|_| from_leader) else {
            return (Vec::new(), None);
        };
        // Only current members get partitions; the rest of the leader's map is stale.
        let assignment = self
            .members
            .keys()
            .map(|id| (id.clone(), assignment.get(id).cloned().unwrap_or_default()))
            .collect();
        let storing = Storing {
            generation: self.generation,
            assignment,
        };
        (Vec::new(), Some(storing))
    }

    /// The leader's assignment was appended (or failed to be): if the group is still
    /// completing that generation, it becomes stable and every member waiting on its
    /// SyncGroup hears its partitions; a failure tells them the store's error and
    /// starts a rebalance. A group that moved on meanwhile ignores it (Kafka's
    /// `doSyncGroup` callback).
    pub fn assignment_stored(
        &mut self,
        storing: Storing,
        outcome: Result<(), GroupError>,
        now: SimTime,
    ) -> Vec<Answer> {
        if self.state != State::CompletingRebalance || storing.generation != self.generation {
            return Vec::new();
        }
        debug_assert!(
            storing.assignment.keys().eq(self.members.keys()),
            "members change only through a rebalance"
        );
        let mut answers = Vec::new();
        match outcome {
            Ok(()) => {
                self.assignment = storing.assignment;
                self.state = State::Stable;
                for (id, m) in &mut self.members {
                    if std::mem::take(&mut m.awaiting_sync) {
                        m.last_heard = now;
                        answers.push(Answer::Sync {
                            member: id.clone(),
                            result: Ok(self.assignment[id].clone()),
                        });
                    }
                }
            }
            Err(error) => {
                for (id, m) in &mut self.members {
                    if std::mem::take(&mut m.awaiting_sync) {
                        m.last_heard = now;
                        answers.push(Answer::Sync {
                            member: id.clone(),
                            result: Err(error),
                        });
                    }
                }
                self.prepare_rebalance(now, &mut answers);
                answers.extend(self.try_complete_join(now));
            }
        }
        answers
    }

    /// A Heartbeat: `REBALANCE_IN_PROGRESS` tells a member to rejoin.
    pub fn heartbeat(
        &mut self,
        member: &str,
        generation: i32,
        now: SimTime,
    ) -> Result<(), GroupError> {
        self.check(member, generation)?;
        if let Some(m) = self.members.get_mut(member) {
            m.last_heard = now;
        }
        match self.state {
            State::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    pub fn leave(&mut self, member: &str, now: SimTime) -> Vec<Answer> {
        if self.members.remove(member).is_none() {
            return Vec::new();
        }
        self.removed(now)
    }

    /// Expire members not heard from within their session timeout and end a join phase
    /// whose deadline passed. Members waiting on their join or sync answer are not
    /// expired (Kafka's `hasSatisfiedHeartbeat`): the rebalance governs them.
    pub fn tick(&mut self, now: SimTime) -> Vec<Answer> {
        let expired: Vec<MemberId> = self
            .members
            .iter()
            .filter(|(_, m)| !m.waiting() && now >= m.last_heard + m.session_timeout)
            .map(|(id, _)| id.clone())
            .collect();
        if expired.is_empty() {
            return self.try_complete_join(now);
        }
        let mut answers = Vec::new();
        for id in &expired {
            self.members.remove(id);
        }
        answers.extend(self.removed(now));
        answers
    }

    /// When the next tick can change anything.
    pub fn next_deadline(&self) -> SimTime {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.waiting())
            .map(|m| m.last_heard + m.session_timeout);
        let join = (self.state == State::PreparingRebalance).then_some(self.join_deadline);
        sessions.chain(join).min().unwrap_or(SimTime::LAST)
    }

    /// Whether an OffsetCommit from `member` in `generation` is taken: Kafka's
    /// `doCommitOffsets` takes one from the current generation while the group is stable
    /// or preparing a rebalance, and from outside any group (no member, generation -1)
    /// while it is empty.
    pub fn accepts_commit(&self, member: &str, generation: i32) -> Result<(), GroupError> {
        if member.is_empty() && generation < 0 && self.state == State::Empty {
            return Ok(());
        }
        self.check(member, generation)?;
        match self.state {
            State::CompletingRebalance => Err(GroupError::RebalanceInProgress),
            _ => Ok(()),
        }
    }

    /// Whether a TxnOffsetCommit from `member` in `generation` is taken (Kafka's
    /// `doTxnCommitOffsets`, KIP-447): from outside any group while it is empty; else a
    /// named member must belong to the group and a named generation must be current. No
    /// rebalance check, unlike a plain commit: the transaction's fate decides.
    pub fn accepts_txn_commit(&self, member: &str, generation: i32) -> Result<(), GroupError> {
        if generation < 0 && self.state == State::Empty {
            Ok(())
        } else if !member.is_empty() && !self.members.contains_key(member) {
            Err(GroupError::UnknownMemberId)
        } else if generation >= 0 && generation != self.generation {
            Err(GroupError::IllegalGeneration)
        } else {
            Ok(())
        }
    }

    /// The generation and its members as the coordinator stores them with the leader's
    /// assignment (Kafka's `storeGroup` on the leader's SyncGroup).
    pub fn stored(&self, storing: &Storing, now: SimTime) -> GroupValue {
        GroupValue {
            generation: storing.generation,
            protocol: (!self.members.is_empty()).then(|| "range".to_owned()),
            leader: self.leader.clone(),
            current_state_timestamp_ms: now.timestamp_ms(),
            members: self
                .members
                .iter()
                .map(|(id, m)| MemberValue {
                    member: id.clone(),
                    client: m.client.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout.as_millis() as i32,
                    session_timeout_ms: m.session_timeout.as_millis() as i32,
                    subscription: m.subscription.clone(),
                    assignment: storing.assignment.get(id).cloned().unwrap_or_default(),
                })
                .collect(),
        }
    }

    /// A group read back from its stored metadata by a new coordinator: stable in its
    /// generation (empty without members), every member's session starting now, as
    /// Kafka's loaded group does.
    pub fn restore(stored: &GroupValue, initial_delay: Duration, now: SimTime) -> Group {
        let mut group = Group::new(initial_delay);
        group.generation = stored.generation;
        group.leader = stored.leader.clone();
        for m in &stored.members {
            let member = Member {
                client: m.client.clone(),
                subscription: m.subscription.clone(),
                session_timeout: Duration::from_millis(m.session_timeout_ms.max(0) as u64),
                rebalance_timeout: Duration::from_millis(m.rebalance_timeout_ms.max(0) as u64),
                last_heard: now,
                awaiting_join: false,
                awaiting_sync: false,
            };
            group.members.insert(m.member.clone(), member);
            group
                .assignment
                .insert(m.member.clone(), m.assignment.clone());
        }
        // New ids must not repeat a restored member's (`<client>-<n>`).
        group.members_created = stored
            .members
            .iter()
            .filter_map(|m| m.member.rsplit_once('-')?.1.parse::<u64>().ok())
            .max()
            .unwrap_or(0);
        group.state = if group.members.is_empty() {
            State::Empty
        } else {
            State::Stable
        };
        group
    }

    fn check(&self, member: &str, generation: i32) -> Result<(), GroupError> {
        if self.state == State::Empty || !self.members.contains_key(member) {
            Err(GroupError::UnknownMemberId)
        } else if generation != self.generation {
            Err(GroupError::IllegalGeneration)
        } else {
            Ok(())
        }
    }

    fn joined(&self, for_leader: bool) -> Joined {
        Joined {
            generation: self.generation,
            leader: self.leader.clone().unwrap_or_default(),
            members: if for_leader {
                self.members
                    .iter()
                    .map(|(id, m)| (id.clone(), m.subscription.clone()))
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    /// After members went: a stable or completing group rebalances; a join phase may
    /// now be complete.
    fn removed(&mut self, now: SimTime) -> Vec<Answer> {
        let mut answers = Vec::new();
        if matches!(self.state, State::Stable | State::CompletingRebalance) {
            self.prepare_rebalance(now, &mut answers);
        }
        answers.extend(self.try_complete_join(now));
        answers
    }

    fn prepare_rebalance(&mut self, now: SimTime, answers: &mut Vec<Answer>) {
        // Followers waiting on an assignment that will not come: rejoin.
        for (id, m) in &mut self.members {
            if std::mem::take(&mut m.awaiting_sync) {
                answers.push(Answer::Sync {
                    member: id.clone(),
                    result: Err(GroupError::RebalanceInProgress),
                });
            }
        }
        self.delayed = self.state == State::Empty;
        self.delay_started = now;
        self.join_deadline = if self.delayed {
            now + self.initial_delay
        } else {
            let longest = self.members.values().map(|m| m.rebalance_timeout).max();
            now + longest.unwrap_or_default()
        };
        self.state = State::PreparingRebalance;
        self.assignment.clear();
    }

    /// End the join phase once every member rejoined (not before the initial delay of a
    /// group that was empty) or its deadline passed: members that did not rejoin leave,
    /// the generation moves on, and every waiting member is answered.
    fn try_complete_join(&mut self, now: SimTime) -> Vec<Answer> {
        if self.state != State::PreparingRebalance {
            return Vec::new();
        }
        let all_in = self.members.values().all(|m| m.awaiting_join);
        let due = now >= self.join_deadline;
        if !(due || (all_in && !self.delayed)) {
            return Vec::new();
        }
        self.members.retain(|_, m| m.awaiting_join);
        self.generation += 1;
        if self.members.is_empty() {
            self.state = State::Empty;
            self.leader = None;
            return Vec::new();
        }
        self.state = State::CompletingRebalance;
        let kept = self
            .leader
            .as_ref()
            .is_some_and(|leader| self.members.contains_key(leader));
        if !kept {
            self.leader = self.members.keys().next().cloned();
        }
        let mut answers = Vec::new();
        let ids: Vec<MemberId> = self.members.keys().cloned().collect();
        for id in ids {
            let for_leader = self.leader.as_deref() == Some(id.as_str());
            let joined = self.joined(for_leader);
            if let Some(m) = self.members.get_mut(&id) {
                m.awaiting_join = false;
                m.last_heard = now;
            }
            answers.push(Answer::Join {
                member: id,
                result: Ok(joined),
            });
        }
        answers
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::client::assignor;
    use proptest::prelude::*;

    const SESSION: Duration = Duration::from_secs(10);
    const REBALANCE: Duration = Duration::from_secs(30);
    const DELAY: Duration = Duration::from_secs(3);

    fn at(ms: u64) -> SimTime {
        SimTime::from_millis(ms)
    }

    fn request(member: Option<&str>, client: &str) -> JoinRequest {
        JoinRequest {
            member: member.map(str::to_owned),
            client: client.to_owned(),
            subscription: vec!["orders".to_owned()],
            session_timeout: SESSION,
            rebalance_timeout: REBALANCE,
        }
    }

    fn joined(answers: &[Answer]) -> Vec<(MemberId, Joined)> {
        answers
            .iter()
            .filter_map(|a| match a {
                Answer::Join {
                    member,
                    result: Ok(j),
                } => Some((member.clone(), j.clone())),
                _ => None,
            })
            .collect()
    }

    /// The leader's assignment of `partitions` partitions of `orders`, from its answer.
    fn assign(leader: &Joined, partitions: u32) -> BTreeMap<MemberId, Vec<TopicPartition>> {
        let subscriptions = leader.members.iter().cloned().collect();
        assignor::range(
            &subscriptions,
            &BTreeMap::from([("orders".into(), partitions)]),
        )
    }

    /// A SyncGroup, and the store of the leader's assignment succeeding at once.
    fn sync_stored(
        group: &mut Group,
        member: &str,
        generation: i32,
        plan: Option<BTreeMap<MemberId, Vec<TopicPartition>>>,
        now: SimTime,
    ) -> Vec<Answer> {
        let (mut answers, storing) = group.sync(member, generation, plan, now);
        if let Some(storing) = storing {
            answers.extend(group.assignment_stored(storing, Ok(()), now));
        }
        answers
    }

    /// Two consumers start: one generation for both once the initial delay is over.
    fn two_members() -> (Group, Vec<(MemberId, Joined)>) {
        let mut group = Group::new(DELAY);
        assert!(group.join(request(None, "consumer-1"), at(0)).1.is_empty());
        assert!(group
            .join(request(None, "consumer-2"), at(100))
            .1
            .is_empty());
        assert_eq!(group.state(), State::PreparingRebalance);
        // The second member's join delays the phase again: 3 s after it, not the first.
        assert!(
            group.tick(at(3_099)).is_empty(),
            "the initial delay holds the join"
        );
        let answers = joined(&group.tick(at(3_100)));
        (group, answers)
    }

    /// Java's own values: `"hello".hashCode()` is 99162322, `"polygenelubricants"` hashes
    /// to `Integer.MIN_VALUE`, and an emoji is two UTF-16 units (0xD83D, 0xDE00).
    #[test]
    fn a_group_lands_on_the_offsets_partition_kafka_gives_it() {
        assert_eq!(offsets_partition("hello", 50), 99_162_322 % 50);
        assert_eq!(offsets_partition("polygenelubricants", 50), 0);
        assert_eq!(offsets_partition("", 50), 0);
        assert_eq!(
            offsets_partition("\u{1F600}", 50),
            (0xD83D * 31 + 0xDE00) % 50
        );
        assert_eq!(offsets_partition("hello", 1), 0);
    }

    #[test]
    fn members_starting_together_join_one_generation_and_the_leader_assigns() {
        let (mut group, answers) = two_members();
        assert_eq!(answers.len(), 2);
        let (leader, follower) = (&answers[0], &answers[1]);
        assert_eq!((leader.1.generation, follower.1.generation), (1, 1));
        assert_eq!(leader.0, "consumer-1-1");
        assert_eq!(leader.1.leader, leader.0);
        assert_eq!(group.leader(), Some(leader.0.as_str()));
        assert_eq!(
            leader.1.members.len(),
            2,
            "the leader sees every subscription"
        );
        assert!(follower.1.members.is_empty());
        assert_eq!(group.state(), State::CompletingRebalance);

        assert_eq!(
            group.sync(&follower.0, 1, None, at(3_110)),
            (Vec::new(), None),
            "waits on the leader"
        );
        let plan = assign(&leader.1, 3);
        let (answers, storing) = group.sync(&leader.0, 1, Some(plan.clone()), at(3_120));
        assert!(answers.is_empty(), "no one hears it before it is stored");
        let storing = storing.expect("the leader's assignment is stored");
        assert_eq!((storing.generation, &storing.assignment), (1, &plan));
        // While the store is on its way, the group is still completing the rebalance:
        // heartbeats are taken, commits are not, and an unchanged member's lost
        // JoinGroup answer is given again.
        assert_eq!(group.state(), State::CompletingRebalance);
        assert_eq!(group.heartbeat(&follower.0, 1, at(3_130)), Ok(()));
        assert_eq!(
            group.accepts_commit(&follower.0, 1),
            Err(GroupError::RebalanceInProgress)
        );
        let again = joined(
            &group
                .join(request(Some(&leader.0), "consumer-1"), at(3_140))
                .1,
        );
        assert_eq!(
            again,
            std::slice::from_ref(leader),
            "the leader's answer, subscriptions and all"
        );
        assert_eq!(group.state(), State::CompletingRebalance);
        let synced = group.assignment_stored(storing, Ok(()), at(3_150));
        assert_eq!(group.state(), State::Stable);
        assert_eq!(synced.len(), 2);
        for answer in synced {
            let Answer::Sync { member, result } = answer else {
                panic!("{answer:?}")
            };
            assert_eq!(result.unwrap(), plan[&member]);
        }
        assert_eq!(group.heartbeat(&follower.0, 1, at(5_000)), Ok(()));
        assert_eq!(group.accepts_commit(&follower.0, 1), Ok(()));
    }

    #[test]
    fn a_silent_member_is_expired_and_the_rest_rebalance_without_it() {
        let (mut group, answers) = two_members();
        let (leader, follower) = (answers[0].0.clone(), answers[1].0.clone());
        group.sync(&follower, 1, None, at(3_110));
        sync_stored(
            &mut group,
            &leader,
            1,
            Some(assign(&answers[0].1, 2)),
            at(3_120),
        );
        // The leader keeps heartbeating; the follower crashed after its sync.
        for t in (4_000..=13_000).step_by(3_000) {
            assert_eq!(group.heartbeat(&leader, 1, at(t)), Ok(()));
            group.tick(at(t));
        }
        group.tick(at(13_110));
        assert_eq!(group.state(), State::Stable);
        assert!(group.tick(at(13_120)).is_empty());
        assert_eq!(
            group.state(),
            State::PreparingRebalance,
            "expired at 3.120s + 10s: its session restarts when it hears its assignment"
        );
        assert_eq!(group.members().collect::<Vec<_>>(), [leader.as_str()]);
        assert_eq!(
            group.heartbeat(&leader, 1, at(14_000)),
            Err(GroupError::RebalanceInProgress)
        );
        assert_eq!(
            group.accepts_commit(&leader, 1),
            Ok(()),
            "commits go on while preparing"
        );
        let rejoined = joined(
            &group
                .join(request(Some(&leader), "consumer-1"), at(14_010))
                .1,
        );
        assert_eq!(rejoined.len(), 1, "everyone is in: no wait");
        assert_eq!(rejoined[0].1.generation, 2);
        assert_eq!(
            group.accepts_commit(&leader, 2),
            Err(GroupError::RebalanceInProgress)
        );
        assert_eq!(
            group.sync(&follower, 1, None, at(14_020)).0[0],
            Answer::Sync {
                member: follower.clone(),
                result: Err(GroupError::UnknownMemberId),
            }
        );
    }

    #[test]
    fn a_member_that_does_not_rejoin_by_the_rebalance_timeout_is_left_out() {
        let (mut group, answers) = two_members();
        let (leader, follower) = (answers[0].0.clone(), answers[1].0.clone());
        group.sync(&follower, 1, None, at(3_110));
        sync_stored(
            &mut group,
            &leader,
            1,
            Some(assign(&answers[0].1, 2)),
            at(3_120),
        );
        // A third consumer arrives: a rebalance, which the follower (stuck in a long
        // poll, heartbeating) does not rejoin within the leader's rebalance timeout.
        assert!(joined(&group.join(request(None, "consumer-3"), at(5_000)).1).is_empty());
        assert!(joined(
            &group
                .join(request(Some(&leader), "consumer-1"), at(5_100))
                .1
        )
        .is_empty());
        // Its heartbeat thread goes on (KIP-62), so its session does not expire.
        for t in (6_000..35_000).step_by(3_000) {
            assert_eq!(
                group.heartbeat(&follower, 1, at(t)),
                Err(GroupError::RebalanceInProgress)
            );
            assert!(group.tick(at(t)).is_empty());
        }
        assert!(group.tick(at(34_999)).is_empty());
        let second = joined(&group.tick(at(35_000)));
        let members: Vec<&str> = second.iter().map(|(m, _)| m.as_str()).collect();
        assert_eq!(members, ["consumer-1-1", "consumer-3-3"]);
        assert!(second.iter().all(|(_, j)| j.generation == 2));
        assert_eq!(
            group.heartbeat(&follower, 1, at(35_100)),
            Err(GroupError::UnknownMemberId)
        );
        assert_eq!(
            group.heartbeat(&leader, 1, at(35_100)),
            Err(GroupError::IllegalGeneration)
        );
    }

    /// The coordinator sleeps until `next_deadline`: the first session expiry of a member
    /// not waiting on an answer, or the end of the join phase.
    #[test]
    fn the_next_deadline_is_the_first_session_expiry_or_the_end_of_the_join_phase() {
        let mut group = Group::new(DELAY);
        assert_eq!(group.next_deadline(), SimTime::LAST);
        group.join(request(None, "consumer-1"), at(0));
        assert_eq!(
            group.next_deadline(),
            at(3_000),
            "the join phase; the member waits on its answer, so its session does not run"
        );
        assert_eq!(joined(&group.tick(at(3_000))).len(), 1);
        assert_eq!(group.state(), State::CompletingRebalance);
        assert_eq!(group.next_deadline(), at(3_000) + SESSION);
    }

    /// Kafka's `doCommitOffsets`: a commit from outside any group (no member, a negative
    /// generation) is taken only while the group is empty; anyone else must be a member.
    #[test]
    fn a_commit_from_outside_the_group_is_taken_only_while_it_is_empty() {
        let empty = Group::new(DELAY);
        assert_eq!(empty.accepts_commit("", -1), Ok(()));
        for (member, generation) in [("", 0), ("consumer-1-1", -1), ("consumer-1-1", 0)] {
            assert_eq!(
                empty.accepts_commit(member, generation),
                Err(GroupError::UnknownMemberId),
                "{member:?} in generation {generation}"
            );
        }
        let (group, _) = two_members();
        assert_eq!(
            group.accepts_commit("", -1),
            Err(GroupError::UnknownMemberId)
        );
    }

    /// Kafka's stored group names its protocol only while it has members.
    #[test]
    fn the_stored_group_names_its_protocol_only_with_members() {
        let (group, answers) = two_members();
        let storing = Storing {
            generation: 1,
            assignment: assign(&answers[0].1, 2),
        };
        let value = group.stored(&storing, at(3_100));
        assert_eq!(value.protocol.as_deref(), Some("range"));
        assert_eq!(
            value.members[1].assignment,
            storing.assignment[&answers[1].0]
        );
        let none = Storing {
            generation: 0,
            assignment: BTreeMap::new(),
        };
        assert_eq!(Group::new(DELAY).stored(&none, at(0)).protocol, None);
    }

    /// Kafka's `storeGroup` callback: a failed store tells every member waiting on its
    /// SyncGroup the error and starts a rebalance; a store that completes after the group
    /// moved on changes nothing.
    #[test]
    fn a_failed_store_sends_the_members_back_and_a_late_one_changes_nothing() {
        let (mut group, answers) = two_members();
        let (leader, follower) = (answers[0].0.clone(), answers[1].0.clone());
        group.sync(&follower, 1, None, at(3_110));
        let (_, storing) = group.sync(&leader, 1, Some(assign(&answers[0].1, 2)), at(3_120));
        let failed = group.assignment_stored(
            storing.clone().unwrap(),
            Err(GroupError::NotCoordinator),
            at(3_200),
        );
        assert_eq!(failed.len(), 2);
        assert!(failed.iter().all(|a| matches!(
            a,
            Answer::Sync {
                result: Err(GroupError::NotCoordinator),
                ..
            }
        )));
        assert_eq!(group.state(), State::PreparingRebalance);

        // The members rejoin into generation 2; the leader's new assignment is on its
        // way when the first store's late success arrives: ignored.
        group.join(request(Some(&leader), "consumer-1"), at(3_300));
        let second = joined(
            &group
                .join(request(Some(&follower), "consumer-2"), at(3_310))
                .1,
        );
        assert_eq!(second.len(), 2);
        assert!(group
            .assignment_stored(storing.unwrap(), Ok(()), at(3_320))
            .is_empty());
        assert_eq!(group.state(), State::CompletingRebalance);

        // A member leaving while the second store is on its way starts a rebalance; the
        // store's success then changes nothing either.
        group.sync(&follower, 2, None, at(3_330));
        let (_, storing) = group.sync(&leader, 2, Some(assign(&second[0].1, 2)), at(3_340));
        let left = group.leave(&follower, at(3_350));
        assert!(matches!(
            &left[..],
            [Answer::Sync {
                result: Err(GroupError::RebalanceInProgress),
                ..
            }]
        ));
        assert!(group
            .assignment_stored(storing.unwrap(), Ok(()), at(3_360))
            .is_empty());
        assert_eq!(group.state(), State::PreparingRebalance);
    }

    /// Kafka's `handleJoinGroup` in CompletingRebalance: a member that rejoins with a
    /// changed subscription starts a new rebalance.
    #[test]
    fn a_changed_member_rejoining_a_completing_group_starts_a_rebalance() {
        let (mut group, answers) = two_members();
        let follower = answers[1].0.clone();
        let mut changed = request(Some(&follower), "consumer-2");
        changed.subscription.push("refunds".to_owned());
        assert!(group.join(changed, at(3_200)).1.is_empty());
        assert_eq!(group.state(), State::PreparingRebalance);
    }

    #[test]
    fn an_unchanged_follower_rejoining_a_stable_group_learns_its_generation() {
        let (mut group, answers) = two_members();
        let (leader, follower) = (answers[0].0.clone(), answers[1].0.clone());
        group.sync(&follower, 1, None, at(3_110));
        sync_stored(
            &mut group,
            &leader,
            1,
            Some(assign(&answers[0].1, 2)),
            at(3_120),
        );
        let again = joined(
            &group
                .join(request(Some(&follower), "consumer-2"), at(4_000))
                .1,
        );
        assert_eq!(again.len(), 1);
        assert_eq!((again[0].1.generation, group.state()), (1, State::Stable));
        let Answer::Join { result, .. } = &group.join(request(Some("nobody"), "x"), at(4_100)).1[0]
        else {
            panic!()
        };
        assert_eq!(result, &Err(GroupError::UnknownMemberId));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Join(usize),
        Sync(usize),
        Heartbeat(usize),
        Leave(usize),
        Wait(u64),
        /// The oldest store on its way completes, or fails.
        Stored(bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0..4usize).prop_map(Op::Join),
            (0..4usize).prop_map(Op::Sync),
            (0..4usize).prop_map(Op::Heartbeat),
            (0..4usize).prop_map(Op::Leave),
            (1..15_000u64).prop_map(Op::Wait),
            any::<bool>().prop_map(Op::Stored),
        ]
    }

    /// What a consumer believes: its id, generation, whether it leads (and the
    /// subscriptions it was given), and the partitions it owns.
    #[derive(Clone, Debug, Default)]
    struct Consumer {
        id: Option<MemberId>,
        generation: i32,
        led: Option<Joined>,
        owned: Vec<TopicPartition>,
    }

    proptest! {
        /// Whatever the consumers do and however time passes, no two members of one
        /// generation own the same partition, and an assignment always comes from the
        /// group's current generation.
        #[test]
        fn no_two_members_of_one_generation_own_a_partition(ops in proptest::collection::vec(op(), 1..60)) {
            let mut group = Group::new(DELAY);
            let mut consumers = vec![Consumer::default(); 4];
            let mut now = SimTime::ZERO;
            // generation -> partition -> owner
            let mut owners: BTreeMap<i32, BTreeMap<TopicPartition, MemberId>> = BTreeMap::new();
            let mut storing = std::collections::VecDeque::new();
            for op in ops {
                let answers = match op {
                    Op::Join(c) => {
                        let client = format!("consumer-{c}");
                        group.join(request(consumers[c].id.as_deref(), &client), now).1
                    }
                    Op::Sync(c) => match consumers[c].id.clone() {
                        Some(id) => {
                            let plan = consumers[c].led.as_ref().map(|j| assign(j, 5));
                            let (answers, store) = group.sync(&id, consumers[c].generation, plan, now);
                            storing.extend(store);
                            answers
                        }
                        None => Vec::new(),
                    },
                    Op::Heartbeat(c) => {
                        if let Some(id) = &consumers[c].id {
                            let _ = group.heartbeat(id, consumers[c].generation, now);
                        }
                        Vec::new()
                    }
                    Op::Leave(c) => match consumers[c].id.take() {
                        Some(id) => {
                            consumers[c] = Consumer::default();
                            group.leave(&id, now)
                        }
                        None => Vec::new(),
                    },
                    Op::Wait(ms) => {
                        now += Duration::from_millis(ms);
                        group.tick(now)
                    }
                    Op::Stored(ok) => match storing.pop_front() {
                        Some(store) => {
                            let outcome = if ok { Ok(()) } else { Err(GroupError::NotCoordinator) };
                            group.assignment_stored(store, outcome, now)
                        }
                        None => Vec::new(),
                    },
                };
                for answer in answers {
                    let member = match &answer {
                        Answer::Join { member, .. } | Answer::Sync { member, .. } => member.clone(),
                    };
                    let Some(c) = consumers.iter().position(|c| c.id.as_deref() == Some(&member))
                        .or_else(|| {
                            // A new member's first answer: the consumer whose client id it carries.
                            let stem = member.rsplit_once('-').map(|(s, _)| s)?;
                            consumers.iter().enumerate()
                                .position(|(i, c)| c.id.is_none() && stem == format!("consumer-{i}"))
                        }) else { continue };
                    match answer {
                        Answer::Join { result: Ok(joined), .. } => {
                            let leads = joined.leader == member;
                            consumers[c] = Consumer {
                                id: Some(member),
                                generation: joined.generation,
                                led: leads.then_some(joined),
                                owned: Vec::new(),
                            };
                        }
                        Answer::Sync { result: Ok(owned), .. } => {
                            prop_assert_eq!(consumers[c].generation, group.generation());
                            let generation = consumers[c].generation;
                            for tp in &owned {
                                let owner = owners.entry(generation).or_default()
                                    .entry(tp.clone()).or_insert_with(|| member.clone());
                                prop_assert_eq!(&*owner, &member, "{} owned twice in generation {}", tp, generation);
                            }
                            consumers[c].owned = owned;
                        }
                        Answer::Join { result: Err(_), .. } => consumers[c] = Consumer::default(),
                        Answer::Sync { result: Err(_), .. } => consumers[c].owned.clear(),
                    }
                }
            }
        }
    }
}
