//! One consumer's side of the classic group protocol, as plain data: find the
//! coordinator, join, sync (the leader assigns with the range assignor), heartbeat, and
//! start over on the errors that say to. The async consumer sends what
//! [`Membership::next`] asks for and hands back the answers; this decides what they mean.
//!
//! As Kafka's `ConsumerCoordinator`: NOT_COORDINATOR and COORDINATOR_NOT_AVAILABLE send
//! it looking for the coordinator again; UNKNOWN_MEMBER_ID makes it join afresh, without
//! its member id; ILLEGAL_GENERATION and REBALANCE_IN_PROGRESS make it rejoin with it.
//! Heartbeats go every `heartbeat.interval.ms` while it is in a generation, from their own
//! thread (KIP-62), so they continue while records are processed.

use super::assignor;
use crate::kafka::protocol::messages::{
    ErrorCode, JoinGroup, JoinGroupResponse, Request, SyncGroup,
};
use crate::os::clock::SimTime;
use crate::types::TopicPartition;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where the member is in the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    /// It needs a coordinator (FindCoordinator, to any broker).
    Finding,
    Joining,
    /// Joined generation `generation`; the leader brings the assignment.
    Syncing,
    /// In a generation, owning `assignment`.
    Stable,
}

/// What an answer changed that the consumer must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// Nothing the consumer sees.
    None,
    /// It owns these partitions now (in this generation): fetch their committed offsets.
    Assigned(Vec<TopicPartition>),
    /// It lost its partitions (a rebalance, or it was dropped): stop processing them.
    Revoked(Vec<TopicPartition>),
}

#[derive(Clone, Debug)]
pub struct Membership {
    pub group: String,
    client: String,
    subscription: Vec<String>,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    heartbeat_interval: Duration,
    phase: Phase,
    coordinator: Option<crate::types::BrokerId>,
    member: Option<String>,
    generation: i32,
    /// The members' subscriptions, when this member leads the generation.
    leading: Option<Vec<(String, Vec<String>)>>,
    assignment: Vec<TopicPartition>,
    next_heartbeat: SimTime,
    /// It lost its coordinator while in a generation: once found again, it goes on
    /// heartbeating in it (the new coordinator says if the generation is gone).
    resume: bool,
}

impl Membership {
    pub fn new(
        group: &str,
        client: &str,
        subscription: Vec<String>,
        session_timeout: Duration,
        rebalance_timeout: Duration,
        heartbeat_interval: Duration,
    ) -> Membership {
        Membership {
            group: group.to_owned(),
            client: client.to_owned(),
            subscription,
            session_timeout,
            rebalance_timeout,
            heartbeat_interval,
            phase: Phase::Finding,
            coordinator: None,
            member: None,
            generation: -1,
            leading: None,
            assignment: Vec::new(),
            next_heartbeat: SimTime::LAST,
            resume: false,
        }
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    pub fn coordinator(&self) -> Option<crate::types::BrokerId> {
        self.coordinator
    }

    /// The member id and generation its commits carry (`""`, -1 outside a generation).
    pub fn identity(&self) -> (&str, i32) {
        match self.phase {
            Phase::Stable => (self.member.as_deref().unwrap_or(""), self.generation),
            Phase::Finding if self.resume => {
                (self.member.as_deref().unwrap_or(""), self.generation)
            }
            _ => ("", -1),
        }
    }

    pub fn assignment(&self) -> &[TopicPartition] {
        &self.assignment
    }

    /// The request to send now, if any: the shell sends it (to the coordinator, except a
    /// FindCoordinator, which any broker answers), one at a time, and hands the answer to
    /// `found`, `joined`, `synced` or `heartbeat_answered` (or says it `timed_out`)
    /// before it asks again.
    /// `partitions` is each subscribed topic's partition count, for the leader's
    /// assignment.
    pub fn next(&mut self, now: SimTime, partitions: &BTreeMap<String, u32>) -> Option<Request> {
        match self.phase {
            Phase::Finding => Some(Request::FindCoordinator {
                group: self.group.clone(),
            }),
            Phase::Joining => Some(Request::JoinGroup(JoinGroup {
                group: self.group.clone(),
                member: self.member.clone(),
                client: self.client.clone(),
                subscription: self.subscription.clone(),
                session_timeout_ms: self.session_timeout.as_millis() as u64,
                rebalance_timeout_ms: self.rebalance_timeout.as_millis() as u64,
            })),
            Phase::Syncing => {
                let assignment = self.leading.as_ref().map(|members| {
                    let subscriptions = members.iter().cloned().collect();
                    assignor::range(&subscriptions, partitions)
                });
                Some(Request::SyncGroup(SyncGroup {
                    group: self.group.clone(),
                    member: self.member.clone().unwrap_or_default(),
                    generation: self.generation,
                    assignment,
                }))
            }
            Phase::Stable if now >= self.next_heartbeat => {
                self.next_heartbeat = now + self.heartbeat_interval;
                Some(Request::Heartbeat {
                    group: self.group.clone(),
                    member: self.member.clone().unwrap_or_default(),
                    generation: self.generation,
                })
            }
            Phase::Stable => None,
        }
    }

    /// When [`next`](Self::next) will have a heartbeat to send.
    pub fn next_heartbeat(&self) -> SimTime {
        match self.phase {
            Phase::Stable => self.next_heartbeat,
            _ => SimTime::LAST,
        }
    }

    /// A FindCoordinator's answer: the broker, or `None` (not yet known: ask again).
    pub fn found(&mut self, coordinator: Option<crate::types::BrokerId>, now: SimTime) {
        if self.phase == Phase::Finding {
            if let Some(broker) = coordinator {
                self.coordinator = Some(broker);
                self.phase = if std::mem::take(&mut self.resume) {
                    self.next_heartbeat = now;
                    Phase::Stable
                } else {
                    Phase::Joining
                };
            }
        }
    }

    pub fn joined(&mut self, answer: &JoinGroupResponse) -> Change {
        if let Some(error) = answer.error {
            return self.refused(error);
        }
        self.member = Some(answer.member.clone());
        self.generation = answer.generation;
        self.leading = (answer.leader == answer.member).then(|| answer.members.clone());
        self.phase = Phase::Syncing;
        Change::None
    }

    pub fn synced(
        &mut self,
        error: Option<ErrorCode>,
        assignment: &[TopicPartition],
        now: SimTime,
    ) -> Change {
        if let Some(error) = error {
            return self.refused(error);
        }
        self.phase = Phase::Stable;
        self.leading = None;
        self.next_heartbeat = now + self.heartbeat_interval;
        self.assignment = assignment.to_vec();
        Change::Assigned(self.assignment.clone())
    }

    pub fn heartbeat_answered(&mut self, error: Option<ErrorCode>) -> Change {
        match error {
            None => Change::None,
            Some(error) => self.refused(error),
        }
    }

    /// The coordinator did not answer in time: look for it again (the generation may
    /// still stand; the next join says).
    pub fn timed_out(&mut self) -> Change {
        self.refused(ErrorCode::CoordinatorNotAvailable)
    }

    /// An error from the coordinator, as Kafka's consumer reads it.
    fn refused(&mut self, error: ErrorCode) -> Change {
        match error {
            // A commit's REQUEST_TIMED_OUT (its append was not replicated in time) also
            // sends the member to look for the coordinator (`OffsetCommitResponseHandler`).
            ErrorCode::NotCoordinator
            | ErrorCode::CoordinatorNotAvailable
            | ErrorCode::RequestTimedOut => {
                // Kafka's consumer keeps its partitions while it looks: a new coordinator
                // that still has the generation takes its heartbeats.
                // Asked again while still looking, it keeps what it was looking for.
                self.resume =
                    self.phase == Phase::Stable || (self.phase == Phase::Finding && self.resume);
                self.coordinator = None;
                self.phase = Phase::Finding;
                return Change::None;
            }
            ErrorCode::CoordinatorLoadInProgress => return Change::None,
            ErrorCode::UnknownMemberId => {
                self.member = None;
                self.generation = -1;
                self.phase = Phase::Joining;
            }
            _ => self.phase = Phase::Joining,
        }
        self.leading = None;
        match std::mem::take(&mut self.assignment) {
            revoked if revoked.is_empty() => Change::None,
            revoked => Change::Revoked(revoked),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::BrokerId;

    fn member() -> Membership {
        Membership::new(
            "billing",
            "consumer-1",
            vec!["orders".into()],
            Duration::from_secs(10),
            Duration::from_secs(30),
            Duration::from_secs(3),
        )
    }

    fn partitions() -> BTreeMap<String, u32> {
        BTreeMap::from([("orders".to_string(), 2)])
    }

    fn at(ms: u64) -> SimTime {
        SimTime::from_millis(ms)
    }

    /// A member that found its coordinator, joined as leader and got its partitions.
    fn stable() -> Membership {
        let mut m = member();
        assert!(matches!(
            m.next(at(0), &partitions()),
            Some(Request::FindCoordinator { .. })
        ));
        m.found(None, at(0));
        assert_eq!(m.phase(), &Phase::Finding, "not known yet: ask again");
        m.found(Some(BrokerId(2)), at(0));
        let Some(Request::JoinGroup(join)) = m.next(at(1), &partitions()) else {
            panic!()
        };
        assert_eq!(join.member, None, "a new member has no id");
        m.joined(&JoinGroupResponse {
            error: None,
            generation: 1,
            member: "consumer-1-1".into(),
            leader: "consumer-1-1".into(),
            members: vec![("consumer-1-1".into(), vec!["orders".into()])],
        });
        let Some(Request::SyncGroup(sync)) = m.next(at(2), &partitions()) else {
            panic!()
        };
        let plan = sync.assignment.expect("the leader assigns");
        assert_eq!(plan["consumer-1-1"].len(), 2);
        let owned = plan["consumer-1-1"].clone();
        assert_eq!(m.synced(None, &owned, at(3)), Change::Assigned(owned));
        m
    }

    #[test]
    fn a_new_member_finds_joins_leads_and_heartbeats() {
        let mut m = stable();
        assert_eq!(m.identity(), ("consumer-1-1", 1));
        assert_eq!(
            m.next(at(2_000), &partitions()).map(|_| ()),
            None,
            "not yet"
        );
        assert!(matches!(
            m.next(at(3_003), &partitions()),
            Some(Request::Heartbeat { generation: 1, .. })
        ));
        assert_eq!(m.next_heartbeat(), at(6_003));
    }

    #[test]
    fn errors_send_it_back_as_kafkas_consumer_goes_back() {
        let mut m = stable();
        // A rebalance: rejoin with the same id, the partitions revoked.
        assert!(matches!(
            m.heartbeat_answered(Some(ErrorCode::RebalanceInProgress)),
            Change::Revoked(p) if p.len() == 2
        ));
        let Some(Request::JoinGroup(join)) = m.next(at(10), &partitions()) else {
            panic!()
        };
        assert_eq!(join.member.as_deref(), Some("consumer-1-1"));
        assert_eq!(m.identity(), ("", -1), "no commits outside a generation");

        // Dropped by the coordinator: a fresh join, without the id.
        let mut m = stable();
        m.heartbeat_answered(Some(ErrorCode::UnknownMemberId));
        let Some(Request::JoinGroup(join)) = m.next(at(10), &partitions()) else {
            panic!()
        };
        assert_eq!(join.member, None);

        // The coordinator moved: find it again, keeping the partitions meanwhile.
        let mut m = stable();
        assert_eq!(
            m.heartbeat_answered(Some(ErrorCode::NotCoordinator)),
            Change::None
        );
        assert_eq!((m.phase(), m.coordinator()), (&Phase::Finding, None));
        assert_eq!(m.assignment().len(), 2);
        m.found(Some(BrokerId(3)), at(20));
        assert_eq!(m.phase(), &Phase::Stable, "it goes on in its generation");
        assert!(matches!(
            m.next(at(20), &partitions()),
            Some(Request::Heartbeat { generation: 1, .. })
        ));
        // Lost while syncing, it joins again once found.
        let mut m = member();
        m.found(Some(BrokerId(2)), at(0));
        m.joined(&JoinGroupResponse {
            error: Some(ErrorCode::NotCoordinator),
            generation: -1,
            member: String::new(),
            leader: String::new(),
            members: Vec::new(),
        });
        m.found(Some(BrokerId(3)), at(5));
        assert_eq!(m.phase(), &Phase::Joining);
    }

    #[test]
    fn a_member_that_times_out_again_while_looking_still_resumes_its_generation() {
        let mut m = stable();
        let generation = m.identity().1;
        m.timed_out();
        m.timed_out();
        assert_eq!(m.phase(), &Phase::Finding);
        assert_eq!(
            m.identity().1,
            generation,
            "commits still carry the generation"
        );
        m.found(Some(BrokerId(3)), at(20));
        assert_eq!(
            m.phase(),
            &Phase::Stable,
            "heartbeats go on in the generation"
        );
    }
}
