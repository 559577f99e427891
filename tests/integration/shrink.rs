//! Shrinking: the nemesis's draws written out replay the nemesis run exactly; a shrunk
//! run still breaks the goal, with fewer faults; its scenario file resolves to exactly
//! the shrunk settings, whatever the original's layout; the catalog's shrunk example is
//! what shrink writes; and a run that fails only with an injected bug shrinks to one that
//! fails with the bug and passes without it.

use hightide::check::{holds, Count};
use hightide::config::bugs::Bugs;
use hightide::scenario::model::Variant;
use hightide::sim::faults;
use hightide::sim::runner::RunOptions;
use hightide::systems::run;
use hightide::{ShrinkOptions, Shrunk};
use std::path::Path;

const UNSAFE: &str = "scenarios/explore/unsafe-nemesis.toml";

fn options() -> ShrinkOptions {
    ShrinkOptions {
        max_runs: 300,
        threads: 2,
    }
}

fn lost(variant: &Variant, seed: u64) -> u64 {
    run(variant, seed, &RunOptions::default())
        .expect("run")
        .verdict
        .counts
        .lost
}

#[test]
fn the_nemesis_draws_written_out_replay_the_nemesis_run() {
    let scenario = hightide::load(UNSAFE).unwrap();
    let drawn = &scenario.variants[0];
    let settings = &drawn.settings;
    let nemesis = settings.nemesis.as_ref().expect("a nemesis");
    let mut written = drawn.clone();
    written.settings.nemesis = None;
    written.settings.faults =
        faults::nemesis_episodes(nemesis, &settings.cluster, settings.duration, 8).concat();
    written.settings.faults.sort_by_key(|f| f.at);
    assert!(written.settings.faults.len() >= 4);
    let (a, b) = (
        run(drawn, 8, &RunOptions::default()).unwrap(),
        run(&written, 8, &RunOptions::default()).unwrap(),
    );
    assert_eq!(a.trace_hash, b.trace_hash);
    assert_eq!(a.verdict.counts, b.verdict.counts);
}

/// Seed 2 of the unsafe nemesis loses thousands of acknowledged messages over five faults;
/// shrunk, two are left (a partition naming two brokers, a power loss), and it still loses.
#[test]
fn an_unsafe_nemesis_run_shrinks_to_its_cause_and_the_catalog_keeps_it() {
    let scenario = hightide::load(UNSAFE).unwrap();
    let shrunk = hightide::shrink(&scenario, "unsafe-nemesis", 2, &options()).unwrap();
    assert_eq!(shrunk.goal.count, Count::Lost);
    assert!(shrunk.original_faults >= 4, "{}", shrunk.original_faults);
    let faults = &shrunk.variant.settings.faults;
    assert!(faults.len() <= 2, "{faults:?}");
    assert!(!holds(&shrunk.goal, lost(&shrunk.variant, 2)));
    assert_eq!(lost(&shrunk.variant, 2), shrunk.count);
    assert!(!shrunk.out_of_runs && shrunk.runs < 300, "{}", shrunk.runs);
    for step in &shrunk.steps {
        assert!(!holds(&shrunk.goal, step.count), "{step:?}");
    }

    // Its file reads back as the same run, and the catalog's example is that file with
    // its name, description and expectation edited.
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shrunk-unsafe-nemesis.toml");
    let text = shrunk.scenario_file(&scenario, &[], &out).unwrap();
    let written = hightide::parse(&out, &text).unwrap();
    assert_eq!(written.seeds, [2]);
    assert!(!hightide::run(&written, &written.variants[0].name, 2)
        .unwrap()
        .passed());
    let catalog = hightide::load("scenarios/shrunk-unsafe-nemesis.toml").unwrap();
    assert_eq!(
        format!("{:?}", catalog.variants[0].settings),
        format!("{:?}", shrunk.variant.settings),
        "scenarios/shrunk-unsafe-nemesis.toml is no longer what shrink writes:\n{text}"
    );
}

/// The shrink is a function of the file, seed and variant: the same on one thread or two.
#[test]
fn a_shrink_is_the_same_on_any_number_of_threads() {
    let scenario = hightide::load(UNSAFE).unwrap();
    let shrink = |threads| {
        let options = ShrinkOptions {
            threads,
            ..options()
        };
        hightide::shrink(&scenario, "unsafe-nemesis", 8, &options).unwrap()
    };
    let (one, two): (Shrunk, Shrunk) = (shrink(1), shrink(2));
    assert_eq!(one.steps, two.steps);
    assert_eq!(one.runs, two.runs);
    assert_eq!(
        format!("{:?}", one.variant.settings),
        format!("{:?}", two.variant.settings)
    );
}

/// A file laid out every way the format allows (dotted keys in a variant, an inline
/// workload table, `[[cluster.topics]]`, several variants) is written back so that it
/// resolves to the shrunk settings (`scenario_file` checks that and errs otherwise), with
/// the `--set` values in.
#[test]
fn a_shrunk_file_resolves_to_the_shrunk_settings_whatever_the_layout() {
    let text = r#"
seeds = 3
duration = "8s"

[[cluster.topics]]
name = "orders"
partitions = 3
replication_factor = 3

[cluster]
brokers = 4

[broker]
min.insync.replicas = 1

[producer]
acks = 1

[workload]
rate = 300
producers = 2

[[faults]]
at = "1s"
action = "kill"
target = "producer-2"

[nemesis]
actions = ["power-loss", "kill"]
interval = "2s"
recover = "1s"

[expect]
lost = 0
reordered = "<= 100000"

[expect_some]
moved = ">= 0"

[variants.safe]
producer.acks = "all"
"broker.min.insync.replicas" = 2

[variants.fast]
workload = { rate = 400 }
expect = { reordered = 0, duplicates = 0 }
"#;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("shrink-layout");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("layout.toml");
    std::fs::write(&file, text).unwrap();
    let sets = [
        "broker.unclean.leader.election.enable=true".to_owned(),
        "cluster.kafka=3.9".to_owned(),
        "producer.linger.ms = 0".to_owned(),
    ];
    let overrides = hightide::scenario::Overrides::parse(&sets).unwrap();
    let scenario = hightide::scenario::load_with(&file, &overrides).unwrap();
    let seed = (1..=20)
        .find(|&seed| !hightide::run(&scenario, "fast", seed).unwrap().passed())
        .expect("a seed of the fast variant that reorders acknowledged messages");
    let shrunk = hightide::shrink(&scenario, "fast", seed, &options()).unwrap();
    let settings = &shrunk.variant.settings;
    assert!(settings.workload.rate < 400 || settings.duration.as_secs() < 8);
    assert_eq!(settings.workload.producers, 2, "a fault names producer-2");
    let out = dir.join("min.toml");
    let written = shrunk.scenario_file(&scenario, &sets, &out).unwrap();
    assert!(!written.contains("[variants.safe]"), "{written}");
    assert!(!written.contains("[nemesis]"), "{written}");
    assert!(
        written.contains("\"unclean.leader.election.enable\" = true"),
        "{written}"
    );
}

/// The mutation suite's bug (a leader whose HW follows its own LEO) loses acknowledged
/// messages under a nemesis that the real broker survives; shrunk, the schedule still
/// fails with the bug, and passes without it.
#[test]
fn a_run_failing_only_with_an_injected_bug_shrinks_to_a_schedule_that_needs_the_bug() {
    let text = r#"
seeds = 20
duration = "12s"

[cluster]
brokers = 3
topics = [{ name = "orders", partitions = 1, replication_factor = 3 }]

[broker]
"min.insync.replicas" = 2

[producer]
acks = "all"
"request.timeout.ms" = 3000

[workload]
rate = 200

[nemesis]
actions = ["kill", "power-loss", "isolate"]
interval = "2s"
recover = "2s"

[expect]
lost = 0
"#;
    let scenario = hightide::parse("bug.toml", text).unwrap();
    let sound = scenario.variants[0].clone();
    let mut buggy = sound.clone();
    buggy.settings.bugs = Bugs {
        hw_on_leader_leo: true,
        ..Bugs::default()
    };
    let seed = scenario
        .seeds
        .iter()
        .copied()
        .find(|&seed| lost(&buggy, seed) > 0 && lost(&sound, seed) == 0)
        .expect("a seed that loses messages with the bug and not without");
    let shrunk = hightide::shrink::shrink(&buggy, seed, &options(), |_, _| {}).unwrap();
    assert!(shrunk.variant.settings.faults.len() < shrunk.original_faults);
    assert!(lost(&shrunk.variant, seed) > 0);
    let mut fixed = shrunk.variant.clone();
    fixed.settings.bugs = Bugs::default();
    assert_eq!(lost(&fixed, seed), 0, "{:?}", fixed.settings.faults);
    assert!(shrunk
        .scenario_file(&scenario, &[], Path::new("x.toml"))
        .is_err());
}

/// A fault with a jitter is shrunk from the instant its seed drew: the shrunk file has
/// that instant (or an earlier one the shrink moved it to) and no jitter.
#[test]
fn a_jittered_fault_is_shrunk_from_the_instant_its_seed_drew() {
    let text = crate::support::ACKS_1_POWER_LOSS.replace(
        "at = \"3s\"\naction = \"power-loss\"",
        "at = \"3s\"\njitter = \"400ms\"\naction = \"power-loss\"",
    );
    let scenario = hightide::parse("jittered.toml", &text).unwrap();
    let variant = &scenario.variants[0];
    // The first seed whose drawn instant loses something (most do: acks=1, a slow link).
    let seed = (1..=10)
        .find(|&seed| lost(variant, seed) > 0)
        .expect("a losing seed");
    let drawn = faults::instant(&variant.settings.faults[1], seed);
    assert_ne!(
        drawn,
        std::time::Duration::from_secs(3),
        "the seed draws the instant"
    );
    let shrunk = hightide::shrink(&scenario, "jittered", seed, &options()).unwrap();
    let faults = &shrunk.variant.settings.faults;
    assert!(faults.iter().all(|f| f.jitter.is_zero()), "{faults:?}");
    let power_loss = faults
        .iter()
        .find(|f| f.action.to_string().starts_with("power-loss"))
        .expect("the power loss is the cause");
    assert!(
        power_loss.at <= drawn,
        "{:?} after {drawn:?}",
        power_loss.at
    );
    assert!(!holds(&shrunk.goal, lost(&shrunk.variant, seed)));
}

/// A power loss of the leader and a follower at once loses acknowledged messages because
/// of the leader alone (acks=1, the followers behind a slow link): the shrunk fault names
/// the leader, no longer a list.
#[test]
fn a_target_list_narrows_to_the_member_the_failure_needs() {
    let text = crate::support::ACKS_1_POWER_LOSS.replace(
        "target = \"leader:orders/0\"",
        "target = [\"follower:orders/0\", \"leader:orders/0\"]",
    );
    let scenario = hightide::parse("listed.toml", &text).unwrap();
    let variant = &scenario.variants[0];
    assert!(lost(variant, 1) > 0);
    let shrunk = hightide::shrink(&scenario, "listed", 1, &options()).unwrap();
    let faults = &shrunk.variant.settings.faults;
    let power_loss = faults
        .iter()
        .find(|f| f.action.to_string().starts_with("power-loss"))
        .expect("the power loss is the cause");
    assert_eq!(power_loss.action.to_string(), "power-loss leader:orders/0");
    assert!(shrunk.steps.iter().any(|s| s
        .change
        .starts_with("follower:orders/0 left out of power-loss")));
    assert!(!holds(&shrunk.goal, lost(&shrunk.variant, 1)));
}

/// A RocketMQ run with a consumer group shrinks like a Kafka one: to the power loss alone,
/// the group kept with at least one member (a group without members does not parse), and
/// the written file reads back and still fails.
#[test]
fn a_rocketmq_run_with_a_group_shrinks_to_a_file_that_still_fails() {
    let text = r#"name = "ASYNC_FLUSH claims no loss"
seeds = 1
duration = "6s"
heal = "5s"
[cluster]
system = "rocketmq"
groups = 2
topics = [{ name = "orders", queues = 2 }]
[workload]
rate = 100
consumers = 2
group = "billing"
[[faults]]
at = "2s"
action = "kill"
target = "consumer-2"
[[faults]]
at = "4s"
action = "power-loss"
target = "master:broker-a"
[expect]
lost = 0
"#;
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rocketmq-group.toml");
    let scenario = hightide::parse(&path, text).unwrap();
    let name = scenario.variants[0].name.clone();
    let shrunk = hightide::shrink(&scenario, &name, 1, &options()).unwrap();
    assert_eq!(shrunk.goal.count, Count::Lost);
    let workload = &shrunk.variant.settings.workload;
    assert_eq!(workload.group.as_deref(), Some("billing"));
    assert!(workload.consumers >= 1, "{workload:?}");
    assert_eq!(shrunk.variant.settings.faults.len(), 1);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rocketmq-group-shrunk.toml");
    let written = shrunk.scenario_file(&scenario, &[], &out).unwrap();
    let reread = hightide::parse(&out, &written).unwrap();
    assert!(!hightide::run(&reread, &reread.variants[0].name, 1)
        .unwrap()
        .passed());
}
