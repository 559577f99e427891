//! The core promise: a run is a pure function of scenario and seed. The same seed gives
//! the same trace hash when run twice, when run alone or among other seeds (on other
//! threads), and different seeds give different runs.

use hightide::scenario;
use hightide::sim::batch::{self, Job};
use hightide::sim::runner::RunOptions;
use hightide::systems;
use std::path::Path;

/// Kafka's replication and retries; RocketMQ's recovery after a power loss (beside Kafka
/// in the same file), its timeouts and retries under a slow disk, and its consumer group
/// across a lost tail.
const SCENARIOS: [&str; 6] = [
    "quickstart.toml",
    "kip-101.toml",
    "idempotent-retries.toml",
    "rocketmq-flush.toml",
    "rocketmq-slow-fsync.toml",
    "rocketmq-torn-tail.toml",
];

fn load(name: &str) -> scenario::model::Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    scenario::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn same_seed_same_trace_hash() {
    for name in SCENARIOS {
        let scenario = load(name);
        for variant in &scenario.variants {
            for seed in [1, 2] {
                let a = systems::run(variant, seed, &RunOptions::default()).expect("run");
                let b = systems::run(variant, seed, &RunOptions::default()).expect("run");
                assert_eq!(
                    a.trace_hash, b.trace_hash,
                    "{name} {} seed {seed}",
                    variant.name
                );
                assert_eq!(
                    a.verdict.counts, b.verdict.counts,
                    "{name} {} seed {seed}",
                    variant.name
                );
                assert_eq!(a.history, b.history, "{name} {} seed {seed}", variant.name);
            }
        }
    }
}

#[test]
fn a_seed_alone_and_among_others_gives_the_same_hash() {
    let scenario = load("quickstart.toml");
    let variant = &scenario.variants[0];
    let alone = systems::run(variant, 3, &RunOptions::default())
        .expect("run")
        .trace_hash;
    let jobs: Vec<Job> = (1..=4).map(|seed| Job { variant, seed }).collect();
    let among = batch::run_all(systems::run, &jobs, 2, &RunOptions::default());
    let hashes: Vec<u64> = among
        .into_iter()
        .map(|r| r.expect("run").trace_hash)
        .collect();
    assert_eq!(hashes[2], alone);
    let distinct: std::collections::BTreeSet<_> = hashes.iter().collect();
    assert_eq!(
        distinct.len(),
        hashes.len(),
        "different seeds must give different runs: {hashes:x?}"
    );
}

#[test]
fn streamed_runs_arrive_in_job_order_and_stop_when_asked() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let scenario = load("quickstart.toml");
    let variant = &scenario.variants[0];
    let jobs: Vec<Job> = (1..=6).map(|seed| Job { variant, seed }).collect();
    let stop = AtomicBool::new(false);
    let mut seeds = Vec::new();
    let ran = batch::run_each(
        systems::run,
        &jobs,
        2,
        &RunOptions::default(),
        &stop,
        |job, result| (job.seed, result.expect("run").trace_hash),
        |(seed, _)| {
            seeds.push(seed);
            if seeds.len() == 2 {
                stop.store(true, Ordering::Relaxed);
            }
        },
    );
    // The runs already started when the stop came still arrive, in order, and whole.
    assert_eq!(ran, seeds.len());
    assert!(ran >= 2, "{seeds:?}");
    assert_eq!(seeds, (1..=ran as u64).collect::<Vec<_>>());
    // Stopped before the first: nothing starts.
    let ran = batch::run_each(
        systems::run,
        &jobs,
        2,
        &RunOptions::default(),
        &stop,
        |_, _| (),
        |()| panic!("no run may start once stopped"),
    );
    assert_eq!(ran, 0);
}
