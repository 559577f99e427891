//! Kafka configuration with Kafka's names and defaults. A field is its key's name with the
//! unit suffix dropped where its type carries the unit: `log_segment_bytes` is the key
//! `log.segment.bytes`, `linger` (a `Duration`) is `linger.ms`. `_ms` in a Rust name always
//! means an integer count of milliseconds. The topic keys `flush.ms` and `segment.ms`, which
//! bare would say nothing, are named for the broker keys they override: `flush_interval`,
//! `roll`. The registry in `scenario::keys` maps keys to fields and documents each key for
//! `hightide config`.

mod release;

pub use release::{
    Era, Reach, Release, Rules, Step, StepReach, KNOWN as RELEASES, STEPS as RELEASE_STEPS,
};

use super::bugs::Bugs;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// `acks`: how many replicas must have a write before the producer is told it is safe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Acks {
    /// `acks=0`: send and forget; the broker never answers.
    None,
    /// `acks=1`: the leader's own append.
    Leader,
    /// `acks=all` (or `-1`): the high watermark has passed the batch.
    All,
}

/// The producer config's spelling: `0`, `1`, `all`.
impl std::fmt::Display for Acks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Acks::None => "0",
            Acks::Leader => "1",
            Acks::All => "all",
        })
    }
}

/// How a follower finds where its log diverges from the new leader's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Truncation {
    /// KIP-101 with KIP-279: ask the leader where the follower's last epoch ends, and ask
    /// again while the epoch histories disagree (Kafka 2.0+).
    LeaderEpoch,
    /// KIP-101 as Kafka 0.11 to 1.1 ran it: one OffsetsForLeaderEpoch round, whose answer
    /// is trusted even where the follower has epochs the leader never had.
    LeaderEpochSingleRound,
    /// The pre-KIP-101 rule: truncate to the checkpointed high watermark.
    HighWatermark,
}

impl Truncation {
    pub const ALL: [Truncation; 3] = [
        Truncation::LeaderEpoch,
        Truncation::LeaderEpochSingleRound,
        Truncation::HighWatermark,
    ];

    /// As a scenario file writes it (`replication.truncation`).
    pub const fn name(self) -> &'static str {
        match self {
            Truncation::LeaderEpoch => "leader-epoch",
            Truncation::LeaderEpochSingleRound => "leader-epoch-single-round",
            Truncation::HighWatermark => "high-watermark",
        }
    }

    /// Whether followers reconcile by leader epoch (any rule since KIP-101).
    pub fn uses_leader_epochs(self) -> bool {
        self != Truncation::HighWatermark
    }
}

/// Kafka's "never" for a count: `Long.MAX_VALUE`.
pub const NEVER: u64 = i64::MAX as u64;

/// Kafka's "never" for a time: `Long.MAX_VALUE` milliseconds. Instants add it saturating.
pub const FOREVER: Duration = Duration::from_millis(NEVER);

const fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// Broker configuration (`[broker]`), the newest release's defaults (`Release::era` gives
/// another's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BrokerConfig {
    pub min_insync_replicas: u32,
    pub unclean_leader_election_enable: bool,
    pub log_flush_interval_messages: u64,
    pub log_flush_interval: Duration,
    pub log_flush_scheduler_interval: Duration,
    pub log_flush_offset_checkpoint_interval: Duration,
    pub log_segment_bytes: u64,
    pub log_roll: Duration,
    pub log_index_interval_bytes: u64,
    pub log_retention_bytes: i64,
    /// `None`: `-1`, keep forever.
    pub log_retention: Option<Duration>,
    pub log_retention_check_interval: Duration,
    pub replica_lag_time_max: Duration,
    pub replica_fetch_wait_max: Duration,
    pub replica_fetch_max_bytes: u64,
    pub replica_fetch_min_bytes: u64,
    pub replica_fetch_backoff: Duration,
    pub replica_socket_timeout: Duration,
    pub replica_high_watermark_checkpoint_interval: Duration,
    pub broker_heartbeat_interval: Duration,
    pub broker_session_timeout: Duration,
    pub replication_truncation: Truncation,
    /// The group coordinator's first rebalance of an empty group waits this long for more
    /// members (KIP-134).
    pub group_initial_rebalance_delay: Duration,
    /// `__consumer_offsets`, made when a client first looks for a coordinator.
    pub offsets_topic_num_partitions: u32,
    pub offsets_topic_replication_factor: u32,
    pub offsets_commit_timeout: Duration,
    /// `__transaction_state`, made when the workload has a transactional producer (Kafka
    /// makes it at the first FindCoordinator of a transactional id); written acks=all.
    pub transaction_state_log_num_partitions: u32,
    pub transaction_state_log_replication_factor: u32,
    /// `__transaction_state`'s own `min.insync.replicas`.
    pub transaction_state_log_min_isr: u32,
    /// The longest `transaction.timeout.ms` a producer may ask for.
    pub transaction_max_timeout: Duration,
    /// How often the coordinator looks for transactions past their timeout, to abort them.
    pub transaction_abort_timed_out_transaction_cleanup_interval: Duration,
    /// A leader asks the transaction coordinator before a transactional batch starts a
    /// transaction on a partition (KIP-890 part 1, Kafka 3.6).
    pub transaction_partition_verification_enable: bool,
    /// The release's rules that no key sets.
    pub rules: Rules,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        BrokerConfig {
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            log_flush_interval_messages: NEVER,
            log_flush_interval: FOREVER,
            log_flush_scheduler_interval: FOREVER,
            log_flush_offset_checkpoint_interval: ms(60_000),
            log_segment_bytes: 1 << 30,
            log_roll: ms(7 * 24 * 3_600_000),
            log_index_interval_bytes: 4096,
            log_retention_bytes: -1,
            log_retention: Some(ms(7 * 24 * 3_600_000)),
            log_retention_check_interval: ms(300_000),
            replica_lag_time_max: ms(30_000),
            replica_fetch_wait_max: ms(500),
            replica_fetch_max_bytes: 1_048_576,
            replica_fetch_min_bytes: 1,
            replica_fetch_backoff: ms(1_000),
            replica_socket_timeout: ms(30_000),
            replica_high_watermark_checkpoint_interval: ms(5_000),
            broker_heartbeat_interval: ms(2_000),
            broker_session_timeout: ms(9_000),
            replication_truncation: Truncation::LeaderEpoch,
            group_initial_rebalance_delay: ms(3_000),
            offsets_topic_num_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_commit_timeout: ms(5_000),
            transaction_state_log_num_partitions: 50,
            transaction_state_log_replication_factor: 3,
            transaction_state_log_min_isr: 2,
            transaction_max_timeout: ms(900_000),
            transaction_abort_timed_out_transaction_cleanup_interval: ms(10_000),
            transaction_partition_verification_enable: true,
            rules: Rules {
                strict_min_isr: true,
                diverging_epoch_in_fetch: true,
                leader_epoch_on_election: true,
                index_by_last_offset: true,
                unclean_election_honoured: true,
                eligible_leader_replicas: true,
                kraft_controller: true,
                fetch_current_leader_epoch: true,
                truncate_at_every_epoch: true,
                out_of_range_never_fatal: true,
                isr_members_must_be_eligible: true,
                isr_broker_epochs: true,
                dir_fsync: true,
                epoch_truncation_fsync: true,
                transaction_abortable: true,
                transaction_version_2: true,
            },
        }
    }
}

/// Per-topic overrides (`topics = [{ ..., config = { "min.insync.replicas" = 2 } }]`),
/// Kafka's topic-level names. `None` inherits the broker's value.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopicConfig {
    pub min_insync_replicas: Option<u32>,
    pub unclean_leader_election_enable: Option<bool>,
    pub flush_messages: Option<u64>,
    /// `flush.ms`.
    pub flush_interval: Option<Duration>,
    pub segment_bytes: Option<u64>,
    /// `segment.ms`.
    pub roll: Option<Duration>,
    pub retention_bytes: Option<i64>,
    /// `Some(None)`: `-1`, keep forever.
    pub retention: Option<Option<Duration>>,
    pub index_interval_bytes: Option<u64>,
}

/// Producer configuration (`[producer]`), the newest release's defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProducerConfig {
    pub acks: Acks,
    pub enable_idempotence: bool,
    /// The most requests in flight an idempotent producer may have; `None`: the release has
    /// no idempotent producer. Not a key: it follows the release.
    pub idempotence_max_in_flight: Option<u32>,
    pub retries: u32,
    pub max_in_flight_requests_per_connection: u32,
    pub linger: Duration,
    pub batch_size: u64,
    pub delivery_timeout: Duration,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
    pub metadata_max_age: Duration,
    /// Before 2.1 (KIP-91) no `delivery.timeout.ms` bounds a send: a batch expires only
    /// while it waits in the accumulator, `request.timeout.ms` after it was due to leave,
    /// and `retries` alone bounds its attempts. Not a key: it follows the release.
    pub expire_in_accumulator: bool,
    /// `transactional.id`: producer-N is transactional, with the id `<this>-N`.
    pub transactional_id: Option<String>,
    /// `transaction.timeout.ms`: how long the coordinator lets a transaction stay open
    /// before it aborts it.
    pub transaction_timeout: Duration,
    /// KIP-360 (2.5): after an abortable error the producer bumps its epoch (InitProducerId
    /// with the id and epoch it holds); before, a batch whose outcome it never learned is
    /// fatal. Not a key: it follows the release.
    pub transaction_epoch_bump: bool,
    /// KIP-588 (2.7): a produce's INVALID_PRODUCER_EPOCH is abortable; before, it was
    /// `ProducerFencedException`, fatal. Not a key: it follows the release.
    pub invalid_epoch_abortable: bool,
    /// Transaction protocol v2 (KIP-890 part 2, 4.0): the cluster's finalized
    /// `transaction.version` feature is 2, which a client learns from ApiVersions. Every
    /// client here runs the cluster's release, so it follows the release; see
    /// [`Rules::transaction_version_2`].
    pub transaction_version_2: bool,
}

impl Default for ProducerConfig {
    fn default() -> Self {
        ProducerConfig {
            acks: Acks::All,
            enable_idempotence: true,
            idempotence_max_in_flight: Some(5),
            retries: i32::MAX as u32,
            max_in_flight_requests_per_connection: 5,
            linger: ms(5),
            batch_size: 16_384,
            delivery_timeout: ms(120_000),
            request_timeout: ms(30_000),
            retry_backoff: ms(100),
            metadata_max_age: ms(300_000),
            expire_in_accumulator: false,
            transactional_id: None,
            transaction_timeout: ms(60_000),
            transaction_epoch_bump: true,
            invalid_epoch_abortable: true,
            transaction_version_2: true,
        }
    }
}

/// A producer key set against what idempotence needs: the key, and the need as a message
/// says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IdempotenceConflict {
    pub key: &'static str,
    pub needs: &'static str,
}

impl ProducerConfig {
    /// Kafka's rule (KafkaProducer's constructor): idempotence needs acks=all, at most 5
    /// requests in flight (1 before Kafka 1.0) and retries. The first key that breaks it.
    /// Set `key` (an [`IdempotenceConflict`]'s) to what idempotence needs, as Kafka's
    /// producer does for a key left unset (`ProducerConfig.maybeOverrideAcksAndRetries`).
    pub fn settle_for_idempotence(&mut self, key: &str) {
        match key {
            "acks" => self.acks = Acks::All,
            "retries" => self.retries = i32::MAX as u32,
            _ => {
                self.max_in_flight_requests_per_connection =
                    self.idempotence_max_in_flight.unwrap_or(1)
            }
        }
        // Callers loop until no conflict is left: each settling must remove its own.
        assert_ne!(
            self.idempotence_conflict().map(|c| c.key),
            Some(key),
            "settling `{key}` resolves it (a release without idempotence has none to settle)"
        );
    }

    pub fn idempotence_conflict(&self) -> Option<IdempotenceConflict> {
        let conflict = |key, needs| Some(IdempotenceConflict { key, needs });
        let max_in_flight = self.idempotence_max_in_flight.unwrap_or(0);
        if self.acks != Acks::All {
            conflict("acks", "`acks` = \"all\"")
        } else if self.max_in_flight_requests_per_connection > max_in_flight {
            conflict(
                "max.in.flight.requests.per.connection",
                if max_in_flight == 1 {
                    "`max.in.flight.requests.per.connection` = 1 before Kafka 1.0"
                } else {
                    "`max.in.flight.requests.per.connection` <= 5"
                },
            )
        } else if self.retries == 0 {
            conflict("retries", "`retries` > 0")
        } else {
            None
        }
    }

    /// Whether the producer is idempotent. Kafka 3.x turns idempotence off when the rule is
    /// broken and `enable.idempotence` was left at its default (set explicitly, it refuses
    /// the configuration); scenarios override `acks` without touching `enable.idempotence`,
    /// so the implicit rule is the one that applies.
    pub fn idempotent(&self) -> bool {
        self.transactional_id.is_some()
            || (self.enable_idempotence && self.idempotence_conflict().is_none())
    }

    /// The `transactional.id` of producer-`index`, if the producers are transactional.
    pub fn transactional_id_of(&self, index: u32) -> Option<String> {
        self.transactional_id
            .as_ref()
            .map(|id| format!("{id}-{index}"))
    }
}

/// Consumer configuration (`[consumer]`), Kafka's defaults (the newest release's; a
/// release's own are in `release.rs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConsumerConfig {
    pub fetch_max_wait: Duration,
    pub fetch_min_bytes: u64,
    pub max_partition_fetch_bytes: u64,
    pub request_timeout: Duration,
    pub retry_backoff: Duration,
    /// Commit the positions of the last poll every `auto_commit_interval`, from poll.
    pub enable_auto_commit: bool,
    pub auto_commit_interval: Duration,
    /// Where a member starts on a partition its group has no valid committed offset for.
    pub auto_offset_reset: OffsetReset,
    /// The coordinator drops a member it has not heard a heartbeat from for this long.
    pub session_timeout: Duration,
    pub heartbeat_interval: Duration,
    /// Longest between polls before the member leaves its group (KIP-62); also the
    /// rebalance timeout it joins with.
    pub max_poll_interval: Duration,
    pub max_poll_records: u32,
    /// Check each fetched batch's CRC-32C before handing its records over. Off, a reader
    /// still stops at a batch or record it cannot parse, but takes rotten bytes inside a
    /// well-formed one for data.
    pub check_crcs: bool,
    pub isolation_level: IsolationLevel,
    /// The consumer sends the leader epoch it knows with each fetch, and after a leader
    /// change asks the new leader where its position's epoch ends before fetching again,
    /// moving back if the log was truncated under it (KIP-320 on the consumer, Kafka 2.3).
    /// Before, it fetched on from its position: a position past a truncated log got
    /// OFFSET_OUT_OF_RANGE and `auto.offset.reset`. Not a key: the release decides it.
    pub validate_positions: bool,
    /// The consumer's OffsetFetch asks for stable offsets only (KIP-447, Kafka 2.5): an
    /// offset still pending in a transaction is not handed out, and the consumer asks
    /// again. Before, it got the last committed offset, and a transaction committing
    /// its offsets a moment later went unseen. Not a key: the release decides it.
    pub require_stable_offsets: bool,
    /// An exactly-once processor's `sendOffsetsToTransaction` carries its consumer's group
    /// metadata, member id and generation (KIP-447, Kafka 2.5), so the group coordinator
    /// refuses the offsets of a member the group has moved on from. Before, it named only
    /// the group, and a zombie's offsets were taken. Not a key: the release decides it.
    pub group_metadata_in_transactions: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            fetch_max_wait: ms(500),
            fetch_min_bytes: 1,
            max_partition_fetch_bytes: 1_048_576,
            request_timeout: ms(30_000),
            retry_backoff: ms(100),
            enable_auto_commit: true,
            auto_commit_interval: ms(5_000),
            auto_offset_reset: OffsetReset::Latest,
            session_timeout: ms(45_000),
            heartbeat_interval: ms(3_000),
            max_poll_interval: ms(300_000),
            max_poll_records: 500,
            check_crcs: true,
            isolation_level: IsolationLevel::ReadUncommitted,
            validate_positions: true,
            require_stable_offsets: true,
            group_metadata_in_transactions: true,
        }
    }
}

/// `isolation.level`: whether a consumer reads everything up to the HW (Kafka's default)
/// or only up to the last stable offset, without the batches of aborted transactions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum IsolationLevel {
    #[default]
    ReadUncommitted,
    ReadCommitted,
}

impl IsolationLevel {
    pub const ALL: [IsolationLevel; 2] = [
        IsolationLevel::ReadUncommitted,
        IsolationLevel::ReadCommitted,
    ];

    /// As Kafka spells it.
    pub const fn name(self) -> &'static str {
        match self {
            IsolationLevel::ReadUncommitted => "read_uncommitted",
            IsolationLevel::ReadCommitted => "read_committed",
        }
    }
}

/// `auto.offset.reset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum OffsetReset {
    Earliest,
    Latest,
    /// Fail the poll with OFFSET_OUT_OF_RANGE / NoOffsetForPartition.
    None,
}

impl OffsetReset {
    pub const ALL: [OffsetReset; 3] = [
        OffsetReset::Earliest,
        OffsetReset::Latest,
        OffsetReset::None,
    ];

    /// As Kafka spells it: `earliest`, `latest`, `none`.
    pub const fn name(self) -> &'static str {
        match self {
            OffsetReset::Earliest => "earliest",
            OffsetReset::Latest => "latest",
            OffsetReset::None => "none",
        }
    }
}

/// Storage configuration of one partition's log: the broker's values with the topic's
/// overrides applied.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogConfig {
    pub segment_bytes: u64,
    /// Age at which the active segment is rolled even if it is not full.
    pub roll: Duration,
    pub index_interval_bytes: u64,
    /// `.index` entries name a batch by its last offset (Kafka 2.0 on) or, before, by its
    /// base offset: the release decides it.
    pub index_by_last_offset: bool,
    pub retention_bytes: i64,
    /// `None`: keep forever.
    pub retention: Option<Duration>,
    pub flush_interval_messages: u64,
    pub flush_interval: Duration,
    /// Flushes fsync the directory as well as the files (the release's `dir_fsync`).
    pub dir_fsync: bool,
    /// The epoch checkpoint is fsynced after a truncation, not only after a new epoch (the
    /// release's `epoch_truncation_fsync`).
    pub epoch_truncation_fsync: bool,
    /// A transactional batch that would start a transaction must have been verified with
    /// the coordinator (`transaction.partition.verification.enable`, KIP-890 part 1).
    pub transaction_verification: bool,
    /// Transaction protocol v2 (the release's `transaction_version_2`, 4.0): every
    /// transactional batch that starts a transaction here went through its leader's add,
    /// a transaction open here is the batch's only at the batch's epoch, and a marker at
    /// the epoch of a verification under way leaves it standing (it ended the transaction
    /// before).
    pub transaction_version_2: bool,
    /// Bugs a mutation test injected into the log (none in any real run).
    #[serde(skip)]
    pub bugs: Bugs,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig::resolve(&BrokerConfig::default(), &TopicConfig::default())
    }
}

impl LogConfig {
    pub fn resolve(broker: &BrokerConfig, topic: &TopicConfig) -> LogConfig {
        LogConfig {
            segment_bytes: topic.segment_bytes.unwrap_or(broker.log_segment_bytes),
            roll: topic.roll.unwrap_or(broker.log_roll),
            index_interval_bytes: topic
                .index_interval_bytes
                .unwrap_or(broker.log_index_interval_bytes),
            index_by_last_offset: broker.rules.index_by_last_offset,
            retention_bytes: topic.retention_bytes.unwrap_or(broker.log_retention_bytes),
            retention: topic.retention.unwrap_or(broker.log_retention),
            flush_interval_messages: topic
                .flush_messages
                .unwrap_or(broker.log_flush_interval_messages),
            flush_interval: topic.flush_interval.unwrap_or(broker.log_flush_interval),
            dir_fsync: broker.rules.dir_fsync,
            epoch_truncation_fsync: broker.rules.epoch_truncation_fsync,
            transaction_verification: broker.transaction_partition_verification_enable,
            transaction_version_2: broker.rules.transaction_version_2,
            bugs: Bugs::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotence_needs_acks_all_few_requests_in_flight_and_retries() {
        let default = ProducerConfig::default();
        assert!(default.idempotent());
        let broken = [
            (
                ProducerConfig {
                    acks: Acks::Leader,
                    ..default.clone()
                },
                "acks",
            ),
            (
                ProducerConfig {
                    max_in_flight_requests_per_connection: 6,
                    ..default.clone()
                },
                "max.in.flight.requests.per.connection",
            ),
            (
                ProducerConfig {
                    retries: 0,
                    ..default.clone()
                },
                "retries",
            ),
        ];
        for (config, key) in broken {
            assert_eq!(config.idempotence_conflict().map(|c| c.key), Some(key));
            assert!(!config.idempotent(), "{key}");
        }
        let off = ProducerConfig {
            enable_idempotence: false,
            ..default
        };
        assert!(!off.idempotent());
    }
}

/// `[workload] commit`: when a group member commits what it polled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Commit {
    /// `enable.auto.commit`: from within poll, every `auto.commit.interval.ms`.
    Auto,
    /// commitSync of a poll's offsets before processing its records: at most once.
    BeforeProcessing,
    /// commitSync after processing them: at least once.
    AfterProcessing,
    /// A processor's exactly once: each poll's outputs and its consumed offsets in one
    /// transaction (`sendOffsetsToTransaction`, then `commitTransaction`).
    Transactional,
}

impl Commit {
    pub const ALL: [Commit; 4] = [
        Commit::Auto,
        Commit::BeforeProcessing,
        Commit::AfterProcessing,
        Commit::Transactional,
    ];

    /// As a scenario file writes it.
    pub const fn name(self) -> &'static str {
        match self {
            Commit::Auto => "auto",
            Commit::BeforeProcessing => "before-processing",
            Commit::AfterProcessing => "after-processing",
            Commit::Transactional => "transactional",
        }
    }
}
