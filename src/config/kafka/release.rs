//! Kafka's releases, and what each changed about durability.
//!
//! A scenario names the release it models (`[cluster] kafka = "2.8"`). A release's
//! defaults and rules are Kafka 0.10's with every [`STEP`](STEPS) up to it applied, in
//! order; keys a scenario sets explicitly are applied after, so they win. A minor release
//! stands for its last patch release (3.0 is 3.0.2: the idempotence default works).
//!
//! Each step says what changed and where Kafka says so (a KIP, an issue, a release), so
//! `hightide config --kafka X.Y` can print the history a number depends on.

use super::{Acks, BrokerConfig, ConsumerConfig, ProducerConfig, Truncation, FOREVER};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::Duration;

/// A Kafka minor release, `major.minor`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Release {
    pub major: u8,
    pub minor: u8,
}

const fn v(major: u8, minor: u8) -> Release {
    Release { major, minor }
}

/// Every release a scenario may name, oldest first: each minor release from 0.10.
pub const KNOWN: &[Release] = &[
    v(0, 10),
    v(0, 11),
    v(1, 0),
    v(1, 1),
    v(2, 0),
    v(2, 1),
    v(2, 2),
    v(2, 3),
    v(2, 4),
    v(2, 5),
    v(2, 6),
    v(2, 7),
    v(2, 8),
    v(3, 0),
    v(3, 1),
    v(3, 2),
    v(3, 3),
    v(3, 4),
    v(3, 5),
    v(3, 6),
    v(3, 7),
    v(3, 8),
    v(3, 9),
    v(4, 0),
    v(4, 1),
];

impl Release {
    /// The newest release modelled: what a scenario gets when it names none.
    pub const NEWEST: Release = KNOWN[KNOWN.len() - 1];
    pub const OLDEST: Release = KNOWN[0];

    /// `"2.8"` → 2.8, if it is a release hightide knows. The error lists the known ones.
    pub fn parse(text: &str) -> Result<Release, String> {
        let known = || {
            let names: Vec<String> = KNOWN.iter().map(Release::to_string).collect();
            names.join(", ")
        };
        let parsed = text.split_once('.').and_then(|(major, minor)| {
            let number = |part: &str| {
                (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| part.parse::<u8>().ok())
                    .flatten()
            };
            Some(v(number(major)?, number(minor)?))
        });
        match parsed {
            Some(release) if KNOWN.contains(&release) => Ok(release),
            Some(release) if release > Release::NEWEST => Err(format!(
                "Kafka {release} is newer than the newest release modelled ({}); the releases are: {}",
                Release::NEWEST,
                known()
            )),
            Some(release) => Err(format!(
                "unknown Kafka release `{release}`; the releases are: {}",
                known()
            )),
            None => Err(format!(
                "invalid Kafka release `{text}`: expected a minor release like \"3.9\"; the releases are: {}",
                known()
            )),
        }
    }

    /// The defaults and rules of this release, before any key a scenario sets.
    pub fn era(self) -> Era {
        let mut era = Era::kafka_0_10();
        era.release = self;
        for step in STEPS.iter().filter(|step| step.since <= self) {
            (step.apply)(&mut era);
        }
        era
    }

    /// The era just before and just after `STEPS[index]`, to see what that step changes.
    #[cfg(test)]
    pub(crate) fn around_step(index: usize) -> (Era, Era) {
        let mut era = Era::kafka_0_10();
        for step in &STEPS[..index] {
            (step.apply)(&mut era);
        }
        let before = era.clone();
        (STEPS[index].apply)(&mut era);
        (before, era)
    }

    /// Pairs of steps after `self` and up to `to` whose changes cancel: the later one, applied
    /// right after the earlier, gives back the era from before it (KAFKA-16541 restoring
    /// what KAFKA-15046 dropped). Between these two releases neither changes anything.
    pub fn cancelling_steps(self, to: Release) -> Vec<(&'static Step, &'static Step)> {
        let range: Vec<&'static Step> = STEPS
            .iter()
            .filter(|step| step.since > self && step.since <= to)
            .collect();
        let mut era = self.era();
        let mut pairs = Vec::new();
        for (i, &first) in range.iter().enumerate() {
            let before = era.clone();
            (first.apply)(&mut era);
            if era == before {
                continue;
            }
            for &second in &range[i + 1..] {
                let mut undone = era.clone();
                (second.apply)(&mut undone);
                if undone == before {
                    pairs.push((first, second));
                }
            }
        }
        pairs
    }

    /// The steps up to this release, oldest first.
    pub fn history(self) -> impl Iterator<Item = &'static Step> {
        STEPS.iter().filter(move |step| step.since <= self)
    }

    /// Whether the producer has `delivery.timeout.ms` (KIP-91, 2.1).
    pub fn has_delivery_timeout(self) -> bool {
        self.lacks_key("producer", "delivery.timeout.ms").is_none()
    }

    /// If `key` of `[section]` came after this release: the release it came in, and the
    /// source that says so.
    pub fn lacks_key(self, section: &str, key: &str) -> Option<(Release, &'static str)> {
        NEWER_KEYS
            .iter()
            .find(|k| k.0 == section && k.1 == key && self < k.2)
            .map(|k| (k.2, k.3))
    }
}

/// Keys hightide accepts that Kafka 0.10 did not have: section, key, the release that
/// added it, the source.
const NEWER_KEYS: &[(&str, &str, Release, &str)] = &[
    ("producer", "enable.idempotence", v(0, 11), "KIP-98"),
    ("producer", "transactional.id", v(0, 11), "KIP-98"),
    ("producer", "transaction.timeout.ms", v(0, 11), "KIP-98"),
    ("producer", "delivery.timeout.ms", v(2, 1), "KIP-91"),
    (
        "broker",
        "group.initial.rebalance.delay.ms",
        v(0, 11),
        "KIP-134",
    ),
];

impl fmt::Display for Release {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

impl Default for Release {
    fn default() -> Self {
        Release::NEWEST
    }
}

/// What a release does that no configuration key says. Kafka changed these between
/// releases without a switch, so they follow the release alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rules {
    /// A leader whose ISR is below `min.insync.replicas` holds its high watermark, so an
    /// acks=1 write cannot become committed on the leader alone (KAFKA-15583, 3.7).
    pub strict_min_isr: bool,
    /// Followers fetch with their last fetched epoch and the leader answers with the epoch
    /// where their logs diverge (KAFKA-10554, 2.8). A new follower whose log has an epoch
    /// then fetches at once, without an OffsetsForLeaderEpoch round
    /// (`AbstractFetcherThread.addPartitions`: Fetching, not Truncating).
    pub diverging_epoch_in_fetch: bool,
    /// A new leader records its epoch, starting at its LEO, when it is elected
    /// (KAFKA-7415, 2.0.1). Before, it had the epoch only once it appended in it: until
    /// then it answered OffsetsForLeaderEpoch as if its previous epoch were current.
    pub leader_epoch_on_election: bool,
    /// `.index` entries name the batch at their position by its last offset (2.0, with the
    /// segment splitting of KAFKA-6264); before, by its base offset. Only a dumped index
    /// shows it: a lookup scans from the entry either way.
    pub index_by_last_offset: bool,
    /// Whether the controller elects a leader outside the ISR when
    /// `unclean.leader.election.enable` allows it. ZooKeeper's controller always did;
    /// KRaft's ignored the key until 3.9 (KAFKA-12670).
    pub unclean_election_honoured: bool,
    /// KIP-966 part 1: replicas that leave the ISR while it is below min ISR stay
    /// eligible to lead, the ISR may become empty, and a broker back from an unclean
    /// shutdown loses its eligibility (4.1 by default; in 4.0 off unless the
    /// `eligible.leader.replicas.version` feature is raised).
    pub eligible_leader_replicas: bool,
    /// The controller is KRaft's (3.3, KIP-833). It handles a controlled shutdown as a
    /// fencing (`generateLeaderAndIsrUpdates`): a partition whose only in-sync replica is
    /// shutting down is left without a leader (or gets an unclean one where allowed), and
    /// the broker stops at once. ZooKeeper's controller left such a broker leading, and the
    /// broker retried its controlled shutdown before stopping anyway.
    pub kraft_controller: bool,
    /// Followers send the leader epoch they believe current with each Fetch and
    /// OffsetsForLeaderEpoch, and a leader refuses an older one (KIP-320 replica fencing,
    /// 2.1). Before, a zombie follower of a deposed leader kept fetching from it.
    pub fetch_current_leader_epoch: bool,
    /// A follower told of a new epoch under the same leader truncates unless the epoch
    /// moved by exactly one (KAFKA-7164, 2.0.1; from 2.1 with `fetch_current_leader_epoch`
    /// at every change). Before, it reset its fetcher, and so truncated, only when the
    /// leader changed, and kept a suffix the leader had dropped in between.
    pub truncate_at_every_epoch: bool,
    /// A follower whose log ends past its leader's truncates to the leader's end, whatever
    /// unclean election allows (KAFKA-7414, 2.0.1). Before, with
    /// `unclean.leader.election.enable` off, it refused and its broker exited.
    pub out_of_range_never_fatal: bool,
    /// The controller refuses an ISR naming a fenced or shutting-down broker, and a leader
    /// does not propose one (KIP-841, KAFKA-14140, 3.3). Before, ISR changes were checked
    /// only for being based on the current version.
    pub isr_members_must_be_eligible: bool,
    /// Fetches carry the follower's broker epoch and the leader passes it on in
    /// AlterPartition; the controller refuses a member whose epoch is not its current
    /// registration's (KIP-903, 3.5). Before, an expansion proposed from a dead
    /// process's fetches could admit its successor, whatever log it came back with.
    pub isr_broker_epochs: bool,
    /// Directory entries are fsynced: the log directory when a flush covers a segment it
    /// created (`LocalLog.flush`), and a checkpoint's directory after its rename
    /// (`Utils.atomicMoveWithFallback`), KAFKA-3968, 3.0. Before, Kafka fsynced files only,
    /// and a new, renamed or deleted name waited for the file system's own commit.
    pub dir_fsync: bool,
    /// The leader-epoch checkpoint rewritten after a truncation is fsynced as it is written
    /// (`LeaderEpochFileCache.truncateFromEnd`). In 3.7 alone it was not (KAFKA-15046 moved
    /// the fsync off the append path's lock; KAFKA-16541 restored it in 3.8, on the
    /// scheduler); a new epoch is fsynced at once in every release.
    pub epoch_truncation_fsync: bool,
    /// Partition verification answers a partition not in the producer's transaction with
    /// TRANSACTION_ABORTABLE (3.8, KIP-890: clients of Produce v11 and later get it; older
    /// ones INVALID_TXN_STATE, as every client did in 3.6 and 3.7).
    pub transaction_abortable: bool,
    /// Transaction protocol v2 (KIP-890 part 2; the `transaction.version` feature at 2,
    /// the default of a cluster formatted by 4.0): the coordinator bumps the producer
    /// epoch when a transaction ends, so its markers carry the next epoch and nothing the
    /// ended transaction's producer sends later is taken; partitions join a transaction
    /// when their leader adds them, not by the client's AddPartitionsToTxn; and
    /// `__transaction_state` values are written in version 1.
    pub transaction_version_2: bool,
}

/// A release's defaults and rules: the broker's, the producer's and the consumer's.
#[derive(Clone, Debug, PartialEq)]
pub struct Era {
    pub release: Release,
    pub broker: BrokerConfig,
    pub producer: ProducerConfig,
    pub consumer: ConsumerConfig,
}

impl Era {
    /// Kafka 0.10.2: no leader epochs, unclean elections on, acks=1 without retries, no
    /// idempotent producer, a ZooKeeper controller with a 6 s session.
    fn kafka_0_10() -> Era {
        Era {
            release: Release::OLDEST,
            broker: BrokerConfig {
                unclean_leader_election_enable: true,
                replica_lag_time_max: ms(10_000),
                replication_truncation: Truncation::HighWatermark,
                broker_session_timeout: ms(6_000),
                broker_heartbeat_interval: ms(2_000),
                group_initial_rebalance_delay: Duration::ZERO,
                transaction_abort_timed_out_transaction_cleanup_interval: ms(60_000),
                transaction_partition_verification_enable: false,
                rules: Rules {
                    strict_min_isr: false,
                    diverging_epoch_in_fetch: false,
                    leader_epoch_on_election: false,
                    index_by_last_offset: false,
                    unclean_election_honoured: true,
                    eligible_leader_replicas: false,
                    kraft_controller: false,
                    fetch_current_leader_epoch: false,
                    truncate_at_every_epoch: false,
                    out_of_range_never_fatal: false,
                    isr_members_must_be_eligible: false,
                    isr_broker_epochs: false,
                    dir_fsync: false,
                    epoch_truncation_fsync: true,
                    transaction_abortable: false,
                    transaction_version_2: false,
                },
                ..BrokerConfig::default()
            },
            producer: ProducerConfig {
                acks: Acks::Leader,
                enable_idempotence: false,
                idempotence_max_in_flight: None,
                retries: 0,
                linger: Duration::ZERO,
                delivery_timeout: FOREVER,
                expire_in_accumulator: true,
                transaction_epoch_bump: false,
                invalid_epoch_abortable: false,
                transaction_version_2: false,
                ..ProducerConfig::default()
            },
            consumer: ConsumerConfig {
                session_timeout: ms(10_000),
                validate_positions: false,
                require_stable_offsets: false,
                group_metadata_in_transactions: false,
                ..ConsumerConfig::default()
            },
        }
    }
}

const fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// One release's changes to what hightide models: when, what, Kafka's own source for it,
/// and the change itself.
pub struct Step {
    pub since: Release,
    pub change: &'static str,
    pub source: &'static str,
    /// The keys whose defaults it changes, as sweep paths (`"producer.acks"`): a run that
    /// sets them all is untouched by that part of the step.
    pub defaults: &'static [&'static str],
    /// Whether it changes a rule no key sets (how followers truncate, who may lead).
    pub rule: bool,
    /// What a run must use for the step to change it.
    pub reach: Reach,
    apply: fn(&mut Era),
}

/// A step as one configuration's runs meet it: `missed` says why it cannot change them
/// (`"these runs have no consumer group"`), or is `None` if it can.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepReach {
    pub since: Release,
    pub source: &'static str,
    pub missed: Option<String>,
}

/// What a run must use for a step to change it: a sweep report names, between two
/// releases, only the steps that can explain a difference in its runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every run: replication, the controller, the producer's delivery.
    Every,
    /// Runs whose consumers form a group.
    Groups,
    /// Runs with consumers, in a group or not.
    Consumers,
    /// Runs whose producer is idempotent.
    IdempotentProducer,
    /// Runs that allow an unclean leader election.
    UncleanElection,
    /// Runs with transactions: a transactional producer (`transactional.id`) or
    /// exactly-once processors (`commit = "transactional"`).
    Transactions,
}

impl Reach {
    /// What a run lacks for the step to reach it, or `None` if it is reached.
    pub fn missed_by(
        self,
        consumers: bool,
        groups: bool,
        transactional: bool,
        broker: &BrokerConfig,
        producer: &ProducerConfig,
    ) -> Option<&'static str> {
        match self {
            Reach::Every => None,
            Reach::Groups => (!groups).then_some("have no consumer group"),
            Reach::Consumers => (!consumers).then_some("have no consumer"),
            Reach::IdempotentProducer => {
                (!producer.idempotent()).then_some("have no idempotent producer")
            }
            Reach::UncleanElection => (!broker.unclean_leader_election_enable)
                .then_some("keep unclean leader election off"),
            Reach::Transactions => (!transactional).then_some("have no transactions"),
        }
    }
}

/// Kafka's durability history as hightide models it, oldest first.
pub static STEPS: &[Step] = &[
    Step {
        since: v(0, 11),
        change: "Leader epochs: a follower asks the leader where its last epoch ends (one OffsetsForLeaderEpoch round) instead of truncating to its high watermark; `replication.truncation` = \"leader-epoch-single-round\"",
        source: "KIP-101",
        defaults: &["broker.replication.truncation"],
        rule: false,
        reach: Reach::Every,
        apply: |era| era.broker.replication_truncation = Truncation::LeaderEpochSingleRound,
    },
    Step {
        since: v(0, 11),
        change: "The group coordinator delays an empty group's first rebalance by `group.initial.rebalance.delay.ms` (3000), again for each member that joins, up to the rebalance timeout",
        source: "KIP-134",
        defaults: &["broker.group.initial.rebalance.delay.ms"],
        rule: false,
        reach: Reach::Groups,
        apply: |era| era.broker.group_initial_rebalance_delay = ms(3_000),
    },
    Step {
        since: v(0, 11),
        change: "`unclean.leader.election.enable` defaults to false",
        source: "KIP-106",
        defaults: &["broker.unclean.leader.election.enable"],
        rule: false,
        reach: Reach::Every,
        apply: |era| era.broker.unclean_leader_election_enable = false,
    },
    Step {
        since: v(0, 11),
        change: "The idempotent producer (`enable.idempotence`, off by default), with at most 1 request in flight",
        source: "KIP-98",
        defaults: &[],
        rule: true,
        reach: Reach::IdempotentProducer,
        apply: |era| era.producer.idempotence_max_in_flight = Some(1),
    },
    Step {
        since: v(1, 0),
        change: "An idempotent producer may have up to 5 requests in flight",
        source: "KAFKA-5494",
        defaults: &[],
        rule: true,
        reach: Reach::IdempotentProducer,
        apply: |era| era.producer.idempotence_max_in_flight = Some(5),
    },
    Step {
        since: v(2, 0),
        change: "Truncation repeats OffsetsForLeaderEpoch rounds until the epoch histories agree; `replication.truncation` = \"leader-epoch\"",
        source: "KIP-279",
        defaults: &["broker.replication.truncation"],
        rule: false,
        reach: Reach::Every,
        apply: |era| era.broker.replication_truncation = Truncation::LeaderEpoch,
    },
    Step {
        since: v(2, 0),
        change: "A follower told of a new leader epoch under the same leader truncates, unless the epoch moved by exactly one (from 2.1, KIP-320, at every change); before, only a new leader reset its fetcher, and a follower that missed the epochs in between kept records the leader had dropped (2.0.1; the fix is on the 1.1 branch too, which had no release after 1.1.1)",
        source: "KAFKA-7164",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.truncate_at_every_epoch = true,
    },
    Step {
        since: v(2, 0),
        change: "`.index` entries name the batch at their position by its last offset (`LogSegment.append` and `recover`); before, by its base offset. A lookup scans on from the entry either way: only a dumped `.index` differs",
        source: "KAFKA-6264, apache/kafka#5169",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.index_by_last_offset = true,
    },
    Step {
        since: v(2, 0),
        change: "A new leader records its epoch when it is elected; before, only at its first append in it, and a follower asking in between about the previous epoch got the leader's LEO, or, asking about an older one it lacked, no answer and truncated to its high watermark (2.0.1; also on the 1.1 branch, never released)",
        source: "KAFKA-7415",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.leader_epoch_on_election = true,
    },
    Step {
        since: v(2, 0),
        change: "A follower whose log ends past its leader's (an out-of-range fetch) truncates to the leader's end; before, with `unclean.leader.election.enable` off, it refused (\"Exiting because log truncation is not allowed\") and its broker exited, at every restart again (2.0.1)",
        source: "KAFKA-7414",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.out_of_range_never_fatal = true,
    },
    Step {
        since: v(2, 1),
        change: "`delivery.timeout.ms` (120000) bounds a send, retries included, and `retries` defaults to 2147483647; before, a batch expired only while it waited in the accumulator, `request.timeout.ms` after it was due to leave (after `linger.ms`, its last append once full, or a retry's backoff), and `retries` alone bounded its attempts",
        source: "KIP-91",
        defaults: &["producer.delivery.timeout.ms", "producer.retries"],
        rule: true,
        reach: Reach::Every,
        apply: |era| {
            era.producer.delivery_timeout = ms(120_000);
            era.producer.retries = i32::MAX as u32;
            era.producer.expire_in_accumulator = false;
        },
    },
    Step {
        since: v(2, 1),
        change: "Replica fencing: a follower's Fetch and OffsetsForLeaderEpoch carry the leader epoch it believes current, and a leader refuses an older one (FENCED_LEADER_EPOCH); before, a follower still following a deposed leader fetched from it and appended what it had",
        source: "KIP-320, KAFKA-7395",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.fetch_current_leader_epoch = true,
    },
    Step {
        since: v(2, 3),
        change: "The consumer sends the leader epoch it knows with each fetch, and after a leader change, or resuming at a committed offset, asks the leader where that position's epoch ends, moving back if the log was truncated under it; before, it fetched on from its position, and a position past the end got OFFSET_OUT_OF_RANGE and `auto.offset.reset` (commits have carried the epoch since 2.1, KAFKA-7437, but nothing read it)",
        source: "KIP-320, KAFKA-7440, KAFKA-7747",
        defaults: &[],
        rule: true,
        reach: Reach::Consumers,
        apply: |era| era.consumer.validate_positions = true,
    },
    Step {
        since: v(2, 5),
        change: "`replica.lag.time.max.ms` 10000 → 30000, and the ZooKeeper session (`zookeeper.session.timeout.ms`, `broker.session.timeout.ms` here) 6000 → 18000",
        source: "KIP-537",
        defaults: &[
            "broker.replica.lag.time.max.ms",
            "broker.broker.session.timeout.ms",
            "broker.broker.heartbeat.interval.ms",
        ],
        rule: false,
        reach: Reach::Every,
        apply: |era| {
            era.broker.replica_lag_time_max = ms(30_000);
            era.broker.broker_session_timeout = ms(18_000);
            era.broker.broker_heartbeat_interval = ms(6_000);
        },
    },
    Step {
        since: v(2, 5),
        change: "The transaction coordinator looks for transactions past their timeout every 10 s (`transaction.abort.timed.out.transaction.cleanup.interval.ms`; was 60 s)",
        source: "KIP-447, KAFKA-9417 (apache/kafka#8000)",
        defaults: &["broker.transaction.abort.timed.out.transaction.cleanup.interval.ms"],
        rule: false,
        reach: Reach::Transactions,
        apply: |era| era.broker.transaction_abort_timed_out_transaction_cleanup_interval = ms(10_000),
    },
    Step {
        since: v(2, 5),
        change: "After an abortable error the transactional producer aborts, then bumps its epoch (InitProducerId with the producer id and epoch it holds) and goes on; before, a batch whose outcome it never learned (expired, unanswered) was fatal: \"the client hasn't received acknowledgment for some previously sent messages and can no longer retry them\"",
        source: "KIP-360 (TransactionManager, 2.4.0 and 2.5.0)",
        defaults: &[],
        rule: true,
        reach: Reach::Transactions,
        apply: |era| era.producer.transaction_epoch_bump = true,
    },
    Step {
        since: v(2, 5),
        change: "A consumer's OffsetFetch requires stable offsets: a partition whose offset a transaction may still commit answers UNSTABLE_OFFSET_COMMIT, and the consumer asks again",
        source: "KIP-447",
        defaults: &[],
        rule: true,
        reach: Reach::Groups,
        apply: |era| era.consumer.require_stable_offsets = true,
    },
    Step {
        since: v(2, 5),
        change: "An exactly-once processor's sendOffsetsToTransaction carries its consumer's group metadata (member id and generation): the group coordinator refuses a TxnOffsetCommit from a member the group has moved on from (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID), and the producer aborts; before, only the group was named and a zombie's offsets were taken",
        source: "KIP-447",
        defaults: &[],
        rule: true,
        reach: Reach::Transactions,
        apply: |era| era.consumer.group_metadata_in_transactions = true,
    },
    Step {
        since: v(2, 7),
        change: "INVALID_PRODUCER_EPOCH on a produce is abortable (`InvalidProducerEpochException`): the transactional producer aborts and goes on; before, it was `ProducerFencedException`, fatal, and the application had to close the producer. Fencing by a newer instance answers PRODUCER_FENCED, still fatal",
        source: "KIP-588",
        defaults: &[],
        rule: true,
        reach: Reach::Transactions,
        apply: |era| era.producer.invalid_epoch_abortable = true,
    },
    Step {
        since: v(2, 8),
        change: "Followers send their last fetched epoch with each fetch and the leader answers with the diverging epoch; a new follower whose log has an epoch skips the OffsetsForLeaderEpoch round",
        source: "KAFKA-10554",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.diverging_epoch_in_fetch = true,
    },
    Step {
        since: v(3, 0),
        change: "Directories are fsynced: a log's when a flush covers a segment it created, a checkpoint's after the checkpoint is renamed into it; before, Kafka fsynced files only, and a new, renamed or deleted name was durable only once the file system committed it",
        source: "KAFKA-3968, apache/kafka#10405, apache/kafka#10680",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.dir_fsync = true,
    },
    Step {
        since: v(3, 0),
        change: "The consumer's `session.timeout.ms` defaults to 45000 (was 10000)",
        source: "KIP-735",
        defaults: &["consumer.session.timeout.ms"],
        rule: false,
        reach: Reach::Groups,
        apply: |era| era.consumer.session_timeout = ms(45_000),
    },
    Step {
        since: v(3, 0),
        change: "`acks` = \"all\" and `enable.idempotence` = true by default (in effect from 3.0.1, which fixed 3.0.0 leaving idempotence off)",
        source: "KIP-679, KAFKA-13598",
        defaults: &["producer.acks", "producer.enable.idempotence"],
        rule: false,
        reach: Reach::Every,
        apply: |era| {
            era.producer.acks = Acks::All;
            era.producer.enable_idempotence = true;
        },
    },
    Step {
        since: v(3, 3),
        change: "A KRaft controller (production ready): brokers heartbeat every 2000 ms and are fenced after `broker.session.timeout.ms` 9000 (a restarted broker's registration is refused until then, and retried from 100 ms doubling up to it); it ignores `unclean.leader.election.enable`; a controlled shutdown leaves a partition whose only in-sync replica is stopping without a leader, where ZooKeeper's controller kept the broker leading",
        source: "KIP-833, KIP-631",
        defaults: &[
            "broker.broker.session.timeout.ms",
            "broker.broker.heartbeat.interval.ms",
        ],
        rule: true,
        reach: Reach::Every,
        apply: |era| {
            era.broker.broker_session_timeout = ms(9_000);
            era.broker.broker_heartbeat_interval = ms(2_000);
            era.broker.rules.unclean_election_honoured = false;
            era.broker.rules.kraft_controller = true;
        },
    },
    Step {
        since: v(3, 3),
        change: "The controller refuses an AlterPartition that adds a fenced or shutting-down broker to the ISR (INELIGIBLE_REPLICA), and a leader does not propose one; before, an ISR change was checked only for being based on the current version (by ZooKeeper's conditional write before 2.7, by the controller's AlterIsr from 2.7, KIP-497)",
        source: "KIP-841, KAFKA-13916, KAFKA-14140",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.isr_members_must_be_eligible = true,
    },
    Step {
        since: v(3, 5),
        change: "A follower's Fetch carries its broker epoch and the leader passes each member's on in AlterPartition; the controller refuses a member whose epoch is not its current registration's (INELIGIBLE_REPLICA), so an expansion proposed from a dead process's fetches cannot admit a successor that came back with less",
        source: "KIP-903, KAFKA-14617",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.isr_broker_epochs = true,
    },
    Step {
        since: v(3, 6),
        change: "Partition verification: before a transactional batch starts a transaction on a partition, its leader asks the transaction coordinator whether the partition is in the producer's ongoing transaction (AddPartitionsToTxn with VerifyOnly) and refuses the batch if not (INVALID_TXN_STATE), or if a marker was written while it asked; before, such a batch opened a transaction of its own: a produce delayed past its transaction's abort marker hung the partition's LSO, or was committed with the producer's next transaction",
        source: "KIP-890 part 1, KAFKA-14402",
        defaults: &["broker.transaction.partition.verification.enable"],
        rule: false,
        reach: Reach::Transactions,
        apply: |era| era.broker.transaction_partition_verification_enable = true,
    },
    Step {
        since: v(3, 7),
        change: "Strict min ISR: a leader whose ISR is below `min.insync.replicas` does not advance its high watermark",
        source: "KAFKA-15583",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.strict_min_isr = true,
    },
    Step {
        since: v(3, 7),
        change: "The leader-epoch checkpoint rewritten after a truncation is no longer fsynced as it is written, only renamed into place, and a power loss can bring back entries the truncation removed; a new epoch is still fsynced at once",
        source: "KAFKA-15046",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.epoch_truncation_fsync = false,
    },
    Step {
        since: v(3, 8),
        change: "The leader-epoch checkpoint rewritten after a truncation is fsynced again, by the scheduler rather than under the log's lock",
        source: "KAFKA-16541",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.epoch_truncation_fsync = true,
    },
    Step {
        since: v(3, 8),
        change: "Partition verification refuses a batch whose partition is not in the producer's transaction with TRANSACTION_ABORTABLE, the error new clients abort on (an older client still gets INVALID_TXN_STATE); the producer aborts either way",
        source: "KIP-890 (TRANSACTION_ABORTABLE)",
        defaults: &[],
        rule: true,
        reach: Reach::Transactions,
        apply: |era| era.broker.rules.transaction_abortable = true,
    },
    Step {
        since: v(3, 9),
        change: "The KRaft controller honours `unclean.leader.election.enable`",
        source: "KAFKA-12670",
        defaults: &[],
        rule: true,
        reach: Reach::UncleanElection,
        apply: |era| era.broker.rules.unclean_election_honoured = true,
    },
    Step {
        since: v(4, 0),
        change: "`linger.ms` defaults to 5",
        source: "KIP-1030",
        defaults: &["producer.linger.ms"],
        rule: false,
        reach: Reach::Every,
        apply: |era| era.producer.linger = ms(5),
    },
    Step {
        since: v(4, 0),
        change: "Transaction protocol v2 (`transaction.version` 2, on by default for a new cluster): ending a transaction bumps the producer epoch, so the markers carry the next epoch and fence whatever the ended transaction's producer still had in flight (a late batch gets INVALID_PRODUCER_EPOCH); EndTxn v5 answers with the new epoch and the producer restarts its sequences; a partition joins the transaction when its leader adds it on the transaction's first batch there (the client sends no AddPartitionsToTxn, even with `transaction.partition.verification.enable` off), and the group's offsets partition when the group coordinator adds it on TxnOffsetCommit v5 (no AddOffsetsToTxn); after an abortable error the abort's own bump replaces the client's InitProducerId; `__transaction_state` values are written in version 1",
        source: "KIP-890 part 2, KAFKA-14562, KAFKA-14563",
        defaults: &[],
        rule: true,
        reach: Reach::Transactions,
        apply: |era| {
            era.broker.rules.transaction_version_2 = true;
            era.producer.transaction_version_2 = true;
        },
    },
    Step {
        since: v(4, 1),
        change: "Eligible leader replicas (KIP-966 part 1) on by default for new clusters: who leaves the ISR while it is below `min.insync.replicas` stays eligible to lead an empty ISR, unless it restarts without a clean shutdown",
        source: "KIP-966",
        defaults: &[],
        rule: true,
        reach: Reach::Every,
        apply: |era| era.broker.rules.eligible_leader_replicas = true,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_release_is_the_config_default() {
        let era = Release::NEWEST.era();
        assert_eq!(era.broker, BrokerConfig::default());
        assert_eq!(era.producer, ProducerConfig::default());
    }

    #[test]
    fn known_releases_and_steps_are_in_order() {
        assert!(KNOWN.windows(2).all(|w| w[0] < w[1]));
        assert!(STEPS.windows(2).all(|w| w[0].since <= w[1].since));
        for step in STEPS {
            assert!(KNOWN.contains(&step.since), "{}", step.since);
            assert!(step.since > Release::OLDEST, "0.10 is the base, not a step");
        }
    }

    #[test]
    fn parse_accepts_known_minor_releases_only() {
        assert_eq!(Release::parse("2.8"), Ok(v(2, 8)));
        assert_eq!(Release::parse("0.10"), Ok(v(0, 10)));
        let unknown = Release::parse("2.9").unwrap_err();
        assert!(
            unknown.starts_with("unknown Kafka release `2.9`; the releases are: 0.10, 0.11, 1.0"),
            "{unknown}"
        );
        assert!(Release::parse("9.0")
            .unwrap_err()
            .contains("newer than the newest"));
        for bad in ["3", "3.9.1", "v3.9", "3.", ".9", "3.x", ""] {
            let error = Release::parse(bad).unwrap_err();
            assert!(error.starts_with("invalid Kafka release"), "{bad}: {error}");
        }
    }

    #[test]
    fn each_era_takes_the_latest_step_at_or_below_it() {
        let era = |major, minor| v(major, minor).era();
        assert_eq!(
            era(0, 10).broker.replication_truncation,
            Truncation::HighWatermark
        );
        assert!(era(0, 10).broker.unclean_leader_election_enable);
        assert_eq!(era(0, 10).producer.acks, Acks::Leader);
        assert_eq!(era(0, 10).producer.idempotence_max_in_flight, None);
        assert_eq!(
            era(0, 11).broker.replication_truncation,
            Truncation::LeaderEpochSingleRound
        );
        assert_eq!(era(0, 11).producer.idempotence_max_in_flight, Some(1));
        assert_eq!(era(1, 1).producer.idempotence_max_in_flight, Some(5));
        assert_eq!(
            era(1, 1).broker.replication_truncation,
            Truncation::LeaderEpochSingleRound
        );
        assert_eq!(
            era(2, 0).broker.replication_truncation,
            Truncation::LeaderEpoch
        );
        assert_eq!(era(2, 0).producer.retries, 0);
        assert_eq!(era(2, 1).producer.retries, i32::MAX as u32);
        assert_eq!(era(2, 4).broker.replica_lag_time_max, ms(10_000));
        assert_eq!(era(2, 5).broker.replica_lag_time_max, ms(30_000));
        assert!(!era(2, 7).broker.rules.diverging_epoch_in_fetch);
        assert!(era(2, 8).broker.rules.diverging_epoch_in_fetch);
        assert_eq!(era(2, 8).producer.acks, Acks::Leader);
        assert!(!era(2, 8).producer.enable_idempotence);
        assert_eq!(era(3, 0).producer.acks, Acks::All);
        assert!(era(3, 0).producer.idempotent());
        assert!(era(3, 2).broker.rules.unclean_election_honoured);
        assert!(!era(3, 3).broker.rules.unclean_election_honoured);
        assert_eq!(era(3, 2).broker.broker_session_timeout, ms(18_000));
        assert_eq!(era(3, 3).broker.broker_session_timeout, ms(9_000));
        assert!(!era(3, 6).broker.rules.strict_min_isr);
        assert!(era(3, 7).broker.rules.strict_min_isr);
        assert!(!era(3, 8).broker.rules.unclean_election_honoured);
        assert!(era(3, 9).broker.rules.unclean_election_honoured);
        assert_eq!(era(3, 9).producer.linger, Duration::ZERO);
        assert_eq!(era(4, 0).producer.linger, ms(5));
        assert!(!era(4, 0).broker.rules.eligible_leader_replicas);
        assert!(!era(3, 9).broker.rules.transaction_version_2);
        assert!(era(4, 0).broker.rules.transaction_version_2);
        assert!(
            !era(3, 9).producer.transaction_version_2 && era(4, 0).producer.transaction_version_2
        );
        assert!(era(4, 1).broker.rules.eligible_leader_replicas);
        let rules = |major, minor| era(major, minor).broker.rules;
        assert!(!rules(1, 1).truncate_at_every_epoch && rules(2, 0).truncate_at_every_epoch);
        assert!(!rules(1, 1).out_of_range_never_fatal && rules(2, 0).out_of_range_never_fatal);
        assert!(!rules(2, 0).fetch_current_leader_epoch && rules(2, 1).fetch_current_leader_epoch);
        assert!(!era(2, 2).consumer.validate_positions && era(2, 3).consumer.validate_positions);
        assert!(
            !era(2, 4).consumer.require_stable_offsets && era(2, 5).consumer.require_stable_offsets
        );
        let scan = |major, minor| {
            era(major, minor)
                .broker
                .transaction_abort_timed_out_transaction_cleanup_interval
        };
        assert_eq!((scan(2, 4), scan(2, 5)), (ms(60_000), ms(10_000)));
        assert!(
            !rules(3, 2).isr_members_must_be_eligible && rules(3, 3).isr_members_must_be_eligible
        );
        assert!(!rules(3, 4).isr_broker_epochs && rules(3, 5).isr_broker_epochs);
        assert!(!rules(1, 1).leader_epoch_on_election && rules(2, 0).leader_epoch_on_election);
        assert!(!rules(1, 1).index_by_last_offset && rules(2, 0).index_by_last_offset);
        assert!(!rules(2, 8).dir_fsync && rules(3, 0).dir_fsync);
        assert!(rules(3, 6).epoch_truncation_fsync);
        assert!(!rules(3, 7).epoch_truncation_fsync && rules(3, 8).epoch_truncation_fsync);
    }

    #[test]
    fn a_step_undone_between_two_releases_cancels_with_the_one_that_undoes_it() {
        let sources = |from: Release, to: Release| -> Vec<(&str, &str)> {
            from.cancelling_steps(to)
                .iter()
                .map(|(a, b)| (a.source, b.source))
                .collect()
        };
        assert_eq!(
            sources(v(3, 6), v(3, 9)),
            vec![("KAFKA-15046", "KAFKA-16541")]
        );
        assert!(sources(v(3, 6), v(3, 7)).is_empty());
        assert!(sources(v(3, 7), v(3, 9)).is_empty());
        assert!(
            sources(Release::OLDEST, Release::NEWEST)
                .iter()
                .all(|pair| *pair == ("KAFKA-15046", "KAFKA-16541")),
            "a step overridden later (KIP-101 by KIP-279) is not undone"
        );
    }

    #[test]
    fn keys_newer_than_a_release_are_named_with_the_release_that_added_them() {
        assert_eq!(
            v(2, 0).lacks_key("producer", "delivery.timeout.ms"),
            Some((v(2, 1), "KIP-91"))
        );
        assert_eq!(v(2, 1).lacks_key("producer", "delivery.timeout.ms"), None);
        assert_eq!(
            v(0, 10).lacks_key("producer", "enable.idempotence"),
            Some((v(0, 11), "KIP-98"))
        );
        assert_eq!(v(0, 10).lacks_key("producer", "acks"), None);
    }

    #[test]
    fn history_lists_the_steps_up_to_a_release() {
        assert_eq!(Release::OLDEST.history().count(), 0);
        assert_eq!(v(0, 11).history().count(), 4);
        assert_eq!(Release::NEWEST.history().count(), STEPS.len());
    }
}
