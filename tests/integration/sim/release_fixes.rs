//! Fixes that one Kafka release brought and the releases before it lack, shown whole:
//! the same faults under a release before the fix and one with it.

use hightide::history::facts::kafka::Fact;
use hightide::history::facts::FactEvent;
use hightide::scenario;
use hightide::sim::runner::RunOptions;
use hightide::systems;
use std::path::Path;

/// The last in-sync replica loses power and is elected again with an empty log, while
/// its two followers still hold what it acknowledged (as in last-replica-standing.toml).
fn last_replica_standing(kafka: &str) -> String {
    format!(
        r#"
name = "the followers of an emptied leader"
duration = "30s"
heal = "10s"

[cluster]
kafka = "{kafka}"
brokers = 3
topics = [{{ name = "orders", partitions = 1, replication_factor = 3 }}]

[broker]
"min.insync.replicas" = 2
"replica.lag.time.max.ms" = 5000
"unclean.leader.election.enable" = false

[producer]
acks = "all"

[workload]
producers = 1
topic = "orders"
rate = 500

[[faults]]
at = "3s"
action = "partition"
groups = [["broker-1"], ["broker-2", "broker-3"]]

[[faults]]
at = "14s"
action = "power-loss"
target = "broker-1"

[[faults]]
at = "14s"
action = "heal"

[[faults]]
at = "17s"
action = "restart"
target = "broker-1"

[[faults]]
at = "30s"
action = "restart"
target = "crashed"
"#
    )
}

fn facts(kafka: &str) -> Vec<FactEvent> {
    let text = last_replica_standing(kafka);
    let scenario =
        scenario::parse(&text, Path::new("kafka-7414.toml")).unwrap_or_else(|e| panic!("{e}"));
    let outcome = systems::run(&scenario.variants[0], 1, &RunOptions::default()).expect("run");
    outcome.final_state.facts.events().to_vec()
}

/// KAFKA-7414 (2.0.1): before it, a follower whose log ended past its leader's refused to
/// truncate while unclean election was off, and its broker exited, again at each restart.
/// Under 0.10 both followers of the emptied leader truncate to their high watermark, past
/// its end, and exit; under 1.1 they ask where their epoch ends, but the leader has not
/// recorded its own epoch yet (KAFKA-7415, also 2.0.1), so they fall back to the high
/// watermark and exit the same way; each exits again when the heal phase starts it.
/// Under 2.0 they truncate to the leader and follow.
#[test]
fn before_kafka_7414_a_follower_that_may_not_truncate_exits_at_every_start() {
    let refusals = |events: &[FactEvent]| -> Vec<(u32, u64)> {
        events
            .iter()
            .filter_map(|e| match e.fact.kafka() {
                Some(Fact::TruncationNotAllowed {
                    broker,
                    leader_end_offset,
                    log_end_offset,
                    ..
                }) => {
                    assert!(leader_end_offset < log_end_offset, "{e:?}");
                    Some((broker.0, e.time.since_start().as_millis() as u64))
                }
                _ => None,
            })
            .collect()
    };
    for release in ["0.10", "1.1"] {
        let old = refusals(&facts(release));
        for broker in [2, 3] {
            let exits: Vec<u64> = old.iter().filter(|r| r.0 == broker).map(|r| r.1).collect();
            assert!(
                exits.iter().any(|&t| t < 30_000) && exits.iter().any(|&t| t >= 30_000),
                "{release}: broker-{broker} exits when it meets the leader and again after \
                 its restart: {old:?}"
            );
        }
    }
    let fixed = facts("2.0");
    assert!(refusals(&fixed).is_empty(), "2.0 truncates instead");
    let truncated: Vec<u32> = fixed
        .iter()
        .filter_map(|e| match e.fact.kafka() {
            Some(Fact::Truncation { broker, .. }) => Some(broker.0),
            _ => None,
        })
        .collect();
    assert!(
        truncated.contains(&2) && truncated.contains(&3),
        "2.0's followers truncate to the emptied leader: {truncated:?}"
    );
}
