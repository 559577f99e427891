//! Scenario files of RocketMQ runs: `[cluster] system = "rocketmq"` with its groups,
//! queues and release, `[rocketmq]`, RocketMQ's targets, a variant that switches the
//! system; and every wrong combination of the two systems' keys and targets, each one
//! error that names the file, line and column.

use crate::support::{hightide, text};
use hightide::config::rocketmq::{FlushDiskType, Release};
use hightide::scenario::model::{FaultAction, Scenario, SystemName, Target};
use hightide::scenario::{parse, parse_with, Overrides, ScenarioError};
use hightide::types::{HostName, TopicPartition};
use std::path::Path;
use std::time::Duration;

/// Six lines: what a test adds starts on line 7.
const ROCKETMQ: &str = r#"duration = "30s"
[cluster]
system = "rocketmq"
rocketmq = "4.9.7"
groups = 2
topics = [{ name = "orders", queues = 4 }]
"#;

/// Kafka's smallest cluster, four lines.
const KAFKA: &str = r#"duration = "30s"
[cluster]
brokers = 3
topics = [{ name = "orders", partitions = 2, replication_factor = 3 }]
"#;

fn ok(text: &str) -> Scenario {
    match parse(text, Path::new("s.toml")) {
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

fn fault(action: &str, target: &str) -> String {
    format!("[[faults]]\nat = \"1s\"\naction = \"{action}\"\ntarget = \"{target}\"\n")
}

#[test]
fn a_rocketmq_file_parses_into_its_settings() {
    let text = format!(
        "{ROCKETMQ}[rocketmq]\nflushDiskType = \"SYNC_FLUSH\"\nflushIntervalCommitLog = 200\nmappedFileSizeCommitLog = 4096\nsendMsgTimeout = 1000\n[workload]\nconsumers = 1\ngroup = \"g\"\n{}{}{}{}{}",
        fault("kill", "master:broker-b"),
        fault("power-loss", "leader:orders/7"),
        fault("isolate", "namesrv"),
        fault("fsync-error", "broker-a-0"),
        fault("restart", "random-broker"),
    );
    let scenario = ok(&text);
    let s = &scenario.variants[0].settings;
    assert_eq!(s.cluster.system, SystemName::RocketMq);
    assert_eq!(s.cluster.rocketmq, Release::parse("4.9.7").unwrap());
    assert_eq!((s.cluster.groups, s.cluster.replicas), (2, 1));
    assert_eq!(s.cluster.topics[0].queues(), 4);
    assert_eq!(
        s.cluster.broker_hosts(),
        [
            HostName::GroupBroker { group: 0, id: 0 },
            HostName::GroupBroker { group: 1, id: 0 }
        ]
    );
    let store = &s.rocketmq.store;
    assert_eq!(store.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(store.flush_interval_commit_log, Duration::from_millis(200));
    assert_eq!(store.mapped_file_size_commit_log, 4096);
    assert_eq!(s.rocketmq.producer.send_msg_timeout, Duration::from_secs(1));
    assert_eq!(s.workload.group.as_deref(), Some("g"));
    let targets: Vec<&Target> = s
        .faults
        .iter()
        .map(|f| match &f.action {
            FaultAction::Kill(t)
            | FaultAction::PowerLoss(t)
            | FaultAction::Isolate(t)
            | FaultAction::FsyncError(t)
            | FaultAction::Restart(t) => t,
            other => panic!("{other}"),
        })
        .collect();
    assert_eq!(
        targets,
        [
            &Target::Master(1),
            &Target::Leader(TopicPartition::new("orders", 7)),
            &Target::Host(HostName::NameServer),
            &Target::Host(HostName::GroupBroker { group: 0, id: 0 }),
            &Target::RandomBroker,
        ]
    );
    assert_eq!(targets[0].to_string(), "master:broker-b");
}

/// One topic table serves both systems: queues default to partitions; `brokers` and the
/// replication factor are Kafka's, kept by a file that compares the systems, and ignored.
#[test]
fn queues_default_to_partitions_and_kafka_cluster_keys_are_ignored() {
    let scenario = ok(r#"duration = "30s"
[cluster]
system = "rocketmq"
brokers = 1
topics = [{ name = "orders", partitions = 3, replication_factor = 3 }]
"#);
    let s = &scenario.variants[0].settings;
    assert_eq!(s.cluster.topics[0].queues(), 3);
    assert_eq!(s.cluster.groups, 1);
    assert_eq!(s.cluster.rocketmq, Release::NEWEST);
    // A Kafka file keeps RocketMQ's keys the same way.
    let kafka = ok(&KAFKA.replace(
        "brokers = 3",
        "brokers = 3\ngroups = 4\nrocketmq = \"5.0.0\"",
    ));
    assert_eq!(kafka.variants[0].settings.cluster.system, SystemName::Kafka);
}

#[test]
fn a_variant_switches_the_system() {
    let text = format!(
        "{KAFKA}[workload]\nproducers = 2\n{}[variants.kafka]\n[variants.rocketmq]\n\"cluster.system\" = \"rocketmq\"\n\"cluster.rocketmq\" = \"5.1.0\"\n\"rocketmq.flushDiskType\" = \"SYNC_FLUSH\"\n",
        fault("kill", "leader:orders/0")
    );
    let scenario = ok(&text);
    let [kafka, rocketmq] = &scenario.variants[..] else {
        panic!("two variants")
    };
    assert_eq!(kafka.settings.cluster.system, SystemName::Kafka);
    assert_eq!(
        kafka.settings.rocketmq.store.flush_disk_type,
        FlushDiskType::AsyncFlush
    );
    let s = &rocketmq.settings;
    assert_eq!(s.cluster.system, SystemName::RocketMq);
    assert_eq!(s.cluster.rocketmq, Release::parse("5.1.0").unwrap());
    assert_eq!(s.rocketmq.store.flush_disk_type, FlushDiskType::SyncFlush);
    assert_eq!(s.workload.producers, 2, "the harness's sections are shared");
    // `--set` switches every variant, and says so of the one that set it.
    let args = ["cluster.system=rocketmq".to_owned()];
    let set = parse_with(
        &text,
        Path::new("s.toml"),
        &Overrides::parse(&args).unwrap(),
    )
    .unwrap();
    assert!(set
        .variants
        .iter()
        .all(|v| v.settings.cluster.system == SystemName::RocketMq));
    assert_eq!(
        set.warnings,
        [(
            "rocketmq".to_owned(),
            "--set cluster.system replaces what variant rocketmq sets".to_owned()
        )]
    );
}

#[test]
fn wrong_cluster_values() {
    assert_error(
        &ROCKETMQ.replace("groups = 2", "groups = 2\nreplicas = 2"),
        "s.toml:6:12: `replicas` = 2: RocketMQ's master/slave replication is not modelled yet; each broker group is one master (replicas = 1)",
    );
    assert_error(
        &ROCKETMQ.replace("groups = 2", "groups = 27"),
        "s.toml:5:10: `groups` must be from 1 to 26, found 27",
    );
    assert_error(
        &ROCKETMQ.replace("\"4.9.7\"", "5.3"),
        "s.toml:4:12: `rocketmq` must be a string naming a release in full, like \"5.3.3\", found the number 5.3",
    );
    assert!(err(&ROCKETMQ.replace("4.9.7", "5.4.0"))
        .to_string()
        .starts_with("s.toml:4:12: unknown RocketMQ release `5.4.0`; the releases are: 4.9.0,"));
    assert_error(
        &ROCKETMQ.replace("\"rocketmq\"", "\"pulsar\""),
        "s.toml:3:10: invalid `system` `pulsar`: expected \"kafka\" or \"rocketmq\"",
    );
    assert_error(
        &ROCKETMQ.replace("queues = 4", "queues = 1025"),
        "s.toml:6:39: `queues` must be from 1 to 1024, found 1025",
    );
}

/// `brokers` is Kafka's: missing, it is an error at `[cluster]` only in a Kafka run.
#[test]
fn kafka_needs_brokers_and_its_replication_factor_within_them() {
    assert_error(
        &KAFKA.replace("brokers = 3\n", ""),
        "s.toml:2:2: missing `brokers` in [cluster] (e.g. brokers = 3)",
    );
    assert_error(
        &format!("{ROCKETMQ}[variants.kafka]\n\"cluster.system\" = \"kafka\"\n"),
        "s.toml:2:2: missing `brokers` in [cluster] (e.g. brokers = 3): variant `kafka` runs Kafka",
    );
    assert_error(
        &KAFKA.replace("brokers = 3", "brokers = 2"),
        "s.toml:4:67: replication factor 3 of topic `orders` is above the broker count (2)",
    );
    ok(&KAFKA.replace("brokers = 3", "brokers = 2\nsystem = \"rocketmq\""));
}

/// Each system's own sections are errors in the other's runs, wherever they are set, and
/// the error names the run.
#[test]
fn one_systems_keys_in_the_others_run() {
    assert_error(
        &format!("{ROCKETMQ}[broker]\n\"min.insync.replicas\" = 2\n"),
        "s.toml:8:25: `min.insync.replicas` is a Kafka key ([broker]), and the scenario runs RocketMQ: RocketMQ's settings are in [rocketmq] (`hightide config --rocketmq` lists them)",
    );
    assert_error(
        &format!("{KAFKA}[producer]\nacks = \"all\"\n[variants.rmq]\n\"cluster.system\" = \"rocketmq\"\n"),
        "s.toml:6:8: `acks` is a Kafka key ([producer]), and variant `rmq` runs RocketMQ: RocketMQ's settings are in [rocketmq] (`hightide config --rocketmq` lists them)",
    );
    assert_error(
        &format!("{ROCKETMQ}[variants.v]\n\"consumer.check.crcs\" = false\n"),
        "s.toml:8:25: `check.crcs` is a Kafka key ([consumer]), and variant `v` runs RocketMQ: RocketMQ's settings are in [rocketmq] (`hightide config --rocketmq` lists them)",
    );
    assert_error(
        &format!("{KAFKA}[rocketmq]\nflushDiskType = \"SYNC_FLUSH\"\n"),
        "s.toml:6:17: `flushDiskType` is a RocketMQ key ([rocketmq]), and the scenario runs Kafka: a RocketMQ run sets [cluster] system = \"rocketmq\" (or `cluster.system` in a variant)",
    );
    assert_error(
        &format!(
            "{}[rocketmq]\nsyncFlushTimeout = 100\n[variants.k]\n\"cluster.system\" = \"kafka\"\n",
            ROCKETMQ.replace("groups = 2", "groups = 2\nbrokers = 1")
        ),
        "s.toml:9:20: `syncFlushTimeout` is a RocketMQ key ([rocketmq]), and variant `k` runs Kafka: a RocketMQ run sets [cluster] system = \"rocketmq\" (or `cluster.system` in a variant)",
    );
    assert_error(
        &ROCKETMQ.replace(
            "queues = 4 }",
            "queues = 4, config = { \"min.insync.replicas\" = 2 } }",
        ),
        "s.toml:6:42: a topic's `config` is Kafka's, and the scenario runs RocketMQ: RocketMQ's settings are in [rocketmq]",
    );
    // A key of [rocketmq] elsewhere names its table.
    assert_error(
        &format!("{KAFKA}[broker]\nflushDiskType = \"SYNC_FLUSH\"\n"),
        "s.toml:6:1: `flushDiskType` is not a key of [broker]: it is a key of [rocketmq]",
    );
}

#[test]
fn wrong_rocketmq_values() {
    assert_error(
        &format!("{ROCKETMQ}[rocketmq]\nflushDiskType = \"SYNC\"\n"),
        "s.toml:8:17: invalid `flushDiskType` `SYNC`: expected \"ASYNC_FLUSH\" or \"SYNC_FLUSH\"",
    );
    assert_error(
        &format!("{ROCKETMQ}[rocketmq]\nmappedFileSizeConsumeQueue = 30\n"),
        "s.toml:8:30: `mappedFileSizeConsumeQueue` must be a multiple of 20 (a ConsumeQueue entry's bytes) from 20 to 2147483647, found 30",
    );
    assert_error(
        &format!("{ROCKETMQ}[rocketmq]\nmappedFileSizeCommitLog = 1024\n"),
        "s.toml:8:27: `mappedFileSizeCommitLog` must be from 4096 to 2147483647, found 1024",
    );
    assert_error(
        &format!("{ROCKETMQ}[rocketmq]\nflushIntervalCommitLog = \"500ms\"\n"),
        "s.toml:8:26: `flushIntervalCommitLog` must be an integer, found a string",
    );
    assert_error(
        &format!("{ROCKETMQ}[rocketmq]\nconsumeFromWhere = \"CONSUME_FROM_TIMESTAMP\"\n"),
        "s.toml:8:20: invalid `consumeFromWhere` `CONSUME_FROM_TIMESTAMP`: expected \"CONSUME_FROM_LAST_OFFSET\" or \"CONSUME_FROM_FIRST_OFFSET\"",
    );
}

/// A RocketMQ consumer is always a group's member, and its push consumer commits one way.
#[test]
fn rocketmq_consumers_need_a_group_and_commit_what_they_consumed() {
    assert_error(
        &format!("{ROCKETMQ}[workload]\nconsumers = 2\n"),
        "s.toml:8:13: RocketMQ consumers are members of a consumer group: set `group`",
    );
    assert_error(
        &format!("{ROCKETMQ}[workload]\nconsumers = 2\ngroup = \"g\"\ncommit = \"after-processing\"\n"),
        "s.toml:10:10: `commit` = \"after-processing\": RocketMQ's push consumer commits what it has consumed, with each pull and every persistConsumerOffsetInterval (5 s); \"auto\" is its only mode",
    );
    let scenario = ok(&format!(
        "{ROCKETMQ}[rocketmq]\nconsumeFromWhere = \"CONSUME_FROM_FIRST_OFFSET\"\npersistConsumerOffsetInterval = 1000\n[workload]\nconsumers = 2\ngroup = \"g\"\n"
    ));
    let settings = &scenario.variants[0].settings;
    assert_eq!(
        settings.rocketmq.consumer.consume_from_where,
        hightide::config::rocketmq::ConsumeFromWhere::FirstOffset
    );
    assert_eq!(
        settings.rocketmq.consumer.persist_consumer_offset_interval,
        Duration::from_secs(1)
    );
}

#[test]
fn rocketmq_targets_in_a_kafka_run() {
    for (target, instead) in [
        (
            "master:broker-a",
            "the cluster has 3 brokers (broker-1 to broker-3)",
        ),
        (
            "broker-a-0",
            "the cluster has 3 brokers (broker-1 to broker-3)",
        ),
        ("namesrv", "its metadata host is `controller`"),
    ] {
        assert_error(
            &format!("{KAFKA}{}", fault("kill", target)),
            &format!("s.toml:8:10: `{target}` is a RocketMQ target, and the scenario runs Kafka: {instead}"),
        );
    }
}

#[test]
fn kafka_targets_in_a_rocketmq_run() {
    let text = format!("{ROCKETMQ}[workload]\ngroup = \"g\"\nconsumers = 1\n");
    for (target, instead) in [
        (
            "broker-1",
            "the cluster has 2 broker groups of 1 host (broker-a-0 to broker-b-0)",
        ),
        ("controller", "its metadata host is `namesrv`"),
        (
            "follower:orders/0",
            "a broker group has no slaves yet (replicas = 1), only its master",
        ),
        (
            "followers:orders/0",
            "a broker group has no slaves yet (replicas = 1), only its master",
        ),
        (
            "coordinator",
            "it has no group coordinator: each master keeps a group's offsets",
        ),
    ] {
        assert_error(
            &format!("{text}{}", fault("kill", target)),
            &format!("s.toml:13:10: `{target}` is a Kafka target, and the scenario runs RocketMQ: {instead}"),
        );
    }
    // In a variant, the error names it.
    assert_error(
        &format!("{KAFKA}{}[variants.r]\n\"cluster.system\" = \"rocketmq\"\n", fault("kill", "broker-2")),
        "s.toml:8:10: `broker-2` is a Kafka target, and variant `r` runs RocketMQ: the cluster has 1 broker group of 1 host (broker-a-0)",
    );
}

#[test]
fn rocketmq_hosts_beyond_the_cluster() {
    assert_error(
        &format!("{ROCKETMQ}{}", fault("kill", "broker-c-0")),
        "s.toml:10:10: no host `broker-c-0`: the cluster has 2 broker groups of 1 host (broker-a-0 to broker-b-0)",
    );
    assert_error(
        &format!("{ROCKETMQ}{}", fault("kill", "broker-a-1")),
        "s.toml:10:10: no host `broker-a-1`: the cluster has 2 broker groups of 1 host (broker-a-0 to broker-b-0)",
    );
    assert_error(
        &format!("{ROCKETMQ}{}", fault("kill", "master:broker-c")),
        "s.toml:10:10: no broker group `broker-c`: the cluster has 2 broker groups of 1 host (broker-a-0 to broker-b-0)",
    );
    // Queues are numbered across the groups: 2 groups of 4 are queues 0 to 7.
    assert_error(
        &format!("{ROCKETMQ}{}", fault("kill", "leader:orders/8")),
        "s.toml:10:10: queue 8 of topic `orders` does not exist: it has 8 queues (4 on each of 2 broker groups, 0 to 7)",
    );
    assert_error(
        &format!("{ROCKETMQ}{}", fault("disk-full", "namesrv")),
        "s.toml:10:10: `namesrv` has no disk: the NameServer keeps its routes in memory",
    );
    assert_error(
        &format!("{ROCKETMQ}{}", fault("kill", "master:broker-1")),
        "s.toml:10:10: invalid target `master:broker-1`: expected master:broker-<letter>, a broker group, like `master:broker-a`",
    );
}

#[test]
fn config_lists_a_rocketmq_releases_keys_and_rules() {
    let output = hightide(&["config", "--rocketmq", "4.9.7"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let listed = text(&output.stdout);
    for needle in [
        "rocketmq = \"4.9.7\"\n",
        "[rocketmq]",
        "flushDiskType = \"ASYNC_FLUSH\"\n",
        "mappedFileSizeConsumeQueue = 6000000\n",
        "#   4.9.1   the stored properties string loses its last separator (PR #2961)\n",
        "#   properties_trailing_separator: false\n",
        "#   checkpoint_longs: 3\n",
        "[workload]",
    ] {
        assert!(listed.contains(needle), "{needle} missing from:\n{listed}");
    }
    assert!(!listed.contains("PR #3979"), "5.0.0's step is after 4.9.7");
    assert!(!listed.contains("[broker]"), "Kafka's keys are not listed");
    let output = hightide(&["config", "--rocketmq", "5.3"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).starts_with("error: --rocketmq: invalid RocketMQ release `5.3`"));
    // Without the flag, Kafka's keys, as before.
    let kafka = text(&hightide(&["config"]).stdout);
    assert!(kafka.contains("[broker]") && !kafka.contains("[rocketmq]"));
}
