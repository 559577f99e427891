//! Stream processors end to end: two group members read `orders` and write one record per
//! input to `totals`. Killed mid-poll, an exactly-once processor's outputs of the open
//! transaction are written and aborted, and its successor's are the ones read; an
//! at-least-once processor's are read twice.

use hightide::config::bugs::Bugs;
use hightide::history::final_state::FinalState;
use hightide::history::{MessageId, Op};
use hightide::scenario::model::Variant;
use hightide::sim::runner::{RunOptions, RunOutcome};
use hightide::systems;
use std::collections::BTreeMap;
use std::path::Path;

/// consumer-1 is killed at 5 s; with no restart, consumer-2 takes its partitions once its
/// session (6 s) expires, and the coordinator aborts consumer-1's open transaction after
/// `transaction.timeout.ms` (5 s).
const SCENARIO: &str = r#"
name = "processors"
seeds = 3
duration = "12s"
heal = "20s"

[cluster]
brokers = 3
topics = [
  { name = "orders", partitions = 3, replication_factor = 3 },
  { name = "totals", partitions = 3, replication_factor = 3 },
]

[broker]
"offsets.topic.num.partitions" = 3
"transaction.state.log.num.partitions" = 3

[producer]
acks = "all"
"transaction.timeout.ms" = 5000

[consumer]
"session.timeout.ms" = 6000
"auto.offset.reset" = "earliest"

[workload]
producers = 1
topic = "orders"
output = "totals"
rate = 300
consumers = 2
group = "etl"
processing = "2ms"
commit = "transactional"

[[faults]]
at = "5s"
action = "kill"
target = "consumer-1"
"#;

fn variant(text: &str) -> Variant {
    let scenario = hightide::scenario::parse(text, Path::new("eos.toml")).expect("parses");
    scenario.variants.into_iter().next().expect("one variant")
}

fn run(variant: &Variant, seed: u64) -> RunOutcome {
    systems::run(variant, seed, &RunOptions::default()).expect("runs")
}

/// Copies of each id in the leaders' logs of the output topic: what a read_uncommitted
/// reader of `totals` would have read.
fn in_output_logs(state: &FinalState) -> BTreeMap<MessageId, usize> {
    let mut copies = BTreeMap::new();
    for partition in &state.outputs {
        let leader = partition
            .replicas
            .iter()
            .find(|r| Some(r.broker) == partition.leader)
            .expect("a leader's log");
        for id in leader.records.iter().filter_map(|r| r.id) {
            *copies.entry(id).or_insert(0) += 1;
        }
    }
    copies
}

#[test]
fn an_exactly_once_processor_killed_mid_transaction_writes_each_output_once() {
    let variant = variant(SCENARIO);
    let mut redone = 0;
    for seed in 1..=3 {
        let outcome = run(&variant, seed);
        let counts = &outcome.verdict.counts;
        assert!(outcome.verdict.processors);
        assert_eq!(
            (counts.eos_duplicates, counts.eos_missing, counts.hanging),
            (0, 0, 0),
            "seed {seed}: {counts:?}"
        );
        assert_eq!((counts.lost, counts.unprocessed), (0, 0), "seed {seed}");
        let outputs: usize = outcome
            .final_state
            .outputs
            .iter()
            .map(|p| p.read.len())
            .sum();
        let inputs: usize = outcome
            .final_state
            .partitions
            .iter()
            .map(|p| p.read.len())
            .sum();
        assert_eq!(outputs, inputs, "seed {seed}: one output per input");
        // What consumer-1's open transaction wrote is in the log, twice with its redo.
        let twice = in_output_logs(&outcome.final_state)
            .values()
            .filter(|&&n| n > 1)
            .count();
        if counts.reprocessed > 0 {
            redone += 1;
            assert!(
                twice > 0,
                "seed {seed}: the aborted outputs reached the log"
            );
        }
    }
    assert!(
        redone > 0,
        "some seed kills consumer-1 with a transaction open"
    );
}

#[test]
fn an_at_least_once_processor_writes_outputs_twice_and_misses_none() {
    let text = SCENARIO.replace(
        "commit = \"transactional\"",
        "commit = \"after-processing\"",
    );
    let variant = variant(&text);
    let mut duplicated = 0;
    for seed in 1..=3 {
        let outcome = run(&variant, seed);
        let counts = &outcome.verdict.counts;
        assert_eq!(counts.eos_missing, 0, "seed {seed}: {counts:?}");
        duplicated += counts.eos_duplicates;
        // Nothing transactional: no transaction state is kept.
        let transactional = outcome
            .history
            .iter()
            .any(|e| matches!(e.op, Op::Txn { .. }));
        assert!(!transactional);
    }
    assert!(duplicated > 0, "a poll's outputs are written again");
}

/// A downstream reader that does not filter aborted transactions (the final read with
/// `final_read_ignores_aborted`) sees the killed processor's aborted outputs as well as
/// its successor's: exactly once holds only for read_committed readers.
#[test]
fn a_reader_that_ignores_aborted_transactions_sees_outputs_twice() {
    let mut variant = variant(SCENARIO);
    variant.settings.bugs = Bugs {
        final_read_ignores_aborted: true,
        ..Bugs::default()
    };
    let found: u64 = (1..=3)
        .map(|seed| run(&variant, seed).verdict.counts.eos_duplicates)
        .sum();
    assert!(found > 0, "the aborted outputs are counted");
}

#[test]
fn a_processor_run_replays_exactly() {
    let variant = variant(SCENARIO);
    let first = run(&variant, 2);
    let again = run(&variant, 2);
    assert_eq!(first.trace_hash, again.trace_hash);
    assert_eq!(first.verdict.counts, again.verdict.counts);
}

/// A processor paused past its session and its transaction's timeout (Kafka 2.5: the
/// timeout fences its epoch) wakes up and sends its poll's outputs into a transaction that
/// already failed: the sends fail at once, as Kafka's `send` does, its commit fails, and it
/// starts a new instance. Seed 10 of the catalog file's `processor-pause` sends in that
/// state (found by `sweeps/transactions.toml`, where it once stopped the simulation).
#[test]
fn a_zombie_that_sends_into_its_fenced_transaction_fails_the_sends_and_goes_on() {
    let sets = [
        "cluster.kafka=2.5".to_owned(),
        "faults=processor-pause".to_owned(),
    ];
    let overrides = hightide::scenario::Overrides::parse(&sets).unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/eos-processor.toml");
    let scenario = hightide::scenario::load_with(&file, &overrides).unwrap();
    let report = hightide::run(&scenario, "exactly-once", 10).expect("runs to its end");
    let counts = &report.counts;
    assert_eq!(
        (counts.fenced, counts.txn_timeouts),
        (1, 1),
        "the timeout fenced the paused processor"
    );
    assert_eq!(
        (counts.eos_duplicates, counts.eos_missing, counts.lost),
        (0, 0, 0)
    );
    assert!(report.passed(), "{:?}", report.failures);
}
