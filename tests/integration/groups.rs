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

/// The same crash, the same seeds: only when the group commits differs, and with it
/// whether records are skipped or repeated. Whether a seed's kill lands between
/// processing and the commit's answer is a matter of milliseconds, so the counts are
/// summed over the file's ten seeds.
#[test]
fn committing_before_processing_skips_and_after_repeats() {
    let scenario = catalog("consumer-commits.toml");
    let (mut skipped, mut repeated) = (0, 0);
    for seed in 1..=10 {
        let before = hightide::run(&scenario, "before-processing", seed).unwrap();
        let after = hightide::run(&scenario, "after-processing", seed).unwrap();
        assert_eq!(
            before.counts.reprocessed, 0,
            "seed {seed}: {:?}",
            before.counts
        );
        assert_eq!(
            after.counts.unprocessed, 0,
            "seed {seed}: {:?}",
            after.counts
        );
        assert_eq!(
            (before.counts.acked, before.counts.lost),
            (after.counts.acked, 0),
            "seed {seed}: the brokers' side is the same run"
        );
        skipped += before.counts.unprocessed;
        repeated += after.counts.reprocessed;
    }
    assert!(
        skipped > 0 && repeated > 0,
        "skipped {skipped}, repeated {repeated}"
    );
}
