//! Typed requests and responses. Kafka's API names and error names; the bytes on the
//! wire are our own compact serde encoding (see `frame`), except record batches, which
//! travel as Kafka RecordBatch v2 bytes exactly as they sit in a segment.
//!
//! Metadata flow: brokers *pull* it. A broker's heartbeat is a long poll: the controller
//! answers at once when its metadata image is newer than the version the broker holds,
//! otherwise after `HEARTBEAT_LONG_POLL` (KRaft brokers fetch the metadata log; we fold
//! that fetch into the heartbeat, so a broker that is cut off from the controller both
//! stops learning leadership and stops proving liveness, as in KRaft).

use crate::config::kafka::{Acks, IsolationLevel};
use crate::kafka::types::{EpochEndOffset, Incarnation, PartitionEpoch, ProducerId};
use crate::types::{BrokerId, Epoch, HostName, Offset, TopicPartition};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long the controller holds a heartbeat when nothing changed.
pub const HEARTBEAT_LONG_POLL: Duration = Duration::from_millis(500);

/// Kafka's error codes, by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorCode {
    NotLeaderOrFollower,
    FencedLeaderEpoch,
    UnknownLeaderEpoch,
    NotEnoughReplicas,
    NotEnoughReplicasAfterAppend,
    RequestTimedOut,
    OutOfOrderSequenceNumber,
    DuplicateSequenceNumber,
    KafkaStorageError,
    OffsetOutOfRange,
    UnknownTopicOrPartition,
    InvalidRecord,
    CorruptMessage,
    StaleBrokerEpoch,
    InvalidUpdateVersion,
    FencedInstanceId,
    BrokerNotAvailable,
    FetchSessionIdNotFound,
    InvalidFetchSessionEpoch,
    // The group protocol's, appended so that the other codes keep their encoding.
    CoordinatorNotAvailable,
    NotCoordinator,
    CoordinatorLoadInProgress,
    UnknownMemberId,
    IllegalGeneration,
    RebalanceInProgress,
    /// What a coordinator answers for a failure that has no code of its own.
    UnknownServerError,
    /// A new incarnation of a broker whose old one still holds a valid session.
    DuplicateBrokerRegistration,
    /// AlterPartition named a member that may not join the ISR: fenced or shutting down
    /// (KIP-841), or not the broker epoch whose fetches the leader saw (KIP-903).
    IneligibleReplica,
    // Transactions' (KIP-98), appended so that the codes above keep their encoding.
    InvalidTxnState,
    InvalidProducerEpoch,
    TransactionCoordinatorFenced,
    /// Another transition of the transactional id is in flight: retry.
    ConcurrentTransactions,
    /// A newer instance of the transactional id has the epoch (KIP-588's code, 2.7; before,
    /// INVALID_PRODUCER_EPOCH).
    ProducerFenced,
    /// The producer id is not the transactional id's current one.
    InvalidProducerIdMapping,
    /// InitProducerId asked for a `transaction.timeout.ms` above the broker's
    /// `transaction.max.timeout.ms`.
    InvalidTransactionTimeout,
    /// OffsetFetch with RequireStable (KIP-447): an offset of the partition is pending in a
    /// transaction; ask again.
    UnstableOffsetCommit,
    /// A request between brokers failed on the network (a partition leader's verification
    /// with the transaction coordinator, KIP-890): retriable.
    NetworkException,
    /// Partition verification from 3.8 (KIP-890): the partition is not in the producer's
    /// transaction; the producer aborts.
    TransactionAbortable,
}

impl ErrorCode {
    /// Kafka's name for the error, as a Kafka user would read it in a log.
    pub fn name(self) -> &'static str {
        match self {
            ErrorCode::NotLeaderOrFollower => "NOT_LEADER_OR_FOLLOWER",
            ErrorCode::FencedLeaderEpoch => "FENCED_LEADER_EPOCH",
            ErrorCode::UnknownLeaderEpoch => "UNKNOWN_LEADER_EPOCH",
            ErrorCode::NotEnoughReplicas => "NOT_ENOUGH_REPLICAS",
            ErrorCode::NotEnoughReplicasAfterAppend => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
            ErrorCode::RequestTimedOut => "REQUEST_TIMED_OUT",
            ErrorCode::OutOfOrderSequenceNumber => "OUT_OF_ORDER_SEQUENCE_NUMBER",
            ErrorCode::DuplicateSequenceNumber => "DUPLICATE_SEQUENCE_NUMBER",
            ErrorCode::KafkaStorageError => "KAFKA_STORAGE_ERROR",
            ErrorCode::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
            ErrorCode::UnknownTopicOrPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            ErrorCode::InvalidRecord => "INVALID_RECORD",
            ErrorCode::CorruptMessage => "CORRUPT_MESSAGE",
            ErrorCode::StaleBrokerEpoch => "STALE_BROKER_EPOCH",
            ErrorCode::DuplicateBrokerRegistration => "DUPLICATE_BROKER_REGISTRATION",
            ErrorCode::IneligibleReplica => "INELIGIBLE_REPLICA",
            ErrorCode::InvalidTxnState => "INVALID_TXN_STATE",
            ErrorCode::InvalidProducerEpoch => "INVALID_PRODUCER_EPOCH",
            ErrorCode::TransactionCoordinatorFenced => "TRANSACTION_COORDINATOR_FENCED",
            ErrorCode::ConcurrentTransactions => "CONCURRENT_TRANSACTIONS",
            ErrorCode::ProducerFenced => "PRODUCER_FENCED",
            ErrorCode::InvalidProducerIdMapping => "INVALID_PRODUCER_ID_MAPPING",
            ErrorCode::InvalidTransactionTimeout => "INVALID_TRANSACTION_TIMEOUT",
            ErrorCode::UnstableOffsetCommit => "UNSTABLE_OFFSET_COMMIT",
            ErrorCode::NetworkException => "NETWORK_EXCEPTION",
            ErrorCode::TransactionAbortable => "TRANSACTION_ABORTABLE",
            ErrorCode::InvalidUpdateVersion => "INVALID_UPDATE_VERSION",
            ErrorCode::FencedInstanceId => "FENCED_INSTANCE_ID",
            ErrorCode::BrokerNotAvailable => "BROKER_NOT_AVAILABLE",
            ErrorCode::FetchSessionIdNotFound => "FETCH_SESSION_ID_NOT_FOUND",
            ErrorCode::InvalidFetchSessionEpoch => "INVALID_FETCH_SESSION_EPOCH",
            ErrorCode::CoordinatorNotAvailable => "COORDINATOR_NOT_AVAILABLE",
            ErrorCode::NotCoordinator => "NOT_COORDINATOR",
            ErrorCode::CoordinatorLoadInProgress => "COORDINATOR_LOAD_IN_PROGRESS",
            ErrorCode::UnknownMemberId => "UNKNOWN_MEMBER_ID",
            ErrorCode::IllegalGeneration => "ILLEGAL_GENERATION",
            ErrorCode::RebalanceInProgress => "REBALANCE_IN_PROGRESS",
            ErrorCode::UnknownServerError => "UNKNOWN_SERVER_ERROR",
        }
    }

    /// Whether a client may retry the request as it is (Kafka's RetriableException
    /// family); a group member told it is unknown, of an old generation or amid a
    /// rebalance must rejoin instead.
    pub fn is_retriable(self) -> bool {
        !matches!(
            self,
            ErrorCode::InvalidRecord
                | ErrorCode::CorruptMessage
                | ErrorCode::OutOfOrderSequenceNumber
                | ErrorCode::FencedInstanceId
                | ErrorCode::UnknownMemberId
                | ErrorCode::IllegalGeneration
                | ErrorCode::RebalanceInProgress
                // A transaction's refusals: the batch fails and the transaction aborts
                // (Kafka's `TransactionManager.canRetry` retries only RetriableExceptions).
                | ErrorCode::InvalidTxnState
                | ErrorCode::InvalidProducerEpoch
                | ErrorCode::ProducerFenced
                | ErrorCode::TransactionCoordinatorFenced
                | ErrorCode::InvalidProducerIdMapping
                | ErrorCode::TransactionAbortable
        )
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One partition's state in the controller's metadata image.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionState {
    /// Replica assignment, in placement order (the first is the preferred leader).
    pub replicas: Vec<BrokerId>,
    pub leader: Option<BrokerId>,
    pub leader_epoch: Epoch,
    /// Bumped by every change to leader or ISR (KIP-497's partition epoch).
    pub partition_epoch: PartitionEpoch,
    pub isr: Vec<BrokerId>,
    /// KIP-966's eligible leader replicas: out of the ISR, yet safe to elect when it is
    /// empty. Always empty without ELR (before Kafka 4.1).
    pub elr: Vec<BrokerId>,
    /// KIP-966: the leader when the ISR last became empty, electable (uncleanly) once
    /// ISR and ELR are both empty. `None` without ELR.
    pub last_known_leader: Option<BrokerId>,
}

/// A registered broker as the controller sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistration {
    pub id: BrokerId,
    /// Changes at every process start; a new incarnation is first the failure of the old.
    pub incarnation: Incarnation,
    pub fenced: bool,
}

/// The controller's metadata image, as brokers and clients receive it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterMetadata {
    /// Bumped by every change; brokers long-poll for a newer one.
    pub version: u64,
    pub brokers: BTreeMap<BrokerId, BrokerRegistration>,
    pub partitions: BTreeMap<TopicPartition, PartitionState>,
}

/// Every request; the response has the same shape name with `Response`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Request {
    // broker -> controller
    RegisterBroker {
        broker: BrokerId,
        incarnation: Incarnation,
        /// The process found the clean-shutdown marker at start (Kafka sends its previous
        /// broker epoch then, KIP-966).
        clean_shutdown: bool,
    },
    BrokerHeartbeat {
        broker: BrokerId,
        incarnation: Incarnation,
        known_version: u64,
    },
    AlterPartition(AlterPartition),
    ControlledShutdown {
        broker: BrokerId,
        incarnation: Incarnation,
    },
    AllocateProducerId,
    // clients and replicas -> broker
    Metadata,
    Produce(Produce),
    Fetch(Fetch),
    OffsetsForLeaderEpoch(OffsetsForLeaderEpoch),
    ListOffsets {
        /// Set for a follower (ListOffsets' `ReplicaId`): its LATEST is the leader's LEO,
        /// a client's the HW, or the LSO under read_committed.
        replica: Option<BrokerId>,
        isolation: IsolationLevel,
        tp: TopicPartition,
        spec: OffsetSpec,
        /// KIP-320 fencing, as in ListOffsets v4+: `Epoch::NONE` asks for no check.
        current_leader_epoch: Epoch,
    },
    InitProducerId,
    // clients -> a group's coordinator (the classic protocol), appended so that the
    // requests above keep their encoding.
    /// Which broker coordinates `group`: the leader of its `__consumer_offsets` partition.
    FindCoordinator {
        group: String,
    },
    JoinGroup(JoinGroup),
    SyncGroup(SyncGroup),
    Heartbeat {
        group: String,
        member: String,
        generation: i32,
    },
    LeaveGroup {
        group: String,
        member: String,
    },
    OffsetCommit(OffsetCommit),
    OffsetFetch {
        group: String,
        partitions: Vec<TopicPartition>,
        /// KIP-447 (OffsetFetch v7, 2.5): answer UNSTABLE_OFFSET_COMMIT rather than an
        /// offset a transaction may still change.
        require_stable: bool,
    },
    // transaction coordinator -> partition leaders (KIP-98), appended so that the
    // requests above keep their encoding.
    WriteTxnMarkers(WriteTxnMarkers),
    // transactional producers -> their transaction coordinator (KIP-98), appended so
    // that the requests above keep their encoding.
    /// FindCoordinator with key type TRANSACTION: the leader of the transactional id's
    /// `__transaction_state` partition.
    FindTxnCoordinator {
        transactional_id: String,
    },
    /// InitProducerId with a `transactional.id`: the id's producer id and a new epoch,
    /// which fences every older instance.
    InitTxnProducerId(InitTxnProducerId),
    /// AddPartitionsToTxn: the partitions the transaction is about to write.
    AddPartitionsToTxn {
        txn: TxnProducer,
        partitions: Vec<TopicPartition>,
    },
    /// AddOffsetsToTxn: the group whose `__consumer_offsets` partition the transaction's
    /// offsets go to.
    AddOffsetsToTxn {
        txn: TxnProducer,
        group: String,
    },
    /// EndTxn: commit or abort the ongoing transaction.
    EndTxn {
        txn: TxnProducer,
        result: crate::kafka::record::TxnResult,
    },
    /// TxnOffsetCommit, to the group's coordinator: offsets that count only if the
    /// transaction commits. `member` and `generation` as an OffsetCommit's (KIP-447, 2.5;
    /// empty and -1 before).
    TxnOffsetCommit {
        txn: TxnProducer,
        commit: OffsetCommit,
    },
    // partition leaders -> a transaction coordinator (KIP-890 part 1, Kafka 3.6),
    // appended so that the requests above keep their encoding.
    /// AddPartitionsToTxn v4 with `VerifyOnly`: is each partition in the producer's
    /// ongoing transaction? Answered, never written.
    VerifyPartitionsInTxn {
        txn: TxnProducer,
        partitions: Vec<TopicPartition>,
    },
}

/// One marker's partitions, with the error each answered.
pub type MarkerErrors = Vec<(TopicPartition, Option<ErrorCode>)>;

/// Who a transactional request speaks for: the id, and the producer id and epoch
/// InitProducerId gave it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnProducer {
    pub transactional_id: String,
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InitTxnProducerId {
    pub transactional_id: String,
    pub transaction_timeout_ms: i32,
    /// KIP-360 (InitProducerId v3, 2.5): the producer id and epoch the client holds, to
    /// bump after an abortable error; `None` for a new instance or an older client.
    pub expected: Option<(ProducerId, i16)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Response {
    RegisterBroker {
        error: Option<ErrorCode>,
    },
    BrokerHeartbeat {
        fenced: bool,
        metadata: Option<ClusterMetadata>,
    },
    AlterPartition {
        error: Option<ErrorCode>,
        state: Option<PartitionState>,
    },
    ControlledShutdown {
        error: Option<ErrorCode>,
        remaining: usize,
    },
    AllocateProducerId {
        producer_id: ProducerId,
    },
    Metadata(ClusterMetadata),
    Produce(ProduceResponse),
    Fetch(FetchResponse),
    OffsetsForLeaderEpoch(OffsetsForLeaderEpochResponse),
    ListOffsets {
        error: Option<ErrorCode>,
        offset: Offset,
    },
    InitProducerId {
        error: Option<ErrorCode>,
        producer_id: ProducerId,
        producer_epoch: i16,
    },
    FindCoordinator {
        error: Option<ErrorCode>,
        coordinator: Option<BrokerId>,
    },
    JoinGroup(JoinGroupResponse),
    SyncGroup {
        error: Option<ErrorCode>,
        assignment: Vec<TopicPartition>,
    },
    Heartbeat {
        error: Option<ErrorCode>,
    },
    LeaveGroup {
        error: Option<ErrorCode>,
    },
    OffsetCommit {
        /// One error for the whole commit: hightide's members commit all their
        /// partitions at once, and the coordinator takes or refuses them together.
        error: Option<ErrorCode>,
    },
    OffsetFetch {
        error: Option<ErrorCode>,
        /// The committed offset of each partition asked for that has one.
        offsets: Vec<(TopicPartition, CommittedOffset)>,
    },
    /// Each marker's partitions, in the request's order, with the error of each.
    WriteTxnMarkers {
        markers: Vec<MarkerErrors>,
    },
    /// The answer to AddPartitionsToTxn, AddOffsetsToTxn and EndTxn: one error for the
    /// whole request (Kafka's AddPartitionsToTxn answers per partition, but its
    /// coordinator decides for all of them at once).
    Txn {
        error: Option<ErrorCode>,
    },
    /// EndTxn v5's answer (transaction protocol v2, 4.0): the producer id and the epoch
    /// the end bumped to, which the producer takes for its next transaction; -1 with an
    /// error. Appended so that the responses above keep their encoding.
    EndTxn {
        error: Option<ErrorCode>,
        producer_id: ProducerId,
        producer_epoch: i16,
    },
}

impl Request {
    /// A group request's answer with `error`, in the response of its kind; `None` for
    /// the other requests.
    pub fn group_refusal(&self, error: ErrorCode) -> Option<Response> {
        let error = Some(error);
        Some(match self {
            Request::FindCoordinator { .. } => Response::FindCoordinator {
                error,
                coordinator: None,
            },
            Request::JoinGroup(join) => Response::JoinGroup(JoinGroupResponse {
                error,
                generation: -1,
                member: join.member.clone().unwrap_or_default(),
                leader: String::new(),
                members: Vec::new(),
            }),
            Request::SyncGroup(_) => Response::SyncGroup {
                error,
                assignment: Vec::new(),
            },
            Request::Heartbeat { .. } => Response::Heartbeat { error },
            Request::LeaveGroup { .. } => Response::LeaveGroup { error },
            Request::OffsetCommit(_) | Request::TxnOffsetCommit { .. } => {
                Response::OffsetCommit { error }
            }
            Request::OffsetFetch { .. } => Response::OffsetFetch {
                error,
                offsets: Vec::new(),
            },
            _ => return None,
        })
    }
}

/// JoinGroup: a member (new, with no id) asks into the group's next generation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JoinGroup {
    pub group: String,
    /// `None` for a consumer joining for the first time.
    pub member: Option<String>,
    /// The consumer's `client.id`.
    pub client: String,
    pub subscription: Vec<String>,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JoinGroupResponse {
    pub error: Option<ErrorCode>,
    pub generation: i32,
    pub member: String,
    pub leader: String,
    /// Every member's subscription, for the leader alone.
    pub members: Vec<(String, Vec<String>)>,
}

/// SyncGroup: the leader brings every member's partitions; the others ask for theirs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyncGroup {
    pub group: String,
    pub member: String,
    pub generation: i32,
    pub assignment: Option<BTreeMap<String, Vec<TopicPartition>>>,
}

/// OffsetCommit: the next offset to read of each partition, with the leader epoch of the
/// record before it (KIP-320).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OffsetCommit {
    pub group: String,
    /// Empty, with generation -1, for a consumer outside the group protocol.
    pub member: String,
    pub generation: i32,
    pub offsets: Vec<(TopicPartition, CommittedOffset)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommittedOffset {
    pub offset: Offset,
    pub leader_epoch: Epoch,
}

/// AlterPartition: a leader asks the controller to change a partition's ISR.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AlterPartition {
    pub broker: BrokerId,
    pub incarnation: Incarnation,
    pub tp: TopicPartition,
    pub leader_epoch: Epoch,
    /// The partition epoch the leader based its proposal on; stale proposals are rejected.
    pub partition_epoch: PartitionEpoch,
    pub new_isr: Vec<BrokerId>,
    /// KIP-903 (AlterPartition v3's `NewIsrWithEpochs`): the broker epoch each member's
    /// fetches carried, where the leader knows one; empty before 3.5.
    pub broker_epochs: Vec<(BrokerId, Incarnation)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Produce {
    /// The producer's `transactional.id` (Produce v3+), which a leader verifying a
    /// transaction asks its coordinator about; `None` for other producers.
    pub transactional_id: Option<String>,
    pub tp: TopicPartition,
    pub acks: Acks,
    pub timeout_ms: u64,
    /// One RecordBatch v2, as encoded by `record`; serialized as one byte string, not
    /// byte by byte (the same bytes on the wire).
    #[serde(with = "serde_bytes")]
    pub batch: Vec<u8>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ProduceResponse {
    pub error: Option<ErrorCode>,
    pub base_offset: Offset,
    pub log_start_offset: Offset,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Fetch {
    /// Set for follower fetches; `None` for consumers.
    pub replica: Option<BrokerId>,
    /// KIP-903 (Fetch v15's `ReplicaState`): the follower's broker epoch, sent from 3.5.
    pub replica_epoch: Option<Incarnation>,
    /// A consumer's `isolation.level` (Fetch v4+); a follower reads to the LEO whatever
    /// it says.
    pub isolation: IsolationLevel,
    /// How long the leader may hold the fetch while it has less than `min_bytes`.
    pub max_wait_ms: u64,
    pub min_bytes: u64,
    /// The fetch session (KIP-227) this request belongs to; see `fetch_session`.
    pub session_id: u32,
    pub session_epoch: i32,
    /// The partitions the fetcher reads from this leader, in one request (Kafka's
    /// FetchRequest topics): all of them, or in an open session only those added or
    /// changed since the last request.
    pub partitions: Vec<FetchPartition>,
    /// In an open session: partitions that leave it.
    pub forgotten: Vec<TopicPartition>,
}

/// WriteTxnMarkers: a transaction coordinator ends transactions on the partitions they
/// wrote, each marker on every partition of its transaction this broker leads.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WriteTxnMarkers {
    pub markers: Vec<TxnMarker>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnMarker {
    pub producer_id: ProducerId,
    pub producer_epoch: i16,
    pub result: crate::kafka::record::TxnResult,
    /// The coordinator's `__transaction_state` leader epoch: partitions refuse markers
    /// from an older one.
    pub coordinator_epoch: i32,
    pub partitions: Vec<TopicPartition>,
}

/// One partition of a Fetch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchPartition {
    pub tp: TopicPartition,
    pub fetch_offset: Offset,
    /// KIP-320 fencing: the leader epoch the fetcher believes is current.
    pub current_leader_epoch: Epoch,
    /// The epoch of the last batch the fetcher has (KIP-595-style divergence check).
    pub last_fetched_epoch: Option<Epoch>,
    /// `replica.fetch.max.bytes` or `max.partition.fetch.bytes`.
    pub max_bytes: u64,
}

/// The answer to a Fetch: one entry per partition, in the request's order (a full
/// fetch), or only the partitions with news, in the session's order (an incremental one).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FetchResponse {
    /// A session error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH): the
    /// fetcher starts a new session with a full fetch.
    pub error: Option<ErrorCode>,
    pub session_id: u32,
    pub partitions: Vec<FetchedPartition>,
}

/// What the leader has for one partition of a Fetch (Kafka's `PartitionData`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FetchedPartition {
    pub tp: TopicPartition,
    pub error: Option<ErrorCode>,
    pub high_watermark: Offset,
    /// The leader's LSO (Fetch v4+): how far a read_committed reader may read.
    pub last_stable_offset: Offset,
    pub log_start_offset: Offset,
    /// Under read_committed, the transactions aborted in what `records` covers, for the
    /// reader to drop their batches (Kafka's `AbortedTransactions`); `None` otherwise.
    pub aborted_transactions: Option<Vec<AbortedTransaction>>,
    /// Whole RecordBatch v2 batches, concatenated (one byte string on the wire).
    #[serde(with = "serde_bytes")]
    pub records: Vec<u8>,
    /// Set when the fetcher's log diverges: truncate to the end of this epoch, then fetch.
    pub diverging_epoch: Option<EpochEndOffset>,
}

impl FetchedPartition {
    /// An answer that carries only an error.
    pub fn error(tp: TopicPartition, error: ErrorCode) -> FetchedPartition {
        FetchedPartition {
            tp,
            error: Some(error),
            high_watermark: Offset::NONE,
            last_stable_offset: Offset::NONE,
            log_start_offset: Offset::NONE,
            aborted_transactions: None,
            records: Vec::new(),
            diverging_epoch: None,
        }
    }
}

/// One aborted transaction in a fetch answer: its producer, and where it began.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AbortedTransaction {
    pub producer_id: ProducerId,
    pub first_offset: Offset,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OffsetsForLeaderEpoch {
    pub replica: BrokerId,
    pub tp: TopicPartition,
    pub current_leader_epoch: Epoch,
    pub leader_epoch: Epoch,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OffsetsForLeaderEpochResponse {
    pub error: Option<ErrorCode>,
    /// The largest epoch ≤ the requested one, and where it ends (KIP-279).
    pub end: EpochEndOffset,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OffsetSpec {
    Earliest,
    /// The high watermark (Kafka's "latest" under read_uncommitted).
    Latest,
}

/// The port every server listens on.
pub const PORT: u16 = 9092;

/// The address of a host in the simulated network.
pub fn address(host: HostName) -> (String, u16) {
    (host.to_string(), PORT)
}
