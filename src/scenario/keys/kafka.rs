//! Kafka's sections of the key registry: `[broker]`, `[producer]`, `[consumer]` and a
//! topic's overrides, with Kafka's names, defaults (from the `Default` impls and release
//! eras of `config`) and meanings; and Kafka's part of `hightide config`.

use super::{render, wrong_type, Key, Kind, Notes, Section, INT_MAX, LONG_MAX};
use crate::config::kafka::{
    Acks, BrokerConfig, ConsumerConfig, Era, IsolationLevel, OffsetReset, ProducerConfig, Release,
    StepReach, TopicConfig, Truncation,
};
use crate::scenario::model::Settings;
use crate::scenario::node::{Node, Value};
use crate::scenario::Error;
use std::fmt::Write as _;
use std::time::Duration;

/// A Kafka `.ms` key: an integer of milliseconds in TOML, a `Duration` in the config.
macro_rules! millis {
    ($name:literal, $field:ident, $min:expr, $max:expr, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Int {
                min: $min,
                max: $max,
                get: |c| c.$field.as_millis() as i64,
                set: |c, v| c.$field = Duration::from_millis(v.unsigned_abs()),
            },
        }
    };
}

/// `retention.ms`: milliseconds, or `-1` for "keep forever" (`None`).
fn retention(millis: i64) -> Option<Duration> {
    u64::try_from(millis).ok().map(Duration::from_millis)
}

fn retention_millis(retention: Option<Duration>) -> i64 {
    retention.map_or(-1, |duration| duration.as_millis() as i64)
}

macro_rules! topic_millis {
    ($name:literal, $field:ident, $min:expr, $max:expr, $inherits:literal) => {
        Key {
            name: $name,
            meaning: concat!("This topic's `", $inherits, "`."),
            kind: Kind::OptInt {
                min: $min,
                max: $max,
                inherits: $inherits,
                set: |c, v| c.$field = Some(Duration::from_millis(v.unsigned_abs())),
            },
        }
    };
}

macro_rules! topic_int {
    ($name:literal, $field:ident as $ty:ty, $min:expr, $max:expr, $inherits:literal) => {
        Key {
            name: $name,
            meaning: concat!("This topic's `", $inherits, "`."),
            kind: Kind::OptInt {
                min: $min,
                max: $max,
                inherits: $inherits,
                set: |c, v| c.$field = Some(v as $ty),
            },
        }
    };
}

pub(crate) static BROKER: Section<BrokerConfig> = Section {
    name: "broker",
    title: "Kafka broker configuration (every broker)",
    keys: &[
        int!("min.insync.replicas", min_insync_replicas as u32, 1, INT_MAX,
            "With acks=all, the fewest in-sync replicas (leader included) that must have a write to acknowledge it; fewer and produce fails with NOT_ENOUGH_REPLICAS."),
        boolean!("unclean.leader.election.enable", unclean_leader_election_enable,
            "Let a replica outside the ISR become leader when no in-sync replica is left: availability over durability, acknowledged writes can be lost."),
        int!("log.flush.interval.messages", log_flush_interval_messages as u64, 1, LONG_MAX,
            "Messages a partition accumulates before the broker fsyncs its log; the default, never, leaves durability to replication and the OS flusher."),
        millis!("log.flush.interval.ms", log_flush_interval, 0, LONG_MAX,
            "Longest a message stays unflushed before the broker fsyncs its log (checked every log.flush.scheduler.interval.ms)."),
        millis!("log.flush.scheduler.interval.ms", log_flush_scheduler_interval, 0, LONG_MAX,
            "How often the broker checks whether a log is due for a flush by time."),
        millis!("log.flush.offset.checkpoint.interval.ms", log_flush_offset_checkpoint_interval, 0, INT_MAX,
            "How often the broker writes recovery-point-offset-checkpoint (below it, logs are known flushed and skip recovery)."),
        int!("log.segment.bytes", log_segment_bytes as u64, 14, INT_MAX,
            "Size at which a partition's active segment is closed and a new one rolled."),
        millis!("log.roll.ms", log_roll, 1, LONG_MAX,
            "Age at which the active segment is rolled even if it is not full."),
        int!("log.index.interval.bytes", log_index_interval_bytes as u64, 0, INT_MAX,
            "Bytes of log between two entries of the offset index."),
        int!("log.retention.bytes", log_retention_bytes as i64, -1, LONG_MAX,
            "Size a partition's log may reach before its oldest segments are deleted; -1: no limit."),
        Key {
            name: "log.retention.ms",
            meaning: "Age after which closed segments are deleted; -1: keep forever.",
            kind: Kind::Int {
                min: -1,
                max: LONG_MAX,
                get: |c| retention_millis(c.log_retention),
                set: |c, v| c.log_retention = retention(v),
            },
        },
        millis!("log.retention.check.interval.ms", log_retention_check_interval, 1, LONG_MAX,
            "How often the broker looks for segments to delete."),
        millis!("replica.lag.time.max.ms", replica_lag_time_max, 0, LONG_MAX,
            "A follower that has not caught up with the leader's log end for this long is removed from the ISR."),
        millis!("replica.fetch.wait.max.ms", replica_fetch_wait_max, 0, INT_MAX,
            "Longest a follower's fetch waits at the leader for new data."),
        int!("replica.fetch.max.bytes", replica_fetch_max_bytes as u64, 0, INT_MAX,
            "Bytes a follower asks for per partition in one fetch (at least one batch is always returned)."),
        int!("replica.fetch.min.bytes", replica_fetch_min_bytes as u64, 0, INT_MAX,
            "Bytes the leader waits to accumulate before answering a follower's fetch (or replica.fetch.wait.max.ms)."),
        millis!("replica.fetch.backoff.ms", replica_fetch_backoff, 0, INT_MAX,
            "How long a follower waits after a failed fetch before the next."),
        millis!("replica.socket.timeout.ms", replica_socket_timeout, 0, INT_MAX,
            "Timeout of a follower's fetch request to the leader."),
        millis!("replica.high.watermark.checkpoint.interval.ms", replica_high_watermark_checkpoint_interval, 1, LONG_MAX,
            "How often the broker writes every partition's high watermark to replication-offset-checkpoint."),
        millis!("broker.heartbeat.interval.ms", broker_heartbeat_interval, 1, INT_MAX,
            "How often a broker heartbeats to the controller (KRaft)."),
        millis!("broker.session.timeout.ms", broker_session_timeout, 1, INT_MAX,
            "A broker whose heartbeats stop this long is fenced: it leaves every ISR and loses its leaderships."),
        choice!("replication.truncation", replication_truncation: Truncation,
            "How a follower finds where its log diverges from a new leader's: \"leader-epoch\" (KIP-101 with KIP-279's repeated rounds, Kafka 2.0+), \"leader-epoch-single-round\" (KIP-101 alone, 0.11 to 1.1) or \"high-watermark\" (before 0.11; can lose or diverge data). Not a Kafka key: it follows `kafka`, and is settable for experiments."),
        millis!("group.initial.rebalance.delay.ms", group_initial_rebalance_delay, 0, INT_MAX,
            "How long the group coordinator holds an empty group's first rebalance for more members, again for each that joins (KIP-134)."),
        int!("offsets.topic.num.partitions", offsets_topic_num_partitions as u32, 1, INT_MAX,
            "Partitions of __consumer_offsets; a group's offsets, and its coordinator, are on partition abs(hash(group.id)) % this."),
        int!("offsets.topic.replication.factor", offsets_topic_replication_factor as u32, 1, i16::MAX as i64,
            "Replicas of each __consumer_offsets partition; its commits are written with acks=all, so min.insync.replicas applies to them."),
        millis!("offsets.commit.timeout.ms", offsets_commit_timeout, 1, INT_MAX,
            "How long an offset commit waits for its record to be replicated before it fails (COORDINATOR_NOT_AVAILABLE)."),
        int!("transaction.state.log.num.partitions", transaction_state_log_num_partitions as u32, 1, INT_MAX,
            "Partitions of __transaction_state; a transactional id's state, and its transaction coordinator, are on partition abs(hash(transactional.id)) % this."),
        int!("transaction.state.log.replication.factor", transaction_state_log_replication_factor as u32, 1, i16::MAX as i64,
            "Replicas of each __transaction_state partition; the coordinator writes every transition with acks=all."),
        int!("transaction.state.log.min.isr", transaction_state_log_min_isr as u32, 1, INT_MAX,
            "min.insync.replicas of __transaction_state: below it the coordinator cannot write, and answers COORDINATOR_NOT_AVAILABLE."),
        millis!("transaction.max.timeout.ms", transaction_max_timeout, 1, INT_MAX,
            "The longest transaction.timeout.ms a producer may ask for (INVALID_TRANSACTION_TIMEOUT above it)."),
        millis!("transaction.abort.timed.out.transaction.cleanup.interval.ms", transaction_abort_timed_out_transaction_cleanup_interval, 1, INT_MAX,
            "How often the transaction coordinator aborts (and fences) transactions open longer than their transaction.timeout.ms."),
        boolean!("transaction.partition.verification.enable", transaction_partition_verification_enable,
            "Before a transactional batch starts a transaction on a partition, its leader asks the transaction coordinator whether the partition is in the producer's ongoing transaction, and refuses it (INVALID_TXN_STATE) if not (KIP-890 part 1, Kafka 3.6): a produce delayed past its transaction's abort can no longer hang the partition or join the next transaction."),
    ],
};

pub(crate) static PRODUCER: Section<ProducerConfig> = Section {
    name: "producer",
    title: "Kafka producer configuration (every producer)",
    keys: &[
        Key {
            name: "acks",
            meaning: "Replicas that must have a write before it is acknowledged: \"0\" none (no response), \"1\" the leader, \"all\" (or \"-1\") every in-sync replica, at least min.insync.replicas.",
            kind: Kind::Other { set: set_acks, show: show_acks },
        },
        boolean!("enable.idempotence", enable_idempotence,
            "Brokers drop retried duplicates by producer id and sequence; needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5 (left unset while those do not hold, it is off, as in Kafka)."),
        int!("retries", retries as u32, 0, INT_MAX,
            "How many times a failed batch is resent (within delivery.timeout.ms)."),
        int!("max.in.flight.requests.per.connection", max_in_flight_requests_per_connection as u32, 1, INT_MAX,
            "Unacknowledged produce requests per broker connection; above 1 without idempotence, retries can reorder messages."),
        millis!("linger.ms", linger, 0, LONG_MAX,
            "How long the producer waits for more messages to fill a batch before sending it."),
        int!("batch.size", batch_size as u64, 0, INT_MAX,
            "Largest batch, in bytes, per partition."),
        millis!("delivery.timeout.ms", delivery_timeout, 0, INT_MAX,
            "Upper bound on the time from send to success or failure, retries included; left unset, raised to linger.ms + request.timeout.ms if below it (as Kafka does)."),
        millis!("request.timeout.ms", request_timeout, 0, INT_MAX,
            "How long the producer waits for a response before it retries or fails the request."),
        millis!("retry.backoff.ms", retry_backoff, 0, LONG_MAX,
            "How long the producer waits before retrying a failed request."),
        millis!("metadata.max.age.ms", metadata_max_age, 0, LONG_MAX,
            "Metadata (who leads what) is refreshed at least this often, even without errors."),
        Key {
            name: "transactional.id",
            meaning: "Makes the producers transactional: producer-N is `<this>-N`, sends `[workload] transaction_messages` records per transaction and commits (aborting after an abortable error); implies enable.idempotence.",
            kind: Kind::Other { set: set_transactional_id, show: |c| c.transactional_id.as_ref().map_or_else(|| "unset".to_owned(), |id| format!("{id:?}")) },
        },
        millis!("transaction.timeout.ms", transaction_timeout, 1, INT_MAX,
            "How long the transaction coordinator lets a transaction stay open before it aborts it (and fences the producer's epoch); at most the broker's transaction.max.timeout.ms."),
    ],
};

fn set_transactional_id(config: &mut ProducerConfig, node: &Node) -> Result<(), Error> {
    let Value::String(id) = &node.value else {
        return Err(wrong_type("transactional.id", "a string", node));
    };
    if id.is_empty() {
        return Err(Error::at(
            &node.span,
            "`transactional.id` is empty: Kafka needs a non-empty id".to_owned(),
        ));
    }
    config.transactional_id = Some(id.clone());
    Ok(())
}

/// The forms of `acks` Kafka reads, as docs/scenarios.md lists them.
const ACKS_FORMS: &str = "\"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1";

fn set_acks(config: &mut ProducerConfig, node: &Node) -> Result<(), Error> {
    let acks = match &node.value {
        Value::String(text) => match text.as_str() {
            "0" => Some(Acks::None),
            "1" => Some(Acks::Leader),
            "all" | "-1" => Some(Acks::All),
            _ => None,
        },
        Value::Integer(0) => Some(Acks::None),
        Value::Integer(1) => Some(Acks::Leader),
        Value::Integer(-1) => Some(Acks::All),
        Value::Integer(_) => None,
        _ => return Err(wrong_type("acks", ACKS_FORMS, node)),
    };
    let shown = match &node.value {
        Value::String(text) => text.clone(),
        Value::Integer(value) => value.to_string(),
        _ => String::new(),
    };
    config.acks = acks.ok_or_else(|| {
        Error::at(
            &node.span,
            format!("invalid `acks` `{shown}`: expected {ACKS_FORMS}"),
        )
    })?;
    Ok(())
}

fn show_acks(config: &ProducerConfig) -> String {
    format!("\"{}\"", config.acks)
}

pub(crate) static CONSUMER: Section<ConsumerConfig> = Section {
    name: "consumer",
    title: "Kafka consumer configuration (the consumers of [workload] and the final read)",
    keys: &[
        millis!(
            "fetch.max.wait.ms",
            fetch_max_wait,
            0,
            INT_MAX,
            "Longest the broker holds a fetch waiting for fetch.min.bytes of data."
        ),
        int!(
            "fetch.min.bytes",
            fetch_min_bytes as u64,
            0,
            INT_MAX,
            "Bytes the broker waits to accumulate before answering a fetch."
        ),
        int!(
            "max.partition.fetch.bytes",
            max_partition_fetch_bytes as u64,
            0,
            INT_MAX,
            "Bytes returned per partition per fetch (at least one batch is always returned)."
        ),
        millis!(
            "request.timeout.ms",
            request_timeout,
            0,
            INT_MAX,
            "How long the consumer waits for a response before it retries."
        ),
        millis!(
            "retry.backoff.ms",
            retry_backoff,
            0,
            LONG_MAX,
            "How long the consumer waits before retrying a failed request."
        ),
        boolean!(
            "enable.auto.commit",
            enable_auto_commit,
            "A group member commits the offsets of its last poll every auto.commit.interval.ms, from within poll ([workload] commit = \"auto\" sets it)."
        ),
        millis!(
            "auto.commit.interval.ms",
            auto_commit_interval,
            0,
            INT_MAX,
            "How often an auto-committing member commits."
        ),
        choice!("auto.offset.reset", auto_offset_reset: OffsetReset,
            "Where a member starts on a partition its group has no valid committed offset for: \"earliest\", \"latest\" or \"none\" (an error)."),
        millis!(
            "session.timeout.ms",
            session_timeout,
            1,
            INT_MAX,
            "The coordinator drops a member it has not heard a heartbeat from for this long."
        ),
        millis!(
            "heartbeat.interval.ms",
            heartbeat_interval,
            1,
            INT_MAX,
            "How often a member heartbeats to its coordinator (from its own thread, KIP-62)."
        ),
        millis!(
            "max.poll.interval.ms",
            max_poll_interval,
            1,
            INT_MAX,
            "Longest between polls before a member leaves its group; also its rebalance timeout."
        ),
        int!(
            "max.poll.records",
            max_poll_records as u32,
            1,
            INT_MAX,
            "Records one poll returns at most: a group member processes them, then polls again."
        ),
        boolean!(
            "check.crcs",
            check_crcs,
            "Check the CRC-32C of every fetched batch; off, rotten bytes inside a well-formed batch reach the reader as data (a batch or record it cannot parse still stops it)."
        ),
        choice!("isolation.level", isolation_level: IsolationLevel,
            "\"read_uncommitted\" reads up to the high watermark, aborted transactions included; \"read_committed\" reads only up to the last stable offset and drops the batches of aborted transactions."),
    ],
};

pub(crate) static TOPIC: Section<TopicConfig> = Section {
    name: "topic config",
    title: "Per-topic overrides: [cluster] topics = [{ name = ..., config = { \"min.insync.replicas\" = 2 } }]",
    keys: &[
        topic_int!("min.insync.replicas", min_insync_replicas as u32, 1, INT_MAX, "min.insync.replicas"),
        Key {
            name: "unclean.leader.election.enable",
            meaning: "This topic's `unclean.leader.election.enable`.",
            kind: Kind::OptBool {
                inherits: "unclean.leader.election.enable",
                set: |c, v| c.unclean_leader_election_enable = Some(v),
            },
        },
        topic_int!("flush.messages", flush_messages as u64, 1, LONG_MAX, "log.flush.interval.messages"),
        topic_millis!("flush.ms", flush_interval, 0, LONG_MAX, "log.flush.interval.ms"),
        topic_int!("segment.bytes", segment_bytes as u64, 14, INT_MAX, "log.segment.bytes"),
        topic_millis!("segment.ms", roll, 1, LONG_MAX, "log.roll.ms"),
        topic_int!("retention.bytes", retention_bytes as i64, -1, LONG_MAX, "log.retention.bytes"),
        Key {
            name: "retention.ms",
            meaning: "This topic's `log.retention.ms`.",
            kind: Kind::OptInt {
                min: -1,
                max: LONG_MAX,
                inherits: "log.retention.ms",
                set: |c, v| c.retention = Some(retention(v)),
            },
        },
        topic_int!("index.interval.bytes", index_interval_bytes as u64, 0, INT_MAX, "log.index.interval.bytes"),
    ],
};

/// A topic key's broker key, or a broker key's topic key (`segment.bytes` and
/// `log.segment.bytes`): what a key set in the other's table stands for.
pub(crate) fn topic_counterpart(key: &str) -> Option<&'static str> {
    TOPIC.keys.iter().find_map(|topic| {
        let broker = topic.inherits()?;
        if topic.name == key {
            Some(broker)
        } else {
            (broker == key).then_some(topic.name)
        }
    })
}

/// Kafka's part of `hightide config`: `[cluster] kafka`, the history of Kafka's changes up
/// to `release`, and the Kafka sections with their defaults in that release.
pub(super) fn reference(out: &mut String, release: Release) {
    let era = release.era();
    let _ = writeln!(
        out,
        "[cluster]\nkafka = \"{release}\"\n    The Kafka release whose rules and defaults apply: {} to {} (default {}); keys set explicitly win.\n",
        Release::OLDEST,
        Release::NEWEST,
        Release::NEWEST
    );
    let _ = writeln!(
        out,
        "# Kafka {release}: 0.10's rules and defaults (no leader epochs, unclean elections on, acks=1 without retries, no idempotent producer, a ZooKeeper controller, whose broker znode keeps a restarted broker out until the old session expires) and these changes:"
    );
    for step in release.history() {
        let _ = writeln!(
            out,
            "#   {:<5} {} ({})",
            step.since.to_string(),
            step.change,
            step.source
        );
    }
    out.push('\n');
    let lacks = |section: &str, key: &str| {
        let (added, source) = era.release.lacks_key(section, key)?;
        Some(format!(
            "not in Kafka {}, it came in {added} ({source})",
            era.release
        ))
    };
    // A topic key shows the broker key it inherits, with that key's value in the release.
    let inherited = |name: &'static str| {
        let value = BROKER
            .find(name)
            .map(|key| key.show(&era.broker, &|_| String::new()))
            .unwrap_or_default();
        format!("[broker] {name} ({value})")
    };
    let meaning = |section: &str, key: &str| meaning_in(&era, section, key);
    let notes = Notes {
        lacks: &lacks,
        inherited: &inherited,
        meaning: &meaning,
    };
    render(out, &BROKER, "[broker]", &era.broker, &notes);
    render(out, &PRODUCER, "[producer]", &era.producer, &notes);
    render(out, &CONSUMER, "[consumer]", &era.consumer, &notes);
    render(
        out,
        &TOPIC,
        "# topic config",
        &TopicConfig::default(),
        &notes,
    );
}

/// What a key means in `era`'s release where the tables' meaning, the newest release's, is
/// wrong for it: before KRaft's controller (3.3) the broker's session and heartbeat are
/// ZooKeeper's, KRaft ignored unclean elections until 3.9, a send had no delivery timeout
/// before 2.1, and an idempotent producer allowed one request in flight in 0.11.
fn meaning_in(era: &Era, section: &str, key: &str) -> Option<String> {
    let rules = era.broker.rules;
    let meaning = match (section, key) {
        ("broker", "broker.session.timeout.ms") if !rules.kraft_controller => {
            "ZooKeeper's session (`zookeeper.session.timeout.ms`): this release's controller is ZooKeeper's, and a broker whose session expires, no ping for this long, is dead to it: it leaves every ISR and loses its leaderships.".to_owned()
        }
        ("broker", "broker.heartbeat.interval.ms") if !rules.kraft_controller => {
            "How often a broker's ZooKeeper client pings to keep its session: a third of the session timeout, as ZooKeeper's client does.".to_owned()
        }
        ("broker", "unclean.leader.election.enable") if !rules.unclean_election_honoured => {
            "Let a replica outside the ISR become leader when no in-sync replica is left; this release's KRaft controller ignores it and never elects one (honoured from 3.9, KAFKA-12670).".to_owned()
        }
        ("producer", "retries") if !era.release.has_delivery_timeout() => {
            "How many times a failed batch is resent; nothing else bounds its attempts, and it expires only while it waits in the accumulator, request.timeout.ms after it was due to leave (delivery.timeout.ms came in 2.1, KIP-91).".to_owned()
        }
        ("producer", "enable.idempotence") => {
            let max = era.producer.idempotence_max_in_flight?;
            if Some(max) == ProducerConfig::default().idempotence_max_in_flight {
                return None;
            }
            format!("Brokers drop retried duplicates by producer id and sequence; needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= {max} in this release (5 from 1.0, KAFKA-5494).")
        }
        _ => return None,
    };
    Some(meaning)
}

/// Each step of the release `settings` models, with whether it can change runs of these
/// settings: not if they lack what it reaches (a consumer group, an idempotent producer,
/// unclean elections), nor if the step only changes defaults and every one of those keys
/// is swept (`swept`, as paths: `"producer.acks"`) or set away from the release's default.
/// A key set explicitly to the default counts as not set: the step is kept.
pub(crate) fn release_steps(settings: &Settings, swept: &[&str]) -> Vec<StepReach> {
    let release = settings.cluster.kafka;
    let era = release.era();
    let consumers = settings.workload.consumers > 0;
    let groups = consumers && settings.workload.group.is_some();
    let run = (&settings.broker, &settings.producer, &settings.consumer);
    let default = (&era.broker, &era.producer, &era.consumer);
    release
        .history()
        .map(|step| {
            let missed = match step.reach.missed_by(
                consumers,
                groups,
                settings.transactional(),
                &settings.broker,
                &settings.producer,
            ) {
                Some(lack) => Some(format!("these runs {lack}")),
                None if step.rule => None,
                None => step
                    .defaults
                    .iter()
                    .all(|path| swept.contains(path) || shown(path, run) != shown(path, default))
                    .then(|| {
                        let names: Vec<&str> = step
                            .defaults
                            .iter()
                            .map(|path| path.split_once('.').map_or(*path, |(_, key)| key))
                            .collect();
                        format!("these runs set {}", names.join(" and "))
                    }),
            };
            StepReach {
                since: step.since,
                source: step.source,
                missed,
            }
        })
        .collect()
}

type Configs<'a> = (&'a BrokerConfig, &'a ProducerConfig, &'a ConsumerConfig);

#[cfg(test)]
fn configs(era: &Era) -> Configs<'_> {
    (&era.broker, &era.producer, &era.consumer)
}

/// A Kafka key's value as `hightide config` prints it, by sweep path (`"producer.acks"`).
fn shown(path: &str, (broker, producer, consumer): Configs) -> Option<String> {
    let (section, key) = path.split_once('.')?;
    let inherited = |_: &'static str| String::new();
    match section {
        "broker" => BROKER.find(key).map(|k| k.show(broker, &inherited)),
        "producer" => PRODUCER.find(key).map(|k| k.show(producer, &inherited)),
        "consumer" => CONSUMER.find(key).map(|k| k.show(consumer, &inherited)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{every_key_default_reads_back, names_are_unique};
    use super::*;

    fn node(value: Value) -> Node {
        Node { span: 3..4, value }
    }

    #[test]
    fn printed_defaults_are_the_defaults() {
        every_key_default_reads_back(&BROKER, BrokerConfig::default);
        every_key_default_reads_back(&PRODUCER, ProducerConfig::default);
        every_key_default_reads_back(&CONSUMER, ConsumerConfig::default);
    }

    #[test]
    fn key_names_are_unique_per_section() {
        names_are_unique(&BROKER);
        names_are_unique(&PRODUCER);
        names_are_unique(&CONSUMER);
        names_are_unique(&TOPIC);
    }

    #[test]
    fn topic_keys_inherit_real_broker_keys() {
        for key in TOPIC.keys {
            let inherits = key
                .inherits()
                .expect("every topic key inherits a broker key");
            assert!(BROKER.find(inherits).is_some(), "{inherits}");
        }
    }

    #[test]
    fn topic_and_broker_keys_are_each_others_counterparts() {
        assert_eq!(
            topic_counterpart("segment.bytes"),
            Some("log.segment.bytes")
        );
        assert_eq!(
            topic_counterpart("log.segment.bytes"),
            Some("segment.bytes")
        );
        assert_eq!(
            topic_counterpart("flush.messages"),
            Some("log.flush.interval.messages")
        );
        assert_eq!(topic_counterpart("acks"), None);
    }

    /// The meaning `hightide config --kafka X.Y` prints under the key that `line` starts.
    fn meaning_of<'a>(text: &'a str, line: &str) -> &'a str {
        let mut lines = text.lines().skip_while(|l| !l.starts_with(line));
        lines.next().expect(line);
        lines.next().expect("a meaning").trim()
    }

    /// A ZooKeeper-era release's keys are described as that release had them: no KRaft
    /// wording before 3.3, its unclean elections ignored by KRaft until 3.9, no delivery
    /// timeout before 2.1, one idempotent request in flight in 0.11.
    #[test]
    fn descriptions_follow_the_release() {
        let release = |text| Release::parse(text).unwrap();
        for zookeeper in ["0.10", "2.8", "3.2"] {
            let text = super::super::config_reference(release(zookeeper));
            assert!(!text.contains("KRaft"), "{zookeeper}:\n{text}");
            assert!(
                meaning_of(&text, "\"broker.session.timeout.ms\"")
                    .starts_with("ZooKeeper's session (`zookeeper.session.timeout.ms`)"),
                "{zookeeper}"
            );
            assert!(meaning_of(&text, "\"broker.heartbeat.interval.ms\"")
                .starts_with("How often a broker's ZooKeeper client pings"));
        }
        let kraft = super::super::config_reference(release("3.3"));
        assert!(meaning_of(&kraft, "\"broker.heartbeat.interval.ms\"").ends_with("(KRaft)."));
        assert!(meaning_of(&kraft, "\"broker.session.timeout.ms\"")
            .starts_with("A broker whose heartbeats stop"));
        assert!(meaning_of(&kraft, "\"unclean.leader.election.enable\"")
            .ends_with("this release's KRaft controller ignores it and never elects one (honoured from 3.9, KAFKA-12670)."));
        let newest = super::super::config_reference(Release::NEWEST);
        assert_eq!(
            meaning_of(&newest, "\"unclean.leader.election.enable\""),
            BROKER
                .find("unclean.leader.election.enable")
                .unwrap()
                .meaning
        );
        let old = super::super::config_reference(release("2.0"));
        assert!(meaning_of(&old, "retries =").contains("nothing else bounds its attempts"));
        assert_eq!(
            meaning_of(&newest, "retries ="),
            PRODUCER.find("retries").unwrap().meaning
        );
        let first_idempotent = super::super::config_reference(release("0.11"));
        assert!(meaning_of(&first_idempotent, "\"enable.idempotence\"")
            .contains("max.in.flight.requests.per.connection <= 1 in this release"));
        assert_eq!(
            meaning_of(&newest, "\"enable.idempotence\""),
            PRODUCER.find("enable.idempotence").unwrap().meaning
        );
    }

    #[test]
    fn integers_are_range_checked() {
        let key = BROKER.find("min.insync.replicas").unwrap();
        let mut config = BrokerConfig::default();
        let err = key
            .apply(&mut config, &node(Value::Integer(0)))
            .unwrap_err();
        assert_eq!(
            err.message,
            "`min.insync.replicas` must be from 1 to 2147483647, found 0"
        );
        assert_eq!(err.span, Some(3..4));
        let err = key
            .apply(&mut config, &node(Value::String("2".into())))
            .unwrap_err();
        assert_eq!(
            err.message,
            "`min.insync.replicas` must be an integer, found a string"
        );
        key.apply(&mut config, &node(Value::Integer(2))).unwrap();
        assert_eq!(config.min_insync_replicas, 2);
    }

    #[test]
    fn acks_accepts_strings_and_integers() {
        let key = PRODUCER.find("acks").unwrap();
        let mut config = ProducerConfig::default();
        for (value, acks) in [
            (Value::String("0".into()), Acks::None),
            (Value::String("1".into()), Acks::Leader),
            (Value::String("all".into()), Acks::All),
            (Value::Integer(1), Acks::Leader),
            (Value::String("-1".into()), Acks::All),
            (Value::Integer(0), Acks::None),
            (Value::Integer(-1), Acks::All),
        ] {
            key.apply(&mut config, &node(value)).unwrap();
            assert_eq!(config.acks, acks);
        }
        let err = key
            .apply(&mut config, &node(Value::String("2".into())))
            .unwrap_err();
        assert_eq!(
            err.message,
            "invalid `acks` `2`: expected \"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1"
        );
        assert!(key.apply(&mut config, &node(Value::Integer(2))).is_err());
        let err = key
            .apply(&mut config, &node(Value::Boolean(true)))
            .unwrap_err();
        assert_eq!(
            err.message,
            "`acks` must be \"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1, found a boolean"
        );
    }

    /// Every key whose value a step changes, and no other, is in its `defaults`; a step
    /// that changes no key changes a rule.
    #[test]
    fn each_release_step_names_the_defaults_it_changes() {
        use crate::config::kafka::RELEASE_STEPS;
        let paths: Vec<String> = [("broker", BROKER.names()), ("producer", PRODUCER.names())]
            .into_iter()
            .chain([("consumer", CONSUMER.names())])
            .flat_map(|(section, names)| names.into_iter().map(move |n| format!("{section}.{n}")))
            .collect();
        for (index, step) in RELEASE_STEPS.iter().enumerate() {
            let (before, after) = Release::around_step(index);
            let changed: Vec<&str> = paths
                .iter()
                .filter(|path| shown(path, configs(&before)) != shown(path, configs(&after)))
                .map(String::as_str)
                .collect();
            let mut declared = step.defaults.to_vec();
            declared.sort_unstable();
            let mut changed = changed;
            changed.sort_unstable();
            assert_eq!(changed, declared, "{}", step.source);
            assert!(step.rule || !step.defaults.is_empty(), "{}", step.source);
            if before.broker.rules != after.broker.rules
                || before.producer.idempotence_max_in_flight
                    != after.producer.idempotence_max_in_flight
                || before.consumer.validate_positions != after.consumer.validate_positions
            {
                assert!(step.rule, "{} changes a rule", step.source);
            }
        }
    }

    /// A producer-only sweep without groups: the group steps, and the step whose defaults
    /// it sets, cannot change its runs; the controller's step can.
    #[test]
    fn release_steps_say_which_can_change_a_run() {
        let scenario = crate::scenario::parse(
            "name = \"s\"\nduration = \"1s\"\n[cluster]\nkafka = \"3.9\"\nbrokers = 3\n\
             topics = [{ name = \"t\", partitions = 1, replication_factor = 3 }]\n\
             [producer]\nlinger.ms = 7\n",
            std::path::Path::new("s.toml"),
        )
        .unwrap();
        let settings = &scenario.variants[0].settings;
        let steps = release_steps(settings, &["producer.acks", "producer.enable.idempotence"]);
        let missed = |source: &str| {
            steps
                .iter()
                .find(|s| s.source == source)
                .unwrap_or_else(|| panic!("{source}"))
                .missed
                .clone()
        };
        assert_eq!(
            missed("KIP-735").as_deref(),
            Some("these runs have no consumer group")
        );
        assert_eq!(
            missed("KIP-134").as_deref(),
            Some("these runs have no consumer group")
        );
        assert_eq!(
            missed("KIP-679, KAFKA-13598").as_deref(),
            Some("these runs set acks and enable.idempotence")
        );
        assert_eq!(
            missed("KAFKA-12670").as_deref(),
            Some("these runs keep unclean leader election off")
        );
        assert_eq!(missed("KIP-833, KIP-631"), None);
        assert_eq!(missed("KIP-101"), None);
        assert!(
            steps.iter().all(|s| s.source != "KIP-1030"),
            "4.0 is after 3.9"
        );
        let unswept = release_steps(settings, &[]);
        let kip_679 = unswept
            .iter()
            .find(|s| s.source.starts_with("KIP-679"))
            .unwrap();
        assert_eq!(kip_679.missed, None, "acks is at 3.9's default");
    }
}
