//! The group coordinator's async shell: it answers the group requests from
//! [`Coordinator`]'s decisions, holds JoinGroup and SyncGroup requests until their answer
//! is released, writes commits to `__consumer_offsets` with acks=all through the replica
//! manager, and follows the broker's leadership of the offsets partitions: a partition
//! it comes to lead is read back from its log before it answers for it, one it loses is
//! forgotten (its waiting members are told NOT_COORDINATOR).
//!
//! As Kafka's `GroupCoordinator` with `GroupMetadataManager`: commits and, after each
//! rebalance, the group's membership (its GroupMetadata record) are written, so a new
//! coordinator knows the generation and its members and takes their heartbeats. Except:
//! the log is read back at once (the simulated disk answers reads without delay, so there
//! is no window of COORDINATOR_LOAD_IN_PROGRESS), and a group that became empty is not
//! stored again (its last stable generation is restored, and its members expire after a
//! session timeout, where Kafka's record says it is empty).

pub mod coordinator;
pub mod group;
pub mod offsets_record;

use super::replica_manager::ReplicaManager;
use crate::config::kafka::{Acks, BrokerConfig};
use crate::kafka::protocol::messages::{
    ErrorCode, JoinGroupResponse, MarkerErrors, OffsetCommit, Produce, Request, Response,
    TxnProducer, WriteTxnMarkers,
};
use crate::kafka::record::{self, BatchBuilder, EndTxnMarker, TxnResult};
use crate::kafka::types::ProducerId;
use crate::os::clock;
use crate::types::{Epoch, TopicPartition};
use coordinator::{Append, Coordinator, GroupStore, LogEntry, OFFSETS_TOPIC};
use group::{Answer, GroupError, JoinRequest, MemberId};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::{oneshot, Notify};

/// A loaded offsets partition is read back this many bytes at a time (Kafka's
/// `offsets.load.buffer.size`).
const LOAD_BUFFER: u64 = 5 * 1024 * 1024;

/// The longest the clock task sleeps without news, so that it never sleeps "forever".
const IDLE: Duration = Duration::from_secs(60);

/// Which answer a member waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Awaiting {
    Join,
    Sync,
}

pub struct Groups {
    coordinator: RefCell<Coordinator>,
    commit_timeout: Duration,
    /// The offsets partitions led and read back, with the leader epoch they were read in:
    /// leading again in a later epoch means reading again.
    loaded: RefCell<BTreeMap<u32, Epoch>>,
    waiting: RefCell<BTreeMap<(String, MemberId, Awaiting), oneshot::Sender<Answer>>>,
    /// A request moved a group's deadlines: the clock task looks again.
    changed: Notify,
}

impl Groups {
    pub fn new(config: &BrokerConfig) -> Groups {
        Groups {
            coordinator: RefCell::new(Coordinator::new(
                config.offsets_topic_num_partitions,
                config.group_initial_rebalance_delay,
            )),
            commit_timeout: config.offsets_commit_timeout,
            loaded: RefCell::default(),
            waiting: RefCell::default(),
            changed: Notify::new(),
        }
    }

    /// Hand released answers to the members waiting for them; an answer for a member that
    /// stopped waiting (its request timed out) is dropped, as Kafka drops it.
    fn deliver(&self, answers: impl IntoIterator<Item = (String, Answer)>) {
        let mut waiting = self.waiting.borrow_mut();
        for (group, answer) in answers {
            let (member, awaiting) = match &answer {
                Answer::Join { member, .. } => (member.clone(), Awaiting::Join),
                Answer::Sync { member, .. } => (member.clone(), Awaiting::Sync),
            };
            if let Some(sender) = waiting.remove(&(group, member, awaiting)) {
                let _ = sender.send(answer);
            }
        }
    }

    /// Take this request's own answer out of `answers`, deliver the rest, and wait for it
    /// if it was not among them. `None`: this broker stopped coordinating the group.
    async fn answer_for(
        &self,
        group: &str,
        member: &MemberId,
        awaiting: Awaiting,
        answers: Vec<Answer>,
    ) -> Option<Answer> {
        let (own, others): (Vec<Answer>, Vec<Answer>) =
            answers.into_iter().partition(|answer| match answer {
                Answer::Join { member: m, .. } => awaiting == Awaiting::Join && m == member,
                Answer::Sync { member: m, .. } => awaiting == Awaiting::Sync && m == member,
            });
        self.deliver(others.into_iter().map(|a| (group.to_owned(), a)));
        if let Some(answer) = own.into_iter().next() {
            return Some(answer);
        }
        self.wait_for(group, member, awaiting).await.ok()
    }

    /// Register a member's wait for its answer, which a later delivery sends.
    fn wait_for(
        &self,
        group: &str,
        member: &MemberId,
        awaiting: Awaiting,
    ) -> oneshot::Receiver<Answer> {
        let (sender, receiver) = oneshot::channel();
        self.waiting
            .borrow_mut()
            .insert((group.to_owned(), member.clone(), awaiting), sender);
        self.changed.notify_one();
        receiver
    }
}

/// The coordinator's clock and its following of leadership: load what this broker came
/// to lead, forget what it lost, expire members and end join phases on time.
pub async fn run(rm: Rc<ReplicaManager>, groups: Rc<Groups>) {
    loop {
        follow_leadership(&rm, &groups);
        let now = clock::now();
        let answers = groups.coordinator.borrow_mut().tick(now);
        groups.deliver(answers);
        let wait = (groups.coordinator.borrow().next_deadline() - now).clamp(Duration::ZERO, IDLE);
        tokio::select! {
            biased;
            _ = rm.leadership_changed.notified() => {}
            _ = groups.changed.notified() => {}
            _ = tokio::time::sleep(wait.max(Duration::from_millis(1))) => {}
        }
    }
}

fn follow_leadership(rm: &ReplicaManager, groups: &Groups) {
    let led = rm.led_partitions(OFFSETS_TOPIC);
    let mut loaded = groups.loaded.borrow_mut();
    let mut coordinator = groups.coordinator.borrow_mut();
    let lost: Vec<u32> = loaded
        .iter()
        .filter(|(p, epoch)| led.get(p) != Some(epoch))
        .map(|(p, _)| *p)
        .collect();
    for partition in lost {
        tracing::info!(broker = rm.id.0, partition, "group coordinator resigns");
        coordinator.resign(partition);
        loaded.remove(&partition);
        // Dropping a waiter's sender answers it NOT_COORDINATOR.
        groups
            .waiting
            .borrow_mut()
            .retain(|(group, _, _), _| coordinator.partition_of(group) != partition);
    }
    for (partition, epoch) in led {
        if loaded.contains_key(&partition) {
            continue;
        }
        coordinator.lead(partition);
        let tp = TopicPartition::new(OFFSETS_TOPIC, partition);
        match read_back(rm, &tp).and_then(|entries| {
            let skip = if rm.bugs.coordinator_skips_load {
                entries.len()
            } else {
                0
            };
            let entries = entries[skip..].iter().filter_map(ReadBack::entry);
            coordinator.loaded(partition, entries, clock::now())
        }) {
            Ok(()) => {
                tracing::info!(broker = rm.id.0, partition, epoch = %epoch, "group coordinator loaded");
                loaded.insert(partition, epoch);
            }
            // Left unloaded: its groups are answered COORDINATOR_LOAD_IN_PROGRESS.
            Err(error) => tracing::warn!(broker = rm.id.0, partition, %error, "offsets not loaded"),
        }
    }
}

/// One entry of an internal topic's log, owned: a record (with its batch's producer id if
/// the batch is transactional), or a transaction marker.
pub(crate) enum ReadBack {
    Record {
        transactional: Option<ProducerId>,
        key: Option<Vec<u8>>,
        value: Option<Vec<u8>>,
    },
    Marker {
        producer_id: ProducerId,
        result: TxnResult,
    },
}

impl ReadBack {
    /// As a load reads it; `None` for a record without a key, which no coordinator wrote.
    pub(crate) fn entry(&self) -> Option<LogEntry<'_>> {
        Some(match self {
            ReadBack::Record {
                transactional,
                key,
                value,
            } => LogEntry::Record {
                transactional: *transactional,
                key: key.as_deref()?,
                value: value.as_deref(),
            },
            ReadBack::Marker {
                producer_id,
                result,
            } => LogEntry::Marker {
                producer_id: *producer_id,
                result: *result,
            },
        })
    }
}

/// Every entry of the partition's log, up to its end (Kafka's loaders read to the log
/// end, not the HW), oldest first.
pub(crate) fn read_back(rm: &ReplicaManager, tp: &TopicPartition) -> Result<Vec<ReadBack>, String> {
    let partitions = rm.partitions.borrow();
    let log = partitions.get(tp).ok_or("not hosted")?.log();
    let end = log.log_end_offset();
    let mut from = log.log_start_offset();
    let mut out = Vec::new();
    while from < end {
        let bytes = log
            .read(from, LOAD_BUFFER, end)
            .map_err(|e| e.to_string())?;
        let before = from;
        for batch in record::batches(&bytes) {
            let (_, header, batch) = batch.map_err(|e| e.to_string())?;
            from = header.next_offset();
            if let Some(marker) = EndTxnMarker::of(batch).map_err(|e| e.to_string())? {
                out.push(ReadBack::Marker {
                    producer_id: header.producer_id,
                    result: marker.result,
                });
                continue;
            }
            let transactional = header.is_transactional().then_some(header.producer_id);
            for view in record::record_views(batch).map_err(|e| e.to_string())? {
                out.push(ReadBack::Record {
                    transactional,
                    key: view.key.map(<[u8]>::to_vec),
                    value: view.value.map(<[u8]>::to_vec),
                });
            }
        }
        if from == before {
            break;
        }
    }
    Ok(out)
}

/// Answer a group request.
pub async fn handle(rm: &Rc<ReplicaManager>, groups: &Groups, request: Request) -> Response {
    let now = clock::now();
    let refuse = |request: &Request, error: ErrorCode| {
        request.group_refusal(error).expect("a group request")
    };
    match request {
        Request::FindCoordinator { ref group } => {
            let partition = groups.coordinator.borrow().partition_of(group);
            let tp = TopicPartition::new(OFFSETS_TOPIC, partition);
            let leader = rm.leader_of(&tp);
            match leader {
                Some(broker) => Response::FindCoordinator {
                    error: None,
                    coordinator: Some(broker),
                },
                None => refuse(&request, ErrorCode::CoordinatorNotAvailable),
            }
        }
        Request::JoinGroup(ref join) => {
            let joined = groups.coordinator.borrow_mut().group(&join.group).map(|g| {
                g.join(
                    JoinRequest {
                        member: join.member.clone(),
                        client: join.client.clone(),
                        subscription: join.subscription.clone(),
                        session_timeout: Duration::from_millis(join.session_timeout_ms),
                        rebalance_timeout: Duration::from_millis(join.rebalance_timeout_ms),
                    },
                    now,
                )
            });
            let (member, answers) = match joined {
                Ok(joined) => joined,
                Err(error) => return refuse(&request, error),
            };
            match groups
                .answer_for(&join.group, &member, Awaiting::Join, answers)
                .await
            {
                Some(Answer::Join { member, result }) => Response::JoinGroup(match result {
                    Ok(joined) => JoinGroupResponse {
                        error: None,
                        generation: joined.generation,
                        member,
                        leader: joined.leader,
                        members: joined.members,
                    },
                    Err(error) => JoinGroupResponse {
                        error: Some(error.into()),
                        generation: -1,
                        member,
                        leader: String::new(),
                        members: Vec::new(),
                    },
                }),
                _ => refuse(&request, ErrorCode::NotCoordinator),
            }
        }
        Request::SyncGroup(ref sync) => {
            let synced = groups.coordinator.borrow_mut().sync(
                &sync.group,
                &sync.member,
                sync.generation,
                sync.assignment.clone(),
                now,
            );
            let (answers, store) = match synced {
                Ok(synced) => synced,
                Err(error) => return refuse(&request, error),
            };
            let answer = match store {
                None => {
                    groups
                        .answer_for(&sync.group, &sync.member, Awaiting::Sync, answers)
                        .await
                }
                Some(store) => {
                    // The leader waits with the others for the store (Kafka's
                    // `awaitingSyncCallback`): losing the partition meanwhile answers it
                    // NOT_COORDINATOR.
                    debug_assert!(answers.is_empty(), "no answer before the store");
                    let answer = groups.wait_for(&sync.group, &sync.member, Awaiting::Sync);
                    store_group(rm, groups, &sync.group, store).await;
                    answer.await.ok()
                }
            };
            match answer {
                Some(Answer::Sync { result, .. }) => match result {
                    Ok(assignment) => Response::SyncGroup {
                        error: None,
                        assignment,
                    },
                    Err(error) => refuse(&request, error.into()),
                },
                _ => refuse(&request, ErrorCode::NotCoordinator),
            }
        }
        Request::Heartbeat {
            ref group,
            ref member,
            generation,
        } => {
            let beat = groups
                .coordinator
                .borrow_mut()
                .group(group)
                .map(|g| g.heartbeat(member, generation, now));
            groups.changed.notify_one();
            match beat {
                Ok(Ok(())) => Response::Heartbeat { error: None },
                Ok(Err(error)) => Response::Heartbeat {
                    error: Some(error.into()),
                },
                Err(error) => refuse(&request, error),
            }
        }
        Request::LeaveGroup {
            ref group,
            ref member,
        } => {
            let left = groups
                .coordinator
                .borrow_mut()
                .group(group)
                .map(|g| g.leave(member, now));
            match left {
                Ok(answers) => {
                    groups.deliver(answers.into_iter().map(|a| (group.clone(), a)));
                    groups.changed.notify_one();
                    Response::LeaveGroup { error: None }
                }
                Err(error) => refuse(&request, error),
            }
        }
        Request::OffsetCommit(commit) => Response::OffsetCommit {
            error: offset_commit(rm, groups, commit).await.err(),
        },
        Request::TxnOffsetCommit { txn, commit } => Response::OffsetCommit {
            error: txn_offset_commit(rm, groups, txn, commit).await.err(),
        },
        Request::OffsetFetch {
            ref group,
            ref partitions,
            require_stable,
        } => {
            let require_stable = require_stable && !rm.bugs.offset_fetch_ignores_require_stable;
            let fetched = groups
                .coordinator
                .borrow_mut()
                .fetch(group, partitions, require_stable);
            match fetched {
                Ok(offsets) => Response::OffsetFetch {
                    error: None,
                    offsets,
                },
                Err(error) => refuse(&request, error),
            }
        }
        other => unreachable!("not a group request: {other:?}"),
    }
}

/// An OffsetCommit: checked by the group, appended with acks=all, counted once replicated.
async fn offset_commit(
    rm: &Rc<ReplicaManager>,
    groups: &Groups,
    commit: OffsetCommit,
) -> Result<(), ErrorCode> {
    let now_ms = clock::now().timestamp_ms();
    let append = groups.coordinator.borrow_mut().commit(
        &commit.group,
        &commit.member,
        commit.generation,
        &commit.offsets,
        now_ms,
    )?;
    append_records(rm, groups, &append)
        .await
        .map_err(commit_error)?;
    groups
        .coordinator
        .borrow_mut()
        .committed(&append)
        .map_err(|_| ErrorCode::UnknownServerError)
}

/// A TxnOffsetCommit: checked by the group, pending in the transaction at once, appended
/// with acks=all in the producer's transactional batch; the marker decides the rest.
async fn txn_offset_commit(
    rm: &Rc<ReplicaManager>,
    groups: &Groups,
    txn: TxnProducer,
    commit: OffsetCommit,
) -> Result<(), ErrorCode> {
    let now_ms = clock::now().timestamp_ms();
    let (member, generation) = if rm.bugs.txn_offsets_skip_generation {
        ("", -1)
    } else {
        (commit.member.as_str(), commit.generation)
    };
    let append = groups.coordinator.borrow_mut().txn_commit(
        &commit.group,
        member,
        generation,
        (txn.producer_id, txn.producer_epoch),
        &commit.offsets,
        now_ms,
    )?;
    let appended = append_records(rm, groups, &append).await;
    groups
        .coordinator
        .borrow_mut()
        .txn_commit_appended(&append, appended.is_ok());
    appended.map_err(commit_error)
}

/// A marker was written on offsets partitions this broker leads: the group coordinator
/// applies or drops the producer's pending offsets there (Kafka's
/// `scheduleHandleTxnCompletion`, called once WriteTxnMarkers' appends are replicated).
pub fn txn_completed(groups: &Groups, markers: &WriteTxnMarkers, errors: &[MarkerErrors]) {
    for (marker, errors) in markers.markers.iter().zip(errors) {
        for (tp, error) in errors {
            if &*tp.topic == OFFSETS_TOPIC && error.is_none() {
                groups.coordinator.borrow_mut().txn_completed(
                    tp.partition,
                    marker.producer_id,
                    marker.result,
                );
            }
        }
    }
}

/// The group's metadata with the leader's assignment, appended as commits are; how the
/// append went is the group's to act on.
async fn store_group(rm: &Rc<ReplicaManager>, groups: &Groups, group: &str, store: GroupStore) {
    let outcome = append_records(rm, groups, &store.append)
        .await
        .map_err(store_error);
    let answers = groups
        .coordinator
        .borrow_mut()
        .group_stored(group, store, outcome, clock::now());
    groups.deliver(answers.into_iter().map(|a| (group.to_owned(), a)));
    groups.changed.notify_one();
}

/// Append to the offsets partition with acks=all, within `offsets.commit.timeout.ms`;
/// the produce error if it failed.
async fn append_records(
    rm: &Rc<ReplicaManager>,
    groups: &Groups,
    append: &Append,
) -> Result<(), ErrorCode> {
    let now_ms = clock::now().timestamp_ms();
    // A TxnOffsetCommit's batch is the producer's, transactional, always at sequence 0
    // (Kafka's `storeOffsets`); the appending broker checks only its epoch.
    let mut batch = match append.producer {
        Some((producer_id, epoch)) => {
            BatchBuilder::new(now_ms, producer_id, epoch, 0).transactional()
        }
        None => BatchBuilder::new(now_ms, ProducerId::NONE, -1, -1),
    };
    for (key, value) in &append.records {
        batch.push(now_ms, Some(key), Some(value));
    }
    let produced = rm
        .coordinator_append(Produce {
            transactional_id: None,
            tp: TopicPartition::new(OFFSETS_TOPIC, append.partition),
            acks: Acks::All,
            timeout_ms: groups.commit_timeout.as_millis() as u64,
            batch: batch.build(),
        })
        .await;
    match produced.error {
        Some(error) => Err(error),
        None => Ok(()),
    }
}

/// How Kafka's coordinator answers a commit whose append failed
/// (`GroupMetadataManager.storeOffsets`): the member looks for the coordinator again, or
/// retries.
fn commit_error(error: ErrorCode) -> ErrorCode {
    match error {
        ErrorCode::UnknownTopicOrPartition
        | ErrorCode::NotEnoughReplicas
        | ErrorCode::NotEnoughReplicasAfterAppend => ErrorCode::CoordinatorNotAvailable,
        ErrorCode::NotLeaderOrFollower | ErrorCode::KafkaStorageError => ErrorCode::NotCoordinator,
        ErrorCode::RequestTimedOut => ErrorCode::RequestTimedOut,
        _ => ErrorCode::UnknownServerError,
    }
}

/// How Kafka's coordinator reads a failed store of a group's assignment
/// (`GroupMetadataManager.storeGroup`): as a commit's, except that a timed-out append
/// sends the members back to rejoin.
fn store_error(error: ErrorCode) -> GroupError {
    match commit_error(error) {
        ErrorCode::CoordinatorNotAvailable => GroupError::CoordinatorNotAvailable,
        ErrorCode::NotCoordinator => GroupError::NotCoordinator,
        ErrorCode::RequestTimedOut => GroupError::RebalanceInProgress,
        _ => GroupError::UnknownServerError,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_append_reads_as_kafka_s_coordinator_reads_it() {
        assert_eq!(
            commit_error(ErrorCode::NotEnoughReplicas),
            ErrorCode::CoordinatorNotAvailable
        );
        assert_eq!(
            commit_error(ErrorCode::RequestTimedOut),
            ErrorCode::RequestTimedOut
        );
        assert_eq!(
            store_error(ErrorCode::RequestTimedOut),
            GroupError::RebalanceInProgress
        );
        assert_eq!(
            store_error(ErrorCode::NotLeaderOrFollower),
            GroupError::NotCoordinator
        );
        assert_eq!(
            commit_error(ErrorCode::NotLeaderOrFollower),
            ErrorCode::NotCoordinator
        );
        assert_eq!(
            commit_error(ErrorCode::CorruptMessage),
            ErrorCode::UnknownServerError
        );
    }
}
