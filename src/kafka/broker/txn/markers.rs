//! The coordinator's marker channel (Kafka's `TransactionMarkerChannelManager`): ended
//! transactions wait here until a COMMIT or ABORT marker is written on every partition
//! they touched, then their Complete record is appended.
//!
//! As Kafka's: at most one WriteTxnMarkers in flight per broker, carrying the markers of
//! every waiting transaction for the partitions that broker leads now; a partition whose
//! leader is unknown waits for new metadata; a retriable error (not the leader, not enough
//! replicas, timed out) sends the marker again, to whoever leads then; a partition that
//! answers INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED means a newer
//! coordinator owns the transaction, and its markers are dropped with no Complete record.
//! A transaction whose coordinator epoch is no longer this broker's is dropped too: the
//! new coordinator reads its Prepare record back and sends the markers itself.
//!
//! Kafka retries as fast as responses come; so does this, except after a lost connection,
//! which waits `RECONNECT_BACKOFF` as Kafka's `reconnect.backoff.ms`.

use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use super::coordinator::Completion;
use super::Txns;
use crate::kafka::broker::replica_manager::{ReplicaManager, MARKER_TIMEOUT};
use crate::kafka::protocol::frame::Connection;
use crate::kafka::protocol::messages::{
    ErrorCode, MarkerErrors, Request, Response, TxnMarker, WriteTxnMarkers,
};
use crate::types::{BrokerId, HostName, TopicPartition};
use std::cell::RefCell;

/// Kafka's `reconnect.backoff.ms` for inter-broker connections.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(50);

/// How long to wait before appending a Complete record again after
/// COORDINATOR_NOT_AVAILABLE (Kafka retries it at the channel's next poll).
pub const COMPLETE_RETRY: Duration = Duration::from_millis(100);

/// One ended transaction waiting for its markers.
struct Waiting {
    completion: Completion,
    /// Partitions without a written marker.
    remaining: BTreeSet<TopicPartition>,
    /// Of those, the ones in a request now.
    sent: BTreeSet<TopicPartition>,
    /// Every marker is written: the Complete record is being appended.
    completing: bool,
}

#[derive(Default)]
pub struct Channel {
    waiting: RefCell<BTreeMap<String, Waiting>>,
    in_flight: RefCell<BTreeSet<BrokerId>>,
    connections: RefCell<BTreeMap<BrokerId, Connection>>,
}

/// What to do next with a waiting transaction.
pub enum Next {
    /// Append its Complete record.
    Complete(Completion),
    /// Send these markers to this broker.
    Send(BrokerId, Vec<(String, TxnMarker)>),
}

impl Channel {
    /// A transaction to end: its markers go out at the next dispatch.
    pub fn add(&self, completion: Completion) {
        let id = completion.complete.transactional_id.clone();
        let epoch = completion.complete.coordinator_epoch;
        let remaining = completion.marker.partitions.iter().cloned().collect();
        let previous = self.waiting.borrow_mut().insert(
            id,
            Waiting {
                completion,
                remaining,
                sent: BTreeSet::new(),
                completing: false,
            },
        );
        assert!(
            previous.is_none_or(|p| p.completion.complete.coordinator_epoch < epoch),
            "one completion per transactional id at a time, unless a newer coordinator epoch's"
        );
    }

    /// The Complete record is written (or given up on): the transaction leaves.
    pub fn done(&self, transactional_id: &str, coordinator_epoch: i32) {
        let mut waiting = self.waiting.borrow_mut();
        if waiting
            .get(transactional_id)
            .is_some_and(|w| w.completion.complete.coordinator_epoch == coordinator_epoch)
        {
            waiting.remove(transactional_id);
        }
    }

    /// What can be done now: transactions whose markers are all written, and one request
    /// per broker that has none in flight, for the partitions it leads (`leader_of`).
    /// Transactions `still_coordinated` says no to are dropped first.
    pub fn plan(
        &self,
        still_coordinated: impl Fn(u32, i32) -> bool,
        leader_of: impl Fn(&TopicPartition) -> Option<BrokerId>,
    ) -> Vec<Next> {
        let mut waiting = self.waiting.borrow_mut();
        waiting.retain(|_, w| {
            let write = &w.completion.complete;
            still_coordinated(write.partition, write.coordinator_epoch)
        });
        let mut next = Vec::new();
        let in_flight = self.in_flight.borrow();
        let mut requests: BTreeMap<BrokerId, Vec<(String, TxnMarker)>> = BTreeMap::new();
        for (id, w) in waiting.iter_mut() {
            if w.remaining.is_empty() {
                if !w.completing {
                    w.completing = true;
                    next.push(Next::Complete(w.completion.clone()));
                }
                continue;
            }
            let mut by_broker: BTreeMap<BrokerId, Vec<TopicPartition>> = BTreeMap::new();
            for tp in w.remaining.difference(&w.sent) {
                match leader_of(tp) {
                    Some(broker) if !in_flight.contains(&broker) => {
                        by_broker.entry(broker).or_default().push(tp.clone());
                    }
                    _ => {}
                }
            }
            for (broker, partitions) in by_broker {
                w.sent.extend(partitions.iter().cloned());
                requests.entry(broker).or_default().push((
                    id.clone(),
                    TxnMarker {
                        partitions,
                        ..w.completion.marker.clone()
                    },
                ));
            }
        }
        drop(in_flight);
        for (broker, markers) in requests {
            self.in_flight.borrow_mut().insert(broker);
            next.push(Next::Send(broker, markers));
        }
        next
    }

    /// A broker answered (or did not: `None`): written markers leave their transaction,
    /// retriable ones are sent again at the next dispatch, a fenced transaction is dropped.
    pub fn answered(
        &self,
        broker: BrokerId,
        sent: &[(String, TxnMarker)],
        answer: Option<&[MarkerErrors]>,
    ) {
        self.in_flight.borrow_mut().remove(&broker);
        let mut waiting = self.waiting.borrow_mut();
        for (i, (id, marker)) in sent.iter().enumerate() {
            let Some(w) = waiting
                .get_mut(id)
                .filter(|w| w.completion.marker.coordinator_epoch == marker.coordinator_epoch)
            else {
                continue;
            };
            let errors: MarkerErrors = match answer {
                Some(markers) => markers.get(i).cloned().unwrap_or_default(),
                None => marker
                    .partitions
                    .iter()
                    .map(|tp| (tp.clone(), Some(ErrorCode::RequestTimedOut)))
                    .collect(),
            };
            let mut fenced = false;
            for (tp, error) in errors {
                w.sent.remove(&tp);
                match error {
                    None => {
                        w.remaining.remove(&tp);
                    }
                    Some(
                        ErrorCode::InvalidProducerEpoch | ErrorCode::TransactionCoordinatorFenced,
                    ) => {
                        fenced = true;
                    }
                    Some(error) => {
                        tracing::debug!(%tp, %error, transactional_id = %id, "marker to retry")
                    }
                }
            }
            if fenced {
                tracing::warn!(transactional_id = %id, "markers fenced by a newer coordinator: dropped");
                waiting.remove(id);
            }
        }
    }
}

/// Send one WriteTxnMarkers to `broker` and hand its answer to the channel.
pub async fn send(
    rm: Rc<ReplicaManager>,
    txns: Rc<Txns>,
    broker: BrokerId,
    markers: Vec<(String, TxnMarker)>,
) {
    let channel = &txns.markers;
    let cached = channel.connections.borrow_mut().remove(&broker);
    let connection = match cached.filter(|c| !c.is_broken()) {
        Some(c) => Ok(c),
        None => {
            Connection::connect(HostName::Broker(broker.0), rm.config.replica_socket_timeout).await
        }
    };
    let request = Request::WriteTxnMarkers(WriteTxnMarkers {
        markers: markers.iter().map(|(_, m)| m.clone()).collect(),
    });
    let answer = match connection {
        Ok(mut connection) => {
            let response = connection.call(&request, MARKER_TIMEOUT).await;
            if !connection.is_broken() {
                channel.connections.borrow_mut().insert(broker, connection);
            }
            match response {
                Ok(Response::WriteTxnMarkers { markers }) => Some(markers),
                Ok(other) => {
                    tracing::warn!(
                        broker = broker.0,
                        ?other,
                        "unexpected answer to WriteTxnMarkers"
                    );
                    None
                }
                Err(_) => None,
            }
        }
        Err(_) => None,
    };
    if answer.is_none() {
        tokio::time::sleep(RECONNECT_BACKOFF).await;
    }
    channel.answered(broker, &markers, answer.as_deref());
    txns.changed.notify_one();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::broker::txn::coordinator::Write;
    use crate::kafka::broker::txn::metadata::{TxnState, TxnTransit};
    use crate::kafka::record::TxnResult;
    use crate::kafka::types::ProducerId;

    fn tp(p: u32) -> TopicPartition {
        TopicPartition::new("out", p)
    }

    fn completion(id: &str, epoch: i32, partitions: &[u32]) -> Completion {
        Completion {
            marker: TxnMarker {
                producer_id: ProducerId(7),
                producer_epoch: 0,
                result: TxnResult::Commit,
                coordinator_epoch: epoch,
                partitions: partitions.iter().map(|p| tp(*p)).collect(),
            },
            complete: Write {
                transactional_id: id.to_owned(),
                partition: 0,
                coordinator_epoch: epoch,
                transit: TxnTransit {
                    producer_id: ProducerId(7),
                    last_producer_id: ProducerId::NONE,
                    producer_epoch: 0,
                    last_producer_epoch: -1,
                    timeout_ms: 60_000,
                    state: TxnState::CompleteCommit,
                    partitions: BTreeSet::new(),
                    start_ms: 0,
                    last_update_ms: 0,
                    client_transaction_version: 0,
                },
            },
        }
    }

    /// Each request as (broker, [(transactional id, partitions)]).
    type Sent = Vec<(u32, Vec<(String, Vec<u32>)>)>;

    fn sends(next: &[Next]) -> Sent {
        next.iter()
            .filter_map(|n| match n {
                Next::Send(b, markers) => Some((
                    b.0,
                    markers
                        .iter()
                        .map(|(id, m)| {
                            (
                                id.clone(),
                                m.partitions.iter().map(|t| t.partition).collect(),
                            )
                        })
                        .collect(),
                )),
                Next::Complete(_) => None,
            })
            .collect()
    }

    fn completes(next: &[Next]) -> Vec<String> {
        next.iter()
            .filter_map(|n| match n {
                Next::Complete(c) => Some(c.complete.transactional_id.clone()),
                Next::Send(..) => None,
            })
            .collect()
    }

    /// One request per broker at a time, carrying every waiting transaction's markers for
    /// the partitions it leads; a marker refused by a former leader goes to the new one.
    #[test]
    fn markers_go_to_the_leaders_one_request_per_broker_and_follow_a_new_leader() {
        let channel = Channel::default();
        channel.add(completion("a", 0, &[0, 1]));
        channel.add(completion("b", 0, &[1]));
        let mut leaders = BTreeMap::from([(0, 1), (1, 2)]);
        let plan = |leaders: &BTreeMap<u32, u32>| {
            channel.plan(
                |_, _| true,
                |t| leaders.get(&t.partition).map(|b| BrokerId(*b)),
            )
        };
        let next = plan(&leaders);
        assert_eq!(
            sends(&next),
            [
                (1, vec![("a".to_owned(), vec![0])]),
                (
                    2,
                    vec![("a".to_owned(), vec![1]), ("b".to_owned(), vec![1])]
                ),
            ]
        );
        assert!(
            plan(&leaders).is_empty(),
            "both brokers have a request in flight"
        );
        let Next::Send(_, to_1) = &next[0] else {
            panic!()
        };
        let Next::Send(_, to_2) = &next[1] else {
            panic!()
        };
        channel.answered(
            BrokerId(1),
            to_1,
            Some(&[vec![(tp(0), Some(ErrorCode::NotLeaderOrFollower))]]),
        );
        leaders.insert(0, 3);
        assert_eq!(
            sends(&plan(&leaders)),
            [(3, vec![("a".to_owned(), vec![0])])]
        );
        channel.answered(
            BrokerId(2),
            to_2,
            Some(&[vec![(tp(1), None)], vec![(tp(1), None)]]),
        );
        assert_eq!(
            completes(&plan(&leaders)),
            ["b"],
            "b's only marker is written"
        );
        channel.answered(
            BrokerId(3),
            &[(
                "a".to_owned(),
                TxnMarker {
                    partitions: vec![tp(0)],
                    ..completion("a", 0, &[0]).marker
                },
            )],
            Some(&[vec![(tp(0), None)]]),
        );
        assert_eq!(completes(&plan(&leaders)), ["a"]);
        assert!(
            plan(&leaders).is_empty(),
            "each Complete is handed out once"
        );
    }

    /// A fenced answer (a newer coordinator wrote there) drops the transaction's markers,
    /// as does losing the coordinatorship; a lost connection retries.
    #[test]
    fn fenced_or_superseded_transactions_are_dropped_and_lost_requests_retried() {
        let channel = Channel::default();
        channel.add(completion("a", 0, &[0]));
        channel.add(completion("b", 0, &[1]));
        let leaders = |t: &TopicPartition| Some(BrokerId(t.partition + 1));
        let next = channel.plan(|_, _| true, leaders);
        let Next::Send(_, to_1) = &next[0] else {
            panic!()
        };
        channel.answered(BrokerId(1), to_1, None);
        let again = channel.plan(|_, _| true, leaders);
        assert_eq!(
            sends(&again)[0],
            (1, vec![("a".to_owned(), vec![0])]),
            "a lost request is sent again"
        );
        let Next::Send(_, to_1) = &again[0] else {
            panic!()
        };
        channel.answered(
            BrokerId(1),
            to_1,
            Some(&[vec![(tp(0), Some(ErrorCode::TransactionCoordinatorFenced))]]),
        );
        let Next::Send(_, to_2) = &next[1] else {
            panic!()
        };
        channel.answered(
            BrokerId(2),
            to_2,
            Some(&[vec![(tp(1), Some(ErrorCode::NotEnoughReplicas))]]),
        );
        assert!(
            channel.plan(|_, epoch| epoch > 0, leaders).is_empty(),
            "b's coordinator epoch is gone"
        );
        channel.add(completion("b", 1, &[1]));
        assert_eq!(
            sends(&channel.plan(|_, _| true, leaders)),
            [(2, vec![("b".to_owned(), vec![1])])]
        );
    }
}
