//! Consumer groups end to end: the same seed gives the same run (rebalances, commits and
//! a coordinator failover included), and the group's counts answer to its settings.

use std::path::Path;

fn catalog(name: &str) -> hightide::Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name);
    hightide::load(path).unwrap()
}

#[test]
fn a_group_run_replays_exactly() {
    let scenario = catalog("coordinator-failover.toml");
    let run = hightide::run(&scenario, "offsets-rf-1", 7).unwrap();
    assert!(run.counts.reprocessed > 0, "{:?}", run.counts);
    let again = hightide::run(&scenario, "offsets-rf-1", 7).unwrap();
    assert_eq!(again.trace_hash, run.trace_hash);
    assert_eq!(again.counts, run.counts);
}

/// The same crash, the same seed: only when the group commits differs, and with it
/// whether records are skipped or repeated.
#[test]
fn committing_before_processing_skips_and_after_repeats() {
    let scenario = catalog("consumer-commits.toml");
    let before = hightide::run(&scenario, "before-processing", 3).unwrap();
    let after = hightide::run(&scenario, "after-processing", 3).unwrap();
    assert!(before.counts.unprocessed > 0, "{:?}", before.counts);
    assert_eq!(before.counts.reprocessed, 0);
    assert_eq!(after.counts.unprocessed, 0);
    assert!(after.counts.reprocessed > 0, "{:?}", after.counts);
    assert_eq!(
        (before.counts.acked, before.counts.lost),
        (after.counts.acked, 0),
        "the brokers' side is the same run"
    );
}
