//! Scenario files: the reference's full example parses into the settings it describes,
//! variants and fault sets resolve, and every class of bad input gives one clear error that
//! names the file, line and column.

use hightide::check::{Comparison, Count, Expectation};
use hightide::config::kafka::{Acks, Truncation, NEVER};
use hightide::os::disk::PowerLossModel;
use hightide::scenario::model::{
    Arrivals, CorruptRegion, FaultAction, NemesisAction, OnError, Scenario, Target,
};
use hightide::scenario::write::{standalone, Standalone};
use hightide::scenario::{
    config_reference, load, parse, parse_seeds, parse_with, Overrides, ScenarioError,
};
use hightide::types::{HostName, TopicPartition};
use proptest::prelude::*;
use std::path::Path;
use std::time::Duration;

/// The settings of the full example of docs/scenarios.md ("Every section at once"), with
/// comments of its own.
const EXAMPLE: &str = r#"
name = "acks=1 loses acknowledged writes when the leader loses power"
description = """
The leader acknowledges a write as soon as it is in its own page cache. It loses power
before the followers fetch it; a follower becomes leader without those messages.
"""
seeds = 20                  # seeds 1 to 20; or a list [3, 17, 42]; or "100..200" (100 to 199)
duration = "30s"            # simulated time of the workload phase
heal = "30s"                # after it: all faults lifted, all hosts up, settle, final read

[cluster]
brokers = 3                 # hosts broker-1 .. broker-3, plus the host controller
kafka = "4.1"               # the Kafka release whose rules and defaults apply (newest by default):
                            # "0.10", "0.11", "2.0", "2.8", "3.9", "4.0", "4.1", ...
topics = [
  { name = "orders", partitions = 1, replication_factor = 3 },
  # per-topic overrides: config = { "min.insync.replicas" = 2 }
]

[broker]                    # Kafka broker configuration, Kafka's names and defaults
"min.insync.replicas" = 1
"unclean.leader.election.enable" = false
"log.flush.interval.messages" = 9223372036854775807   # never: only the OS writes back
"replica.lag.time.max.ms" = 10000
"log.segment.bytes" = 1048576
"replication.truncation" = "leader-epoch"    # or "high-watermark" (pre-KIP-101 rule)

[producer]                  # Kafka producer configuration
acks = "1"                  # "0" | "1" | "all" (also "-1")
"enable.idempotence" = false
retries = 5
"max.in.flight.requests.per.connection" = 5
"linger.ms" = 5
"batch.size" = 16384
"delivery.timeout.ms" = 30000

[workload]
producers = 2               # hosts producer-1, producer-2
topic = "orders"
rate = 500                  # sends per simulated second, per producer
messages = 10000            # stop after this many sends in all (or at `duration`)
keys = 100                  # distinct keys; 0 = null keys (sticky partitioner)
value_bytes = 64
consumers = 1               # hosts consumer-1..: read during the run (dirty-read check)

[disk]                      # the simulated disk of every broker and the controller
writeback = "5s"            # OS flusher interval (dirty_writeback_centisecs)
dirty_expire = "30s"        # pages dirty this long are written back (dirty_expire_centisecs)
fsync_latency = "2ms"
power_loss = "random-writeback"   # "drop-unflushed" | "random-writeback" | "torn-tail"

[network]
latency = { min = "1ms", max = "5ms" }

[[faults]]
at = "10s"
action = "power-loss"
target = "leader:orders/0"  # resolved when the fault fires

[[faults]]
at = "20s"
action = "restart"
target = "crashed"          # every host stopped by an earlier fault

[expect]                    # must hold for every seed
duplicates = 0
divergent = 0

[expect_some]               # must hold for at least one seed of the set
lost = "> 0"
"#;

/// The smallest valid scenario; bad-input tests add one mistake to it.
const MINIMAL: &str = r#"duration = "30s"
[cluster]
brokers = 3
topics = [{ name = "orders", partitions = 2, replication_factor = 3 }]
"#;

fn ok(text: &str) -> Scenario {
    match parse(text, Path::new("scenarios/test-file.toml")) {
        Ok(scenario) => scenario,
        Err(e) => panic!("{e}"),
    }
}

fn err(text: &str) -> ScenarioError {
    match parse(text, Path::new("s.toml")) {
        Ok(_) => panic!("parsed:\n{text}"),
        Err(e) => e,
    }
}

/// Assert the whole `path:line:column: message`.
fn assert_error(text: &str, expected: &str) {
    assert_eq!(err(text).to_string(), expected, "for:\n{text}");
}

/// `text`'s only variant, written back as `shrink` writes a file, unchanged.
fn written_back(text: &str) -> String {
    let scenario = ok(text);
    let variant = &scenario.variants[0];
    standalone(&Standalone {
        text,
        variant: &variant.name,
        original: &variant.settings,
        settings: &variant.settings,
        sets: &[],
        expect: &[],
        expect_some: &[],
        name: "written back",
        seed: 1,
        header: &[],
    })
    .expect("writes")
}

fn eq(count: Count, value: u64) -> Expectation {
    Expectation {
        count,
        comparison: Comparison::Eq,
        value,
    }
}

#[test]
fn the_example_parses_into_its_settings() {
    let scenario = ok(EXAMPLE);
    assert_eq!(
        scenario.name,
        "acks=1 loses acknowledged writes when the leader loses power"
    );
    assert!(scenario
        .description
        .starts_with("The leader acknowledges a write"));
    assert_eq!(scenario.seeds, (1..=20).collect::<Vec<u64>>());
    assert_eq!(scenario.variants.len(), 1);
    let variant = &scenario.variants[0];
    assert_eq!(variant.name, "test-file");
    assert_eq!(variant.settings.cluster.kafka.to_string(), "4.1");
    assert!(variant.settings.broker.rules.eligible_leader_replicas);
    let s = &variant.settings;
    assert_eq!(s.duration, Duration::from_secs(30));
    assert_eq!(s.heal, Duration::from_secs(30));
    assert_eq!(s.cluster.brokers, 3);
    assert_eq!(s.cluster.topics.len(), 1);
    assert_eq!(s.cluster.topics[0].name, "orders");
    assert_eq!(s.cluster.topics[0].partitions, 1);
    assert_eq!(s.cluster.topics[0].replication_factor, 3);
    assert_eq!(s.cluster.topics[0].config, Default::default());
    assert_eq!(s.broker.min_insync_replicas, 1);
    assert!(!s.broker.unclean_leader_election_enable);
    assert_eq!(s.broker.log_flush_interval_messages, NEVER);
    assert_eq!(s.broker.replica_lag_time_max, Duration::from_millis(10_000));
    assert_eq!(s.broker.log_segment_bytes, 1_048_576);
    assert_eq!(s.broker.replication_truncation, Truncation::LeaderEpoch);
    // Untouched broker keys keep Kafka's defaults.
    assert_eq!(s.broker.replica_fetch_wait_max, Duration::from_millis(500));
    assert_eq!(s.broker.log_index_interval_bytes, 4096);
    assert_eq!(s.producer.acks, Acks::Leader);
    assert!(!s.producer.enable_idempotence);
    assert_eq!(s.producer.retries, 5);
    assert_eq!(s.producer.max_in_flight_requests_per_connection, 5);
    assert_eq!(s.producer.linger, Duration::from_millis(5));
    assert_eq!(s.producer.batch_size, 16_384);
    assert_eq!(s.producer.delivery_timeout, Duration::from_millis(30_000));
    assert_eq!(s.producer.request_timeout, Duration::from_millis(30_000));
    assert_eq!(s.consumer, Default::default());
    assert_eq!(s.workload.producers, 2);
    assert_eq!(s.workload.topic, "orders");
    assert_eq!(s.workload.rate, 500);
    assert_eq!(s.workload.messages, Some(10_000));
    assert_eq!(s.workload.keys, 100);
    assert_eq!(s.workload.value_bytes, 64);
    assert_eq!(s.workload.consumers, 1);
    assert_eq!(s.disk.writeback, Duration::from_secs(5));
    assert_eq!(s.disk.dirty_expire, Duration::from_secs(30));
    assert_eq!(s.disk.fsync_latency, Duration::from_millis(2));
    assert_eq!(s.disk.power_loss, PowerLossModel::RandomWriteback);
    assert_eq!(s.network.latency_min, Duration::from_millis(1));
    assert_eq!(s.network.latency_max, Duration::from_millis(5));
    assert_eq!(s.faults.len(), 2);
    assert_eq!(s.faults[0].at, Duration::from_secs(10));
    assert_eq!(
        s.faults[0].action,
        FaultAction::PowerLoss(Target::Leader(TopicPartition::new("orders", 0)))
    );
    assert_eq!(s.faults[1].at, Duration::from_secs(20));
    assert_eq!(s.faults[1].action, FaultAction::Restart(Target::Crashed));
    assert_eq!(s.nemesis, None);
    assert_eq!(
        variant.expect,
        with_default_zeros(vec![eq(Count::Duplicates, 0), eq(Count::Divergent, 0)])
    );
    assert_eq!(
        variant.expect_some,
        vec![Expectation {
            count: Count::Lost,
            comparison: Comparison::Gt,
            value: 0
        }]
    );
}

#[test]
fn defaults_fill_a_minimal_scenario() {
    let scenario = ok(MINIMAL);
    assert_eq!(scenario.name, "test-file");
    assert_eq!(scenario.seeds, vec![1]);
    let s = &scenario.variants[0].settings;
    assert_eq!(s.heal, Duration::from_secs(30));
    assert_eq!(s.broker, Default::default());
    assert_eq!(s.producer, Default::default());
    assert_eq!(s.producer.acks, Acks::All);
    assert!(s.producer.enable_idempotence);
    assert_eq!(s.disk, Default::default());
    assert_eq!(s.network.latency_min, Duration::from_millis(1));
    assert_eq!(s.network.latency_max, Duration::from_millis(5));
    assert_eq!(s.workload.producers, 1);
    assert_eq!(s.workload.topic, "orders", "the only topic is the default");
    assert_eq!(s.workload.keys, 0);
    assert_eq!(s.workload.value_bytes, 64);
    assert_eq!(s.workload.consumers, 0);
    assert_eq!(s.workload.messages, None);
    assert!(s.faults.is_empty());
}

#[test]
fn topic_config_dotted_keys_and_seed_forms() {
    let text = MINIMAL.replace(
        "replication_factor = 3 }",
        "replication_factor = 3, config = { \"min.insync.replicas\" = 2, \"flush.messages\" = 1, \"retention.ms\" = -1, \"unclean.leader.election.enable\" = true } }",
    );
    let text = format!("seeds = \"100..103\"\n{text}\n[broker]\nlog.flush.interval.ms = 1000\n[producer]\nenable.idempotence = false\n");
    let scenario = ok(&text);
    assert_eq!(scenario.seeds, vec![100, 101, 102]);
    let s = &scenario.variants[0].settings;
    let config = &s.cluster.topics[0].config;
    assert_eq!(config.min_insync_replicas, Some(2));
    assert_eq!(config.flush_messages, Some(1));
    assert_eq!(config.retention, Some(None), "-1: keep forever");
    assert_eq!(config.unclean_leader_election_enable, Some(true));
    assert_eq!(config.segment_bytes, None);
    assert_eq!(
        s.broker.log_flush_interval,
        Duration::from_millis(1000),
        "unquoted dotted keys mean the Kafka key"
    );
    assert!(!s.producer.enable_idempotence);

    assert_eq!(
        ok(&format!("seeds = [3, 17, 42]\n{MINIMAL}")).seeds,
        vec![3, 17, 42]
    );
}

#[test]
fn test_seeds_pick_among_the_seeds_and_default_to_all_of_them() {
    let all = ok(&format!("seeds = 5\n{MINIMAL}"));
    assert_eq!(all.test_seeds, vec![1, 2, 3, 4, 5]);
    let picked = ok(&format!("seeds = 5\ntest_seeds = [4, 2]\n{MINIMAL}"));
    assert_eq!(picked.seeds, vec![1, 2, 3, 4, 5]);
    assert_eq!(picked.test_seeds, vec![4, 2]);
    let before = ok(&format!("test_seeds = \"3..5\"\nseeds = 9\n{MINIMAL}"));
    assert_eq!(
        before.test_seeds,
        vec![3, 4],
        "the order of the keys does not matter"
    );
    assert_error(
        &format!("seeds = 5\ntest_seeds = [2, 6]\n{MINIMAL}"),
        "s.toml:2:14: test seed 6 is not among `seeds`: `test_seeds` picks the seeds `cargo test` runs out of the file's own",
    );
    assert_error(
        &format!("test_seeds = 2\n{MINIMAL}"),
        "s.toml:1:14: test seed 2 is not among `seeds`: `test_seeds` picks the seeds `cargo test` runs out of the file's own",
    );
    assert_error(
        &format!("test_seeds = true\n{MINIMAL}"),
        "s.toml:1:14: `test_seeds` must be a count, a list of seeds or a range string like \"100..200\", found a boolean",
    );
}

#[test]
fn kafka_producer_rules_between_keys() {
    // acks=1 with idempotence left at its default: Kafka quietly turns idempotence off.
    let s = ok(&format!("{MINIMAL}[producer]\nacks = 1\n"))
        .variants
        .remove(0)
        .settings;
    assert_eq!(s.producer.acks, Acks::Leader);
    assert!(!s.producer.enable_idempotence);
    // Explicitly enabled, Kafka refuses the configuration.
    let text = format!("{MINIMAL}[producer]\n\"enable.idempotence\" = true\nacks = \"1\"\n");
    assert_error(
        &text,
        "s.toml:7:8: `enable.idempotence` = true needs `acks` = \"all\" (Kafka rejects this producer configuration)",
    );
    // delivery.timeout.ms below linger.ms + request.timeout.ms: Kafka refuses it, but the
    // reference's full example sets exactly that (30000 < 5 + 30000) and must run, so it stands.
    let s = ok(&format!(
        "{MINIMAL}[producer]\n\"delivery.timeout.ms\" = 1000\n"
    ))
    .variants
    .remove(0)
    .settings;
    assert_eq!(s.producer.delivery_timeout, Duration::from_millis(1000));
    let s = ok(&format!(
        "{MINIMAL}[producer]\n\"request.timeout.ms\" = 200000\n"
    ))
    .variants
    .remove(0)
    .settings;
    assert_eq!(
        s.producer.delivery_timeout,
        Duration::from_millis(200_005),
        "raised when left at its default"
    );
}

const VARIANTS: &str = r#"
[[fault_sets.leader-kill]]
at = "10s"
action = "kill"
target = "leader:orders/0"

[[fault_sets.cluster-power-loss]]
at = "5s"
action = "power-loss"
target = "brokers"

[[fault_sets.cluster-power-loss]]
at = "15s"
action = "restart"
target = ["broker-1", "broker-2", "broker-3"]

[expect]
duplicates = 0

[variants.acks-1]
"producer.acks" = "1"

[variants.acks-all-min-isr-2]
"producer.acks" = "all"
"broker.min.insync.replicas" = 2
faults = "cluster-power-loss"
"disk.power_loss" = "torn-tail"
"workload.rate" = 50

[variants.acks-1.expect_some]
lost = "> 0"

[variants.acks-all-min-isr-2.expect]
lost = 0
"#;

#[test]
fn variants_resolve_and_add_expectations() {
    let text = format!("faults = \"leader-kill\"\n{MINIMAL}{VARIANTS}");
    let scenario = ok(&text);
    assert_eq!(scenario.variants.len(), 2);
    let (a, b) = (&scenario.variants[0], &scenario.variants[1]);
    assert_eq!(a.name, "acks-1");
    assert_eq!(a.settings.producer.acks, Acks::Leader);
    assert!(
        !a.settings.producer.enable_idempotence,
        "acks=1 turns default idempotence off"
    );
    assert_eq!(a.settings.broker.min_insync_replicas, 1);
    assert_eq!(a.settings.faults.len(), 1);
    assert_eq!(
        a.settings.faults[0].action,
        FaultAction::Kill(Target::Leader(TopicPartition::new("orders", 0)))
    );
    assert_eq!(a.expect, with_default_zeros(vec![eq(Count::Duplicates, 0)]));
    assert_eq!(
        a.expect_some,
        vec![Expectation {
            count: Count::Lost,
            comparison: Comparison::Gt,
            value: 0
        }]
    );

    assert_eq!(b.name, "acks-all-min-isr-2");
    assert_eq!(b.settings.producer.acks, Acks::All);
    assert!(b.settings.producer.enable_idempotence);
    assert_eq!(b.settings.broker.min_insync_replicas, 2);
    assert_eq!(b.settings.disk.power_loss, PowerLossModel::TornTail);
    assert_eq!(b.settings.workload.rate, 50);
    assert_eq!(
        b.settings.faults.len(),
        2,
        "the variant picks its own fault set"
    );
    assert_eq!(
        b.settings.faults[0].action,
        FaultAction::PowerLoss(Target::Brokers)
    );
    assert_eq!(
        b.settings.faults[1].action,
        FaultAction::Restart(Target::List(vec![
            Target::Host(HostName::Broker(1)),
            Target::Host(HostName::Broker(2)),
            Target::Host(HostName::Broker(3)),
        ]))
    );
    assert_eq!(
        b.expect,
        with_default_zeros(vec![eq(Count::Duplicates, 0), eq(Count::Lost, 0)])
    );
    assert!(b.expect_some.is_empty());
}

/// `expected` followed by the zeros every scenario expects unless it names the count.
fn with_default_zeros(mut expected: Vec<Expectation>) -> Vec<Expectation> {
    expected.extend([
        eq(Count::Moved, 0),
        eq(Count::Unexpected, 0),
        eq(Count::FalseFailures, 0),
        eq(Count::UnderReplicated, 0),
        eq(Count::Unreadable, 0),
        eq(Count::AbortedReads, 0),
        eq(Count::Torn, 0),
    ]);
    expected
}

#[test]
fn a_count_the_scenario_names_replaces_its_default_zero() {
    let text = format!(
        "{MINIMAL}\n[expect]\nmoved = \"<= 3\"\n\n[expect_some]\nfalse_failures = \"> 0\"\n"
    );
    let scenario = ok(&text);
    let variant = &scenario.variants[0];
    assert_eq!(
        variant.expect,
        vec![
            Expectation {
                count: Count::Moved,
                comparison: Comparison::Le,
                value: 3
            },
            eq(Count::Unexpected, 0),
            eq(Count::UnderReplicated, 0),
            eq(Count::Unreadable, 0),
            eq(Count::AbortedReads, 0),
            eq(Count::Torn, 0),
        ]
    );
    assert_eq!(
        variant.expect_some,
        vec![Expectation {
            count: Count::FalseFailures,
            comparison: Comparison::Gt,
            value: 0
        }]
    );
}

#[test]
fn a_scenario_without_expectations_still_expects_the_default_zeros() {
    let scenario = ok(MINIMAL);
    assert_eq!(scenario.variants[0].expect, with_default_zeros(Vec::new()));
}

#[test]
fn fault_sets_pick_and_every_action_parses() {
    let text = format!(
        r#"faults = "everything"
{MINIMAL}
[workload]
producers = 2
consumers = 1

[nemesis]
actions = ["kill", "power-loss", "partition", "slow-link", "disk-full"]
interval = "5s"
recover = "3s"

[[fault_sets.unused]]
at = "1s"
action = "heal"

[[fault_sets.everything]]
at = "2s"
action = "partition"
groups = [["leader:orders/0", "controller"], "brokers"]
[[fault_sets.everything]]
at = "1s"
action = "slow-link"
between = ["broker-1", "follower:orders/1"]
latency = "250ms"
[[fault_sets.everything]]
at = "3s"
action = "slow-disk"
target = "random-broker"
latency = "2m"
[[fault_sets.everything]]
at = "4s"
action = "corrupt"
target = "broker-2"
file = "orders-0/*.log"
bytes = 16
[[fault_sets.everything]]
at = "5s"
action = "isolate"
target = "producer-2"
[[fault_sets.everything]]
at = "6s"
action = "shutdown"
target = "followers:orders/1"
[[fault_sets.everything]]
at = "7s"
action = "fsync-error"
target = "controller"
[[fault_sets.everything]]
at = "8s"
action = "disk-full"
target = "brokers"
[[fault_sets.everything]]
at = "9s"
action = "heal-disk"
target = "brokers"
[[fault_sets.everything]]
at = "10s"
action = "heal"
[[fault_sets.everything]]
at = "30s"
action = "kill"
target = "consumer-1"
"#
    );
    let s = ok(&text).variants.remove(0).settings;
    let tp = |p| TopicPartition::new("orders", p);
    let actions: Vec<FaultAction> = s.faults.iter().map(|f| f.action.clone()).collect();
    assert_eq!(s.faults[0].at, Duration::from_secs(1), "sorted by time");
    assert_eq!(
        actions,
        vec![
            FaultAction::SlowLink {
                between: (Target::Host(HostName::Broker(1)), Target::Follower(tp(1))),
                latency: Duration::from_millis(250),
                bandwidth: None,
            },
            FaultAction::Partition(vec![
                Target::List(vec![
                    Target::Leader(tp(0)),
                    Target::Host(HostName::Controller)
                ]),
                Target::Brokers,
            ]),
            FaultAction::SlowDisk {
                target: Target::RandomBroker,
                latency: Duration::from_secs(120),
                throughput: None,
            },
            FaultAction::Corrupt {
                target: Target::Host(HostName::Broker(2)),
                file: "orders-0/*.log".into(),
                bytes: 16,
                region: CorruptRegion::Tail,
            },
            FaultAction::Isolate(Target::Host(HostName::Producer(2))),
            FaultAction::Shutdown(Target::Followers(tp(1))),
            FaultAction::FsyncError(Target::Host(HostName::Controller)),
            FaultAction::DiskFull(Target::Brokers),
            FaultAction::HealDisk(Target::Brokers),
            FaultAction::Heal,
            FaultAction::Kill(Target::Host(HostName::Consumer(1))),
        ]
    );
    let nemesis = s.nemesis.expect("nemesis");
    assert_eq!(nemesis.actions[1], NemesisAction::PowerLoss);
    assert_eq!(nemesis.interval, Duration::from_secs(5));
    assert_eq!(nemesis.recover, Duration::from_secs(3));
}

#[test]
fn seeds_spec_for_the_command_line() {
    assert_eq!(parse_seeds("20"), Ok((1..=20).collect()));
    assert_eq!(parse_seeds("3,17,42"), Ok(vec![3, 17, 42]));
    assert_eq!(parse_seeds("100..200"), Ok((100..200).collect()));
    assert!(parse_seeds("abc").is_err());
}

#[test]
fn config_reference_covers_every_section() {
    let text = config_reference(hightide::config::kafka::Release::NEWEST);
    for needle in [
        "[broker]",
        "\"min.insync.replicas\" = 1",
        "\"replication.truncation\" = \"leader-epoch\"",
        "[producer]",
        "\"delivery.timeout.ms\" = 120000",
        "[consumer]",
        "\"fetch.max.wait.ms\" = 500",
        "\"flush.messages\"",
        "[disk]",
        "[network]",
        "[workload]",
    ] {
        assert!(text.contains(needle), "{needle} missing from:\n{text}");
    }
}

// ---- bad input: one test per class, each asserting the message and where it points ----

#[test]
fn unknown_keys_suggest_the_nearest() {
    assert_error(
        &format!("{MINIMAL}[producer]\nack = \"1\"\n"),
        "s.toml:6:1: unknown key `ack` in [producer]; did you mean `acks`?",
    );
    assert_error(
        &format!("{MINIMAL}[broker]\n\"min.insync.replica\" = 2\n"),
        "s.toml:6:1: unknown key `min.insync.replica` in [broker]; did you mean `min.insync.replicas`?",
    );
    assert_error(
        &format!("seed = 3\n{MINIMAL}"),
        "s.toml:1:1: unknown key `seed` in the top level; did you mean `seeds`?",
    );
    assert_error(
        &MINIMAL.replace("partitions = 2", "partition = 2"),
        "s.toml:4:30: unknown key `partition` in a topic of [cluster]; did you mean `partitions`?",
    );
    assert_error(
        &format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"kill\"\ntargt = \"broker-1\"\n"),
        "s.toml:8:1: unknown key `targt` in [[faults]]; did you mean `target`?",
    );
    assert_error(
        &format!("{MINIMAL}[disk]\ncompression = 1\n"),
        "s.toml:6:1: unknown key `compression` in [disk]; expected one of: writeback, dirty_expire, fsync_latency, power_loss, filesystem, journal_commit, throughput, memory, dirty_ratio, dirty_background_ratio",
    );
}

/// A key of another table names that table, from the parser's own tables, rather than
/// the nearest key of the table it is in by spelling.
#[test]
fn keys_in_the_wrong_table_name_their_tables() {
    assert_error(
        &format!("{MINIMAL}[broker]\n\"request.timeout.ms\" = 5000\n"),
        "s.toml:6:1: `request.timeout.ms` is not a key of [broker]: it is a key of [producer] and [consumer]",
    );
    // Unquoted, its implicit tables are read on to the whole key (the caret is under its
    // last part, as for any unquoted dotted key).
    assert_error(
        &format!("{MINIMAL}[broker]\nrequest.timeout.ms = 5000\n"),
        "s.toml:6:17: `request.timeout.ms` is not a key of [broker]: it is a key of [producer] and [consumer]",
    );
    assert_error(
        &format!("{MINIMAL}[producer]\n\"min.insync.replicas\" = 2\n"),
        "s.toml:6:1: `min.insync.replicas` is not a key of [producer]: it is a key of [broker] and a topic's `config`",
    );
    assert_error(
        &format!("{MINIMAL}[consumer]\nacks = \"all\"\n"),
        "s.toml:6:1: `acks` is not a key of [consumer]: it is a key of [producer]",
    );
    assert_error(
        &format!("{MINIMAL}[workload]\npower_loss = \"torn-tail\"\n"),
        "s.toml:6:1: `power_loss` is not a key of [workload]: it is a key of [disk]",
    );
    assert_error(
        &format!("{MINIMAL}[disk]\nlatency = {{ min = \"1ms\", max = \"2ms\" }}\n"),
        "s.toml:6:1: `latency` is not a key of [disk]: it is a key of [network] and [[faults]]",
    );
    assert_error(
        &format!("{MINIMAL}[network]\nproducers = 2\n"),
        "s.toml:6:1: `producers` is not a key of [network]: it is a key of [workload]",
    );
    assert_error(
        &format!("{MINIMAL}[workload]\ntopics = \"orders\"\n"),
        "s.toml:6:1: `topics` is not a key of [workload]: it is a key of [cluster]; did you mean `topic`?",
    );
    assert_error(
        &format!("{MINIMAL}[nemesis]\nactions = [\"kill\"]\ninterval = \"5s\"\nrecover = \"1s\"\nat = \"3s\"\n"),
        "s.toml:9:1: `at` is not a key of [nemesis]: it is a key of [[faults]]",
    );
    assert_error(
        &MINIMAL.replace("brokers = 3", "brokers = 3\npartitions = 2"),
        "s.toml:4:1: `partitions` is not a key of [cluster]: it is a key of a topic of [cluster]",
    );
    // A top-level key below a header belongs to that header's table.
    assert_error(
        &MINIMAL.replace("brokers = 3", "brokers = 3\nseeds = 5"),
        "s.toml:4:1: `seeds` is not a key of [cluster]: it is a key of the top level (above the first [table] header)",
    );
    assert_error(
        &format!("acks = \"all\"\n{MINIMAL}"),
        "s.toml:1:1: `acks` is not a key of the top level: it is a key of [producer]",
    );
}

/// A topic's key in [broker], or a broker key in a topic's `config`, suggests the name it
/// has there: the key it inherits, or the key that overrides it.
#[test]
fn topic_and_broker_keys_suggest_each_other() {
    assert_error(
        &format!("{MINIMAL}[broker]\n\"flush.messages\" = 1\n"),
        "s.toml:6:1: `flush.messages` is not a key of [broker]: it is a key of a topic's `config`; did you mean `log.flush.interval.messages`?",
    );
    assert_error(
        &MINIMAL.replace(
            "replication_factor = 3 }",
            "replication_factor = 3, config = { \"log.segment.bytes\" = 1048576 } }",
        ),
        "s.toml:4:81: `log.segment.bytes` is not a key of a topic's `config`: it is a key of [broker]; did you mean `segment.bytes`?",
    );
}

#[test]
fn wrong_types() {
    assert_error(
        &format!("{MINIMAL}[workload]\nrate = \"fast\"\n"),
        "s.toml:6:8: `rate` must be an integer, found a string",
    );
    assert_error(
        &format!("{MINIMAL}[broker]\n\"unclean.leader.election.enable\" = \"yes\"\n"),
        "s.toml:6:36: `unclean.leader.election.enable` must be true or false, found a string",
    );
    assert_error(
        &MINIMAL.replace("brokers = 3", "brokers = 3.0"),
        "s.toml:3:11: `brokers` must be an integer, found a float",
    );
    assert_error(
        &format!("name = 1979-05-27\n{MINIMAL}"),
        "s.toml:1:8: `name` must be a string, found a date-time",
    );
    assert_error(
        &format!("seeds = true\n{MINIMAL}"),
        "s.toml:1:9: `seeds` must be a count, a list of seeds or a range string like \"100..200\", found a boolean",
    );
}

#[test]
fn impossible_values() {
    assert_error(
        &MINIMAL.replace("replication_factor = 3", "replication_factor = 4"),
        "s.toml:4:67: replication factor 4 of topic `orders` is above the broker count (3)",
    );
    assert_error(
        &MINIMAL.replace("partitions = 2", "partitions = 0"),
        "s.toml:4:43: `partitions` must be from 1 to 10000, found 0",
    );
    assert_error(
        &format!("{MINIMAL}[broker]\n\"min.insync.replicas\" = 0\n"),
        "s.toml:6:25: `min.insync.replicas` must be from 1 to 2147483647, found 0",
    );
    assert_error(
        &format!("{MINIMAL}[network]\nlatency = {{ min = \"5ms\", max = \"1ms\" }}\n"),
        "s.toml:6:11: `latency` min (5ms) is above its max (1ms)",
    );
    assert_error(
        &MINIMAL.replace("brokers = 3", "brokers = 0"),
        "s.toml:3:11: `brokers` must be from 1 to 1000, found 0",
    );
}

#[test]
fn unknown_workload_topic() {
    assert_error(
        &format!("{MINIMAL}[workload]\ntopic = \"ordrs\"\n"),
        "s.toml:6:9: unknown topic `ordrs`; did you mean `orders`?",
    );
    let two = MINIMAL.replace("}]\n", "}, { name = \"payments\" }]\n");
    assert_error(
        &two,
        "s.toml: [workload] needs a `topic`: the cluster has 2 topics (orders, payments)",
    );
}

#[test]
fn unknown_fault_action() {
    assert_error(
        &format!(
            "{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"power_loss\"\ntarget = \"broker-1\"\n"
        ),
        "s.toml:7:10: unknown fault action `power_loss`; did you mean `power-loss`?",
    );
    assert_error(
        &format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"kill\"\nlatency = \"1s\"\ntarget = \"broker-1\"\n"),
        "s.toml:8:1: `latency` does not apply to action `kill` (it takes `target`)",
    );
    assert_error(
        &format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"slow-link\"\nlatency = \"1s\"\n"),
        "s.toml:7:10: action `slow-link` needs `between`",
    );
}

fn fault(target: &str) -> String {
    format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"kill\"\ntarget = {target}\n")
}

#[test]
fn unknown_fault_targets() {
    assert_error(
        &fault("\"broker-7\""),
        "s.toml:8:10: no host `broker-7`: the cluster has 3 brokers (broker-1 to broker-3)",
    );
    assert_error(
        &fault("[\"broker-1\", \"broker-4\"]"),
        "s.toml:8:23: no host `broker-4`: the cluster has 3 brokers (broker-1 to broker-3)",
    );
    assert_error(
        &fault("\"leader:nosuch/0\""),
        "s.toml:8:10: unknown topic `nosuch`; the topics of [cluster] are: orders (in target `leader:nosuch/0`)",
    );
    assert_error(
        &fault("\"leader:orders/2\""),
        "s.toml:8:10: partition 2 of topic `orders` does not exist: it has 2 partitions (0 to 1)",
    );
    assert_error(
        &fault("\"producer-2\""),
        "s.toml:8:10: no host `producer-2`: [workload] has 1 producer",
    );
    assert_error(
        &fault("\"leader-orders\""),
        "s.toml:8:10: invalid target `leader-orders`: expected broker-N, controller, producer-N, consumer-N, brokers, crashed, random-broker, coordinator, txn-coordinator, leader:<topic>/<partition>, follower:<topic>/<partition>, followers:<topic>/<partition>, master:broker-<letter>, broker-<letter>-<id> or namesrv",
    );
    let rf1 = MINIMAL.replace("replication_factor = 3", "replication_factor = 1");
    assert_error(
        &format!(
            "{rf1}[[faults]]\nat = \"1s\"\naction = \"kill\"\ntarget = \"follower:orders/0\"\n"
        ),
        "s.toml:8:10: `orders/0` has no followers: topic `orders` has replication factor 1",
    );
    assert_error(
        &format!(
            "{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"disk-full\"\ntarget = \"producer-1\"\n"
        ),
        "s.toml:8:10: `producer-1` has no disk: disk faults apply to brokers and the controller",
    );
    assert_error(
        &fault("\"coordinator\""),
        "s.toml:8:10: `coordinator` is a group's coordinator: [workload] has no `group`",
    );
}

#[test]
fn fault_at_beyond_duration() {
    assert_error(
        &format!("{MINIMAL}[[faults]]\nat = \"31s\"\naction = \"heal\"\n"),
        "s.toml:6:6: fault at 31s is beyond `duration` (30s)",
    );
}

#[test]
fn malformed_durations() {
    assert_error(
        &MINIMAL.replace("\"30s\"", "\"30\""),
        "s.toml:1:12: invalid duration `30`: expected a whole number and a unit (ms, s, m or h), like \"250ms\", \"10s\" or \"2m\"",
    );
    assert_error(
        &MINIMAL.replace("\"30s\"", "\"1.5s\""),
        "s.toml:1:12: invalid duration `1.5s`: expected a whole number and a unit (ms, s, m or h), like \"250ms\", \"10s\" or \"2m\"",
    );
    assert_error(
        &MINIMAL.replace("\"30s\"", "30"),
        "s.toml:1:12: `duration` must be a duration with a unit, like \"250ms\" or \"10s\", found an integer",
    );
}

/// Every form of `acks` docs/scenarios.md allows is named, the integers too.
#[test]
fn invalid_acks() {
    assert_error(
        &format!("{MINIMAL}[producer]\nacks = \"2\"\n"),
        "s.toml:6:8: invalid `acks` `2`: expected \"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1",
    );
    assert_error(
        &format!("{MINIMAL}[producer]\nacks = 3\n"),
        "s.toml:6:8: invalid `acks` `3`: expected \"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1",
    );
    assert_error(
        &format!("{MINIMAL}[producer]\nacks = true\n"),
        "s.toml:6:8: `acks` must be \"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1, found a boolean",
    );
}

#[test]
fn unknown_fault_set() {
    let text = format!("faults = \"leader-kil\"\n{MINIMAL}[[fault_sets.leader-kill]]\nat = \"1s\"\naction = \"heal\"\n");
    assert_error(
        &text,
        "s.toml:1:10: unknown fault set `leader-kil`; did you mean `leader-kill`?",
    );
    assert_error(
        &format!("faults = \"x\"\n{MINIMAL}"),
        "s.toml:1:10: unknown fault set `x`: the scenario defines no [[fault_sets.NAME]]",
    );
    let text = format!("{MINIMAL}[variants.v]\nfaults = \"nope\"\n");
    assert_error(
        &text,
        "s.toml:6:10: unknown fault set `nope`: the scenario defines no [[fault_sets.NAME]]",
    );
}

/// `faults = "NAME"` beside `[[faults]]` is one TOML key given twice: the error says the
/// two forms exclude each other, where the second one is.
#[test]
fn a_fault_set_and_a_fault_script_exclude_each_other() {
    let script = "[[faults]]\nat = \"1s\"\naction = \"heal\"\n";
    let either = "exclude each other: a scenario either scripts its faults in [[faults]] or picks a named set of [[fault_sets.NAME]] with `faults = \"NAME\"`";
    assert_error(
        &format!("faults = \"calm\"\n{MINIMAL}[[fault_sets.calm]]\nat = \"1s\"\naction = \"heal\"\n{script}"),
        &format!("s.toml:9:1: [[faults]] and `faults = \"calm\"` on line 1 {either}"),
    );
    assert_error(
        &format!("faults = [{{ at = \"1s\", action = \"heal\" }}]\nfaults = \"calm\"\n{MINIMAL}"),
        &format!("s.toml:2:1: `faults = \"calm\"` and [[faults]] on line 1 {either}"),
    );
    // The same form twice stays TOML's duplicate key.
    let e = err(&format!("faults = \"calm\"\nfaults = \"calm\"\n{MINIMAL}"));
    assert_eq!(
        e.to_string(),
        "s.toml:2:1: duplicate key `faults` in document root"
    );
}

#[test]
fn unknown_variant_key_path() {
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"producer.ack\" = \"1\"\n"),
        "s.toml:6:1: unknown key `producer.ack` in variant `v`; did you mean `producer.acks`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"brokr.min.insync.replicas\" = 2\n"),
        "s.toml:6:1: unknown key `brokr.min.insync.replicas` in variant `v`; did you mean `broker.min.insync.replicas`?",
    );
    // A known path with a bad value points at the value.
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"broker.min.insync.replicas\" = \"two\"\n"),
        "s.toml:6:32: `min.insync.replicas` must be an integer, found a string",
    );
}

/// A variant's path into the wrong section, or without its section, names the sections
/// whose key it is and the paths that set it.
#[test]
fn variant_paths_in_the_wrong_section_name_the_right_one() {
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"broker.request.timeout.ms\" = 5000\n"),
        "s.toml:6:1: unknown key `broker.request.timeout.ms` in variant `v`: `request.timeout.ms` is a key of [producer] and [consumer]; did you mean `producer.request.timeout.ms` or `consumer.request.timeout.ms`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\nbroker.request.timeout.ms = 5000\n"),
        "s.toml:6:24: unknown key `broker.request.timeout.ms` in variant `v`: `request.timeout.ms` is a key of [producer] and [consumer]; did you mean `producer.request.timeout.ms` or `consumer.request.timeout.ms`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"producer.min.insync.replicas\" = 2\n"),
        "s.toml:6:1: unknown key `producer.min.insync.replicas` in variant `v`: `min.insync.replicas` is a key of [broker]; did you mean `broker.min.insync.replicas`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v.broker]\nacks = \"1\"\n"),
        "s.toml:6:1: unknown key `broker.acks` in variant `v`: `acks` is a key of [producer]; did you mean `producer.acks`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"broker.kafka\" = \"2.8\"\n"),
        "s.toml:6:1: unknown key `broker.kafka` in variant `v`: `kafka` is a key of [cluster]; did you mean `cluster.kafka`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\nacks = \"1\"\n"),
        "s.toml:6:1: unknown key `acks` in variant `v`: it is a key of [producer]; did you mean `producer.acks`?",
    );
    let e = Overrides::parse(&["broker.acks=all".to_owned()]).unwrap_err();
    assert_eq!(
        e.report(),
        "error: --set broker.acks=all: unknown key `broker.acks` in --set: `acks` is a key of [producer]; did you mean `producer.acks`?\n  | --set broker.acks=all\n  |       ^"
    );
}

#[test]
fn expect_on_an_unknown_count() {
    assert_error(
        &format!("{MINIMAL}[expect]\nlose = 0\n"),
        "s.toml:6:1: unknown count `lose` in [expect]; did you mean `lost`?",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v.expect_some]\ndirty-reads = \"> 0\"\n"),
        "s.toml:6:1: unknown count `dirty-reads` in [variants.v.expect_some]; did you mean `dirty_reads`?",
    );
}

#[test]
fn comparison_that_does_not_parse() {
    assert_error(
        &format!("{MINIMAL}[expect_some]\nlost = \">> 0\"\n"),
        "s.toml:6:8: invalid expectation `>> 0`: expected an integer or a comparison like \"== 0\", \"!= 0\", \"> 0\", \">= 1000\", \"< 5\" or \"<= 5\"",
    );
    assert_error(
        &format!("{MINIMAL}[expect]\nlost = -1\n"),
        "s.toml:6:8: a count is never negative: `lost` = -1 cannot hold",
    );
}

#[test]
fn toml_syntax_errors() {
    let e = err("duration = \"30s\"\n[cluster\nbrokers = 3\n");
    assert_eq!(e.location.map(|(line, _)| line), Some(2), "{e}");
    assert!(e.to_string().starts_with("s.toml:2:"), "{e}");
    let e = err("duration = \"30s\nx = 1\n");
    assert!(e.to_string().starts_with("s.toml:1:"), "{e}");
    let e = err(&format!("{MINIMAL}[cluster]\nbrokers = 4\n"));
    assert!(
        e.to_string().starts_with("s.toml:5:"),
        "duplicate table: {e}"
    );
}

#[test]
fn empty_files() {
    assert_error(
        "",
        "s.toml: the file is empty: a scenario needs at least `duration` and [cluster]",
    );
    assert_error(
        "# nothing\n\n",
        "s.toml: the file holds only comments: a scenario needs at least `duration` and [cluster]",
    );
    assert_error("name = \"x\"\n", "s.toml: missing `duration` (the simulated time of the workload phase, e.g. duration = \"30s\")");
    assert_error(
        "duration = \"1s\"\n",
        "s.toml: missing [cluster] (brokers and topics)",
    );
}

#[test]
fn binary_files() {
    let dir = std::env::temp_dir().join(format!("hightide-scenario-parse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("binary.toml");
    std::fs::write(&path, b"duration = \"1s\"\nname = \"\xff\xfe\"\n").unwrap();
    let e = load(&path).unwrap_err();
    assert_eq!(e.location, Some((2, 9)));
    assert!(
        e.to_string()
            .ends_with(":2:9: not a UTF-8 text file: invalid byte 0xff"),
        "{e}"
    );
    let e = load(&dir.join("missing.toml")).unwrap_err();
    assert!(e.message.starts_with("cannot read the file"), "{e}");
    std::fs::write(&path, EXAMPLE).unwrap();
    assert_eq!(load(&path).unwrap().variants[0].name, "binary");
    std::fs::remove_dir_all(&dir).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = parse(&text, Path::new("p.toml"));
    }

    #[test]
    fn mutated_example_never_panics(cuts in proptest::collection::vec((0usize..4000, 0usize..20, ".{0,8}"), 1..4)) {
        let mut text = EXAMPLE.to_owned();
        for (at, len, insert) in cuts {
            let mut start = at.min(text.len());
            while !text.is_char_boundary(start) { start -= 1; }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) { end -= 1; }
            text.replace_range(start..end, &insert);
        }
        if let Err(e) = parse(&text, Path::new("p.toml")) {
            // Any located error points inside the text.
            if let Some((line, _)) = e.location {
                prop_assert!(line <= text.lines().count() + 1, "{e}");
            }
        }
    }

    #[test]
    fn mutated_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse(&String::from_utf8_lossy(&bytes), Path::new("p.toml"));
    }
}

#[test]
fn unquoted_dotted_keys_and_topic_tables() {
    let text = r#"duration = "10s"
[cluster]
brokers = 2
[[cluster.topics]]
name = "a"
replication_factor = 2
[[cluster.topics]]
name = "b"
partitions = 3
[workload]
topic = "b"
[variants.v]
producer.acks = "0"
broker.min.insync.replicas = 2
network.latency = { min = "0ms", max = "20ms" }
"#;
    let scenario = ok(text);
    let s = &scenario.variants[0].settings;
    assert_eq!(s.cluster.topics[1].partitions, 3);
    assert_eq!(
        s.cluster.topics[1].replication_factor, 1,
        "Kafka's default.replication.factor"
    );
    assert_eq!(s.workload.topic, "b");
    assert_eq!(s.producer.acks, Acks::None);
    assert_eq!(s.broker.min_insync_replicas, 2);
    assert_eq!(s.network.latency_max, Duration::from_millis(20));
}

fn with_set(text: &str, args: &[&str]) -> Result<Scenario, ScenarioError> {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    parse_with(text, Path::new("s.toml"), &Overrides::parse(&args)?)
}

#[test]
fn set_on_the_command_line_wins_over_the_top_level_and_every_variant() {
    let text = format!(
        "{MINIMAL}[producer]\nacks = \"0\"\n[variants.one]\n\"producer.acks\" = \"1\"\n[variants.other]\n\"producer.linger.ms\" = 7\n"
    );
    let scenario = with_set(
        &text,
        &[
            "producer.acks=all",
            "broker.min.insync.replicas = 2",
            "cluster.kafka=3.9",
            "duration=10s",
        ],
    )
    .unwrap();
    for variant in &scenario.variants {
        let s = &variant.settings;
        assert_eq!(s.producer.acks, Acks::All, "{}", variant.name);
        assert_eq!(s.broker.min_insync_replicas, 2);
        assert_eq!(s.cluster.kafka.to_string(), "3.9");
        assert_eq!(s.duration, Duration::from_secs(10));
    }
    assert_eq!(
        scenario.variants[1].settings.producer.linger,
        Duration::from_millis(7),
        "the rest of a variant stands"
    );
    assert_eq!(
        scenario.warnings,
        [(
            "one".to_owned(),
            "--set producer.acks replaces what variant one sets".to_owned()
        )],
        "only a variant's own setting is worth a warning"
    );
    assert!(ok(&text).warnings.is_empty());
}

#[test]
fn an_error_found_late_still_points_at_the_set_argument() {
    let text = format!("{MINIMAL}[producer]\n\"enable.idempotence\" = true\n");
    let e = with_set(&text, &["producer.retries=3", "producer.acks=1"]).unwrap_err();
    assert_eq!(
        e.report(),
        "error: --set producer.acks=1: `enable.idempotence` = true needs `acks` = \"all\" (Kafka rejects this producer configuration)\n  | --set producer.acks=1\n  |                     ^"
    );
    // An error in the file still points into the file.
    let e = with_set(
        &format!("{MINIMAL}[[faults]]\nat = \"20s\"\naction = \"heal\"\n"),
        &["duration=10s"],
    )
    .unwrap_err();
    assert!(e.to_string().starts_with("s.toml:6:6: "), "{e}");
    let e = with_set(MINIMAL, &["faults=[]"]).unwrap_err();
    assert!(e.to_string().starts_with("--set faults=[]: "), "{e}");
}

#[test]
fn sweeps_cross_the_vary_paths_over_the_base() {
    let dir = std::env::temp_dir().join(format!("hightide-sweep-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("scenarios")).unwrap();
    std::fs::create_dir_all(dir.join("sweeps")).unwrap();
    let base = format!(
        "{MINIMAL}[expect]\nduplicates = 0\n[[fault_sets.leader-kill]]\nat = \"1s\"\naction = \"kill\"\ntarget = \"leader:orders/0\"\n[[fault_sets.calm]]\nat = \"1s\"\naction = \"heal\"\n[variants.ignored]\n\"producer.acks\" = \"0\"\n"
    );
    std::fs::write(dir.join("scenarios/leader-failure.toml"), base).unwrap();
    let matrix = r#"name = "durability"
base = "../scenarios/leader-failure.toml"
seeds = 4
[vary]
"producer.acks" = ["0", "1", "all"]
"broker.min.insync.replicas" = [1, 2]
"faults" = ["leader-kill", "calm"]
"#;
    let matrix_path = dir.join("sweeps/durability.toml");
    std::fs::write(&matrix_path, matrix).unwrap();
    let sweep = hightide::scenario::load_sweep(&matrix_path, &Overrides::default()).unwrap();
    assert_eq!(sweep.name, "durability");
    assert_eq!(sweep.scenario.seeds, vec![1, 2, 3, 4]);
    let variants = &sweep.scenario.variants;
    assert_eq!(variants.len(), 12);
    assert_eq!(
        variants[0].name,
        "producer.acks=0 broker.min.insync.replicas=1 faults=leader-kill"
    );
    assert_eq!(
        variants[11].name,
        "producer.acks=all broker.min.insync.replicas=2 faults=calm"
    );
    assert_eq!(variants[11].settings.producer.acks, Acks::All);
    assert_eq!(variants[11].settings.broker.min_insync_replicas, 2);
    assert_eq!(variants[11].settings.faults[0].action, FaultAction::Heal);
    assert_eq!(
        variants[0].expect,
        with_default_zeros(vec![eq(Count::Duplicates, 0)])
    );

    // A bad value points into the matrix; a bad base points into the base.
    std::fs::write(&matrix_path, matrix.replace("[1, 2]", "[1, 0]")).unwrap();
    let e = hightide::scenario::load_sweep(&matrix_path, &Overrides::default()).unwrap_err();
    assert!(
        e.to_string().ends_with(
            "durability.toml:6:36: `min.insync.replicas` must be from 1 to 2147483647, found 0"
        ),
        "{e}"
    );
    std::fs::write(&matrix_path, matrix.replace("\"calm\"", "\"calmm\"")).unwrap();
    let e = hightide::scenario::load_sweep(&matrix_path, &Overrides::default()).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("durability.toml:7:28: unknown fault set `calmm`; did you mean `calm`?"),
        "{e}"
    );
    // `--set` changes the base under every configuration, but not a path the sweep varies.
    std::fs::write(&matrix_path, matrix).unwrap();
    let set = |args: &[&str]| {
        Overrides::parse(&args.iter().map(|a| a.to_string()).collect::<Vec<_>>()).unwrap()
    };
    let sweep = hightide::scenario::load_sweep(&matrix_path, &set(&["duration=5s"])).unwrap();
    assert!(sweep
        .scenario
        .variants
        .iter()
        .all(|v| v.settings.duration == Duration::from_secs(5)));
    let e = hightide::scenario::load_sweep(&matrix_path, &set(&["producer.acks=1"])).unwrap_err();
    assert_eq!(
        e.to_string(),
        "--set producer.acks=1: the sweep varies `producer.acks`: set it in [vary] or on the command line, not both"
    );
    std::fs::write(
        &matrix_path,
        matrix.replace("\"producer.acks\"", "\"producer.ack\""),
    )
    .unwrap();
    let e = hightide::scenario::load_sweep(&matrix_path, &Overrides::default()).unwrap_err();
    assert!(e.to_string().ends_with("durability.toml:5:1: unknown key `producer.ack` in [vary]; did you mean `producer.acks`?"), "{e}");
    std::fs::write(
        &matrix_path,
        matrix.replace("\"producer.acks\"", "\"broker.acks\""),
    )
    .unwrap();
    let e = hightide::scenario::load_sweep(&matrix_path, &Overrides::default()).unwrap_err();
    assert!(e.to_string().ends_with("durability.toml:5:1: unknown key `broker.acks` in [vary]: `acks` is a key of [producer]; did you mean `producer.acks`?"), "{e}");
    std::fs::write(
        dir.join("scenarios/leader-failure.toml"),
        "duration = \"1s\"\n",
    )
    .unwrap();
    std::fs::write(&matrix_path, matrix).unwrap();
    let e = hightide::scenario::load_sweep(&matrix_path, &Overrides::default()).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("leader-failure.toml: missing [cluster] (brokers and topics)"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// TOML splits an unquoted dotted key into nested tables; an error about its value still
/// names the value's own line and column, as it does for the quoted form.
#[test]
fn dotted_keys_keep_their_positions() {
    let acks =
        "invalid `acks` `2`: expected \"0\", \"1\", \"all\" or \"-1\", or the integer 0, 1 or -1";
    assert_error(
        &format!("producer.acks = \"2\"\n{MINIMAL}"),
        &format!("s.toml:1:17: {acks}"),
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\nproducer.acks = \"2\"\n"),
        &format!("s.toml:6:17: {acks}"),
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\n\"producer.acks\" = \"2\"\n"),
        &format!("s.toml:6:19: {acks}"),
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\nbroker.min.insync.replicas = 0\n"),
        "s.toml:6:30: `min.insync.replicas` must be from 1 to 2147483647, found 0",
    );
    assert_error(
        &format!("{MINIMAL}[broker]\nmin.insync.replicas = 0\n"),
        "s.toml:6:23: `min.insync.replicas` must be from 1 to 2147483647, found 0",
    );
    assert_error(
        "duration = \"30s\"\n[cluster]\nbrokers = 3\ntopics = [{ name = \"orders\", config = { min.insync.replicas = 0 } }]\n",
        "s.toml:4:63: `min.insync.replicas` must be from 1 to 2147483647, found 0",
    );
    assert_error(
        &format!("{MINIMAL}[variants.v]\nproducer.retries = 1\n  producer.linger = \"5ms\"\n"),
        "s.toml:7:12: unknown key `producer.linger` in variant `v`; did you mean `producer.linger.ms`?",
    );
}

#[test]
fn a_configuration_that_can_never_acknowledge_says_why() {
    let with = |extra: &str| {
        ok(&format!("{MINIMAL}{extra}")).variants[0]
            .settings
            .clone()
    };
    let never = with("[broker]\n\"min.insync.replicas\" = 4\n");
    assert_eq!(
        never.never_acknowledges().as_deref(),
        Some("acks=all with min.insync.replicas 4 above the replication factor 3 of `orders`: every produce fails with NOT_ENOUGH_REPLICAS, nothing is ever acknowledged")
    );
    assert_eq!(
        with("[broker]\n\"min.insync.replicas\" = 3\n").never_acknowledges(),
        None
    );
    assert_eq!(
        with("[broker]\n\"min.insync.replicas\" = 4\n[producer]\nacks = \"1\"\n")
            .never_acknowledges(),
        None,
        "acks=1 ignores min ISR"
    );
    let topic_override = ok(
        "duration = \"30s\"\n[cluster]\nbrokers = 3\ntopics = [{ name = \"orders\", replication_factor = 2, config = { \"min.insync.replicas\" = 3 } }]\n",
    );
    assert!(topic_override.variants[0]
        .settings
        .never_acknowledges()
        .is_some());
}

/// A group's commit mode sets `enable.auto.commit`, and an explicit one that disagrees is
/// Kafka-shaped nonsense the file is told about; `commit` and `processing` need a group,
/// a group needs consumers; `session.timeout.ms` follows the release (KIP-735, 3.0).
#[test]
fn consumer_group_keys_and_their_rules() {
    let settings = |text: &str| ok(text).variants.remove(0).settings;
    let group = "[workload]\nconsumers = 2\ngroup = \"billing\"\n";
    let s = settings(&format!(
        "{MINIMAL}{group}commit = \"after-processing\"\nprocessing = \"2ms\"\n"
    ));
    assert_eq!(s.workload.group.as_deref(), Some("billing"));
    assert!(!s.consumer.enable_auto_commit);
    assert_eq!(s.workload.processing, Duration::from_millis(2));
    assert!(
        settings(&format!("{MINIMAL}{group}"))
            .consumer
            .enable_auto_commit
    );
    assert_eq!(
        settings(&format!("{MINIMAL}{group}"))
            .consumer
            .session_timeout,
        Duration::from_secs(45)
    );
    let old = MINIMAL.replace("[cluster]\n", "[cluster]\nkafka = \"2.8\"\n");
    assert_eq!(
        settings(&format!("{old}{group}")).consumer.session_timeout,
        Duration::from_secs(10)
    );
    let text = format!(
        "{MINIMAL}{group}commit = \"before-processing\"\n[consumer]\n\"enable.auto.commit\" = true\n"
    );
    assert!(
        err(&text).to_string().contains(
            "`enable.auto.commit` = true disagrees with [workload] commit = \"before-processing\""
        ),
        "{}",
        err(&text)
    );
    assert!(err(&format!("{MINIMAL}[workload]\ncommit = \"auto\"\n"))
        .to_string()
        .contains("`commit` needs a `group`"));
    assert!(err(&format!("{MINIMAL}[workload]\ngroup = \"g\"\n"))
        .to_string()
        .contains("group `g` has no members"));
    assert_eq!(
        err(&format!(
            "{MINIMAL}[broker]\n\"offsets.topic.replication.factor\" = 4\n{group}"
        ))
        .to_string(),
        "s.toml:6:38: group `billing` needs __consumer_offsets with `offsets.topic.replication.factor` = 4 replicas, more than the 3 brokers: lower it or add brokers"
    );
    assert!(err(&format!("{MINIMAL}{group}commit = \"sometimes\"\n"))
        .to_string()
        .contains(
            "expected \"auto\", \"before-processing\", \"after-processing\" or \"transactional\""
        ));
    assert!(err(&format!(
        "{MINIMAL}[consumer]\n\"auto.offset.reset\" = \"first\"\n"
    ))
    .to_string()
    .contains("invalid `auto.offset.reset` `first`"));
}

/// A key that names one value of an enum: every name sets its value, and anything else
/// is refused at its line and column with every name it could have been.
#[test]
fn a_one_of_names_key_takes_each_name_and_refuses_others_where_they_stand() {
    let set = |section: &str, line: &str| {
        let scenario = ok(&format!("{MINIMAL}[{section}]\n{line}\n"));
        scenario.variants[0].settings.clone()
    };
    for (name, value) in [
        ("leader-epoch", Truncation::LeaderEpoch),
        (
            "leader-epoch-single-round",
            Truncation::LeaderEpochSingleRound,
        ),
        ("high-watermark", Truncation::HighWatermark),
    ] {
        let s = set(
            "broker",
            &format!("\"replication.truncation\" = \"{name}\""),
        );
        assert_eq!(s.broker.replication_truncation, value);
    }
    for (name, value) in [
        ("drop-unflushed", PowerLossModel::DropUnflushed),
        ("random-writeback", PowerLossModel::RandomWriteback),
        ("torn-tail", PowerLossModel::TornTail),
    ] {
        assert_eq!(
            set("disk", &format!("power_loss = \"{name}\""))
                .disk
                .power_loss,
            value
        );
    }
    assert_eq!(
        err(&format!("{MINIMAL}[broker]\n\"replication.truncation\" = \"epoch\"\n")).to_string(),
        "s.toml:6:28: invalid `replication.truncation` `epoch`: expected \"leader-epoch\", \"leader-epoch-single-round\" or \"high-watermark\""
    );
    assert_eq!(
        err(&format!("{MINIMAL}[disk]\npower_loss = \"all\"\n")).to_string(),
        "s.toml:6:14: invalid `power_loss` `all`: expected \"drop-unflushed\", \"random-writeback\" or \"torn-tail\""
    );
    assert_eq!(
        err(&format!("{MINIMAL}[disk]\npower_loss = 1\n")).to_string(),
        "s.toml:6:14: `power_loss` must be a string, found an integer"
    );
}

/// `on_error` says what the application records of a send that ended in an exception.
#[test]
fn on_error_is_read_and_checked() {
    let settings = |text: &str| ok(text).variants[0].settings.clone();
    assert_eq!(settings(MINIMAL).workload.on_error, OnError::WhatItProves);
    let naive = settings(&format!(
        "{MINIMAL}[workload]\non_error = \"not-written\"\n"
    ));
    assert_eq!(naive.workload.on_error, OnError::NotWritten);
    assert_eq!(
        err(&format!("{MINIMAL}[workload]\non_error = \"failed\"\n")).to_string(),
        "s.toml:6:12: invalid `on_error` `failed`: expected \"what-it-proves\" or \"not-written\""
    );
}

/// `arrivals` picks how sends arrive (Poisson unless asked), and a fault's `jitter` is
/// read with its `at`, for any action, and written back by the scenario writer.
#[test]
fn arrivals_and_fault_jitter_are_read_checked_and_written_back() {
    let settings = |text: &str| ok(text).variants[0].settings.clone();
    assert_eq!(settings(MINIMAL).workload.arrivals, Arrivals::Poisson);
    let periodic = settings(&format!("{MINIMAL}[workload]\narrivals = \"periodic\"\n"));
    assert_eq!(periodic.workload.arrivals, Arrivals::Periodic);
    assert_eq!(
        err(&format!("{MINIMAL}[workload]\narrivals = \"bursty\"\n")).to_string(),
        "s.toml:6:12: invalid `arrivals` `bursty`: expected \"poisson\" or \"periodic\""
    );
    let jittered = format!(
        "{MINIMAL}[[faults]]\nat = \"8s\"\njitter = \"500ms\"\naction = \"kill\"\ntarget = \"broker-1\"\n"
    );
    let faults = settings(&jittered).faults;
    assert_eq!(faults[0].at, Duration::from_secs(8));
    assert_eq!(faults[0].jitter, Duration::from_millis(500));
    assert_eq!(
        err(&format!(
            "{MINIMAL}[[faults]]\nat = \"8s\"\njitter = 5\naction = \"heal\"\n"
        ))
        .to_string(),
        "s.toml:7:10: `jitter` must be a duration with a unit, like \"250ms\" or \"10s\", found an integer"
    );
    let written = written_back(&jittered);
    assert!(written.contains("jitter = \"500ms\""), "{written}");
    assert_eq!(settings(&written).faults, settings(&jittered).faults);
}

/// A `corrupt` fault rots the tail unless its `region` says `anywhere`; another word, or
/// `region` on another action, is an error at its place; the writer keeps the region.
#[test]
fn corrupt_region_is_read_checked_and_written_back() {
    let corrupt = |region: &str| {
        format!(
            "{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"corrupt\"\ntarget = \"broker-1\"\nfile = \"orders-0/*.log\"\nbytes = 1\n{region}"
        )
    };
    let region = |text: &str| match &ok(text).variants[0].settings.faults[0].action {
        FaultAction::Corrupt { region, .. } => *region,
        other => panic!("{other:?}"),
    };
    assert_eq!(region(&corrupt("")), CorruptRegion::Tail);
    assert_eq!(region(&corrupt("region = \"tail\"\n")), CorruptRegion::Tail);
    let anywhere = corrupt("region = \"anywhere\"\n");
    assert_eq!(region(&anywhere), CorruptRegion::Anywhere);
    assert_error(
        &corrupt("region = \"middle\"\n"),
        "s.toml:11:10: invalid `region` `middle`: expected \"tail\" or \"anywhere\"",
    );
    assert_error(
        &corrupt("region = 3\n"),
        "s.toml:11:10: `region` must be a string, found an integer",
    );
    assert_error(
        &format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"kill\"\ntarget = \"broker-1\"\nregion = \"tail\"\n"),
        "s.toml:9:1: `region` does not apply to action `kill` (it takes `target`)",
    );
    assert_error(
        &corrupt("latency = \"1s\"\n"),
        "s.toml:11:1: `latency` does not apply to action `corrupt` (it takes `target`, `file`, `bytes`, `region`)",
    );
    let written = written_back(&anywhere);
    assert!(written.contains("region = \"anywhere\""), "{written}");
    assert_eq!(region(&written), CorruptRegion::Anywhere);
}

#[test]
fn a_slow_disk_takes_a_latency_a_throughput_or_both() {
    let slow = |fields: &str| {
        format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"slow-disk\"\ntarget = \"broker-2\"\n{fields}")
    };
    let action = |text: &str| ok(text).variants[0].settings.faults[0].action.clone();
    assert_eq!(
        action(&slow("throughput = 2000000\n")),
        FaultAction::SlowDisk {
            target: Target::Host(HostName::Broker(2)),
            latency: Duration::ZERO,
            throughput: Some(2_000_000),
        }
    );
    assert_eq!(
        action(&slow("latency = \"5s\"\nthroughput = 100\n")).to_string(),
        "slow-disk broker-2 +5000ms at 100 B/s"
    );
    assert_eq!(
        action(&slow("latency = \"50ms\"\n")).to_string(),
        "slow-disk broker-2 +50ms"
    );
    assert_error(
        &slow(""),
        "s.toml:7:10: action `slow-disk` needs `latency`, `throughput` (bytes per second) or both",
    );
    assert_error(
        &slow("throughput = 0\n"),
        "s.toml:9:14: `throughput` must be at least 1, found 0",
    );
    // Written back as it was given, as `shrink` writes a file.
    let text = slow("throughput = 2000000\n");
    let written = written_back(&text);
    assert!(!written.contains("latency"), "{written}");
    assert_eq!(action(&written), action(&text));
}

#[test]
fn a_disk_s_throughput_is_bytes_per_second_or_unlimited() {
    let disk = |value: &str| format!("{MINIMAL}[disk]\nthroughput = {value}\nmemory = 8388608\n");
    let settings = |text: &str| ok(text).variants[0].settings.disk.clone();
    assert_eq!(settings(&disk("150000")).throughput, Some(150_000));
    assert_eq!(settings(&disk("\"unlimited\"")).throughput, None);
    assert_eq!(settings(&disk("1")).memory, 8 << 20);
    assert_error(
        &disk("\"fast\""),
        "s.toml:6:14: `throughput` must be bytes per second (an integer) or \"unlimited\", found a string",
    );
    assert_error(
        &format!("{MINIMAL}[disk]\nmemory = 1000\n"),
        "s.toml:6:10: `memory` must be at least 1048576, found 1000",
    );
    assert_error(
        &format!("{MINIMAL}[disk]\ndirty_ratio = 0\n"),
        "s.toml:6:15: `dirty_ratio` must be from 1 to 100, found 0",
    );
}

#[test]
fn a_slow_link_takes_a_latency_a_bandwidth_or_both() {
    let slow = |fields: &str| {
        format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"slow-link\"\nbetween = [\"broker-1\", \"broker-2\"]\n{fields}")
    };
    let action = |text: &str| ok(text).variants[0].settings.faults[0].action.clone();
    assert_eq!(
        action(&slow("bandwidth = 1000000\n")).to_string(),
        "slow-link broker-1 <-> broker-2 at 1000000 B/s"
    );
    assert_eq!(
        action(&slow("latency = \"20ms\"\nbandwidth = 10\n")).to_string(),
        "slow-link broker-1 <-> broker-2 +20ms at 10 B/s"
    );
    assert_error(
        &slow(""),
        "s.toml:7:10: action `slow-link` needs `latency`, `bandwidth` (bytes per second) or both",
    );
    let network = |value: &str| format!("{MINIMAL}[network]\nbandwidth = {value}\n");
    let bandwidth = |text: &str| ok(text).variants[0].settings.network.bandwidth;
    assert_eq!(bandwidth(&network("125000000")), Some(125_000_000));
    assert_eq!(bandwidth(&network("\"unlimited\"")), None);
    assert_error(
        &network("-1"),
        "s.toml:6:13: `bandwidth` must be at least 1, found -1",
    );
}

#[test]
fn a_transactional_id_makes_an_idempotent_producer_and_refuses_what_idempotence_cannot_take() {
    let s = ok(&format!(
        "{MINIMAL}[producer]\n\"transactional.id\" = \"writer\"\n\n[workload]\ntransaction_messages = 5\n"
    ))
    .variants
    .remove(0)
    .settings;
    assert_eq!(
        s.producer.transactional_id_of(2).as_deref(),
        Some("writer-2")
    );
    assert!(s.producer.enable_idempotence && s.producer.idempotent());
    assert_eq!(s.workload.transaction_messages, 5);
    assert_error(
        &format!("{MINIMAL}[producer]\n\"transactional.id\" = \"writer\"\nacks = \"1\"\n"),
        "s.toml:7:8: `transactional.id` (a transactional producer is idempotent) needs `acks` = \"all\" (Kafka rejects this producer configuration)",
    );
    assert_error(
        &format!(
            "{MINIMAL}[producer]\n\"transactional.id\" = \"writer\"\n\"enable.idempotence\" = false\n"
        ),
        "s.toml:6:22: `transactional.id` needs `enable.idempotence` = true (Kafka: \"Cannot set a transactional.id without also enabling idempotence\")",
    );
    assert_error(
        &format!("{MINIMAL}[producer]\n\"transactional.id\" = \"\"\n"),
        "s.toml:6:22: `transactional.id` is empty: Kafka needs a non-empty id",
    );
    assert_error(
        &format!(
            "{MINIMAL}[producer]\n\"transactional.id\" = \"w\"\n\"transaction.timeout.ms\" = 1000000\n"
        ),
        "s.toml:7:28: `transaction.timeout.ms` 1000000 is above the brokers' `transaction.max.timeout.ms` 900000: Kafka's initTransactions fails with INVALID_TRANSACTION_TIMEOUT",
    );
    assert_error(
        &format!("{MINIMAL}[[faults]]\nat = \"1s\"\naction = \"kill\"\ntarget = \"txn-coordinator\"\n"),
        "s.toml:8:10: `txn-coordinator` is producer-1's transaction coordinator (consumer-1's with exactly-once processors only): [producer] has no `transactional.id` and [workload] no `commit` = \"transactional\"",
    );
    assert_error(
        &format!("{MINIMAL}[workload]\ntransaction_messages = 5\n"),
        "s.toml:6:24: `transaction_messages` needs `[producer] \"transactional.id\"`: only a transactional producer sends in transactions",
    );
    assert_error(
        &(MINIMAL.replace("[cluster]\n", "[cluster]\nkafka = \"0.10\"\n")
            + "[producer]\n\"transactional.id\" = \"w\"\n"),
        "s.toml:7:22: `transactional.id` is not a key of Kafka 0.10: it came in 0.11 (KIP-98)",
    );
}

/// `[workload] output` makes the group's members processors; `commit = "transactional"`
/// is theirs, with Kafka's transactions.
#[test]
fn processors_write_to_another_topic_and_exactly_once_is_theirs() {
    let two = MINIMAL.replace(
        "topics = [{ name = \"orders\", partitions = 2, replication_factor = 3 }]",
        "topics = [{ name = \"orders\", partitions = 2, replication_factor = 3 }, { name = \"totals\", partitions = 2, replication_factor = 3 }]",
    );
    let group = "[workload]\ntopic = \"orders\"\nconsumers = 1\ngroup = \"etl\"\n";
    let s = ok(&format!(
        "{two}{group}output = \"totals\"\ncommit = \"transactional\"\n"
    ))
    .variants
    .remove(0)
    .settings;
    assert_eq!(s.workload.output.as_deref(), Some("totals"));
    assert!(s.transactional() && s.producer.transactional_id.is_none());
    assert!(!s.consumer.enable_auto_commit);
    assert_error(
        &format!("{two}[workload]\ntopic = \"orders\"\noutput = \"totals\"\n"),
        "s.toml:7:10: `output` needs a `group`: consumers outside a group commit nothing",
    );
    assert_error(
        &format!("{two}{group}output = \"orders\"\n"),
        "s.toml:9:10: `output` = \"orders\" is the topic the processors read: write their outputs to another topic of [cluster]",
    );
    assert_error(
        &format!("{two}{group}output = \"total\"\n"),
        "s.toml:9:10: unknown topic `total`; did you mean `totals`?",
    );
    assert_error(
        &format!("{two}{group}commit = \"transactional\"\n"),
        "s.toml:9:10: `commit` = \"transactional\" is a processor's exactly once (outputs and offsets in one transaction): set `output`, the topic the processors write",
    );
    assert_error(
        &format!(
            "{}{group}output = \"totals\"\ncommit = \"transactional\"\n",
            two.replace("[cluster]\n", "[cluster]\nkafka = \"0.10\"\n")
        ),
        "s.toml:11:10: `commit` = \"transactional\" needs Kafka's transactions, which came in 0.11 (KIP-98), not in Kafka 0.10",
    );
    assert_error(
        &format!(
            "{two}[producer]\nacks = \"1\"\n{group}output = \"totals\"\ncommit = \"transactional\"\n"
        ),
        "s.toml:6:8: `commit` = \"transactional\" makes the processors' producers transactional, so idempotent: they need `acks` = \"all\" (Kafka rejects this producer configuration)",
    );
    // Left at 2.4's default (acks=1), acks is set to all for the processors, as Kafka does.
    let old = ok(&format!(
        "{}{group}output = \"totals\"\ncommit = \"transactional\"\n",
        two.replace("[cluster]\n", "[cluster]\nkafka = \"2.4\"\n")
    ));
    assert_eq!(old.variants[0].settings.producer.acks, Acks::Leader);
}
