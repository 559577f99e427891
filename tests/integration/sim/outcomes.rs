//! What the history says a send's outcome was must agree with where its message ended up:
//! a send recorded as a definite failure (`fail`) must not be in the final read.

use hightide::history::{MessageId, Op};
use hightide::scenario;
use hightide::sim::runner::{self, RunOptions};
use std::collections::BTreeSet;
use std::path::Path;

/// Regression: a controlled shutdown of the leader answers the produces parked in its
/// purgatory with NOT_LEADER_OR_FOLLOWER after their records were appended (as Kafka's
/// `DelayedProduce` does). With `retries = 0` the producer gave up and recorded a definite
/// failure, yet the new leader had the records: seed 3 showed `producer-1:003999 ...
/// failed at t=8.008s (NOT_LEADER_OR_FOLLOWER); in the final read at orders/0@3999`.
#[test]
fn a_send_recorded_as_failed_is_not_in_the_final_read() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/controlled-shutdown.toml");
    let scenario = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut variant = scenario
        .variants
        .iter()
        .find(|v| v.name == "shutdown")
        .expect("the shutdown variant")
        .clone();
    variant.settings.producer.retries = 0;
    let mut not_leader_outcomes = 0;
    for seed in 1..=5 {
        let outcome = runner::run(&variant, seed, &RunOptions::default()).expect("run");
        let read: BTreeSet<MessageId> = outcome
            .final_state
            .partitions
            .iter()
            .flat_map(|p| &p.read)
            .filter_map(|r| MessageId::parse_value(&r.value))
            .collect();
        for event in &outcome.history {
            match &event.op {
                Op::Fail { id, error } => assert!(
                    !read.contains(id),
                    "seed {seed}: {id} failed ({error}) but is in the final read"
                ),
                Op::Info { error, .. } if error == "NOT_LEADER_OR_FOLLOWER" => {
                    not_leader_outcomes += 1;
                }
                _ => {}
            }
        }
    }
    assert!(
        not_leader_outcomes > 0,
        "no send ended on NOT_LEADER_OR_FOLLOWER: the scenario no longer exercises the case"
    );
}
