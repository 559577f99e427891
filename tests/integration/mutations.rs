//! Proof that the checkers catch real bugs: each test injects one known bug into the
//! broker or the harness (`config::Bugs`, unreachable from scenario files) and runs a
//! catalog scenario. The count must flag the bug on the seeds below, and must not flag
//! the same seeds without it. docs/checkers.md lists the table.

use hightide::check::{self, Count, Counts};
use hightide::config::bugs::Bugs;
use hightide::os::disk::PowerLossModel;
use hightide::scenario::{self, model::Variant};
use hightide::sim::runner::RunOptions;
use hightide::systems;
use std::path::Path;

const SEEDS: [u64; 2] = [1, 2];

fn variant(file: &str, name: &str) -> Variant {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let scenario = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    scenario
        .variants
        .into_iter()
        .find(|v| v.name == name)
        .unwrap_or_else(|| panic!("{file} has no variant {name}"))
}

fn counts(variant: &Variant, bugs: Bugs, seed: u64) -> (Counts, Vec<String>) {
    let mut variant = variant.clone();
    variant.settings.bugs = bugs;
    let outcome = systems::run(&variant, seed, &RunOptions::default()).expect("the run");
    let failures = check::evaluate(&variant.expect, &outcome.verdict.counts);
    (outcome.verdict.counts, failures)
}

/// Without the bug, each of `flagged` is 0 and the expectations hold on every seed; with
/// it, some seed makes each of `flagged` positive and fails the expectations, as one
/// failing seed fails the file. (Sends arrive at seeded instants, so a bug whose window a
/// fault must hit, such as a read above the HW just before a leader dies, is caught on the
/// seeds that hit it, not on all of them.)
fn caught(variant: &Variant, bugs: Bugs, flagged: &[Count]) {
    let mut caught_on = Vec::new();
    for seed in SEEDS {
        let (clean, clean_failures) = counts(variant, Bugs::default(), seed);
        for &count in flagged {
            assert_eq!(
                clean.get(count),
                0,
                "seed {seed} without the bug: {clean:?}"
            );
        }
        assert!(clean_failures.is_empty(), "seed {seed}: {clean_failures:?}");
        let (buggy, failures) = counts(variant, bugs, seed);
        if flagged.iter().all(|&count| buggy.get(count) > 0) && !failures.is_empty() {
            caught_on.push(seed);
        }
    }
    assert!(
        !caught_on.is_empty(),
        "{bugs:?} went unnoticed by {flagged:?} on seeds {SEEDS:?}"
    );
}

#[test]
fn acks_all_answered_at_the_append_loses_acknowledged_messages() {
    let bugs = Bugs {
        ack_at_append: true,
        ..Bugs::default()
    };
    caught(
        &variant("leader-failure.toml", "acks-all"),
        bugs,
        &[Count::Lost],
    );
}

#[test]
fn a_high_watermark_on_the_leader_alone_loses_acknowledged_messages() {
    let bugs = Bugs {
        hw_on_leader_leo: true,
        ..Bugs::default()
    };
    caught(
        &variant("leader-failure.toml", "acks-all"),
        bugs,
        &[Count::Lost],
    );
}

#[test]
fn a_follower_that_never_truncates_diverges() {
    let bugs = Bugs {
        skip_follower_truncation: true,
        ..Bugs::default()
    };
    // The old leader returns after the unclean election holding records the new leader
    // replaced; without truncating it keeps them.
    caught(
        &variant("unclean-election.toml", "unclean-on"),
        bugs,
        &[Count::Divergent],
    );
}

#[test]
fn consumers_served_beyond_the_high_watermark_read_dirty() {
    // Twenty leader kills, a consumer reading: records above the HW of a dying leader are
    // truncated away.
    let reading = variant("leader-kills.toml", "leader-kills");
    let bugs = Bugs {
        read_beyond_hw: true,
        ..Bugs::default()
    };
    caught(&reading, bugs, &[Count::DirtyReads]);
}

#[test]
fn a_final_read_that_skips_a_partition_is_unreadable_never_zero_lost() {
    let bugs = Bugs {
        final_read_skips_a_partition: true,
        ..Bugs::default()
    };
    let acks_all = variant("quickstart.toml", "acks-all-min-isr-2");
    caught(&acks_all, bugs, &[Count::Unreadable]);
    let (buggy, _) = counts(&acks_all, bugs, 1);
    assert_eq!(buggy.lost, 0, "unread sends are unknown, not lost");
    assert_eq!(buggy.delivered, 0);
}

#[test]
fn a_broker_that_ignores_sequence_numbers_duplicates_retried_batches() {
    let bugs = Bugs {
        ignore_sequences: true,
        ..Bugs::default()
    };
    caught(
        &variant("idempotent-retries.toml", "idempotent"),
        bugs,
        &[Count::Duplicates],
    );
}

/// Idempotence keeps retries in send order twice over: the producer puts a retried batch
/// back in sequence order, and the leader refuses a sequence that skips one. Either
/// alone restores the order the other lost; only both broken reorder the retries.
#[test]
fn idempotence_reorders_only_with_both_of_its_order_rules_broken() {
    let idempotent = variant("idempotent-retries.toml", "idempotent");
    let producer_only = Bugs {
        reenqueue_ignores_sequence: true,
        ..Bugs::default()
    };
    let broker_only = Bugs {
        ignore_sequences: true,
        ..Bugs::default()
    };
    for seed in SEEDS {
        assert_eq!(counts(&idempotent, producer_only, seed).0.reordered, 0);
        assert_eq!(counts(&idempotent, broker_only, seed).0.reordered, 0);
    }
    let both = Bugs {
        reenqueue_ignores_sequence: true,
        ignore_sequences: true,
        ..Bugs::default()
    };
    caught(&idempotent, both, &[Count::Reordered]);
}

#[test]
fn a_recovery_that_checks_no_crc_serves_corrupt_bytes() {
    let bugs = Bugs {
        skip_crc_on_recovery: true,
        ..Bugs::default()
    };
    // Without a torn write the flipped bytes land inside whole batches, which only the CRC
    // tells from good ones (a torn tail is cut by its length alone, CRC or not). The
    // corrupt batch stays in broker-3's log: the replica comparison sees it, and once
    // broker-3 leads, the final read stops at it rather than serve it.
    let mut corrupted = variant("corrupt-tail.toml", "corrupt-tail");
    corrupted.settings.disk.power_loss = PowerLossModel::DropUnflushed;
    caught(&corrupted, bugs, &[Count::Divergent, Count::Unreadable]);
}

#[test]
fn a_final_read_that_checks_no_crc_serves_rot_as_data() {
    let bugs = Bugs {
        final_read_skips_crc: true,
        ..Bugs::default()
    };
    // A byte of broker-1's log rots where no recovery reads it; the final read reaches it
    // and, checking no CRC, takes a rotten value for a message.
    let checking = variant("check-crcs.toml", "check-crcs");
    caught(&checking, bugs, &[Count::Unexpected]);
}

#[test]
fn a_clean_election_outside_the_isr_loses_acknowledged_messages() {
    let bugs = Bugs {
        clean_election_outside_isr: true,
        ..Bugs::default()
    };
    // The ISR has shrunk to the leader when it dies; with unclean election off the
    // partition must wait for it, but the bug elects a follower that lacks its writes.
    caught(
        &variant("unclean-election.toml", "unclean-off"),
        bugs,
        &[Count::Lost],
    );
}

#[test]
fn a_fenced_broker_kept_in_the_isr_is_elected_with_a_short_log() {
    let bugs = Bugs {
        keep_fenced_in_isr: true,
        ..Bugs::default()
    };
    // Broker-3 lost its unflushed log to a power loss and is the first to return; only
    // the stale ISR lets it lead, and the others truncate to it.
    caught(
        &variant("fenced-follower.toml", "fenced-follower"),
        bugs,
        &[Count::Lost],
    );
}

#[test]
fn an_fsync_that_returns_before_the_data_is_durable_loses_acknowledged_messages() {
    let bugs = Bugs {
        fsync_returns_early: true,
        ..Bugs::default()
    };
    let flushed = variant("fsync-vs-os-flusher.toml", "flush-every-message");
    caught(&flushed, bugs, &[Count::Lost]);
}

#[test]
fn a_member_that_commits_its_fetch_position_leaves_records_unprocessed() {
    let bugs = Bugs {
        commit_fetch_position: true,
        ..Bugs::default()
    };
    let after = variant("consumer-commits.toml", "after-processing");
    caught(&after, bugs, &[Count::Unprocessed]);
}

#[test]
fn a_controller_that_takes_a_restart_within_the_session_ends_the_outage_early() {
    let bugs = Bugs {
        register_in_session: true,
        ..Bugs::default()
    };
    // The killed leader's restart at 12 s is refused until its old session expires, about
    // 16.7 s; taken at once, it ends the outage 4.7 s early and the producers stop retrying.
    let failures = file_failures("controlled-shutdown.toml", bugs);
    assert!(
        failures
            .iter()
            .any(|f| f.contains(" kill: ") && f.contains("retries")),
        "{failures:?}"
    );
}

/// The expectations `cargo test` checks of `file` (every variant on its `test_seeds`)
/// that fail with `bugs` injected, each with its seed and variant: empty if the file
/// passes.
/// KAFKA-6119: without the fence, the paused producer's late batches open a transaction
/// that its next transaction's COMMIT marker ends, with the records of the one the
/// coordinator aborted (before 3.6, nothing else refuses them).
#[test]
fn a_timeout_abort_that_does_not_fence_tears_the_transaction() {
    let bugs = Bugs {
        timeout_abort_skips_fence: true,
        ..Bugs::default()
    };
    caught(
        &variant("read-committed-lso-stall.toml", "paused-past-timeout-3-5"),
        bugs,
        &[Count::Torn],
    );
}

fn file_failures(file: &str, bugs: Bugs) -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let scenario = scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut failures = Vec::new();
    for variant in &scenario.variants {
        let mut variant = variant.clone();
        variant.settings.bugs = bugs;
        let mut counts = Vec::new();
        for &seed in &scenario.test_seeds {
            let outcome = systems::run(&variant, seed, &RunOptions::default()).expect("the run");
            for failure in check::evaluate(&variant.expect, &outcome.verdict.counts) {
                failures.push(format!("seed {seed} {}: {failure}", variant.name));
            }
            counts.push(outcome.verdict.counts);
        }
        for failure in check::evaluate_some(&variant.expect_some, counts.iter()) {
            failures.push(format!("{}: expect_some {failure}", variant.name));
        }
    }
    failures
}

/// One row of the file × mutation table in docs/checkers.md: each catalog file, and the
/// bug its lesson is about, which must make the file fail under `cargo test`. (Without
/// the bug each file passes: that is `tests/scenarios.rs`.)
macro_rules! lessons {
    ($($test:ident: $file:literal => $bug:ident,)*) => {
        /// (file, bug, the bug alone).
        const LESSONS: &[(&str, &str, fn() -> Bugs)] =
            &[$(($file, stringify!($bug), || Bugs { $bug: true, ..Bugs::default() })),*];
        $(
            #[test]
            fn $test() {
                let failures = file_failures($file, Bugs { $bug: true, ..Bugs::default() });
                assert!(!failures.is_empty(), "{} passes with {}", $file, stringify!($bug));
            }
        )*
    };
}

lessons! {
    lesson_of_bit_rot: "bit-rot.toml" => follower_skips_crc,
    lesson_of_check_crcs: "check-crcs.toml" => final_read_skips_crc,
    lesson_of_consumer_commits: "consumer-commits.toml" => commit_fetch_position,
    lesson_of_controlled_shutdown: "controlled-shutdown.toml" => shutdown_without_marker,
    lesson_of_coordinator_failover: "coordinator-failover.toml" => coordinator_skips_load,
    lesson_of_corrupt_tail: "corrupt-tail.toml" => skip_crc_on_recovery,
    lesson_of_eos_processor: "eos-processor.toml" => final_read_ignores_aborted,
    lesson_of_fenced_follower: "fenced-follower.toml" => keep_fenced_in_isr,
    lesson_of_flusher_and_journal: "flusher-and-journal.toml" => journal_per_file,
    lesson_of_follower_falls_behind: "follower-falls-behind.toml" => any_fetch_caught_up,
    lesson_of_fsync_vs_os_flusher: "fsync-vs-os-flusher.toml" => fsync_returns_early,
    lesson_of_group_rewind: "group-rewind.toml" => skip_position_validation,
    lesson_of_idempotent_retries: "idempotent-retries.toml" => ignore_sequences,
    lesson_of_isr_of_one: "isr-of-one.toml" => clean_election_outside_isr,
    lesson_of_kafka_releases: "kafka-releases.toml" => ack_at_append,
    lesson_of_kill_vs_power_loss: "kill-vs-power-loss.toml" => power_loss_keeps_page_cache,
    lesson_of_kip_101_divergence: "kip-101-divergence.toml" => skip_follower_truncation,
    lesson_of_kip_101: "kip-101.toml" => skip_follower_truncation,
    lesson_of_kip_279: "kip-279.toml" => skip_follower_truncation,
    lesson_of_kip_903: "kip-903.toml" => ignore_broker_epochs,
    lesson_of_lagging_follower: "lagging-follower.toml" => never_shrink_isr,
    lesson_of_last_replica_standing: "last-replica-standing.toml" => clean_election_outside_isr,
    lesson_of_leader_cut_from_followers: "leader-cut-from-followers.toml" => hw_on_leader_leo,
    lesson_of_leader_failure: "leader-failure.toml" => ack_at_append,
    lesson_of_leader_kills: "leader-kills.toml" => read_beyond_hw,
    lesson_of_min_insync_replicas: "min-insync-replicas.toml" => ignore_min_insync_replicas,
    lesson_of_nemesis: "nemesis.toml" => hw_on_leader_leo,
    lesson_of_quickstart: "quickstart.toml" => ack_at_append,
    lesson_of_read_committed_lso_stall: "read-committed-lso-stall.toml" => lso_is_hw,
    lesson_of_retried_ack_moved: "retried-ack-moved.toml" => ack_at_append,
    lesson_of_rocketmq_consumer_offsets: "rocketmq-consumer-offsets.toml" => offsets_persist_fsyncs,
    lesson_of_rocketmq_flush: "rocketmq-flush.toml" => sync_flush_acks_at_append,
    lesson_of_rocketmq_slow_fsync: "rocketmq-slow-fsync.toml" => timeout_proves_not_written,
    lesson_of_rocketmq_torn_tail: "rocketmq-torn-tail.toml" => reput_past_flushed,
    lesson_of_rocketmq_transient_store_pool: "rocketmq-transient-store-pool.toml" => pool_commits_at_append,
    lesson_of_shrunk_unsafe_nemesis: "shrunk-unsafe-nemesis.toml" => retries_enqueue_at_back,
    lesson_of_timeouts_are_not_failures: "timeouts-are-not-failures.toml" => timeout_proves_not_written,
    lesson_of_txn_coordinator_cut_off: "txn-coordinator-cut-off.toml" => end_txn_before_prepare_replicated,
    lesson_of_txn_coordinator_failover: "txn-coordinator-failover.toml" => txn_coordinator_skips_load,
    lesson_of_txn_stable_offsets: "txn-stable-offsets.toml" => offset_fetch_ignores_require_stable,
    lesson_of_txn_stray_produce: "txn-stray-produce.toml" => skip_partition_verification,
    lesson_of_txn_zombie_fencing: "txn-zombie-fencing.toml" => txn_offsets_skip_generation,
    lesson_of_unclean_election: "unclean-election.toml" => clean_election_outside_isr,
}

/// Every catalog file has a row, and docs/checkers.md's table shows each row.
#[test]
fn every_catalog_file_has_a_lesson_in_the_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = hightide::lab::scenario_files(&root.join("scenarios")).expect("the catalog");
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    let rows: Vec<&str> = LESSONS.iter().map(|&(file, ..)| file).collect();
    assert_eq!(rows, names, "one row per catalog file, in file order");
    let docs = std::fs::read_to_string(root.join("docs/checkers.md")).expect("docs/checkers.md");
    for (file, bug, _) in LESSONS {
        let row = format!("| `{file}` | `{bug}` |");
        assert!(docs.contains(&row), "docs/checkers.md has no row {row}");
    }
}

/// The table's evidence: what each file's row makes fail (`cargo test --test integration
/// lesson_table -- --ignored --nocapture`).
#[test]
#[ignore = "prints the evidence for docs/checkers.md; the lesson_of_* tests assert it"]
fn lesson_table() {
    for (file, bug, bugs) in LESSONS {
        let failures = file_failures(file, bugs());
        println!(
            "| `{file}` | `{bug}` | {} | {} |",
            failures.len(),
            failures.first().map_or("PASSES", |f| f.as_str())
        );
    }
}
