//! Fetch sessions (KIP-227): a follower and its leader both remember what the session's
//! last fetch asked for and what its answer said, so that a fetch names only the
//! partitions that changed and an answer carries only the partitions with news. Without
//! them every round of a fetcher that follows N partitions costs O(N) on the wire and in
//! both brokers, however little moved.
//!
//! A fetch with session id 0 and epoch 0 opens a session: it names every partition and is
//! answered in full, with the new session's id. Epoch -1 asks for no session (consumers,
//! the final read). An open session's id with its next epoch is an incremental fetch.
//! Both sides are plain state machines here; the fetcher and the replica manager drive
//! them.

use crate::kafka::protocol::messages::{
    ErrorCode, Fetch, FetchPartition, FetchResponse, FetchedPartition,
};
use crate::types::{BrokerId, Offset, TopicPartition};
use std::collections::BTreeMap;

/// The epoch of a fetch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch of a fetch outside any session.
pub const FINAL_EPOCH: i32 = -1;

/// The fetcher's side, for one leader (Kafka's `FetchSessionHandler`).
#[derive(Debug, Default)]
pub struct SessionHandler {
    /// 0 until the leader opened a session.
    id: u32,
    next_epoch: i32,
    /// What the leader holds for each partition of the session.
    sent: BTreeMap<TopicPartition, FetchPartition>,
}

/// What a fetch of the session sends.
#[derive(Debug, PartialEq, Eq)]
pub struct SessionRequest {
    pub session_id: u32,
    pub session_epoch: i32,
    pub partitions: Vec<FetchPartition>,
    pub forgotten: Vec<TopicPartition>,
}

impl SessionHandler {
    /// The request of a round that wants `wanted`, sorted by partition: everything to open
    /// a session, then only what was added or changed, and what left.
    pub fn build(&mut self, wanted: &[FetchPartition]) -> SessionRequest {
        if self.id == 0 {
            self.sent = wanted.iter().map(|p| (p.tp.clone(), p.clone())).collect();
            return SessionRequest {
                session_id: 0,
                session_epoch: INITIAL_EPOCH,
                partitions: wanted.to_vec(),
                forgotten: Vec::new(),
            };
        }
        let forgotten: Vec<TopicPartition> = self
            .sent
            .keys()
            .filter(|tp| wanted.binary_search_by(|p| p.tp.cmp(tp)).is_err())
            .cloned()
            .collect();
        for tp in &forgotten {
            self.sent.remove(tp);
        }
        let mut partitions = Vec::new();
        for partition in wanted {
            if self.sent.get(&partition.tp) != Some(partition) {
                self.sent.insert(partition.tp.clone(), partition.clone());
                partitions.push(partition.clone());
            }
        }
        SessionRequest {
            session_id: self.id,
            session_epoch: self.next_epoch,
            partitions,
            forgotten,
        }
    }

    /// Learn from the leader's answer to the last request. False when the session is gone
    /// (the next fetch opens a new one).
    pub fn handle_response(&mut self, response: &FetchResponse) -> bool {
        if response.error.is_some() {
            self.reset();
            return false;
        }
        if self.id == 0 {
            self.id = response.session_id;
            self.next_epoch = 1;
        } else {
            self.next_epoch = next_epoch(self.next_epoch);
        }
        true
    }

    /// Forget the session: after a failed request, or on a new connection.
    pub fn reset(&mut self) {
        *self = SessionHandler::default();
    }
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// A partition of a session, on the leader.
#[derive(Debug)]
struct Cached {
    asked: FetchPartition,
    /// The HW and log start offset the last answer carried; `None` before the first.
    sent: Option<(Offset, Offset)>,
}

#[derive(Debug)]
struct LeaderSession {
    id: u32,
    next_epoch: i32,
    partitions: BTreeMap<TopicPartition, Cached>,
}

/// How a fetch is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Every partition, no session.
    Sessionless,
    /// Every partition, and the session `id` of `replica` remembers what was sent.
    Full { replica: BrokerId, id: u32 },
    /// Only the partitions with news.
    Incremental { replica: BrokerId, id: u32 },
}

impl Context {
    pub fn session_id(self) -> u32 {
        match self {
            Context::Sessionless => 0,
            Context::Full { id, .. } | Context::Incremental { id, .. } => id,
        }
    }
}

/// The leader's side (Kafka's `FetchSessionCache` and `FetchContext`). One session per
/// follower: a follower has one fetcher per leader, and its new session replaces its
/// last (Kafka evicts the old one later; nothing reads it meanwhile).
#[derive(Debug, Default)]
pub struct SessionCache {
    last_id: u32,
    by_replica: BTreeMap<BrokerId, LeaderSession>,
}

impl SessionCache {
    /// The partitions this fetch reads, and how it will be answered; or the session
    /// error to answer with.
    pub fn open(&mut self, request: Fetch) -> Result<(Context, Vec<FetchPartition>), ErrorCode> {
        let Some(replica) = request.replica else {
            return Ok((Context::Sessionless, request.partitions));
        };
        match (request.session_id, request.session_epoch) {
            (_, FINAL_EPOCH) => {
                self.by_replica.remove(&replica);
                Ok((Context::Sessionless, request.partitions))
            }
            (0, INITIAL_EPOCH) => {
                self.last_id += 1;
                let id = self.last_id;
                let partitions = request
                    .partitions
                    .iter()
                    .map(|p| {
                        let cached = Cached {
                            asked: p.clone(),
                            sent: None,
                        };
                        (p.tp.clone(), cached)
                    })
                    .collect();
                let session = LeaderSession {
                    id,
                    next_epoch: 1,
                    partitions,
                };
                self.by_replica.insert(replica, session);
                Ok((Context::Full { replica, id }, request.partitions))
            }
            (id, epoch) => {
                let session = self
                    .by_replica
                    .get_mut(&replica)
                    .filter(|s| s.id == id)
                    .ok_or(ErrorCode::FetchSessionIdNotFound)?;
                if epoch != session.next_epoch {
                    return Err(ErrorCode::InvalidFetchSessionEpoch);
                }
                session.next_epoch = next_epoch(epoch);
                for tp in &request.forgotten {
                    session.partitions.remove(tp);
                }
                for asked in request.partitions {
                    match session.partitions.get_mut(&asked.tp) {
                        Some(cached) => cached.asked = asked,
                        None => {
                            let tp = asked.tp.clone();
                            session.partitions.insert(tp, Cached { asked, sent: None });
                        }
                    }
                }
                let partitions = session
                    .partitions
                    .values()
                    .map(|c| c.asked.clone())
                    .collect();
                Ok((Context::Incremental { replica, id }, partitions))
            }
        }
    }

    /// What the answer carries, given the answers read for every partition `open` named:
    /// all of them in a full fetch; in an incremental one only those with records, an
    /// error, a divergence, or an HW or log start offset other than the last answer's.
    pub fn respond(
        &mut self,
        context: Context,
        answers: Vec<FetchedPartition>,
    ) -> Vec<FetchedPartition> {
        let (replica, id, full) = match context {
            Context::Sessionless => return answers,
            Context::Full { replica, id } => (replica, id, true),
            Context::Incremental { replica, id } => (replica, id, false),
        };
        // The session was replaced meanwhile (its follower restarted): nothing to remember.
        let Some(session) = self.by_replica.get_mut(&replica).filter(|s| s.id == id) else {
            return answers;
        };
        let mut cached = session.partitions.values_mut();
        answers
            .into_iter()
            .filter(|answer| {
                let Some(cached) = cached.next().filter(|c| c.asked.tp == answer.tp) else {
                    return true;
                };
                let sent = Some((answer.high_watermark, answer.log_start_offset));
                let news = full
                    || !answer.records.is_empty()
                    || answer.error.is_some()
                    || answer.diverging_epoch.is_some()
                    || cached.sent != sent;
                cached.sent = sent;
                news
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::kafka::IsolationLevel;
    use crate::types::Epoch;

    fn ask(partition: u32, offset: i64) -> FetchPartition {
        FetchPartition {
            tp: TopicPartition::new("t", partition),
            fetch_offset: Offset(offset),
            current_leader_epoch: Epoch(0),
            last_fetched_epoch: None,
            max_bytes: 1 << 20,
        }
    }

    fn answer(partition: u32, hw: i64, records: &[u8]) -> FetchedPartition {
        FetchedPartition {
            tp: TopicPartition::new("t", partition),
            error: None,
            high_watermark: Offset(hw),
            last_stable_offset: Offset(hw),
            aborted_transactions: None,
            log_start_offset: Offset(0),
            records: records.to_vec(),
            diverging_epoch: None,
        }
    }

    fn fetch(request: SessionRequest) -> Fetch {
        Fetch {
            replica: Some(BrokerId(2)),
            replica_epoch: None,
            isolation: IsolationLevel::ReadUncommitted,
            max_wait_ms: 500,
            min_bytes: 1,
            session_id: request.session_id,
            session_epoch: request.session_epoch,
            partitions: request.partitions,
            forgotten: request.forgotten,
        }
    }

    fn response(session_id: u32, partitions: Vec<FetchedPartition>) -> FetchResponse {
        FetchResponse {
            error: None,
            session_id,
            partitions,
        }
    }

    fn tps(partitions: &[FetchedPartition]) -> Vec<u32> {
        partitions.iter().map(|p| p.tp.partition).collect()
    }

    /// The round trip of KIP-227: a full fetch opens the session; then a fetch names only
    /// what changed and the answer carries only what has news, while the leader still
    /// reads every partition of the session.
    #[test]
    fn a_session_sends_only_what_changed() {
        let (mut follower, mut leader) = (SessionHandler::default(), SessionCache::default());
        let wanted = vec![ask(0, 5), ask(1, 7), ask(2, 9)];
        let first = follower.build(&wanted);
        assert_eq!((first.session_id, first.session_epoch), (0, INITIAL_EPOCH));
        let (context, read) = leader.open(fetch(first)).expect("opens");
        assert_eq!(read, wanted);
        let answers = vec![answer(0, 5, b"x"), answer(1, 7, b""), answer(2, 9, b"")];
        let sent = leader.respond(context, answers);
        assert_eq!(
            tps(&sent),
            vec![0, 1, 2],
            "a full answer carries everything"
        );
        assert!(follower.handle_response(&response(context.session_id(), sent)));

        // Partition 0 moved on; 2 is held back by the fetcher (so it leaves the session).
        let wanted = vec![ask(0, 6), ask(1, 7)];
        let second = follower.build(&wanted);
        assert_eq!(second.session_id, context.session_id());
        assert_eq!(second.session_epoch, 1);
        assert_eq!(second.partitions, vec![ask(0, 6)]);
        assert_eq!(second.forgotten, vec![TopicPartition::new("t", 2)]);
        let (context, read) = leader.open(fetch(second)).expect("incremental");
        assert_eq!(read, wanted, "the leader reads the whole session");
        // Nothing new on 0; 1's HW moved.
        let sent = leader.respond(context, vec![answer(0, 5, b""), answer(1, 8, b"")]);
        assert_eq!(tps(&sent), vec![1], "only the HW that moved");
        assert!(follower.handle_response(&response(context.session_id(), sent)));

        let third = follower.build(&wanted);
        assert!(third.partitions.is_empty() && third.forgotten.is_empty());
        assert_eq!(third.session_epoch, 2);
    }

    #[test]
    fn a_lost_session_or_a_wrong_epoch_starts_over() {
        let mut leader = SessionCache::default();
        let stale = fetch(SessionRequest {
            session_id: 7,
            session_epoch: 3,
            partitions: Vec::new(),
            forgotten: Vec::new(),
        });
        assert_eq!(
            leader.open(stale).err(),
            Some(ErrorCode::FetchSessionIdNotFound)
        );
        let mut follower = SessionHandler::default();
        let (context, _) = leader.open(fetch(follower.build(&[ask(0, 0)]))).unwrap();
        follower.handle_response(&response(context.session_id(), Vec::new()));
        let mut request = follower.build(&[ask(0, 0)]);
        request.session_epoch += 1;
        assert_eq!(
            leader.open(fetch(request)).err(),
            Some(ErrorCode::InvalidFetchSessionEpoch)
        );
        let error = FetchResponse {
            error: Some(ErrorCode::InvalidFetchSessionEpoch),
            session_id: 0,
            partitions: Vec::new(),
        };
        assert!(!follower.handle_response(&error));
        let again = follower.build(&[ask(0, 0)]);
        assert_eq!((again.session_id, again.session_epoch), (0, INITIAL_EPOCH));
        assert_eq!(again.partitions.len(), 1, "a new session names everything");
    }

    #[test]
    fn consumers_fetch_without_a_session() {
        let mut leader = SessionCache::default();
        let request = Fetch {
            replica: None,
            replica_epoch: None,
            ..fetch(SessionRequest {
                session_id: 0,
                session_epoch: FINAL_EPOCH,
                partitions: vec![ask(0, 0)],
                forgotten: Vec::new(),
            })
        };
        let (context, read) = leader.open(request).unwrap();
        assert_eq!(context, Context::Sessionless);
        let sent = leader.respond(context, vec![answer(0, 0, b"")]);
        assert_eq!(read.len(), 1);
        assert_eq!(
            sent.len(),
            1,
            "without a session every partition is answered"
        );
    }
}
