//! The library's front door, used as another crate would: a scenario written in code, run
//! on a seed, its counts read; a folder's file checked as `cargo test` checks it.

use crate::support::ACKS_1_POWER_LOSS;
use std::path::Path;

#[test]
fn a_scenario_written_in_code_runs_and_replays() {
    // A scenario without [variants] has one, named after its file.
    let scenario = hightide::parse("in-code.toml", ACKS_1_POWER_LOSS).unwrap();
    let run = hightide::run(&scenario, "in-code", 1).unwrap();
    assert!(run.counts.acked > 1000, "{:?}", run.counts);
    assert!(run.counts.lost > 0, "acks=1 loses to a leader power loss");
    assert!(!run.passed());
    assert!(run.failures[0].contains("lost"), "{:?}", run.failures);
    let again = hightide::run(&scenario, "in-code", 1).unwrap();
    assert_eq!(again.trace_hash, run.trace_hash);
    assert_eq!(again.counts, run.counts);
}

#[test]
fn run_seeds_gives_every_variant_of_every_seed_in_order() {
    let text = ACKS_1_POWER_LOSS.replace(
        "[expect]\nlost = 0\n",
        "[variants.leader]\n\"producer.acks\" = 1\n[variants.all]\n\"producer.acks\" = \"all\"\n\"broker.min.insync.replicas\" = 2\n",
    );
    let scenario = hightide::parse("variants.toml", &text).unwrap();
    let runs = hightide::run_seeds(&scenario, &[1, 2]).unwrap();
    let order: Vec<(u64, &str)> = runs.iter().map(|r| (r.seed, r.variant.as_str())).collect();
    assert_eq!(
        order,
        [(1, "leader"), (1, "all"), (2, "leader"), (2, "all")]
    );
    assert!(runs
        .iter()
        .filter(|r| r.variant == "all")
        .all(|r| r.counts.lost == 0));
    let alone = hightide::run(&scenario, "all", 2).unwrap();
    assert_eq!(alone.trace_hash, runs[3].trace_hash);
}

#[test]
fn mistakes_are_errors_that_say_where() {
    let error = hightide::parse("bad.toml", "duration = \"ten seconds\"\n").unwrap_err();
    let text = error.to_string();
    assert!(text.contains("bad.toml:1:"), "{text}");
    let scenario = hightide::parse("in-code.toml", ACKS_1_POWER_LOSS).unwrap();
    let error = hightide::run(&scenario, "nope", 1).unwrap_err();
    assert!(matches!(error, hightide::Error::NoVariant { .. }));
    assert!(error.to_string().contains("(it has: in-code)"), "{error}");
}

#[test]
fn check_file_names_each_failure_and_its_replay() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("lab");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("acks-1.toml");
    std::fs::write(
        &file,
        ACKS_1_POWER_LOSS.replace("seeds = [1, 2]", "seeds = [1]"),
    )
    .unwrap();
    let failures = hightide::check_file(&file).unwrap_err();
    assert!(
        failures.contains("in code: seed 1 variant acks-1: expected lost == 0, got"),
        "{failures}"
    );
    assert!(
        failures.contains("replay: cargo run --release -- run"),
        "{failures}"
    );
    let fine = dir.join("acks-1-loses.toml");
    std::fs::write(
        &fine,
        ACKS_1_POWER_LOSS
            .replace("seeds = [1, 2]", "seeds = [1]")
            .replace("lost = 0", "lost = \"> 0\""),
    )
    .unwrap();
    hightide::check_file(&fine).unwrap();
}
