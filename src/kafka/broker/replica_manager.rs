//! The replica manager: every hosted partition, and the leader's side of every request.
//!
//! Two contracts are enforced here and nowhere else:
//! - **ack-after-flush**: when the flush policy (`log.flush.interval.messages`) demands a
//!   flush after an append, the produce is answered only after every fsync of that flush
//!   returned; a failed fsync takes the log dir offline and the produce (and every one
//!   waiting) is answered KAFKA_STORAGE_ERROR, never success.
//! - **ack-after-HW**: an `acks=all` produce is answered with success only when the
//!   leader's HW has passed its last offset (see `purgatory`).

use super::partition::{Partition, Transition};
use super::purgatory::{self, DelayedProduce, LeaderView};
use super::truncation;
use crate::config::bugs::Bugs;
use crate::config::kafka::{Acks, BrokerConfig, IsolationLevel, LogConfig, TopicConfig};
use crate::history::facts::kafka::Fact;
use crate::history::facts::Facts;
use crate::kafka::protocol::fetch_session::SessionCache;
use crate::kafka::protocol::messages::{
    AbortedTransaction, ClusterMetadata, ErrorCode, Fetch, FetchPartition, FetchResponse,
    FetchedPartition, OffsetSpec, OffsetsForLeaderEpoch, OffsetsForLeaderEpochResponse, Produce,
    ProduceResponse, Response, WriteTxnMarkers,
};
use crate::kafka::record::EndTxnMarker;
use crate::kafka::storage::log::{AppendOutcome, Log, StorageError};
use crate::kafka::storage::producer_state::VerificationGuard;
use crate::kafka::types::{Brokers, EpochEndOffset, Incarnation, PartitionEpoch, ProducerId};
use crate::os::clock;
use crate::os::disk::{Disk, DiskError};
use crate::types::{BrokerId, Epoch, Offset, TopicPartition};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Deref;
use std::rc::Rc;
use std::task::Poll;
use std::time::Duration;
use tokio::sync::{Mutex, Notify};

pub struct ReplicaManager {
    pub id: BrokerId,
    pub incarnation: Incarnation,
    pub config: BrokerConfig,
    pub topic_configs: BTreeMap<String, TopicConfig>,
    pub disk: Disk,
    /// Where follower truncations and log recoveries are recorded.
    pub facts: Facts,
    /// Bugs a mutation test injected (none in any real run).
    pub bugs: Bugs,
    pub partitions: RefCell<BTreeMap<TopicPartition, Hosted>>,
    /// The latest metadata image from the controller.
    pub metadata: RefCell<ClusterMetadata>,
    /// The (single) log dir failed: nothing more is acknowledged; the broker stops.
    pub offline: Cell<bool>,
    /// Controlled shutdown finished: background tasks stop.
    pub stopped: Cell<bool>,
    /// A follower met a truncation it may not make (before KAFKA-7414): the broker exits.
    pub exiting: Cell<bool>,
    /// This process found the clean-shutdown marker: the controller learns it at
    /// registration (KIP-966 takes a broker back from an unclean one out of ELRs).
    pub clean_shutdown: Cell<bool>,
    /// AlterPartition proposals to send, drained by the controller link.
    pub isr_proposals: RefCell<Vec<IsrProposal>>,
    pub isr_wakeup: tokio::sync::Notify,
    /// A metadata image was applied: the group coordinator looks at what it leads.
    pub leadership_changed: tokio::sync::Notify,
    /// The same news for the transaction coordinator (one `Notify` per listener, so that
    /// neither takes the other's wake-up).
    pub txn_leadership_changed: tokio::sync::Notify,
    /// One checkpoint write at a time: two writers of one file would share its temp file.
    pub checkpoint_lock: tokio::sync::Mutex<()>,
    /// The followers' fetch sessions with this broker as their leader.
    pub fetch_sessions: RefCell<SessionCache>,
}

/// The replica manager's slot for one hosted partition: the partition, and what tasks
/// wait on and lock for it. Reads go through `Deref`; every change goes through `update`,
/// so that no change misses waking the waiters.
pub struct Hosted {
    partition: Partition,
    /// Woken on appends, HW moves and role changes (long-polling fetches, waiting produces).
    notify: Rc<Notify>,
    /// Serialises this log's flushes: a flush plan is confirmed only by its own fsyncs.
    flush_lock: Rc<Mutex<()>>,
}

impl Hosted {
    fn new(partition: Partition) -> Hosted {
        Hosted {
            partition,
            notify: Rc::new(Notify::new()),
            flush_lock: Rc::new(Mutex::new(())),
        }
    }

    /// Change the partition, then wake the waiters if the change is one they wait for.
    pub fn update<R>(&mut self, change: impl FnOnce(&mut Partition) -> R) -> R {
        let result = change(&mut self.partition);
        if self.partition.take_wake() {
            self.notify.notify_waiters();
        }
        result
    }

    /// What a long-polling fetch or a waiting produce waits on.
    pub fn notify(&self) -> Rc<Notify> {
        self.notify.clone()
    }

    pub fn flush_lock(&self) -> Rc<Mutex<()>> {
        self.flush_lock.clone()
    }

    /// Wake every waiter, to re-check (the log dir went offline, the broker halts).
    pub fn wake_waiters(&self) {
        self.notify.notify_waiters();
    }
}

impl Deref for Hosted {
    type Target = Partition;

    fn deref(&self) -> &Partition {
        &self.partition
    }
}

/// An ISR change for the controller, based on this leader epoch and partition epoch.
pub struct IsrProposal {
    pub tp: TopicPartition,
    pub leader_epoch: Epoch,
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<BrokerId>,
    /// KIP-903: each member's broker epoch, where known (empty before 3.5).
    pub broker_epochs: Vec<(BrokerId, Incarnation)>,
}

/// Whether a broker whose controlled shutdown finished still answers as a leader: it
/// takes no more writes and serves no more fetches, but still says where its epochs end
/// and what its offsets are.
#[derive(Clone, Copy, PartialEq, Eq)]
enum AfterShutdown {
    Refuse,
    Answer,
}

/// Who appends a batch as leader (Kafka's `AppendOrigin`, less REPLICATION, which is the
/// follower's own path).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AppendOrigin {
    Client,
    Coordinator,
}

/// How long a marker append waits for its replicas: the broker's `request.timeout.ms`
/// (30 s), which Kafka's `handleWriteTxnMarkersRequest` passes (and its transaction
/// coordinator, for its own appends).
pub const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

/// What a fetch found in one partition: an error or a divergence, which the fetcher
/// must hear of now, or the records there are (maybe none yet).
enum FetchRead {
    Now(FetchedPartition),
    Data(FetchedPartition),
}

/// Who is fetching, which decides how far it may read: a follower to the LEO, a consumer
/// to the HW, or to the LSO under read_committed.
#[derive(Clone, Copy)]
struct Reader {
    replica: Option<BrokerId>,
    replica_epoch: Option<Incarnation>,
    read_committed: bool,
}

impl ReplicaManager {
    pub fn new(
        id: BrokerId,
        incarnation: Incarnation,
        config: BrokerConfig,
        topic_configs: BTreeMap<String, TopicConfig>,
        disk: Disk,
        facts: Facts,
        bugs: Bugs,
    ) -> ReplicaManager {
        ReplicaManager {
            id,
            incarnation,
            config,
            topic_configs,
            disk,
            facts,
            bugs,
            partitions: RefCell::new(BTreeMap::new()),
            metadata: RefCell::new(ClusterMetadata::default()),
            offline: Cell::new(false),
            exiting: Cell::new(false),
            stopped: Cell::new(false),
            clean_shutdown: Cell::new(false),
            isr_proposals: RefCell::new(Vec::new()),
            isr_wakeup: tokio::sync::Notify::new(),
            leadership_changed: tokio::sync::Notify::new(),
            txn_leadership_changed: tokio::sync::Notify::new(),
            checkpoint_lock: tokio::sync::Mutex::new(()),
            fetch_sessions: RefCell::new(SessionCache::default()),
        }
    }

    fn topic_config(&self, topic: &str) -> TopicConfig {
        self.topic_configs.get(topic).cloned().unwrap_or_default()
    }

    pub fn log_config(&self, topic: &str) -> LogConfig {
        LogConfig {
            bugs: self.bugs,
            ..LogConfig::resolve(&self.config, &self.topic_config(topic))
        }
    }

    /// The topic's `unclean.leader.election.enable`, as the broker reads it.
    pub fn unclean_leader_election(&self, topic: &str) -> bool {
        self.topic_config(topic)
            .unclean_leader_election_enable
            .unwrap_or(self.config.unclean_leader_election_enable)
    }

    /// Before KAFKA-7414 (2.0.1): a follower whose log ends past its leader's, where
    /// unclean election is off, may not truncate (`ReplicaFetcherThread`'s "Exiting
    /// because log truncation is not allowed"): the broker exits, and will again at
    /// every restart while that leader leads.
    pub fn exit_on_truncation_not_allowed(
        &self,
        tp: &TopicPartition,
        leader_end_offset: Offset,
        log_end_offset: Offset,
    ) {
        if !self.exiting.replace(true) {
            tracing::error!(broker = self.id.0, %tp, leader_end_offset = %leader_end_offset, log_end_offset = %log_end_offset, "exiting: log truncation is not allowed (unclean.leader.election.enable is off)");
            self.facts.record(Fact::TruncationNotAllowed {
                tp: tp.clone(),
                broker: self.id,
                leader_end_offset,
                log_end_offset,
            });
        }
    }

    pub fn min_insync_replicas(&self, topic: &str) -> u32 {
        if self.bugs.ignore_min_insync_replicas {
            return 1;
        }
        self.topic_config(topic)
            .min_insync_replicas
            .unwrap_or(self.config.min_insync_replicas)
    }

    /// Open (or create) a partition's log and start hosting it.
    pub fn host(&self, log: Log, hw: Offset) {
        let min_isr = self.min_insync_replicas(&log.tp().topic);
        let tp = log.tp().clone();
        let partition = Partition::new(
            self.id,
            log,
            hw,
            min_isr,
            self.config.rules,
            self.facts.clone(),
            self.bugs,
        );
        self.partitions
            .borrow_mut()
            .insert(tp, Hosted::new(partition));
    }

    /// The log dir failed (Kafka's LogDirFailureChannel): nothing is acknowledged from now
    /// on, every waiter is woken to answer KAFKA_STORAGE_ERROR, and the broker stops.
    pub fn storage_failed(&self, context: &str, error: &dyn std::fmt::Display) {
        if !self.offline.replace(true) {
            tracing::error!(broker = self.id.0, %context, %error, "log dir offline: storage error");
            self.facts.record(Fact::LogDirOffline {
                broker: self.id,
                error: format!("{context}: {error}"),
            });
        }
        // Callers may hold the partitions borrowed; then `run` wakes the waiters instead.
        if let Ok(partitions) = self.partitions.try_borrow() {
            for partition in partitions.values() {
                partition.wake_waiters();
            }
        }
    }

    /// Wake every waiting fetch and produce, to answer them before the broker halts.
    /// The leader of `tp` as this broker's metadata has it: where a coordinator's
    /// partition lives, for FindCoordinator and the questions brokers ask coordinators.
    pub fn leader_of(&self, tp: &TopicPartition) -> Option<BrokerId> {
        self.metadata
            .borrow()
            .partitions
            .get(tp)
            .and_then(|state| state.leader)
    }

    /// The partitions of an internal `topic` this broker leads, with their leader
    /// epochs (none once it has shut down): what its coordinators answer for.
    pub fn led_partitions(&self, topic: &str) -> BTreeMap<u32, Epoch> {
        if self.stopped.get() {
            return BTreeMap::new();
        }
        self.partitions
            .borrow()
            .iter()
            .filter(|(tp, p)| &*tp.topic == topic && p.is_leader())
            .map(|(tp, p)| (tp.partition, p.leader_epoch()))
            .collect()
    }

    pub fn wake_all(&self) {
        for partition in self.partitions.borrow().values() {
            partition.wake_waiters();
        }
    }

    /// Map a storage error to the client's error, taking the log dir offline for I/O errors.
    fn storage_error(&self, tp: &TopicPartition, error: StorageError) -> ErrorCode {
        match error {
            StorageError::OutOfOrderSequence => ErrorCode::OutOfOrderSequenceNumber,
            StorageError::DuplicateSequence => ErrorCode::DuplicateSequenceNumber,
            StorageError::InvalidTxnState => ErrorCode::InvalidTxnState,
            StorageError::InvalidProducerEpoch => ErrorCode::InvalidProducerEpoch,
            StorageError::TransactionCoordinatorFenced => ErrorCode::TransactionCoordinatorFenced,
            StorageError::InvalidRecord(_) => ErrorCode::CorruptMessage,
            StorageError::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            StorageError::Disk(_) | StorageError::Corrupt(_) | StorageError::Checkpoint { .. } => {
                self.storage_failed(&tp.to_string(), &error);
                ErrorCode::KafkaStorageError
            }
        }
    }

    /// The gate of every request a leader answers, in Kafka's order: the log dir is
    /// offline, the partition is unknown, this broker does not lead it.
    fn leader_gate<P: Deref<Target = Hosted>>(
        &self,
        partition: Option<P>,
        after_shutdown: AfterShutdown,
    ) -> Result<P, ErrorCode> {
        if self.offline.get() {
            return Err(ErrorCode::KafkaStorageError);
        }
        let partition = partition.ok_or(ErrorCode::UnknownTopicOrPartition)?;
        let stopped = after_shutdown == AfterShutdown::Refuse && self.stopped.get();
        if !partition.is_leader() || stopped {
            return Err(ErrorCode::NotLeaderOrFollower);
        }
        Ok(partition)
    }

    /// Apply a new metadata image: become leader, follower, or update the ISR of every
    /// partition assigned to this broker. Returns the partitions that need a fetcher.
    pub fn apply_metadata(
        &self,
        image: ClusterMetadata,
    ) -> Vec<(TopicPartition, u64, BrokerId, Epoch)> {
        let now = clock::now();
        let mut fetchers = Vec::new();
        for (tp, state) in &image.partitions {
            if !state.replicas.contains(&self.id) {
                continue;
            }
            if !self.partitions.borrow().contains_key(tp) {
                if self.incarnation.0 > 1 && !self.clean_shutdown.get() {
                    self.facts.record(Fact::LogMissing {
                        tp: tp.clone(),
                        broker: self.id,
                    });
                }
                let config = self.log_config(&tp.topic);
                match Log::open(&self.disk, tp, config, Offset(0), Offset(0), true, now) {
                    Ok(log) => self.host(log, Offset(0)),
                    Err(e) => {
                        self.storage_failed(&tp.to_string(), &e);
                        return Vec::new();
                    }
                }
            }
            let mut partitions = self.partitions.borrow_mut();
            let Some(partition) = partitions.get_mut(tp) else {
                continue;
            };
            let transition = match partition
                .update(|p| p.apply(state, self.config.replication_truncation, now))
            {
                Ok(t) => t,
                Err(e) => {
                    drop(partitions);
                    self.storage_error(tp, e);
                    return Vec::new();
                }
            };
            match transition {
                Transition::BecameLeader => tracing::info!(
                    broker = self.id.0, %tp, epoch = %state.leader_epoch, leo = %partition.log().log_end_offset(),
                    hw = %partition.hw(), isr = %Brokers(&state.isr), "became leader"
                ),
                Transition::BecameFollower { leader } => {
                    tracing::info!(
                        broker = self.id.0, %tp, epoch = %state.leader_epoch, leader = %leader.map_or_else(|| "none".to_string(), |l| l.0.to_string()),
                        leo = %partition.log().log_end_offset(), hw = %partition.hw(), "became follower"
                    );
                    if let Some(leader) = leader {
                        fetchers.push((
                            tp.clone(),
                            partition.generation(),
                            leader,
                            state.leader_epoch,
                        ));
                    }
                }
                Transition::IsrChanged => tracing::info!(
                    broker = self.id.0, %tp, partition_epoch = %state.partition_epoch, isr = %Brokers(&state.isr), "isr updated"
                ),
                Transition::None => {}
            }
        }
        *self.metadata.borrow_mut() = image;
        self.leadership_changed.notify_one();
        self.txn_leadership_changed.notify_one();
        fetchers
    }

    /// Queue an ISR change for the controller link to send.
    pub fn propose_isr(&self, partition: &Partition, isr: Vec<BrokerId>) {
        let tp = partition.tp();
        let (leader_epoch, partition_epoch) =
            (partition.leader_epoch(), partition.partition_epoch());
        tracing::info!(broker = self.id.0, %tp, %leader_epoch, %partition_epoch, proposed_isr = %Brokers(&isr), "proposing isr");
        let broker_epochs = if self.config.rules.isr_broker_epochs {
            let mut epochs = partition.broker_epochs(&isr);
            epochs.push((self.id, self.incarnation));
            epochs
        } else {
            Vec::new()
        };
        self.isr_proposals.borrow_mut().push(IsrProposal {
            tp: tp.clone(),
            leader_epoch,
            partition_epoch,
            new_isr: isr,
            broker_epochs,
        });
        self.isr_wakeup.notify_one();
    }

    /// Make everything appended to `tp` so far durable. `Err` means the log dir is offline.
    pub async fn flush(&self, tp: &TopicPartition) -> Result<(), ()> {
        let Some(lock) = self.partitions.borrow().get(tp).map(Hosted::flush_lock) else {
            return Ok(());
        };
        let _guard = lock.lock().await;
        let Some(plan) = self
            .partitions
            .borrow()
            .get(tp)
            .map(|p| p.log().flush_plan())
        else {
            return Ok(());
        };
        for file in &plan.files {
            self.fsync(file, false).await?;
        }
        for dir in &plan.dirs {
            self.fsync(dir, true).await?;
        }
        if let Some(partition) = self.partitions.borrow_mut().get_mut(tp) {
            partition.update(|p| p.on_flushed(plan.up_to, clock::now()));
        }
        Ok(())
    }

    /// One fsync; a file a truncation deleted meanwhile needs none.
    async fn fsync(&self, path: &str, dir: bool) -> Result<(), ()> {
        if self.offline.get() {
            return Err(());
        }
        let result = if dir {
            self.disk.fsync_dir(path).await
        } else {
            self.disk.fsync(path).await
        };
        match result {
            Ok(()) | Err(DiskError::NotFound(_)) => Ok(()),
            Err(e) => {
                self.storage_failed(path, &e);
                Err(())
            }
        }
    }

    fn leader_view(&self, tp: &TopicPartition) -> LeaderView {
        let partitions = self.partitions.borrow();
        let partition = partitions.get(tp);
        LeaderView {
            leader_epoch: partition
                .filter(|p| p.is_leader() && !self.stopped.get())
                .map(|p| p.leader_epoch()),
            hw: partition.map_or(Offset::NONE, |p| p.hw()),
            isr_len: partition.map_or(0, |p| p.isr().len()),
            offline: self.offline.get(),
        }
    }

    /// A client's produce; `guard` is the verification its batch went through, if it
    /// starts a transaction (see `verification`).
    pub async fn produce(
        self: &Rc<Self>,
        request: Produce,
        guard: Option<VerificationGuard>,
    ) -> ProduceResponse {
        self.produce_from(request, AppendOrigin::Client, guard)
            .await
    }

    /// A coordinator's own append to its internal topic (Kafka's
    /// `AppendOrigin.COORDINATOR`: no sequence check).
    pub async fn coordinator_append(self: &Rc<Self>, request: Produce) -> ProduceResponse {
        self.produce_from(request, AppendOrigin::Coordinator, None)
            .await
    }

    async fn produce_from(
        self: &Rc<Self>,
        request: Produce,
        origin: AppendOrigin,
        guard: Option<VerificationGuard>,
    ) -> ProduceResponse {
        let fail = |error: ErrorCode| ProduceResponse {
            error: Some(error),
            base_offset: Offset::NONE,
            log_start_offset: Offset::NONE,
        };
        let (acks, timeout_ms) = (request.acks, request.timeout_ms);
        let batch = request.batch;
        let appended = self
            .append(&request.tp, acks, |p| match origin {
                AppendOrigin::Client => p.on_verified_produce(batch, clock::now(), guard),
                AppendOrigin::Coordinator => p.on_coordinator_append(batch, clock::now()),
            })
            .await;
        if guard.is_some() && appended.as_ref().err() == Some(&ErrorCode::InvalidTxnState) {
            // Verified, but a marker came in while the coordinator was asked.
            let id = request.transactional_id.as_deref().unwrap_or_default();
            self.record_unverified(&request.tp, id, ErrorCode::InvalidTxnState);
        }
        let (first_offset, last_offset, log_start, delayed) = match appended {
            Ok(appended) => appended,
            Err(e) => return fail(e),
        };
        let ok = ProduceResponse {
            error: None,
            base_offset: first_offset,
            log_start_offset: log_start,
        };
        if acks != Acks::All || self.bugs.ack_at_append {
            self.record_ack(&request.tp, acks, first_offset, last_offset);
            return ok;
        }
        match self.wait_for_hw(&request.tp, delayed(timeout_ms)).await {
            None => {
                self.record_ack(&request.tp, acks, first_offset, last_offset);
                ok
            }
            Some(error) => fail(error),
        }
    }

    /// Leader, KIP-890: the guard a transactional batch of `producer_id` at `epoch` needs
    /// to start a transaction on `tp`, `None` if it continues one (`verification` asks the
    /// coordinator meanwhile).
    pub fn start_verification(
        &self,
        tp: &TopicPartition,
        producer_id: ProducerId,
        epoch: i16,
    ) -> Result<Option<VerificationGuard>, ErrorCode> {
        let mut partitions = self.partitions.borrow_mut();
        let partition = self.leader_gate(partitions.get_mut(tp), AfterShutdown::Refuse)?;
        Ok(partition.update(|p| p.start_verification(producer_id, epoch)))
    }

    /// A transactional batch refused because its transaction does not hold `tp`.
    pub fn record_unverified(&self, tp: &TopicPartition, transactional_id: &str, error: ErrorCode) {
        tracing::info!(broker = self.id.0, %tp, error = error.name(), "transactional produce refused: not in an ongoing transaction");
        self.facts.record(Fact::TxnUnverified {
            tp: tp.clone(),
            broker: self.id,
            transactional_id: transactional_id.to_owned(),
            error: error.name().to_string(),
        });
    }

    /// A leader's append, from a producer or a transaction coordinator: the min ISR check
    /// for acks=all, the append, and the flush the policy demands. Returns the offsets, the
    /// log start, and the wait for the HW that acks=all then needs (given its timeout).
    async fn append(
        self: &Rc<Self>,
        tp: &TopicPartition,
        acks: Acks,
        append: impl FnOnce(&mut Partition) -> Result<AppendOutcome, StorageError>,
    ) -> Result<(Offset, Offset, Offset, impl Fn(u64) -> DelayedProduce), ErrorCode> {
        // The leader's append (and the coordinator's, which comes through here) waits for
        // a slow or throttled disk before it writes.
        self.disk.write_gate().await;
        let (outcome, epoch, min_isr, log_start) = {
            let mut partitions = self.partitions.borrow_mut();
            let partition = self.leader_gate(partitions.get_mut(tp), AfterShutdown::Refuse)?;
            purgatory::check_before_append(
                acks,
                partition.isr().len(),
                partition.min_insync_replicas(),
            )?;
            match partition.update(append) {
                Ok(outcome) => (
                    outcome,
                    partition.leader_epoch(),
                    partition.min_insync_replicas(),
                    partition.log().log_start_offset(),
                ),
                Err(e) => {
                    drop(partitions);
                    return Err(self.storage_error(tp, e));
                }
            }
        };
        let (first_offset, last_offset) = match outcome {
            AppendOutcome::Appended {
                first_offset,
                last_offset,
                flush_needed,
            } => {
                // ack-after-flush: the flush the policy demands completes before any answer.
                if flush_needed && self.flush(tp).await.is_err() {
                    return Err(ErrorCode::KafkaStorageError);
                }
                (first_offset, last_offset)
            }
            AppendOutcome::Duplicate {
                first_offset,
                last_offset,
            } => (first_offset, last_offset),
        };
        self.flush_rolled_segment(tp);
        let delayed = move |timeout_ms: u64| DelayedProduce {
            required_offset: last_offset.next(),
            leader_epoch: epoch,
            deadline: clock::now() + Duration::from_millis(timeout_ms),
            min_insync_replicas: min_isr,
        };
        Ok((first_offset, last_offset, log_start, delayed))
    }

    /// WriteTxnMarkers: each marker appended, acks=all, to every partition of its
    /// transaction this broker leads (Kafka's `handleWriteTxnMarkersRequest`, origin
    /// COORDINATOR), all appended before any is waited for; each partition's error answered.
    pub async fn write_txn_markers(self: &Rc<Self>, request: &WriteTxnMarkers) -> Response {
        let mut appended = Vec::new();
        for marker in &request.markers {
            for tp in &marker.partitions {
                let end = EndTxnMarker {
                    result: marker.result,
                    coordinator_epoch: marker.coordinator_epoch,
                };
                let (pid, epoch) = (marker.producer_id, marker.producer_epoch);
                let result = self
                    .append(tp, Acks::All, |p| {
                        p.on_marker(pid, epoch, end, clock::now())
                    })
                    .await
                    .map(|(_, _, _, delayed)| delayed(MARKER_TIMEOUT.as_millis() as u64));
                appended.push((tp.clone(), result));
            }
        }
        let mut answers = appended.into_iter();
        let mut markers = Vec::with_capacity(request.markers.len());
        for marker in &request.markers {
            let mut errors = Vec::with_capacity(marker.partitions.len());
            for _ in &marker.partitions {
                let (tp, result) = answers.next().expect("an answer per partition");
                let error = match result {
                    Ok(delayed) => self.wait_for_hw(&tp, delayed).await,
                    Err(e) => Some(e),
                };
                errors.push((tp, error));
            }
            markers.push(errors);
        }
        Response::WriteTxnMarkers { markers }
    }

    /// A successful answer is a cluster fact, with what the leader knew when it gave it:
    /// the explanation of a lost write starts here. acks=0 is never answered.
    fn record_ack(&self, tp: &TopicPartition, acks: Acks, first: Offset, last: Offset) {
        if acks == Acks::None {
            return;
        }
        let partitions = self.partitions.borrow();
        let Some(partition) = partitions.get(tp) else {
            return;
        };
        self.facts.record(Fact::Acknowledged {
            tp: tp.clone(),
            leader: self.id,
            epoch: partition.leader_epoch(),
            acks,
            first,
            last,
            high_watermark: partition.hw(),
            last_stable_offset: self.last_stable_offset(partition),
            followers: partition.follower_leos().into_boxed_slice(),
        });
    }

    /// After a roll Kafka flushes the closed segment in the background, not before the ack.
    fn flush_rolled_segment(self: &Rc<Self>, tp: &TopicPartition) {
        let pending = self
            .partitions
            .borrow()
            .get(tp)
            .is_some_and(|p| p.log().roll_flush_pending());
        if pending {
            let this = self.clone();
            let tp = tp.clone();
            tokio::task::spawn_local(async move {
                let _ = this.flush(&tp).await;
            });
        }
    }

    /// The purgatory: wait, woken by HW moves and role changes, until the produce completes.
    async fn wait_for_hw(&self, tp: &TopicPartition, delayed: DelayedProduce) -> Option<ErrorCode> {
        let Some(notify) = self.partitions.borrow().get(tp).map(Hosted::notify) else {
            return Some(ErrorCode::NotLeaderOrFollower);
        };
        loop {
            let notified = notify.notified();
            let now = clock::now();
            if let Some(answer) = delayed.try_complete(self.leader_view(tp), now) {
                return answer;
            }
            let remaining = (delayed.deadline - now).max(Duration::from_millis(1));
            let _ = tokio::time::timeout(remaining, notified).await;
        }
    }

    /// A Fetch, from a follower or a consumer, of any number of partitions; long-polls up
    /// to `max_wait_ms` until it can answer (Kafka's `DelayedFetch`). A follower's fetch
    /// belongs to a fetch session (KIP-227): the answer then carries only what has news.
    pub async fn fetch(self: &Rc<Self>, request: Fetch) -> FetchResponse {
        let deadline = clock::now() + Duration::from_millis(request.max_wait_ms);
        let (replica, replica_epoch, min_bytes) =
            (request.replica, request.replica_epoch, request.min_bytes);
        // A follower reads to the LEO whatever its request says (Kafka's `FetchIsolation`).
        let read_committed =
            replica.is_none() && request.isolation == IsolationLevel::ReadCommitted;
        let opened = self.fetch_sessions.borrow_mut().open(request);
        let (context, partitions) = match opened {
            Ok(opened) => opened,
            Err(error) => {
                return FetchResponse {
                    error: Some(error),
                    session_id: 0,
                    partitions: Vec::new(),
                }
            }
        };
        let notifies: Vec<Rc<Notify>> = {
            let hosted = self.partitions.borrow();
            partitions
                .iter()
                .filter_map(|p| hosted.get(&p.tp).map(Hosted::notify))
                .collect()
        };
        let mut first = true;
        loop {
            // Registered before the read, so that nothing appended after it is missed.
            let mut waits: Vec<_> = notifies.iter().map(|n| Box::pin(n.notified())).collect();
            let reader = Reader {
                replica,
                replica_epoch,
                read_committed,
            };
            let (answers, complete) = self.read_for_fetch(reader, &partitions, min_bytes, first);
            first = false;
            let now = clock::now();
            if complete || waits.is_empty() || now >= deadline {
                return FetchResponse {
                    error: None,
                    session_id: context.session_id(),
                    partitions: self.fetch_sessions.borrow_mut().respond(context, answers),
                };
            }
            let any = std::future::poll_fn(|cx| {
                if waits.iter_mut().any(|w| w.as_mut().poll(cx).is_ready()) {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            });
            let _ = tokio::time::timeout(deadline - now, any).await;
        }
    }

    /// Read every partition of the fetch. It may be answered now when a partition has an
    /// error or a divergence to report, or when there are `min_bytes` of records in all.
    fn read_for_fetch(
        self: &Rc<Self>,
        reader: Reader,
        partitions: &[FetchPartition],
        min_bytes: u64,
        first: bool,
    ) -> (Vec<FetchedPartition>, bool) {
        let mut urgent = false;
        let mut bytes = 0;
        let answers = partitions
            .iter()
            .map(|p| match self.read_partition(reader, p, first) {
                FetchRead::Now(answer) => {
                    urgent = true;
                    answer
                }
                FetchRead::Data(answer) => {
                    bytes += answer.records.len() as u64;
                    answer
                }
            })
            .collect();
        (answers, urgent || bytes >= min_bytes)
    }

    /// One partition of a fetch. `first` is the fetch's first read, the one that records
    /// a follower's fetch offset; a fetch woken later only reads again.
    fn read_partition(
        self: &Rc<Self>,
        reader: Reader,
        request: &FetchPartition,
        first: bool,
    ) -> FetchRead {
        let Reader {
            replica,
            replica_epoch,
            read_committed,
        } = reader;
        let tp = &request.tp;
        let error = |error: ErrorCode| FetchRead::Now(FetchedPartition::error(tp.clone(), error));
        let mut partitions = self.partitions.borrow_mut();
        let partition = match self.leader_gate(partitions.get_mut(tp), AfterShutdown::Refuse) {
            Ok(partition) => partition,
            Err(e) => return error(e),
        };
        if let Some(e) = check_epoch(request.current_leader_epoch, partition.leader_epoch()) {
            return error(e);
        }
        let leo = partition.log().log_end_offset();
        // Kafka reads (and captures the HW) before it records the follower's fetch, so a
        // response with data carries the HW from before this fetch: a follower learns the
        // HW one round late. A fetch answered after waiting reads the HW afresh.
        let hw_at_read = partition.hw();
        let lso = self.last_stable_offset(partition);
        let answer = |hw: Offset, log_start_offset: Offset, records: Vec<u8>| FetchedPartition {
            tp: tp.clone(),
            error: None,
            high_watermark: hw,
            last_stable_offset: lso,
            log_start_offset,
            aborted_transactions: read_committed.then(Vec::new),
            records,
            diverging_epoch: None,
        };
        let log_start = partition.log().log_start_offset();
        if let (Some(_), Some(last_fetched_epoch)) = (replica, request.last_fetched_epoch) {
            let ours = partition
                .log()
                .epochs()
                .end_offset_for(last_fetched_epoch, leo);
            if let Some(diverging) =
                truncation::diverging_epoch(ours, last_fetched_epoch, request.fetch_offset)
            {
                return FetchRead::Now(FetchedPartition {
                    diverging_epoch: Some(diverging),
                    ..answer(hw_at_read, log_start, Vec::new())
                });
            }
        }
        if request.fetch_offset < log_start || request.fetch_offset > leo {
            return error(ErrorCode::OffsetOutOfRange);
        }
        let upper_bound = match replica {
            Some(replica) => {
                if first {
                    let may_join = !self.config.rules.isr_members_must_be_eligible
                        || self
                            .metadata
                            .borrow()
                            .brokers
                            .get(&replica)
                            .is_some_and(|r| !r.fenced);
                    let now = clock::now();
                    let offset = request.fetch_offset;
                    if let Some(isr) = partition.update(|p| {
                        p.on_follower_fetch(replica, replica_epoch, may_join, offset, now)
                    }) {
                        self.propose_isr(partition, isr);
                    }
                }
                leo
            }
            None if self.bugs.read_beyond_hw => leo,
            None if read_committed => lso,
            None => partition.hw(),
        };
        if request.fetch_offset >= upper_bound {
            return FetchRead::Data(answer(partition.hw(), log_start, Vec::new()));
        }
        match partition
            .log()
            .read(request.fetch_offset, request.max_bytes, upper_bound)
        {
            Ok(records) if records.is_empty() => {
                FetchRead::Data(answer(partition.hw(), log_start, records))
            }
            Ok(records) => {
                let mut answer = answer(hw_at_read, log_start, records);
                if read_committed {
                    let end = crate::kafka::record::batches_unchecked_crc(&answer.records)
                        .last()
                        .and_then(Result::ok)
                        .map_or(request.fetch_offset, |(_, h, _)| h.next_offset());
                    let aborted = partition
                        .log()
                        .collect_aborted_txns(request.fetch_offset, end);
                    answer.aborted_transactions = Some(
                        aborted
                            .iter()
                            .map(|t| AbortedTransaction {
                                producer_id: t.producer_id,
                                first_offset: t.first_offset,
                            })
                            .collect(),
                    );
                }
                FetchRead::Data(answer)
            }
            Err(e) => {
                drop(partitions);
                error(self.storage_error(tp, e))
            }
        }
    }

    pub fn offsets_for_leader_epoch(
        &self,
        request: &OffsetsForLeaderEpoch,
    ) -> OffsetsForLeaderEpochResponse {
        let error = |error: ErrorCode| OffsetsForLeaderEpochResponse {
            error: Some(error),
            end: EpochEndOffset {
                epoch: Epoch::NONE,
                end_offset: Offset::NONE,
            },
        };
        let partitions = self.partitions.borrow();
        let partition = match self.leader_gate(partitions.get(&request.tp), AfterShutdown::Answer) {
            Ok(partition) => partition,
            Err(e) => return error(e),
        };
        if let Some(e) = check_epoch(request.current_leader_epoch, partition.leader_epoch()) {
            return error(e);
        }
        let log = partition.log();
        let end = log
            .epochs()
            .end_offset_for(request.leader_epoch, log.log_end_offset());
        OffsetsForLeaderEpochResponse { error: None, end }
    }

    pub fn list_offsets(
        &self,
        replica: Option<BrokerId>,
        isolation: IsolationLevel,
        tp: &TopicPartition,
        spec: OffsetSpec,
        current_leader_epoch: Epoch,
    ) -> (Option<ErrorCode>, Offset) {
        let partitions = self.partitions.borrow();
        let p = match self.leader_gate(partitions.get(tp), AfterShutdown::Answer) {
            Ok(p) => p,
            Err(e) => return (Some(e), Offset::NONE),
        };
        if let Some(e) = check_epoch(current_leader_epoch, p.leader_epoch()) {
            return (Some(e), Offset::NONE);
        }
        match spec {
            OffsetSpec::Earliest => (None, p.log().log_start_offset()),
            OffsetSpec::Latest if replica.is_some() => (None, p.log().log_end_offset()),
            OffsetSpec::Latest if isolation == IsolationLevel::ReadCommitted => {
                (None, self.last_stable_offset(p))
            }
            OffsetSpec::Latest => (None, p.hw()),
        }
    }

    /// The LSO this leader answers read_committed readers with.
    fn last_stable_offset(&self, partition: &Partition) -> Offset {
        if self.bugs.lso_is_hw {
            partition.hw()
        } else {
            partition.last_stable_offset()
        }
    }

    /// Every hosted partition's (HW, recovery point, log start offset), for the checkpoints.
    pub fn offsets(&self) -> BTreeMap<TopicPartition, (Offset, Offset, Offset)> {
        self.partitions
            .borrow()
            .iter()
            .map(|(tp, p)| {
                (
                    tp.clone(),
                    (p.hw(), p.log().recovery_point(), p.log().log_start_offset()),
                )
            })
            .collect()
    }

    /// Partitions this broker leads.
    pub fn led(&self) -> Vec<TopicPartition> {
        self.partitions
            .borrow()
            .iter()
            .filter(|(_, p)| p.is_leader())
            .map(|(tp, _)| tp.clone())
            .collect()
    }
}

/// KIP-320: a request from an older epoch is fenced; one from a newer epoch means this
/// broker has not heard of it yet. `Epoch::NONE` asks for no check (older clients).
fn check_epoch(requested: Epoch, ours: Epoch) -> Option<ErrorCode> {
    if requested == Epoch::NONE || requested == ours {
        None
    } else if requested < ours {
        Some(ErrorCode::FencedLeaderEpoch)
    } else {
        Some(ErrorCode::UnknownLeaderEpoch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::protocol::messages::PartitionState;
    use crate::kafka::record::BatchBuilder;
    use crate::kafka::types::ProducerId;
    use crate::os::clock::SimTime;

    fn tp() -> TopicPartition {
        TopicPartition::new("orders", 0)
    }

    /// Broker 1 leading `orders/0` with ISR {1, 2} and two records.
    fn leader() -> Rc<ReplicaManager> {
        let disk = Disk::new(crate::os::disk::DiskConfig::default(), 1);
        let rm = Rc::new(ReplicaManager::new(
            BrokerId(1),
            Incarnation(1),
            BrokerConfig::default(),
            BTreeMap::new(),
            disk,
            Facts::default(),
            Bugs::default(),
        ));
        rm.apply_metadata(image(1, Epoch(0)));
        for value in [b"m0", b"m1"] {
            let mut batch = BatchBuilder::new(0, ProducerId::NONE, -1, -1);
            batch.push(0, None, Some(value));
            let mut partitions = rm.partitions.borrow_mut();
            let partition = partitions.get_mut(&tp()).expect("hosted");
            partition
                .update(|p| p.on_produce(batch.build(), SimTime::ZERO))
                .expect("append");
        }
        rm
    }

    /// Metadata `version` in which broker 1 leads `orders/0` in `leader_epoch`.
    fn image(version: u64, leader_epoch: Epoch) -> ClusterMetadata {
        let mut image = ClusterMetadata {
            version,
            ..ClusterMetadata::default()
        };
        image.partitions.insert(
            tp(),
            PartitionState {
                replicas: vec![BrokerId(1), BrokerId(2)],
                leader: Some(BrokerId(1)),
                leader_epoch,
                partition_epoch: PartitionEpoch(leader_epoch.0),
                isr: vec![BrokerId(1), BrokerId(2)],
                elr: Vec::new(),
                last_known_leader: None,
            },
        );
        image
    }

    fn follower_fetch(offset: i64) -> FetchPartition {
        FetchPartition {
            tp: tp(),
            fetch_offset: Offset(offset),
            current_leader_epoch: Epoch(0),
            last_fetched_epoch: Some(Epoch(0)),
            max_bytes: 1 << 20,
        }
    }

    const FOLLOWER: Option<BrokerId> = Some(BrokerId(2));
    const CONSUMER_READER: Reader = Reader {
        replica: None,
        replica_epoch: None,
        read_committed: false,
    };
    const FOLLOWER_READER: Reader = Reader {
        replica: FOLLOWER,
        replica_epoch: None,
        read_committed: false,
    };

    /// The lag KIP-101 is about: the fetch that moves the leader's HW does not carry it.
    #[test]
    fn follower_learns_the_hw_one_round_late() {
        let rm = leader();
        let FetchRead::Data(first) = rm.read_partition(FOLLOWER_READER, &follower_fetch(1), true)
        else {
            panic!("records at offset 1")
        };
        assert_eq!(
            first.high_watermark,
            Offset(0),
            "HW as of before this fetch"
        );
        assert_eq!(
            rm.partitions.borrow()[&tp()].hw(),
            Offset(1),
            "the leader's HW moved"
        );
        let FetchRead::Data(second) = rm.read_partition(FOLLOWER_READER, &follower_fetch(2), true)
        else {
            panic!("nothing beyond the LEO")
        };
        assert_eq!(second.high_watermark, Offset(2));
    }

    #[test]
    fn stale_and_unknown_leader_epochs_are_rejected() {
        let rm = leader();
        let mut fetch = follower_fetch(0);
        fetch.current_leader_epoch = Epoch(1);
        let FetchRead::Now(newer) = rm.read_partition(FOLLOWER_READER, &fetch, true) else {
            panic!()
        };
        assert_eq!(newer.error, Some(ErrorCode::UnknownLeaderEpoch));
        rm.apply_metadata(image(2, Epoch(2)));
        let FetchRead::Now(older) = rm.read_partition(FOLLOWER_READER, &fetch, true) else {
            panic!()
        };
        assert_eq!(older.error, Some(ErrorCode::FencedLeaderEpoch));
    }

    /// ListOffsets v4+ carries the reader's leader epoch (KIP-320): the final read asks
    /// the controller who leads and must not be answered by a leader of another epoch.
    #[test]
    fn list_offsets_is_fenced_by_the_leader_epoch() {
        let rm = leader();
        let ask = |epoch| {
            rm.list_offsets(
                None,
                IsolationLevel::ReadUncommitted,
                &tp(),
                OffsetSpec::Earliest,
                epoch,
            )
        };
        assert_eq!(
            ask(Epoch(1)),
            (Some(ErrorCode::UnknownLeaderEpoch), Offset::NONE)
        );
        assert_eq!(ask(Epoch::NONE), (None, Offset(0)));
        rm.apply_metadata(image(2, Epoch(2)));
        assert_eq!(
            ask(Epoch(1)),
            (Some(ErrorCode::FencedLeaderEpoch), Offset::NONE)
        );
        assert_eq!(ask(Epoch(2)), (None, Offset(0)));
    }

    /// Regression: a follower's failed truncation reports the storage error while it holds
    /// the partitions borrowed; that must take the dir offline, not panic the broker.
    #[test]
    fn storage_failure_under_a_partition_borrow_takes_the_dir_offline() {
        let rm = leader();
        let held = rm.partitions.borrow_mut();
        rm.storage_failed("orders/0", &"EIO");
        drop(held);
        assert!(rm.offline.get());
        let FetchRead::Now(read) = rm.read_partition(FOLLOWER_READER, &follower_fetch(0), true)
        else {
            panic!()
        };
        assert_eq!(read.error, Some(ErrorCode::KafkaStorageError));
    }

    #[test]
    fn consumers_read_only_below_the_hw() {
        let rm = leader();
        let consumer = FetchPartition {
            last_fetched_epoch: None,
            ..follower_fetch(0)
        };
        let FetchRead::Data(nothing) = rm.read_partition(CONSUMER_READER, &consumer, true) else {
            panic!("no error")
        };
        assert!(nothing.records.is_empty(), "the HW is 0");
        rm.read_partition(FOLLOWER_READER, &follower_fetch(1), true);
        let FetchRead::Data(read) = rm.read_partition(CONSUMER_READER, &consumer, true) else {
            panic!("offset 0 is below the HW now")
        };
        let offsets: Vec<i64> = crate::kafka::record::batches(&read.records)
            .filter_map(Result::ok)
            .map(|(_, header, _)| header.base_offset.0)
            .collect();
        assert_eq!(offsets, vec![0]);
    }

    /// Producer 5 aborts a transaction while producer 6's is open: a read_committed
    /// consumer reads below the LSO (producer 6's first offset) and is told of 5's abort;
    /// its ListOffsets LATEST is the LSO, a read_uncommitted one's the HW.
    #[test]
    fn read_committed_reads_below_the_lso_and_learns_the_aborts() {
        use crate::kafka::record::{EndTxnMarker, TxnResult};
        let rm = leader();
        {
            let mut partitions = rm.partitions.borrow_mut();
            let partition = partitions.get_mut(&tp()).expect("hosted");
            for pid in [5, 6] {
                let mut batch = BatchBuilder::new(0, ProducerId(pid), 0, 0).transactional();
                batch.push(0, None, Some(b"t"));
                // Verified, as the coordinator would have answered (KIP-890).
                partition
                    .update(|p| {
                        let guard = p.start_verification(ProducerId(pid), 0);
                        p.on_verified_produce(batch.build(), SimTime::ZERO, guard)
                    })
                    .expect("append");
            }
            let abort = EndTxnMarker {
                result: TxnResult::Abort,
                coordinator_epoch: 0,
            };
            partition
                .update(|p| p.on_marker(ProducerId(5), 0, abort, SimTime::ZERO))
                .expect("marker");
        }
        rm.read_partition(FOLLOWER_READER, &follower_fetch(5), true);
        let committed = Reader {
            read_committed: true,
            ..CONSUMER_READER
        };
        let consumer = FetchPartition {
            last_fetched_epoch: None,
            ..follower_fetch(0)
        };
        let FetchRead::Data(read) = rm.read_partition(committed, &consumer, true) else {
            panic!("no error")
        };
        let offsets: Vec<i64> = crate::kafka::record::batches(&read.records)
            .filter_map(Result::ok)
            .map(|(_, header, _)| header.base_offset.0)
            .collect();
        assert_eq!(
            (read.high_watermark, read.last_stable_offset),
            (Offset(5), Offset(3))
        );
        assert_eq!(offsets, vec![0, 1, 2], "below the LSO only");
        assert_eq!(
            read.aborted_transactions,
            Some(vec![AbortedTransaction {
                producer_id: ProducerId(5),
                first_offset: Offset(2)
            }])
        );
        let FetchRead::Data(plain) = rm.read_partition(CONSUMER_READER, &consumer, true) else {
            panic!("no error")
        };
        assert_eq!(plain.aborted_transactions, None);
        let latest =
            |isolation| rm.list_offsets(None, isolation, &tp(), OffsetSpec::Latest, Epoch::NONE);
        assert_eq!(latest(IsolationLevel::ReadCommitted), (None, Offset(3)));
        assert_eq!(latest(IsolationLevel::ReadUncommitted), (None, Offset(5)));
    }

    /// Kafka's `DelayedFetch`: the records of all partitions count towards `min_bytes`,
    /// and an error in any partition answers the whole fetch at once.
    #[test]
    fn a_fetch_is_answered_at_min_bytes_or_on_any_error() {
        let rm = leader();
        let (answers, complete) = rm.read_for_fetch(FOLLOWER_READER, &[follower_fetch(0)], 1, true);
        let bytes = answers[0].records.len() as u64;
        assert!(complete && bytes > 0, "one byte is enough");
        let (_, complete) =
            rm.read_for_fetch(FOLLOWER_READER, &[follower_fetch(0)], bytes + 1, true);
        assert!(!complete, "fewer than min_bytes: wait for more");
        let (_, complete) = rm.read_for_fetch(FOLLOWER_READER, &[follower_fetch(2)], 0, true);
        assert!(complete, "min_bytes 0 never waits");
        let unknown = FetchPartition {
            tp: TopicPartition::new("orders", 9),
            ..follower_fetch(0)
        };
        let (answers, complete) = rm.read_for_fetch(
            FOLLOWER_READER,
            &[follower_fetch(2), unknown],
            1 << 20,
            true,
        );
        assert!(complete, "an error is news");
        let errors: Vec<_> = answers.iter().map(|p| p.error).collect();
        assert_eq!(errors, vec![None, Some(ErrorCode::UnknownTopicOrPartition)]);
    }
}
