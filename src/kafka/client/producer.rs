//! The producer host: sends at the scenario's rate, batches per partition, and delivers
//! batches to partition leaders with Kafka's retry, timeout and idempotence rules. Every
//! send is recorded in the history as an invoke and, once its batch's fate is known, an
//! ok (with the offset), a fail (nothing written) or an info (unknown).
//!
//! Tasks, all on the host's LocalSet around one shared `State`:
//! - the application loop (`run_producer`): a send into the accumulator at each instant of
//!   its arrival process (`config::workload`);
//! - the sender: drains ready batches to leaders' connections, at most
//!   `max.in.flight.requests.per.connection` requests per connection, and expires batches
//!   past `delivery.timeout.ms`;
//! - one task per request, awaiting its response within `request.timeout.ms`;
//! - the metadata refresher (on demand and every `metadata.max.age.ms`), connection
//!   setup, and InitProducerId for the idempotent producer;
//! - for a transactional producer (`transactional.id`), the transaction loop: the
//!   requests its `TransactionManager` asks for, one at a time, to the coordinator.
//!
//! A transactional producer's application begins a transaction before its first send,
//! commits after `transaction_messages` sends, and aborts when the commit fails with an
//! abortable error; after a fatal one it closes the producer and starts a new instance
//! with the same `transactional.id`. Its sends are completed in the history when their
//! transaction ends: ok if it committed, fail if it aborted, info if that is unknown.
//!
//! The decisions (readiness, outcomes, retries, sequences, transactions) are in
//! `accumulator`, `outcome`, `idempotence` and `transaction`; this file only moves batches
//! and requests between them and the network.

use crate::config::bugs::Bugs;
use crate::config::kafka::{Acks, ProducerConfig};
use crate::config::workload::{ArrivalProcess, OnError};
use crate::history::budget::SendBudget;
use crate::history::facts::{Fact, Facts};
use crate::history::{History, MessageId, Op, TxnOutcome};
use crate::kafka::client::accumulator::{
    AccumulatorConfig, Expiry, PendingRecord, ProducerBatch, RecordAccumulator,
};
use crate::kafka::client::idempotence::IdempotenceState;
use crate::kafka::client::metadata::{
    self, fetch_metadata, MetadataCache, CONNECTION_SETUP_TIMEOUT,
};
use crate::kafka::client::network::Pipeline;
use crate::kafka::client::outcome::{
    self, decide, may_have_written, AttemptResult, BatchProgress, Decision, RetryPolicy,
};
use crate::kafka::client::partitioner::{partition_for_key, StickyPartitioner};
use crate::kafka::client::transaction::{
    BatchFailure, TransactionManager, TxnAnswer, TxnRequest, TxnRules, TxnState, Wait,
};
use crate::kafka::protocol::messages::{
    ErrorCode, InitTxnProducerId, OffsetCommit, Produce, Request, Response, TxnProducer,
};
use crate::kafka::record::{BatchBuilder, NO_PRODUCER_EPOCH, NO_SEQUENCE};
use crate::kafka::types::ProducerId;
use crate::os::clock::{self, SimTime};
use crate::os::frame::NetError;
use crate::types::{BrokerId, HostName, Offset, TopicPartition};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

#[derive(Clone)]
pub struct ProducerContext {
    /// Host `producer-<index>` (or, for a processor's outputs, `consumer-<index>`); also
    /// the producer number in message ids.
    pub index: u32,
    pub config: ProducerConfig,
    pub topic: String,
    pub partitions: u32,
    /// Distinct keys (`key-<n % keys>`); 0: null keys and the sticky partitioner.
    pub keys: u32,
    pub value_bytes: u32,
    pub on_error: OnError,
    /// Bugs a mutation test injected (none in any real run).
    pub bugs: Bugs,
    pub brokers: u32,
    pub history: History,
    /// Where the producer records its retries, for the checkers' explanations.
    pub facts: Facts,
    pub seed: u64,
    /// What sends through this producer.
    pub application: Application,
}

/// Who calls `send`.
// One per producer, built once per host start: its size does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Clone)]
pub enum Application {
    /// The workload's producer application (`producer-N`): a send at each instant of its
    /// arrival process, each recorded in the history.
    Workload {
        /// When the application sends, as offsets from the producer's start.
        arrivals: ArrivalProcess,
        /// Harness-owned send budget: next message sequence per producer and the global
        /// `messages` cap; survives a producer's crash so that ids stay unique.
        budget: SendBudget,
        /// Run time at which sending stops.
        stop_at: SimTime,
        /// A transactional producer's sends per transaction.
        transaction_messages: u32,
    },
    /// A stream processor's output producer (`consumer-N`'s), driven by its group member
    /// (its `OutputProducer`): each output carries its input's id, so the outputs are checked
    /// from the output topic's final read and none is recorded as a send.
    Processor,
}

/// The key of message `seq`: `key-<seq % keys>`, or none when `keys` is 0. It is made
/// twice per message (at the send and at the encode): `itoa` formats without `format!`'s
/// machinery, which cost about 1% of the canonical load.
pub fn message_key(seq: u64, keys: u32) -> Option<Vec<u8>> {
    (keys > 0).then(|| {
        let mut digits = itoa::Buffer::new();
        let n = digits.format(seq % u64::from(keys));
        let mut key = Vec::with_capacity(4 + n.len());
        key.extend_from_slice(b"key-");
        key.extend_from_slice(n.as_bytes());
        key
    })
}

struct Producer {
    name: Arc<str>,
    config: ProducerConfig,
    topic: Arc<str>,
    partitions: u32,
    keys: u32,
    value_bytes: usize,
    on_error: OnError,
    /// A mutation test's bug ([`Bugs::timeout_proves_not_written`]).
    ///
    /// [`Bugs::timeout_proves_not_written`]: crate::config::bugs::Bugs::timeout_proves_not_written
    timeout_proves_not_written: bool,
    brokers: u32,
    history: History,
    facts: Facts,
    /// The producer number in message ids and retry facts.
    index: u32,
    policy: RetryPolicy,
    /// Wakes the sender: new records, completions, metadata, connections.
    wake: Notify,
    /// Wakes the metadata refresher.
    metadata_wanted: Notify,
    /// Whether its sends go into the history (not a processor's outputs).
    records_sends: bool,
    /// The producer's `transactional.id`, if it is transactional.
    transactional_id: Option<String>,
    /// Wakes the transaction loop: a send, a batch resolved, a commit or abort begun.
    txn_wake: Notify,
    /// Wakes the application waiting for its transaction manager's state to change.
    txn_changed: Notify,
    state: RefCell<State>,
}

/// A send of the open transaction: its partition, and its offset once its batch is
/// acknowledged (`Some(None)`: its batch failed or expired).
#[derive(Clone, Copy, Debug)]
struct TxnSend {
    partition: u32,
    written: Option<Option<Offset>>,
}

struct State {
    accumulator: RecordAccumulator,
    sticky: StickyPartitioner,
    metadata: MetadataCache,
    idempotence: Option<IdempotenceState>,
    initializing_producer_id: bool,
    connections: BTreeMap<BrokerId, Pipeline>,
    connecting: BTreeSet<BrokerId>,
    /// No new connection attempt to a broker before this time (after a failed one).
    reconnect_at: BTreeMap<BrokerId, SimTime>,
    /// Batches sent and not yet answered.
    in_flight: usize,
    /// Rotates the broker asked first for metadata and producer ids.
    next_broker: u32,
    transaction: Option<TransactionManager>,
    /// The open transaction's sends, by id.
    txn_sends: BTreeMap<MessageId, TxnSend>,
    /// A processor's outputs since its last flush (non-transactional).
    outputs: Outputs,
    /// The offsets `sendOffsetsToTransaction` was given, for the TxnOffsetCommit.
    txn_offsets: Option<OffsetCommit>,
    /// Which instance of the transactional producer this is (a fatal error starts a new
    /// one): an answer to the old instance's request is no answer to the new one's.
    instance: u64,
}

/// A processor's outputs not yet resolved, and those that failed, since its last flush.
#[derive(Debug, Default)]
struct Outputs {
    unresolved: u64,
    failed: u64,
}

/// Run a producer until it has stopped sending and every batch has its outcome.
pub async fn run_producer(ctx: ProducerContext) -> turmoil::Result {
    let Application::Workload {
        arrivals,
        budget,
        stop_at,
        transaction_messages,
    } = &ctx.application
    else {
        panic!("a processor's producer is its member's");
    };
    let (producer, tasks) = Producer::start(&ctx);
    let plan = SendPlan {
        arrivals: arrivals.clone(),
        budget,
        stop_at: *stop_at,
        transaction_messages: *transaction_messages,
    };
    send_loop(&producer, plan).await;
    producer.state.borrow_mut().accumulator.close();
    producer.wake.notify_one();
    let finished = tasks.sender.await;
    tasks.refresher.abort();
    if let Some(transactions) = tasks.transactions {
        transactions.abort();
    }
    let connections: Vec<Pipeline> = producer
        .state
        .borrow()
        .connections
        .values()
        .cloned()
        .collect();
    for connection in connections {
        connection.flush(producer.config.request_timeout).await;
    }
    tracing::info!(producer = %producer.name, "producer finished");
    finished.map_err(|e| e.to_string().into())
}

/// A producer's background tasks.
struct Tasks {
    sender: tokio::task::JoinHandle<()>,
    refresher: tokio::task::JoinHandle<()>,
    transactions: Option<tokio::task::JoinHandle<()>>,
}

impl Producer {
    /// The producer and its background tasks: the sender, the metadata refresher and, if
    /// transactional, the transaction loop.
    fn start(ctx: &ProducerContext) -> (Rc<Producer>, Tasks) {
        let producer = Rc::new(Producer::new(ctx));
        tracing::info!(producer = %producer.name, "producer started");
        let tasks = Tasks {
            sender: tokio::task::spawn_local(sender_loop(producer.clone())),
            refresher: tokio::task::spawn_local(metadata_loop(producer.clone())),
            transactions: producer
                .transactional_id
                .is_some()
                .then(|| tokio::task::spawn_local(transaction_loop(producer.clone()))),
        };
        (producer, tasks)
    }

    fn new(ctx: &ProducerContext) -> Self {
        let config = ctx.config.clone();
        let idempotent = config.idempotent();
        let expiry = if config.expire_in_accumulator {
            Expiry::InAccumulator {
                request_timeout: config.request_timeout,
            }
        } else {
            Expiry::Delivery(config.delivery_timeout)
        };
        let accumulator = RecordAccumulator::new(AccumulatorConfig {
            batch_size_bytes: usize::try_from(config.batch_size).unwrap_or(usize::MAX),
            linger: config.linger,
            idempotent,
            expiry,
            retries_at_back: ctx.bugs.retries_enqueue_at_back,
            reenqueue_ignores_sequence: ctx.bugs.reenqueue_ignores_sequence,
        });
        let policy = RetryPolicy {
            retries: config.retries,
            delivery_timeout: (!config.expire_in_accumulator).then_some(config.delivery_timeout),
        };
        let transactional_id = config.transactional_id_of(ctx.index);
        let rules = TxnRules {
            bump_epoch: config.transaction_epoch_bump,
            invalid_epoch_abortable: config.invalid_epoch_abortable,
            v2: config.transaction_version_2,
        };
        Producer {
            name: match ctx.application {
                Application::Workload { .. } => HostName::Producer(ctx.index),
                Application::Processor => HostName::Consumer(ctx.index),
            }
            .to_string()
            .into(),
            records_sends: matches!(ctx.application, Application::Workload { .. }),
            topic: TopicPartition::new(&ctx.topic, 0).topic,
            partitions: ctx.partitions.max(1),
            keys: ctx.keys,
            on_error: ctx.on_error,
            timeout_proves_not_written: ctx.bugs.timeout_proves_not_written,
            value_bytes: ctx.value_bytes as usize,
            brokers: ctx.brokers.max(1),
            history: ctx.history.clone(),
            facts: ctx.facts.clone(),
            index: ctx.index,
            policy,
            wake: Notify::new(),
            metadata_wanted: Notify::new(),
            txn_wake: Notify::new(),
            txn_changed: Notify::new(),
            state: RefCell::new(State {
                accumulator,
                sticky: StickyPartitioner::new(ctx.partitions, ctx.seed),
                metadata: MetadataCache::default(),
                idempotence: idempotent.then(IdempotenceState::default),
                initializing_producer_id: false,
                connections: BTreeMap::new(),
                connecting: BTreeSet::new(),
                reconnect_at: BTreeMap::new(),
                in_flight: 0,
                next_broker: ctx.seed as u32 % ctx.brokers.max(1) + 1,
                transaction: transactional_id
                    .is_some()
                    .then(|| TransactionManager::new(rules)),
                txn_sends: BTreeMap::new(),
                outputs: Outputs::default(),
                txn_offsets: None,
                instance: 0,
            }),
            transactional_id,
            config,
        }
    }

    fn tp(&self, partition: u32) -> TopicPartition {
        TopicPartition {
            topic: self.topic.clone(),
            partition,
        }
    }

    /// The application's `send`: partition the message, record the invoke, accumulate. In
    /// a transaction that already failed the send fails at once, nothing written.
    fn send(&self, id: MessageId) {
        let now = clock::now();
        let key = message_key(u64::from(id.seq), self.keys);
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        let refused = state.transaction.as_ref().and_then(|t| t.send_error());
        let partition = match &key {
            Some(key) => partition_for_key(key, self.partitions),
            None => {
                // Partitions with a leader, looked up only when the sticky partition moves.
                let available =
                    |state: &State| state.metadata.available(&self.topic, self.partitions);
                let sticky = match state.sticky.current() {
                    Some(p) => p,
                    None => state.sticky.partition(&available(state)),
                };
                if state
                    .accumulator
                    .opens_new_batch(sticky, None, self.value_bytes)
                {
                    let available = available(state);
                    state.sticky.on_new_batch(sticky, &available)
                } else {
                    sticky
                }
            }
        };
        if self.records_sends {
            self.history.record(
                &self.name,
                Op::Invoke {
                    id,
                    tp: self.tp(partition),
                },
            );
        }
        if let Some(error) = refused {
            tracing::debug!(producer = %self.name, %id, ?error, "send in a failed transaction");
            if self.records_sends {
                let error = format!("transaction failed before the send: {}", error.reason);
                self.history.record(&self.name, Op::Fail { id, error });
            }
            return;
        }
        if !self.records_sends {
            state.outputs.unresolved += 1;
        }
        let record = PendingRecord {
            id,
            timestamp_ms: now.timestamp_ms(),
        };
        let key_len = key.as_ref().map(Vec::len);
        state
            .accumulator
            .append(partition, record, key_len, self.value_bytes, now);
        if let Some(transaction) = state.transaction.as_mut() {
            transaction.add_partition(&self.tp(partition));
            let send = TxnSend {
                partition,
                written: None,
            };
            state.txn_sends.insert(id, send);
            self.txn_wake.notify_one();
        }
        drop(guard);
        self.wake.notify_one();
    }

    fn encode(&self, batch: &ProducerBatch) -> Vec<u8> {
        let (producer_id, producer_epoch, base_sequence) = match batch.sequence {
            Some(s) => (s.producer_id, s.producer_epoch, s.base_sequence),
            None => (ProducerId::NONE, NO_PRODUCER_EPOCH, NO_SEQUENCE),
        };
        let base_timestamp = batch.records.first().map_or(0, |r| r.timestamp_ms);
        let mut builder =
            BatchBuilder::new(base_timestamp, producer_id, producer_epoch, base_sequence);
        if self.transactional_id.is_some() {
            builder = builder.transactional();
        }
        for record in &batch.records {
            let key = message_key(u64::from(record.id.seq), self.keys);
            let value = record.id.value(self.value_bytes);
            builder.push(record.timestamp_ms, key.as_deref(), Some(&value));
        }
        builder.build()
    }

    fn request_metadata(&self) {
        self.metadata_wanted.notify_one();
    }

    /// Record the final outcome of every message of `batch`; a transactional producer's
    /// wait for their transaction's. `refused`: the error a broker refused the batch with.
    fn complete(
        &self,
        state: &mut State,
        batch: &ProducerBatch,
        decision: &Decision,
        refused: Option<ErrorCode>,
    ) {
        if state.transaction.is_some() {
            self.complete_in_transaction(state, batch, decision, refused);
            return;
        }
        if !self.records_sends {
            self.complete_outputs(state, batch, decision);
            return;
        }
        let told;
        let decision = match self.on_error {
            OnError::WhatItProves => decision,
            OnError::NotWritten => {
                told = outcome::taken_as_not_written(decision.clone());
                &told
            }
        };
        let tp = self.tp(batch.partition);
        for (i, record) in batch.records.iter().enumerate() {
            let id = record.id;
            let op = match decision {
                Decision::Ok { base_offset } => Op::Ok {
                    id,
                    tp: tp.clone(),
                    offset: Offset(base_offset.0 + i as i64),
                    degraded: None,
                },
                Decision::Fail(error) => Op::Fail {
                    id,
                    error: error.clone(),
                },
                Decision::Info(error) => Op::Info {
                    id,
                    error: error.clone(),
                },
                Decision::Retry => return,
            };
            self.history.record(&self.name, op);
        }
        tracing::debug!(producer = %self.name, %tp, records = batch.records.len(), ?decision, "batch completed");
        resolve_sequences(state, batch, decision);
    }

    /// A processor's outputs' outcome, for its next `flush`.
    fn complete_outputs(&self, state: &mut State, batch: &ProducerBatch, decision: &Decision) {
        if matches!(decision, Decision::Retry) {
            return;
        }
        let records = batch.records.len() as u64;
        debug_assert!(
            state.outputs.unresolved >= records,
            "outputs resolved twice"
        );
        state.outputs.unresolved -= records;
        if !matches!(decision, Decision::Ok { .. }) {
            state.outputs.failed += records;
        }
        resolve_sequences(state, batch, decision);
        self.txn_changed.notify_one();
    }

    /// A transactional batch's outcome: its sends keep it until their transaction ends, and
    /// a failure fails the transaction (abortable or fatal, as the manager decides).
    fn complete_in_transaction(
        &self,
        state: &mut State,
        batch: &ProducerBatch,
        decision: &Decision,
        refused: Option<ErrorCode>,
    ) {
        let offset = |i: usize| match decision {
            Decision::Ok { base_offset } => Some(Offset(base_offset.0 + i as i64)),
            _ => None,
        };
        let mut ours = false;
        for (i, record) in batch.records.iter().enumerate() {
            if let Some(send) = state.txn_sends.get_mut(&record.id) {
                send.written = Some(offset(i));
                ours = true;
            }
        }
        let (Some(transaction), Some(idempotence)) =
            (state.transaction.as_mut(), state.idempotence.as_mut())
        else {
            return;
        };
        if let Some(sequenced) = &batch.sequence {
            idempotence.forget(batch.partition, sequenced);
        }
        tracing::debug!(producer = %self.name, partition = batch.partition, ?decision, "transactional batch completed");
        if ours && !matches!(decision, Decision::Ok { .. }) {
            let (mut failure, reason) = match decision {
                Decision::Fail(reason) => (BatchFailure::Refused(refused), reason),
                Decision::Info(reason) => (BatchFailure::Unknown, reason),
                Decision::Ok { .. } | Decision::Retry => unreachable!("a batch that failed"),
            };
            // Before KIP-360 a refused batch gives its sequences back; where this model
            // cannot renumber the batches after it, the producer cannot go on.
            if let (BatchFailure::Refused(_), Some(sequenced)) = (failure, &batch.sequence) {
                if !transaction.rules().bump_epoch
                    && !idempotence.rewind(batch.partition, sequenced, batch.records.len())
                {
                    failure = BatchFailure::Unknown;
                }
            }
            transaction.on_batch_failed(failure, reason);
            self.txn_changed.notify_one();
        }
        self.txn_wake.notify_one();
    }

    /// A produce attempt ended: complete the batch or put it back for a retry.
    fn on_attempt(&self, mut batch: ProducerBatch, result: AttemptResult) {
        let now = clock::now();
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        state.accumulator.unmute(batch.partition);
        let earlier_unresolved = match (&state.idempotence, &batch.sequence) {
            (Some(idempotence), Some(sequenced)) => {
                idempotence.earlier_unresolved(batch.partition, sequenced)
            }
            _ => false,
        };
        let progress = BatchProgress {
            retries_done: batch.attempts.saturating_sub(1),
            maybe_written: batch.maybe_written,
            created: batch.created,
            earlier_unresolved,
        };
        let decision = match decide(&result, &progress, &self.policy, now) {
            Decision::Info(reason)
                if self.timeout_proves_not_written && result == AttemptResult::TimedOut =>
            {
                Decision::Fail(reason)
            }
            decision => decision,
        };
        // A processor's outputs carry their inputs' ids: no fact of theirs names a send.
        if result == AttemptResult::TimedOut && self.records_sends {
            self.facts.record(Fact::RequestTimedOut {
                producer: self.index,
                tp: self.tp(batch.partition),
            });
        }
        batch.maybe_written |= may_have_written(&result);
        if outcome::refreshes_metadata(&result) {
            self.request_metadata();
        }
        match decision {
            Decision::Retry => {
                tracing::debug!(producer = %self.name, partition = batch.partition, ?result, "retrying batch");
                let told = batch.records.first().zip(batch.records.last());
                if let Some((first, last)) = told.filter(|_| self.records_sends) {
                    self.facts.record(Fact::Retried {
                        producer: self.index,
                        tp: self.tp(batch.partition),
                        first: first.id,
                        last: last.id,
                        error: result.to_string(),
                    });
                }
                state
                    .accumulator
                    .reenqueue(batch, now, self.config.retry_backoff);
            }
            decision => {
                let refused = match result {
                    AttemptResult::Response { error, .. } => error,
                    _ => None,
                };
                self.complete(state, &batch, &decision, refused)
            }
        }
        drop(guard);
        self.wake.notify_one();
    }

    /// Drain every ready batch that can go now; returns the next time to look again.
    fn drain_ready(self: &Rc<Self>) -> Option<SimTime> {
        let now = clock::now();
        let mut guard = self.state.borrow_mut();
        let state = &mut *guard;
        let reason = state.accumulator.expiry().reason();
        for batch in state.accumulator.expire(now) {
            let decision = outcome::expired(batch.maybe_written, reason);
            self.complete(state, &batch, &decision, None);
        }
        if state
            .transaction
            .as_ref()
            .is_some_and(TransactionManager::aborts_undrained)
        {
            let aborted = Decision::Fail("transaction aborted".to_owned());
            for batch in state.accumulator.abort_undrained() {
                self.complete(state, &batch, &aborted, None);
            }
        }
        if state.transaction.is_none()
            && state
                .idempotence
                .as_ref()
                .is_some_and(IdempotenceState::needs_producer_id)
            && !state.initializing_producer_id
        {
            state.initializing_producer_id = true;
            tokio::task::spawn_local(init_producer_id(self.clone()));
        }
        let mut next = state.accumulator.next_ready_time(now);
        for partition in state.accumulator.ready(now) {
            if state
                .transaction
                .as_ref()
                .is_some_and(|t| !t.may_send_to(&self.tp(partition)))
            {
                continue;
            }
            let Some((leader, _)) = state.metadata.leader(&self.tp(partition)) else {
                self.request_metadata();
                continue;
            };
            let Some(connection) = self.connection(state, leader, now, &mut next) else {
                continue;
            };
            let acks_none = self.config.acks == Acks::None;
            let limit = self.config.max_in_flight_requests_per_connection.max(1) as usize;
            while acks_none || connection.in_flight() < limit {
                let Some(batch) = self.drain_one(state, partition) else {
                    break;
                };
                let sent = self.send_batch(state, &connection, batch, now);
                debug_assert!(
                    acks_none || connection.in_flight() <= limit,
                    "{} requests in flight on a connection, over max.in.flight.requests.per.connection {limit}",
                    connection.in_flight()
                );
                if !sent || !state.accumulator.is_ready(partition, now) {
                    break;
                }
            }
        }
        if let Some(expiry) = state.accumulator.next_expiry() {
            next = Some(next.map_or(expiry, |n| n.min(expiry)));
        }
        next
    }

    /// An open connection to `broker`, or start one (after its reconnect backoff).
    fn connection(
        self: &Rc<Self>,
        state: &mut State,
        broker: BrokerId,
        now: SimTime,
        next: &mut Option<SimTime>,
    ) -> Option<Pipeline> {
        match state.connections.get(&broker) {
            Some(connection) if !connection.is_closed() => return Some(connection.clone()),
            Some(_) => {
                state.connections.remove(&broker);
            }
            None => {}
        }
        if state.connecting.contains(&broker) {
            return None;
        }
        if let Some(&at) = state.reconnect_at.get(&broker) {
            if at > now {
                *next = Some(next.map_or(at, |n| n.min(at)));
                return None;
            }
        }
        state.connecting.insert(broker);
        tokio::task::spawn_local(connect(self.clone(), broker));
        None
    }

    /// The partition's next batch, stamped and encoded at its first drain; `None` when an
    /// idempotent producer cannot stamp a new batch for the partition yet (no usable
    /// producer id, or an older id's batch there is still unresolved).
    fn drain_one(&self, state: &mut State, partition: u32) -> Option<ProducerBatch> {
        let front = state.accumulator.front(partition)?;
        let first_drain = front.encoded.is_none();
        // The mutation that breaks retry order breaks this rule with it.
        let retried = front
            .sequence
            .as_ref()
            .filter(|_| state.accumulator.keeps_sequence_order());
        if state
            .idempotence
            .as_ref()
            .is_some_and(|idempotence| !idempotence.may_drain(partition, retried))
        {
            return None;
        }
        let mut batch = state.accumulator.drain(partition)?;
        if first_drain {
            if let Some(idempotence) = state.idempotence.as_mut() {
                batch.sequence = idempotence.assign(partition, batch.records.len());
            }
            batch.encoded = Some(self.encode(&batch));
        }
        Some(batch)
    }

    /// Hand `batch` to the connection. `false` when the connection has closed: the batch
    /// is queued again, unsent, and the caller stops draining to that connection.
    fn send_batch(
        self: &Rc<Self>,
        state: &mut State,
        connection: &Pipeline,
        mut batch: ProducerBatch,
        now: SimTime,
    ) -> bool {
        let request = Request::Produce(Produce {
            transactional_id: self.transactional_id.clone(),
            tp: self.tp(batch.partition),
            acks: self.config.acks,
            timeout_ms: self.config.request_timeout.as_millis() as u64,
            batch: batch.encoded.clone().unwrap_or_default(),
        });
        let in_flight = match connection.send(request) {
            Ok(in_flight) => in_flight,
            Err(_) => {
                state.accumulator.reenqueue(batch, now, Duration::ZERO);
                return false;
            }
        };
        batch.attempts += 1;
        batch.retry_at = None;
        if self.config.acks == Acks::None {
            // Send and forget: the answer, if any, is not waited for.
            drop(in_flight);
            let sent = Decision::Info(outcome::SENT_AND_FORGOTTEN.to_string());
            self.complete(state, &batch, &sent, None);
            return true;
        }
        state.in_flight += 1;
        if self.config.max_in_flight_requests_per_connection <= 1 {
            state.accumulator.mute(batch.partition);
        }
        let producer = self.clone();
        let timeout = self.config.request_timeout;
        tokio::task::spawn_local(async move {
            let result = match in_flight.response(timeout).await {
                Ok(Response::Produce(response)) => AttemptResult::Response {
                    error: response.error,
                    base_offset: response.base_offset,
                },
                Ok(other) => {
                    tracing::debug!(?other, "unexpected answer to Produce");
                    AttemptResult::Disconnected
                }
                Err(NetError::Timeout) => AttemptResult::TimedOut,
                Err(_) => AttemptResult::Disconnected,
            };
            producer.state.borrow_mut().in_flight -= 1;
            producer.on_attempt(batch, result);
        });
        true
    }
}

/// The workload application's plan ([`Application::Workload`]).
struct SendPlan<'a> {
    arrivals: ArrivalProcess,
    budget: &'a SendBudget,
    stop_at: SimTime,
    transaction_messages: u32,
}

/// The application: a send at each of its arrival instants until `stop_at` or the budget
/// runs out; a transactional producer's in transactions of `transaction_messages` sends.
async fn send_loop(producer: &Producer, plan: SendPlan<'_>) {
    let start = clock::now();
    let transactional = producer.transactional_id.is_some();
    if transactional {
        producer.init_transactions().await;
    }
    let mut open: Option<(MessageId, MessageId, u32)> = None;
    for offset in plan.arrivals {
        clock::sleep_until(start + offset).await;
        if clock::now() >= plan.stop_at {
            break;
        }
        let Some(id) = plan.budget.take(producer.index) else {
            break;
        };
        if transactional && open.is_none() {
            producer.with_transaction(TransactionManager::begin);
        }
        producer.send(id);
        if transactional {
            let (first, _, sends) = open.unwrap_or((id, id, 0));
            open = Some((first, id, sends + 1));
            if sends + 1 >= plan.transaction_messages {
                producer.end_transaction(first, id).await;
                open = None;
            }
        }
    }
    if let Some((first, last, _)) = open {
        producer.end_transaction(first, last).await;
    }
}

impl Producer {
    fn with_transaction<T>(&self, f: impl FnOnce(&mut TransactionManager) -> T) -> T {
        let mut state = self.state.borrow_mut();
        let transaction = state
            .transaction
            .as_mut()
            .expect("a transactional producer");
        let result = f(transaction);
        drop(state);
        self.txn_wake.notify_one();
        self.wake.notify_one();
        result
    }

    /// Wait until the transaction manager's state is one of `states`.
    async fn await_state(&self, states: &[TxnState]) -> TxnState {
        loop {
            let state = self.with_transaction(|t| t.state());
            if states.contains(&state) {
                return state;
            }
            self.txn_changed.notified().await;
        }
    }

    /// `initTransactions`, and again for a new instance after a fatal error (a new
    /// manager and new sequences; the coordinator fences the old epoch).
    async fn init_transactions(&self) {
        loop {
            {
                let mut state = self.state.borrow_mut();
                let used = state
                    .transaction
                    .as_ref()
                    .filter(|t| t.state() != TxnState::Uninitialized)
                    .map(TransactionManager::rules);
                if let Some(rules) = used {
                    state.transaction = Some(TransactionManager::new(rules));
                    state.idempotence = Some(IdempotenceState::default());
                    state.instance += 1;
                }
            }
            self.with_transaction(TransactionManager::initialize);
            if self
                .await_state(&[TxnState::Ready, TxnState::FatalError])
                .await
                == TxnState::Ready
            {
                return;
            }
            let error = self.with_transaction(|t| t.failure());
            tracing::info!(producer = %self.name, ?error, "initTransactions failed: a new instance");
            tokio::time::sleep(self.config.retry_backoff).await;
        }
    }

    /// `commitTransaction`, or `abortTransaction` when the commit fails with an abortable
    /// error; the sends `first..=last` are completed with the transaction's outcome.
    async fn end_transaction(&self, first: MessageId, last: MessageId) {
        let (outcome, error) = self.finish_transaction().await;
        self.record_transaction(first, last, outcome, error);
        self.recover().await;
    }

    /// `commitTransaction`, or `abortTransaction` when the commit (or an earlier request)
    /// failed with an abortable error. Returns how the transaction ended, and why it did
    /// not commit; after a fatal error the caller [`Producer::recover`]s.
    async fn finish_transaction(&self) -> (TxnOutcome, Option<String>) {
        self.state.borrow_mut().accumulator.set_flushing(true);
        let failed = match self.with_transaction(TransactionManager::begin_commit) {
            Ok(()) => {
                let ended = [
                    TxnState::Ready,
                    TxnState::AbortableError,
                    TxnState::FatalError,
                ];
                match self.await_state(&ended).await {
                    TxnState::Ready => None,
                    _ => Some(self.with_transaction(|t| t.failure())),
                }
            }
            Err(error) => Some(error),
        };
        if failed.as_ref().is_some_and(|error| !error.fatal) {
            self.with_transaction(TransactionManager::begin_abort)
                .expect("an abortable error allows an abort");
            let ended = [
                TxnState::Ready,
                TxnState::Initializing,
                TxnState::FatalError,
            ];
            self.await_state(&ended).await;
        }
        self.state.borrow_mut().accumulator.set_flushing(false);
        let outcome = match &failed {
            None => TxnOutcome::Committed,
            Some(_) if self.with_transaction(|t| t.commit_sent()) => TxnOutcome::Unknown,
            Some(_) => TxnOutcome::Aborted,
        };
        (outcome, failed.map(|e| e.reason))
    }

    /// Ready for the next transaction: after a fatal error, a new instance.
    async fn recover(&self) {
        match self
            .await_state(&[TxnState::Ready, TxnState::FatalError])
            .await
        {
            TxnState::Ready => {}
            _ => self.init_transactions().await,
        }
    }

    /// The transaction's outcome in the history, then each of its sends' completion.
    fn record_transaction(
        &self,
        first: MessageId,
        last: MessageId,
        outcome: TxnOutcome,
        error: Option<String>,
    ) {
        tracing::debug!(producer = %self.name, %first, %last, ?outcome, ?error, "transaction ended");
        let sends: Vec<(MessageId, TxnSend)> = {
            let mut state = self.state.borrow_mut();
            let later = state.txn_sends.split_off(&MessageId {
                seq: last.seq + 1,
                ..last
            });
            let ours = std::mem::replace(&mut state.txn_sends, later);
            ours.into_iter().collect()
        };
        self.history.record(
            &self.name,
            Op::Txn {
                first,
                last,
                outcome,
                error: error.clone(),
            },
        );
        let reason = error.unwrap_or_default();
        for (id, send) in sends {
            let op = match (outcome, send.written) {
                (TxnOutcome::Committed, Some(Some(offset))) => Op::Ok {
                    id,
                    tp: self.tp(send.partition),
                    offset,
                    degraded: None,
                },
                (TxnOutcome::Committed, written) => {
                    debug_assert!(false, "{id} of a committed transaction: {written:?}");
                    Op::Info {
                        id,
                        error: "committed without its batch's answer".to_owned(),
                    }
                }
                (TxnOutcome::Aborted, _) => Op::Fail {
                    id,
                    error: format!("transaction aborted: {reason}"),
                },
                (TxnOutcome::Unknown, _) => Op::Info {
                    id,
                    error: format!("transaction outcome unknown: {reason}"),
                },
            };
            self.history.record(&self.name, op);
        }
    }
}

/// A stream processor's producer, as its group member's poll loop uses it: each output
/// carries its input's id. Transactional (exactly once: the outputs and the consumed
/// offsets commit together) or not (at least once: flush, then commit the offsets).
pub(crate) struct OutputProducer {
    producer: Rc<Producer>,
}

impl OutputProducer {
    pub fn start(ctx: &ProducerContext) -> OutputProducer {
        debug_assert!(matches!(ctx.application, Application::Processor));
        // Its tasks live as long as the member's host.
        let (producer, _) = Producer::start(ctx);
        OutputProducer { producer }
    }

    pub fn transactional(&self) -> bool {
        self.producer.transactional_id.is_some()
    }

    /// `initTransactions` (a new instance fences the old one and aborts what it left open).
    pub async fn init_transactions(&self) {
        self.producer.init_transactions().await;
    }

    /// `beginTransaction`.
    pub fn begin(&self) {
        self.producer.with_transaction(TransactionManager::begin);
    }

    /// `send` of the output of input `id`.
    pub fn send(&self, id: MessageId) {
        self.producer.send(id);
    }

    /// `sendOffsetsToTransaction` then `commitTransaction` (KIP-447: the member's
    /// generation goes with the offsets); on an abortable error `abortTransaction`, after a
    /// fatal one a new instance. Returns how the transaction ended and why.
    pub async fn commit_with_offsets(&self, offsets: OffsetCommit) -> (TxnOutcome, Option<String>) {
        let group = offsets.group.clone();
        let sent = self
            .producer
            .with_transaction(|t| t.state() == TxnState::InTransaction);
        if sent {
            self.producer.state.borrow_mut().txn_offsets = Some(offsets);
            self.producer.with_transaction(|t| t.send_offsets(&group));
            while self.producer.with_transaction(|t| t.offsets_pending()) {
                self.producer.txn_changed.notified().await;
            }
            self.producer.state.borrow_mut().txn_offsets = None;
        }
        let ended = self.producer.finish_transaction().await;
        self.producer.state.borrow_mut().txn_sends.clear();
        self.producer.recover().await;
        ended
    }

    /// `flush`: wait until every output sent so far has its outcome; whether all of them
    /// were written.
    pub async fn flush(&self) -> bool {
        self.producer
            .state
            .borrow_mut()
            .accumulator
            .set_flushing(true);
        self.producer.wake.notify_one();
        while self.producer.state.borrow().outputs.unresolved > 0 {
            self.producer.txn_changed.notified().await;
        }
        let mut state = self.producer.state.borrow_mut();
        state.accumulator.set_flushing(false);
        std::mem::take(&mut state.outputs.failed) == 0
    }
}

/// The sender: drain, then sleep until something changes or a deadline passes. Ends when
/// the producer is closing and every batch has its outcome.
async fn sender_loop(producer: Rc<Producer>) {
    loop {
        let next = producer.drain_ready();
        {
            let state = producer.state.borrow();
            if state.accumulator.is_empty()
                && state.in_flight == 0
                && state.accumulator.is_closing()
            {
                return;
            }
        }
        match next {
            Some(at) => {
                tokio::select! {
                    biased;
                    _ = producer.wake.notified() => {}
                    _ = clock::sleep_until(at) => {}
                }
            }
            None => producer.wake.notified().await,
        }
    }
}

/// Refresh metadata when asked (at most every `retry.backoff.ms`) and every `metadata.max.age.ms`.
async fn metadata_loop(producer: Rc<Producer>) {
    let backoff = producer.config.retry_backoff;
    let max_age = producer.config.metadata_max_age;
    let timeout = producer.config.request_timeout;
    let mut wanted = true;
    loop {
        if !wanted {
            let refresh_at = clock::now() + max_age;
            tokio::select! {
                biased;
                _ = producer.metadata_wanted.notified() => {}
                _ = clock::sleep_until(refresh_at) => {}
            }
        }
        let first = {
            let mut state = producer.state.borrow_mut();
            let first = state.next_broker;
            state.next_broker = first % producer.brokers + 1;
            first
        };
        match fetch_metadata(producer.brokers, first, timeout).await {
            Some(fresh) => {
                let changed = producer.state.borrow_mut().metadata.update(fresh);
                if changed {
                    tracing::debug!(producer = %producer.name, "metadata changed");
                }
                wanted = false;
                producer.wake.notify_one();
            }
            None => wanted = true,
        }
        tokio::time::sleep(backoff).await;
    }
}

async fn connect(producer: Rc<Producer>, broker: BrokerId) {
    let result = Pipeline::connect(HostName::Broker(broker.0), CONNECTION_SETUP_TIMEOUT).await;
    let now = clock::now();
    {
        let mut state = producer.state.borrow_mut();
        state.connecting.remove(&broker);
        match result {
            Ok(connection) => {
                state.reconnect_at.remove(&broker);
                state.connections.insert(broker, connection);
            }
            Err(e) => {
                tracing::debug!(producer = %producer.name, %broker, error = %e, "connect failed");
                state
                    .reconnect_at
                    .insert(broker, now + producer.config.retry_backoff);
                producer.request_metadata();
            }
        }
    }
    producer.wake.notify_one();
}

/// The transaction manager's requests, one at a time: FindCoordinator to any broker, the
/// rest to the coordinator; each answer fed back, then its backoff.
async fn transaction_loop(producer: Rc<Producer>) {
    let timeout = producer.config.request_timeout;
    let transactional_id = producer
        .transactional_id
        .clone()
        .expect("a transactional producer");
    loop {
        let (request, coordinator, identity, instance) = {
            let mut state = producer.state.borrow_mut();
            let instance = state.instance;
            let unresolved = state.txn_sends.values().any(|s| s.written.is_none());
            let Some(transaction) = state.transaction.as_mut() else {
                return;
            };
            let before = transaction.state();
            let request = transaction.next_request(unresolved);
            if transaction.state() != before {
                producer.txn_changed.notify_one();
            }
            (
                request,
                transaction.coordinator(),
                transaction
                    .identity()
                    .unwrap_or((ProducerId::NONE, NO_PRODUCER_EPOCH)),
                instance,
            )
        };
        let Some(request) = request else {
            producer.txn_wake.notified().await;
            continue;
        };
        let txn = || TxnProducer {
            transactional_id: transactional_id.clone(),
            producer_id: identity.0,
            producer_epoch: identity.1,
        };
        let (host, message) = match &request {
            TxnRequest::FindCoordinator => {
                let mut state = producer.state.borrow_mut();
                let broker = state.next_broker;
                state.next_broker = broker % producer.brokers + 1;
                let find = Request::FindTxnCoordinator {
                    transactional_id: transactional_id.clone(),
                };
                (broker, find)
            }
            TxnRequest::InitProducerId { expected } => (
                coordinator.map_or(0, |c| c.0),
                Request::InitTxnProducerId(InitTxnProducerId {
                    transactional_id: transactional_id.clone(),
                    transaction_timeout_ms: producer.config.transaction_timeout.as_millis() as i32,
                    expected: *expected,
                }),
            ),
            TxnRequest::AddPartitions(partitions) => (
                coordinator.map_or(0, |c| c.0),
                Request::AddPartitionsToTxn {
                    txn: txn(),
                    partitions: partitions.clone(),
                },
            ),
            TxnRequest::EndTxn(result) => (
                coordinator.map_or(0, |c| c.0),
                Request::EndTxn {
                    txn: txn(),
                    result: *result,
                },
            ),
            TxnRequest::AddOffsets(group) => (
                coordinator.map_or(0, |c| c.0),
                Request::AddOffsetsToTxn {
                    txn: txn(),
                    group: group.clone(),
                },
            ),
            TxnRequest::FindGroupCoordinator(group) => {
                let mut state = producer.state.borrow_mut();
                let broker = state.next_broker;
                state.next_broker = broker % producer.brokers + 1;
                (
                    broker,
                    Request::FindCoordinator {
                        group: group.clone(),
                    },
                )
            }
            TxnRequest::TxnOffsetCommit(broker) => {
                let commit = producer.state.borrow().txn_offsets.clone();
                let commit = commit.expect("offsets sent to the transaction");
                (broker.0, Request::TxnOffsetCommit { txn: txn(), commit })
            }
        };
        tracing::debug!(producer = %producer.name, ?request, broker = host, "transaction request");
        let answer = match metadata::call(HostName::Broker(host), &message, timeout).await {
            Some(Response::FindCoordinator {
                error: None,
                coordinator: Some(broker),
            }) => TxnAnswer::Coordinator(broker),
            Some(Response::InitProducerId {
                error: None,
                producer_id,
                producer_epoch,
            }) => TxnAnswer::ProducerId(producer_id, producer_epoch),
            Some(Response::FindCoordinator { error, .. }) => {
                TxnAnswer::Error(Some(error.unwrap_or(ErrorCode::CoordinatorNotAvailable)))
            }
            Some(Response::InitProducerId {
                error: Some(error), ..
            }) => TxnAnswer::Error(Some(error)),
            Some(Response::EndTxn {
                error: None,
                producer_id,
                producer_epoch,
            }) => TxnAnswer::ProducerId(producer_id, producer_epoch),
            Some(Response::EndTxn {
                error: Some(error), ..
            }) => TxnAnswer::Error(Some(error)),
            Some(Response::Txn { error }) | Some(Response::OffsetCommit { error }) => {
                TxnAnswer::Error(error)
            }
            Some(_) | None => TxnAnswer::Lost,
        };
        let wait = {
            let mut guard = producer.state.borrow_mut();
            let state = &mut *guard;
            if state.instance != instance {
                // A new instance replaced the one that asked.
                continue;
            }
            let Some(transaction) = state.transaction.as_mut() else {
                return;
            };
            let held = transaction.identity();
            let wait = transaction.on_answer(answer);
            if let (Some(identity), Some(idempotence)) =
                (transaction.identity(), state.idempotence.as_mut())
            {
                if matches!(request, TxnRequest::InitProducerId { .. })
                    && transaction.state() == TxnState::Ready
                {
                    idempotence.set_producer_id(identity.0, identity.1);
                    tracing::info!(producer = %producer.name, producer_id = identity.0 .0, epoch = identity.1, "transactional producer id acquired");
                } else if matches!(request, TxnRequest::EndTxn(_)) && held != Some(identity) {
                    // v2: the end bumped the epoch; every partition's sequence restarts.
                    idempotence.set_producer_id(identity.0, identity.1);
                    tracing::debug!(producer = %producer.name, epoch = identity.1, "epoch bumped by the transaction's end");
                }
            }
            wait
        };
        producer.txn_changed.notify_one();
        producer.wake.notify_one();
        match wait {
            Wait::None => {}
            Wait::RetryBackoff => tokio::time::sleep(producer.config.retry_backoff).await,
            Wait::Fixed(backoff) => tokio::time::sleep(backoff).await,
        }
    }
}

/// InitProducerId from any broker, retried until one answers.
async fn init_producer_id(producer: Rc<Producer>) {
    let timeout = producer.config.request_timeout;
    let mut broker = producer.state.borrow().next_broker;
    loop {
        let answer =
            metadata::call(HostName::Broker(broker), &Request::InitProducerId, timeout).await;
        if let Some(Response::InitProducerId {
            error: None,
            producer_id,
            producer_epoch,
        }) = answer
        {
            let mut state = producer.state.borrow_mut();
            if let Some(idempotence) = state.idempotence.as_mut() {
                idempotence.set_producer_id(producer_id, producer_epoch);
            }
            state.initializing_producer_id = false;
            drop(state);
            tracing::info!(producer = %producer.name, producer_id = producer_id.0, "producer id acquired");
            producer.wake.notify_one();
            return;
        }
        broker = broker % producer.brokers + 1;
        tokio::time::sleep(producer.config.retry_backoff).await;
    }
}

/// `batch` has its final outcome: the idempotent producer settles its sequences (moves past
/// them, or takes them back).
fn resolve_sequences(state: &mut State, batch: &ProducerBatch, decision: &Decision) {
    if let (Some(idempotence), Some(sequenced)) =
        (state.idempotence.as_mut(), batch.sequence.as_ref())
    {
        idempotence.resolve(
            batch.partition,
            sequenced,
            matches!(decision, Decision::Ok { .. }),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::message_key;

    #[test]
    fn message_key_is_key_dash_seq_mod_keys() {
        assert_eq!(message_key(5, 0), None);
        for (seq, keys) in [
            (0, 1),
            (9, 10),
            (10, 11),
            (12_345, 1000),
            (u64::MAX, u32::MAX),
        ] {
            let expected = format!("key-{}", seq % u64::from(keys)).into_bytes();
            assert_eq!(message_key(seq, keys), Some(expected), "{seq} % {keys}");
        }
    }
}
