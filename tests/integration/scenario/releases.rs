//! `[cluster] kafka = "X.Y"`: a release's defaults and rules reach the settings, keys set
//! explicitly win over them, variants and sweeps vary the release, and a release or key
//! that does not fit is an error at its place.

use hightide::config::kafka::{Acks, Release, Truncation, RELEASES};
use hightide::scenario::model::Settings;
use hightide::scenario::{config_reference, load_sweep, parse};
use std::path::Path;
use std::time::Duration;

fn scenario(kafka: &str, extra: &str) -> String {
    format!(
        "duration = \"30s\"\n[cluster]\nbrokers = 3\n{kafka}\ntopics = [{{ name = \"orders\", partitions = 1, replication_factor = 3 }}]\n{extra}"
    )
}

fn settings(text: &str) -> Settings {
    match parse(text, Path::new("s.toml")) {
        Ok(scenario) => scenario.variants[0].settings.clone(),
        Err(e) => panic!("{e}\n{text}"),
    }
}

fn error(text: &str) -> String {
    match parse(text, Path::new("s.toml")) {
        Ok(_) => panic!("parsed:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_scenario_without_a_release_models_the_newest() {
    let s = settings(&scenario("", ""));
    assert_eq!(s.cluster.kafka, Release::NEWEST);
    assert_eq!(s.broker, Release::NEWEST.era().broker);
}

#[test]
fn kafka_0_10_has_its_own_defaults_and_rules() {
    let s = settings(&scenario("kafka = \"0.10\"", ""));
    assert_eq!(s.cluster.kafka.to_string(), "0.10");
    assert_eq!(s.broker.replication_truncation, Truncation::HighWatermark);
    assert!(s.broker.unclean_leader_election_enable);
    assert_eq!(s.broker.replica_lag_time_max, Duration::from_secs(10));
    assert!(!s.broker.rules.strict_min_isr);
    assert!(!s.broker.rules.diverging_epoch_in_fetch);
    assert_eq!(s.producer.acks, Acks::Leader);
    assert_eq!(s.producer.retries, 0);
    assert!(!s.producer.idempotent());
    assert_eq!(s.producer.linger, Duration::ZERO);
    // No delivery timeout before 2.1: a batch expires only while queued (KIP-91).
    assert!(s.producer.expire_in_accumulator);
    assert!(
        !settings(&scenario("kafka = \"2.1\"", ""))
            .producer
            .expire_in_accumulator
    );
}

#[test]
fn keys_set_explicitly_win_over_the_release() {
    let s = settings(&scenario(
        "kafka = \"0.10\"",
        "[broker]\n\"replication.truncation\" = \"leader-epoch\"\n\"unclean.leader.election.enable\" = false\n[producer]\nacks = \"all\"\nretries = 3\n",
    ));
    assert_eq!(s.broker.replication_truncation, Truncation::LeaderEpoch);
    assert!(!s.broker.unclean_leader_election_enable);
    assert_eq!(s.producer.acks, Acks::All);
    assert_eq!(s.producer.retries, 3);
    assert_eq!(
        s.broker.replica_lag_time_max,
        Duration::from_secs(10),
        "what the file leaves alone stays 0.10's"
    );
}

#[test]
fn every_known_release_parses() {
    for release in RELEASES {
        let s = settings(&scenario(&format!("kafka = \"{release}\""), ""));
        assert_eq!(s.cluster.kafka, *release);
        assert_eq!(s.broker, release.era().broker, "{release}");
    }
}

#[test]
fn an_unknown_release_is_an_error_that_lists_the_known_ones() {
    let message = error(&scenario("kafka = \"2.9\"", ""));
    assert!(
        message.starts_with(
            "s.toml:4:9: unknown Kafka release `2.9`; the releases are: 0.10, 0.11, 1.0, 1.1, 2.0"
        ),
        "{message}"
    );
    assert!(message.ends_with(&Release::NEWEST.to_string()), "{message}");
    assert_eq!(
        error(&scenario("kafka = 3.9", "")),
        "s.toml:4:9: `kafka` must be a string, like \"3.9\": a number cannot tell 2.1 from 2.10"
    );
    assert!(error(&scenario("kafka = \"3.9.1\"", "")).starts_with(
        "s.toml:4:9: invalid Kafka release `3.9.1`: expected a minor release like \"3.9\""
    ));
}

#[test]
fn a_key_newer_than_the_release_is_an_error_that_says_when_it_came() {
    assert_eq!(
        error(&scenario(
            "kafka = \"2.0\"",
            "[producer]\n\"delivery.timeout.ms\" = 60000\n"
        )),
        "s.toml:7:25: `delivery.timeout.ms` is not a key of Kafka 2.0: it came in 2.1 (KIP-91)"
    );
    assert_eq!(
        error(&scenario(
            "kafka = \"0.10\"",
            "[producer]\n\"enable.idempotence\" = false\n"
        )),
        "s.toml:7:24: `enable.idempotence` is not a key of Kafka 0.10: it came in 0.11 (KIP-98)"
    );
}

#[test]
fn enabling_idempotence_sets_the_keys_left_unset_and_refuses_those_set_against_it() {
    // 0.11: acks, retries and the requests in flight follow idempotence when unset
    // (KafkaProducer's configureAcks, configureRetries, configureInflightRequests).
    let enabled = "[producer]\n\"enable.idempotence\" = true\n";
    let s = settings(&scenario("kafka = \"0.11\"", enabled));
    assert!(s.producer.idempotent());
    assert_eq!(s.producer.acks, Acks::All);
    assert_eq!(s.producer.retries, i32::MAX as u32);
    assert_eq!(s.producer.max_in_flight_requests_per_connection, 1);
    let s = settings(&scenario("kafka = \"2.8\"", enabled));
    assert!(s.producer.idempotent());
    assert_eq!(s.producer.max_in_flight_requests_per_connection, 5);
    // A key set against it is an error at that key.
    let five = format!("{enabled}\"max.in.flight.requests.per.connection\" = 5\n");
    let message = error(&scenario("kafka = \"0.11\"", &five));
    assert!(
        message.starts_with("s.toml:8:")
            && message.contains("`max.in.flight.requests.per.connection` = 1 before Kafka 1.0"),
        "{message}"
    );
    let acks_1 = format!("{enabled}acks = \"1\"\n");
    assert!(error(&scenario("kafka = \"2.8\"", &acks_1)).contains("needs `acks` = \"all\""));
    // Left at its default (3.0+), idempotence is quietly off instead.
    let s = settings(&scenario("", "[producer]\nacks = \"1\"\n"));
    assert!(!s.producer.idempotent());
}

#[test]
fn variants_and_sweeps_vary_the_release() {
    let text = scenario(
        "kafka = \"3.9\"",
        "[variants.old]\n\"cluster.kafka\" = \"0.10\"\n[variants.file]\n[variants.newest.cluster]\nkafka = \"4.0\"\n",
    );
    let parsed = parse(&text, Path::new("s.toml")).expect("parses");
    let releases: Vec<String> = parsed
        .variants
        .iter()
        .map(|v| v.settings.cluster.kafka.to_string())
        .collect();
    assert_eq!(releases, ["0.10", "3.9", "4.0"]);
    assert_eq!(
        parsed.variants[0].settings.broker.replication_truncation,
        Truncation::HighWatermark
    );
    assert!(
        error(&scenario("", "[variants.x]\n\"cluster.kafka\" = \"0.9\"\n"))
            .starts_with("s.toml:7:19: unknown Kafka release `0.9`")
    );

    let dir = std::env::temp_dir().join(format!("hightide-releases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("base.toml"), scenario("", "")).expect("base");
    let matrix = dir.join("m.toml");
    std::fs::write(
        &matrix,
        "name = \"m\"\nbase = \"base.toml\"\n[vary]\n\"cluster.kafka\" = [\"0.10\", \"2.8\"]\n\"producer.acks\" = [\"1\"]\n",
    )
    .expect("matrix");
    let sweep = load_sweep(&matrix, &Default::default()).expect("sweep");
    let variants: Vec<(String, Release)> = sweep
        .scenario
        .variants
        .iter()
        .map(|v| (v.name.clone(), v.settings.cluster.kafka))
        .collect();
    assert_eq!(variants[0].0, "cluster.kafka=0.10 producer.acks=1");
    assert_eq!(variants[1].1.to_string(), "2.8");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

#[test]
fn the_config_reference_of_a_release_shows_its_defaults_and_history() {
    let old = config_reference(Release::parse("0.10").expect("known"));
    assert!(old.contains("kafka = \"0.10\"\n"), "{old}");
    assert!(old.contains("\"unclean.leader.election.enable\" = true\n"));
    assert!(old.contains("\"replication.truncation\" = \"high-watermark\"\n"));
    assert!(old.contains("acks = \"1\"\n"));
    assert!(old.contains("# \"delivery.timeout.ms\": not in Kafka 0.10, it came in 2.1 (KIP-91)\n"));
    assert!(old.contains(
        "\"unclean.leader.election.enable\" = [broker] unclean.leader.election.enable (true)\n"
    ));
    let mid = config_reference(Release::parse("2.8").expect("known"));
    assert!(
        mid.contains("#   2.5   `replica.lag.time.max.ms` 10000 → 30000"),
        "{mid}"
    );
    assert!(mid.contains("(KAFKA-10554)"));
    assert!(!mid.contains("KIP-679"), "3.0's step is not 2.8's");
    assert!(mid.contains("\"delivery.timeout.ms\" = 120000\n"));
}
