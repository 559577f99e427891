//! The transaction coordinator (KIP-98): the leader of a transactional id's
//! `__transaction_state` partition keeps that id's transaction, fences its old producers,
//! and ends its transactions with markers on every partition they wrote.
//!
//! This module is the async shell: it answers the transactional requests from
//! [`coordinator::Coordinator`]'s decisions, appends their records to
//! `__transaction_state` with acks=all through the replica manager, follows the broker's
//! leadership of that topic (a partition it comes to lead is read back before it answers
//! for it, and the transactions caught mid-commit get their markers again), aborts the
//! transactions past their timeout, and drives the [`markers`] channel.
//!
//! As Kafka's, except: a partition is read back at once (the simulated disk answers reads
//! without delay, so there is no COORDINATOR_LOAD_IN_PROGRESS window), and ids never
//! expire (`transactional.id.expiration.ms` is 7 days, beyond any run).

pub mod coordinator;
pub mod decide;
pub mod load;
pub mod log_record;
pub mod markers;
pub mod metadata;

use super::groups::coordinator::{LogEntry, OFFSETS_TOPIC};
use super::groups::read_back;
use super::replica_manager::{ReplicaManager, MARKER_TIMEOUT};
use crate::config::kafka::{Acks, BrokerConfig};
use crate::history::facts::kafka::Fact;
use crate::kafka::protocol::messages::{
    ErrorCode, InitTxnProducerId, Produce, Request, Response, TxnProducer,
};
use crate::kafka::record::{BatchBuilder, TxnResult};
use crate::kafka::types::{coordinator_partition, ProducerId};
use crate::os::clock::{self, SimTime};
use crate::types::{Epoch, TopicPartition};
use coordinator::{Completion, Coordinator, Init, Write, TRANSACTION_STATE_TOPIC};
use markers::Next;
use metadata::{TxnState, NO_PRODUCER_EPOCH};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;
use tokio::sync::Notify;

/// The longest the clock task sleeps without news.
const IDLE: Duration = Duration::from_secs(60);

pub struct Txns {
    coordinator: RefCell<Coordinator>,
    /// The `__transaction_state` partitions led and read back, with their leader epoch.
    loaded: RefCell<BTreeMap<u32, Epoch>>,
    markers: markers::Channel,
    /// A marker was answered, a transaction ended: the clock task dispatches again.
    changed: Notify,
    max_timeout: Duration,
    scan_interval: Duration,
    offsets_partitions: u32,
}

impl Txns {
    pub fn new(config: &BrokerConfig) -> Txns {
        Txns {
            coordinator: RefCell::new(Coordinator::new(
                config.transaction_state_log_num_partitions,
                true,
                if config.rules.transaction_version_2 {
                    metadata::TRANSACTION_VERSION_2
                } else {
                    0
                },
            )),
            loaded: RefCell::default(),
            markers: markers::Channel::default(),
            changed: Notify::new(),
            max_timeout: config.transaction_max_timeout,
            scan_interval: config.transaction_abort_timed_out_transaction_cleanup_interval,
            offsets_partitions: config.offsets_topic_num_partitions,
        }
    }
}

/// The coordinator's clock: follow leadership, abort what timed out, send markers.
pub async fn run(rm: Rc<ReplicaManager>, txns: Rc<Txns>) {
    let mut next_scan = clock::now() + txns.scan_interval;
    loop {
        follow_leadership(&rm, &txns);
        let now = clock::now();
        if now >= next_scan {
            next_scan = now + txns.scan_interval;
            let writes = txns
                .coordinator
                .borrow_mut()
                .abort_timed_out(now.timestamp_ms(), !rm.bugs.timeout_abort_skips_fence);
            for write in writes {
                tracing::info!(broker = rm.id.0, transactional_id = %write.transactional_id, epoch = write.transit.producer_epoch, "transaction timed out: fenced and aborted");
                tokio::task::spawn_local(fence(rm.clone(), txns.clone(), write, true));
            }
        }
        dispatch(&rm, &txns);
        let wait = (next_scan - now).clamp(Duration::from_millis(1), IDLE);
        tokio::select! {
            biased;
            _ = rm.txn_leadership_changed.notified() => {}
            _ = txns.changed.notified() => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

fn follow_leadership(rm: &ReplicaManager, txns: &Txns) {
    let led = rm.led_partitions(TRANSACTION_STATE_TOPIC);
    let mut loaded = txns.loaded.borrow_mut();
    let lost: Vec<u32> = loaded
        .iter()
        .filter(|(p, epoch)| led.get(p) != Some(epoch))
        .map(|(p, _)| *p)
        .collect();
    for partition in lost {
        tracing::info!(
            broker = rm.id.0,
            partition,
            "transaction coordinator resigns"
        );
        txns.coordinator.borrow_mut().resign(partition);
        loaded.remove(&partition);
    }
    for (partition, epoch) in led {
        if loaded.contains_key(&partition) {
            continue;
        }
        let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
        let read = read_back(rm, &tp).and_then(|entries| {
            let skip = if rm.bugs.txn_coordinator_skips_load {
                entries.len()
            } else {
                0
            };
            let records = entries[skip..]
                .iter()
                .filter_map(|entry| match entry.entry()? {
                    LogEntry::Record { key, value, .. } => Some((key, value)),
                    LogEntry::Marker { .. } => None,
                });
            load::load(records, clock::now().timestamp_ms())
        });
        match read {
            Ok(state) => {
                let completions = txns
                    .coordinator
                    .borrow_mut()
                    .lead(partition, epoch.0, state);
                tracing::info!(broker = rm.id.0, partition, epoch = %epoch, resent = completions.len(), "transaction coordinator loaded");
                for completion in completions {
                    txns.markers.add(completion);
                }
                loaded.insert(partition, epoch);
            }
            // Left unled: its ids are answered NOT_COORDINATOR.
            Err(error) => {
                tracing::warn!(broker = rm.id.0, partition, %error, "transactions not loaded")
            }
        }
    }
}

/// Send what the marker channel can send now; append the Complete records it is ready for.
fn dispatch(rm: &Rc<ReplicaManager>, txns: &Rc<Txns>) {
    let next = {
        let coordinator = txns.coordinator.borrow();
        let metadata = rm.metadata.borrow();
        txns.markers.plan(
            |partition, epoch| coordinator.coordinates(partition, epoch),
            |tp| metadata.partitions.get(tp).and_then(|p| p.leader),
        )
    };
    for step in next {
        match step {
            Next::Send(broker, markers) => {
                tokio::task::spawn_local(markers::send(rm.clone(), txns.clone(), broker, markers));
            }
            Next::Complete(completion) => {
                tokio::task::spawn_local(complete(rm.clone(), txns.clone(), completion));
            }
        }
    }
}

/// Every marker is written: append the Complete record, again while the log is
/// unavailable; then the transaction leaves the channel.
async fn complete(rm: Rc<ReplicaManager>, txns: Rc<Txns>, completion: Completion) {
    rm.facts.record(Fact::TxnMarked {
        transactional_id: completion.complete.transactional_id.clone(),
        committed: completion.marker.result == TxnResult::Commit,
        partitions: completion.marker.partitions.len() as u32,
        started: SimTime::from_millis(completion.complete.transit.start_ms.max(0) as u64),
    });
    let write = completion.complete;
    loop {
        match append(&rm, &txns, &write, true).await {
            Err(ErrorCode::CoordinatorNotAvailable) => {
                tokio::time::sleep(markers::COMPLETE_RETRY).await;
            }
            outcome => {
                if let Err(error) = outcome {
                    tracing::info!(broker = rm.id.0, transactional_id = %write.transactional_id, %error, "complete record not written");
                }
                txns.markers
                    .done(&write.transactional_id, write.coordinator_epoch);
                txns.changed.notify_one();
                return;
            }
        }
    }
}

/// Append a Prepare record, then hand its markers to the channel; the error if it failed.
/// The PrepareAbort of a fenced producer's open transaction: once it is written, the old
/// epoch is fenced, a fact.
async fn fence(
    rm: Rc<ReplicaManager>,
    txns: Rc<Txns>,
    write: Write,
    timed_out: bool,
) -> Result<(), ErrorCode> {
    let (transactional_id, epoch) = (write.transactional_id.clone(), write.transit.producer_epoch);
    end(rm.clone(), txns, write).await?;
    rm.facts.record(Fact::TxnFenced {
        transactional_id,
        epoch,
        timed_out,
    });
    Ok(())
}

async fn end(rm: Rc<ReplicaManager>, txns: Rc<Txns>, write: Write) -> Result<(), ErrorCode> {
    let completion = append(&rm, &txns, &write, false).await?;
    let completion = completion.expect("a Prepare record starts the markers");
    txns.markers.add(completion);
    txns.changed.notify_one();
    Ok(())
}

/// Append `write` to its `__transaction_state` partition with acks=all and report the
/// outcome to the coordinator (which decides what it means).
async fn append(
    rm: &Rc<ReplicaManager>,
    txns: &Txns,
    write: &Write,
    retry_unavailable: bool,
) -> Result<Option<Completion>, ErrorCode> {
    let now_ms = clock::now().timestamp_ms();
    let (key, value) = write.record(txns.coordinator.borrow().version());
    let mut batch = BatchBuilder::new(now_ms, ProducerId::NONE, -1, -1);
    batch.push(now_ms, Some(&key), Some(&value));
    let produced = rm
        .coordinator_append(Produce {
            transactional_id: None,
            tp: TopicPartition::new(TRANSACTION_STATE_TOPIC, write.partition),
            acks: if rm.bugs.end_txn_before_prepare_replicated
                && matches!(
                    write.transit.state,
                    TxnState::PrepareCommit | TxnState::PrepareAbort
                ) {
                Acks::Leader
            } else {
                Acks::All
            },
            timeout_ms: MARKER_TIMEOUT.as_millis() as u64,
            batch: batch.build(),
        })
        .await;
    let appended = produced.error.map_or(Ok(()), Err);
    txns.coordinator.borrow_mut().appended(
        write,
        appended,
        retry_unavailable,
        clock::now().timestamp_ms(),
    )
}

/// Answer a transactional request.
pub async fn handle(rm: &Rc<ReplicaManager>, txns: &Rc<Txns>, request: Request) -> Response {
    let now_ms = clock::now().timestamp_ms();
    let answer = |error: Result<(), ErrorCode>| Response::Txn { error: error.err() };
    match request {
        Request::FindTxnCoordinator { transactional_id } => {
            let partition = txns.coordinator.borrow().partition_of(&transactional_id);
            let tp = TopicPartition::new(TRANSACTION_STATE_TOPIC, partition);
            let leader = rm.leader_of(&tp);
            Response::FindCoordinator {
                error: leader
                    .is_none()
                    .then_some(ErrorCode::CoordinatorNotAvailable),
                coordinator: leader,
            }
        }
        Request::InitTxnProducerId(init) => {
            let (producer_id, producer_epoch, error) = match init_producer_id(rm, txns, init).await
            {
                Ok((pid, epoch)) => (pid, epoch, None),
                Err(error) => (ProducerId::NONE, -1, Some(error)),
            };
            Response::InitProducerId {
                error,
                producer_id,
                producer_epoch,
            }
        }
        Request::AddPartitionsToTxn { txn, partitions } => {
            answer(add_partitions(rm, txns, &txn, partitions.into_iter().collect(), now_ms).await)
        }
        Request::VerifyPartitionsInTxn { txn, partitions } => {
            answer(txns.coordinator.borrow_mut().verify_partitions(
                &txn,
                &partitions.into_iter().collect(),
                rm.config.rules.transaction_abortable,
            ))
        }
        Request::AddOffsetsToTxn { txn, group } => {
            let partition = coordinator_partition(&group, txns.offsets_partitions);
            let offsets = BTreeSet::from([TopicPartition::new(OFFSETS_TOPIC, partition)]);
            answer(add_partitions(rm, txns, &txn, offsets, now_ms).await)
        }
        Request::EndTxn { txn, result } => {
            let decided = txns.coordinator.borrow_mut().end_txn(&txn, result, now_ms);
            let ended = match decided {
                // A retry: the id's producer id and epoch as they stand.
                Ok(None) => Ok(txns
                    .coordinator
                    .borrow()
                    .metadata(&txn.transactional_id)
                    .map(|meta| (meta.producer_id, meta.producer_epoch))),
                Ok(Some(write)) => {
                    let bumped = (write.transit.producer_id, write.transit.producer_epoch);
                    end(rm.clone(), txns.clone(), write)
                        .await
                        .map(|()| Some(bumped))
                }
                Err(error) => Err(error),
            };
            if txns.coordinator.borrow().version() < metadata::TRANSACTION_VERSION_2 {
                return answer(ended.map(|_| ()));
            }
            let (error, (producer_id, producer_epoch)) = match ended {
                Ok(identity) => (None, identity.expect("a retry of a known id")),
                Err(error) => (Some(error), (ProducerId::NONE, NO_PRODUCER_EPOCH)),
            };
            Response::EndTxn {
                error,
                producer_id,
                producer_epoch,
            }
        }
        other => unreachable!("not a transactional request: {other:?}"),
    }
}

/// Kafka's `handleInitProducerId` with a transactional id: a new id gets a producer id
/// from the controller first.
async fn init_producer_id(
    rm: &Rc<ReplicaManager>,
    txns: &Rc<Txns>,
    init: InitTxnProducerId,
) -> Result<(ProducerId, i16), ErrorCode> {
    let timeout = init.transaction_timeout_ms;
    if timeout <= 0 || Duration::from_millis(timeout as u64) > txns.max_timeout {
        return Err(ErrorCode::InvalidTransactionTimeout);
    }
    let id = &init.transactional_id;
    let known = txns.coordinator.borrow_mut().knows(id)?;
    let new_producer_id = if known {
        None
    } else {
        Some(
            super::controller_link::allocate_producer_id()
                .await
                .ok_or(ErrorCode::CoordinatorNotAvailable)?,
        )
    };
    let decided = txns.coordinator.borrow_mut().init_producer_id(
        id,
        timeout,
        init.expected,
        new_producer_id,
        clock::now().timestamp_ms(),
    )?;
    match decided {
        Init::Bump(write) => {
            append(rm, txns, &write, false).await?;
            Ok((write.transit.producer_id, write.transit.producer_epoch))
        }
        Init::Abort(write) => {
            tracing::info!(broker = rm.id.0, transactional_id = %id, epoch = write.transit.producer_epoch, "new instance: open transaction fenced and aborted");
            fence(rm.clone(), txns.clone(), write, false).await?;
            Err(ErrorCode::ConcurrentTransactions)
        }
    }
}

async fn add_partitions(
    rm: &Rc<ReplicaManager>,
    txns: &Txns,
    txn: &TxnProducer,
    partitions: BTreeSet<TopicPartition>,
    now_ms: i64,
) -> Result<(), ErrorCode> {
    let decided = txns
        .coordinator
        .borrow_mut()
        .add_partitions(txn, &partitions, now_ms)?;
    match decided {
        None => Ok(()),
        Some(write) => append(rm, txns, &write, false).await.map(|_| ()),
    }
}
