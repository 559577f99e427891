//! Reports from hand-built runs: the exact run line, the table, the summary, the JSON
//! fields, and the sweep report's numbers, findings, comparisons and charts.

use super::*;
use crate::check::{Comparison, Count, Expectation};
use crate::check::{Counts, Example, Verdict};
use crate::config::kafka::{Reach, Release, StepReach};
use crate::config::Modelled;
use std::time::Duration;

fn run(variant: &str, seed: u64, lost: u64, p99_ms: u64) -> RunReport {
    let mut stats = HistoryStats {
        events: 20_000,
        throughput_per_s: 495.0,
        ..HistoryStats::default()
    };
    for ms in [2, 2, 3, p99_ms] {
        stats.histogram.record(Duration::from_millis(ms));
    }
    stats.latency = LatencyStats {
        count: 4,
        p50_ms: 2.0,
        p99_ms: p99_ms as f64,
        max_ms: p99_ms as f64,
    };
    let counts = Counts {
        attempted: 10_000,
        acked: 9_900,
        failed: 60,
        indeterminate: 40,
        lost,
        delivered: 10_000 - lost,
        missing: lost,
        ..Counts::default()
    };
    let examples = (lost > 0)
        .then(|| Example {
            count: Count::Lost,
            text: "producer-1:000417 acked at orders/0@812 (t=10.012s)".into(),
            why: vec![
                "t=10.010s broker-1 acknowledged orders/0@812..812".into(),
                "t=10.500s fault: kill broker-1".into(),
            ],
        })
        .into_iter()
        .collect();
    let strict = variant.contains("all");
    RunReport {
        scenario: "leader-failure".into(),
        variant: variant.into(),
        modelled: Modelled::Kafka(Release::NEWEST),
        seed,
        verdict: Verdict {
            counts,
            examples,
            lost_acked_at: Vec::new(),
            group: false,
            processors: false,
        },
        failures: if strict && lost > 0 {
            vec![format!("expected lost == 0, got {lost}")]
        } else {
            vec![]
        },
        expect_some: if strict {
            vec![]
        } else {
            vec![Expectation {
                count: Count::Lost,
                comparison: Comparison::Gt,
                value: 0,
            }]
        },
        named: if strict { vec![] } else { vec![Count::Lost] },
        trace_hash: 0x3f2a_9c0d_11e2_b4f7,
        sim_time: Duration::from_secs(60),
        wall_time: Duration::from_millis(830),
        stats,
    }
}

#[test]
fn a_run_line_shows_the_seed_variant_main_counts_verdict_and_trace_hash() {
    assert_eq!(
        run_line(&run("acks-all", 17, 3, 20)),
        "seed    17  acks-all              acked    9900  lost     3  dup     0  reord     0  dirty     0  diverg  0  offline  0  FAIL  3f2a9c0d11e2b4f7"
    );
}

#[test]
fn a_run_with_unresolved_sends_says_so_on_its_line() {
    let mut r = run("acks-all", 17, 0, 20);
    r.verdict.counts.unresolved = 12;
    assert!(
        run_line(&r).ends_with("  (12 sends still unresolved at the final read)"),
        "{}",
        run_line(&r)
    );
}

/// A run that consumed as a group.
fn group_run(variant: &str, seed: u64, unprocessed: u64, reprocessed: u64) -> RunReport {
    let mut report = run(variant, seed, 0, 9);
    report.verdict.group = true;
    report.verdict.counts.unprocessed = unprocessed;
    report.verdict.counts.reprocessed = reprocessed;
    report
}

#[test]
fn a_group_run_shows_its_unprocessed_and_reprocessed_on_its_line_and_others_do_not() {
    assert_eq!(
        run_line(&group_run("at-most-once", 17, 11, 0)),
        "seed    17  at-most-once          acked    9900  lost     0  dup     0  reord     0  dirty     0  diverg  0  offline  0  unproc    11  reproc     0  PASS  3f2a9c0d11e2b4f7"
    );
    assert!(!run_line(&run("acks-1", 17, 0, 9)).contains("unproc"));
}

#[test]
fn the_table_has_group_rows_only_when_a_run_of_it_consumed_as_a_group() {
    let plain = side_by_side(&[&run("acks-1", 4, 0, 9), &run("acks-all", 4, 0, 9)]);
    assert!(!plain.contains("unprocessed"), "{plain}");
    let grouped = side_by_side(&[
        &run("acks-1", 4, 0, 9),
        &group_run("at-least-once", 4, 0, 7),
    ]);
    let lines: Vec<&str> = grouped.lines().collect();
    assert!(
        lines.contains(&"unprocessed                       0                 0"),
        "{grouped}"
    );
    assert!(
        lines.contains(&"reprocessed                       0                 7"),
        "{grouped}"
    );
}

/// A release row appears only where the runs model different releases: named for the
/// system when only the release differs, `system` when the systems do.
#[test]
fn the_table_names_the_release_only_where_the_runs_differ_in_it() {
    let kafka = |release: &str, variant| RunReport {
        modelled: Modelled::Kafka(Release::parse(release).unwrap()),
        ..run(variant, 4, 0, 9)
    };
    let rocketmq = RunReport {
        modelled: Modelled::RocketMq(crate::config::rocketmq::Release::parse("5.3.3").unwrap()),
        ..run("sync-flush", 4, 0, 9)
    };
    let row = |table: &str, label: &str| {
        table
            .lines()
            .find(|line| line.split_whitespace().next() == Some(label))
            .map(|line| {
                line.split_whitespace()
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
    };
    let same = side_by_side(&[&kafka("4.1", "acks-1"), &kafka("4.1", "acks-all")]);
    assert_eq!(row(&same, "kafka"), None, "{same}");
    let releases = side_by_side(&[&kafka("3.9", "acks-1"), &kafka("4.1", "acks-all")]);
    assert_eq!(
        row(&releases, "kafka").as_deref(),
        Some("3.9 4.1"),
        "{releases}"
    );
    let systems = side_by_side(&[&rocketmq, &kafka("4.1", "acks-1")]);
    assert_eq!(
        row(&systems, "system").as_deref(),
        Some("RocketMQ 5.3.3 Kafka 4.1"),
        "{systems}"
    );
}

/// What became of the sends is always in the table; a rare anomaly where a run has it or
/// the scenario names it; what the cluster and clients did where the runs differ in it or
/// the scenario names it.
#[test]
fn the_table_shows_each_outcome_where_it_happens_differs_or_is_named() {
    let rows = |reports: &[&RunReport]| -> Vec<String> {
        side_by_side(reports)
            .lines()
            .skip(1)
            .map(|l| l.split("  ").next().unwrap_or_default().to_string())
            .collect()
    };
    let (a, mut b) = (run("acks-1", 4, 0, 9), run("acks-all", 4, 0, 9));
    let plain = rows(&[&a, &b]);
    for always in ["failed", "indeterminate", "lost", "unresolved"] {
        assert!(plain.iter().any(|r| r == always), "{always}: {plain:?}");
    }
    for hidden in [
        "under_replicated",
        "elections",
        "retries",
        "request_timeouts",
    ] {
        assert!(!plain.iter().any(|r| r == hidden), "{hidden}: {plain:?}");
    }

    // Equal in both columns: a fact stays hidden; an anomaly shows once seen.
    b.verdict.counts.elections = 1;
    b.verdict.counts.unreadable = 1;
    let mut elected = a.clone();
    elected.verdict.counts.elections = 1;
    let seen = rows(&[&elected, &b]);
    assert!(!seen.iter().any(|r| r == "elections"), "{seen:?}");
    assert!(seen.iter().any(|r| r == "unreadable"), "{seen:?}");
    // Different: shown.
    let differ = rows(&[&a, &b]);
    assert!(differ.iter().any(|r| r == "elections"), "{differ:?}");
    // Named by the scenario: shown whatever the values.
    let mut named = a.clone();
    named.named = vec![Count::Retries, Count::FalseFailures];
    let shown = rows(&[&named, &a]);
    assert!(shown.iter().any(|r| r == "retries"), "{shown:?}");
    assert!(shown.iter().any(|r| r == "false_failures"), "{shown:?}");
}

/// The summary's failed and indeterminate columns appear only when some variant has any.
#[test]
fn the_summary_shows_unacknowledged_sends_only_when_there_are_some() {
    let mut clean = run("acks-all", 1, 0, 9);
    clean.verdict.counts.failed = 0;
    clean.verdict.counts.indeterminate = 0;
    let header = |reports: &[RunReport]| {
        Summary::of(reports)
            .table()
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    };
    assert!(!header(&[clean.clone()]).contains("failed"));
    assert!(header(&[clean, run("acks-1", 1, 0, 9)]).contains("failed  indeterminate"));
}

#[test]
fn variants_of_one_seed_stand_side_by_side_and_a_failing_one_shows_why() {
    let reports = [
        run("acks-1", 4, 0, 9),
        run("acks-all", 4, 2, 20),
        run("acks-1", 5, 0, 9),
    ];
    let text = runs_text(&reports);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "seed 4                       acks-1          acks-all"
    );
    assert!(
        lines.contains(&"lost                              0                 2"),
        "{text}"
    );
    assert!(
        lines.contains(&"result                         PASS              FAIL"),
        "{text}"
    );
    assert!(lines.contains(&"  acks-all:"), "{text}");
    assert!(lines.contains(&"    expected lost == 0, got 2"), "{text}");
    assert!(
        lines.contains(&"    lost: producer-1:000417 acked at orders/0@812 (t=10.012s)"),
        "{text}"
    );
    // Seed 5 ran one variant: a plain line.
    assert!(
        lines
            .last()
            .is_some_and(|l| l.starts_with("seed     5  acks-1")),
        "{text}"
    );
}

#[test]
fn the_summary_totals_each_variant_and_judges_expect_some_across_seeds() {
    let reports = [
        run("acks-1", 1, 0, 9),
        run("acks-1", 2, 0, 9),
        run("acks-all", 1, 4, 20),
        run("acks-all", 2, 0, 20),
    ];
    let summary = Summary::of(&reports);
    let text = summary.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "variant     passed  lost total  lost avg   worst  duplicates    failed  indeterminate   acked/s      p99 ms"
    );
    assert_eq!(
        lines[1],
        "acks-1         2/2           0       0.0       0           0       120             80       495         9.0"
    );
    assert_eq!(
        lines[2],
        "acks-all       1/2           4       2.0       4           0       120             80       495        20.0"
    );
    assert_eq!(
        lines[3],
        "FAIL acks-1: expected lost > 0 in at least one seed, got 0 in all 2 seeds"
    );
    assert_eq!(lines[4], "FAIL: 1 of 4 runs failed an expectation");
    assert_eq!(
        summary.expect_some_failures(),
        vec!["acks-1: expected lost > 0 in at least one seed, got 0 in all 2 seeds".to_string()]
    );
}

#[test]
fn the_first_example_of_a_count_tells_its_story_and_every_example_does_on_request() {
    let mut report = run("acks-1", 3, 2, 9);
    let mut second = report.verdict.examples[0].clone();
    second.text = "producer-1:000418 acked at orders/0@813 (t=10.013s)".into();
    second.why = vec!["t=10.011s broker-1 acknowledged orders/0@813..813".into()];
    report.verdict.examples.push(second);
    let first = run_details(&report, Stories::FirstOfEach);
    assert_eq!(
        first.lines().collect::<Vec<_>>(),
        [
            "    lost: producer-1:000417 acked at orders/0@812 (t=10.012s)",
            "        t=10.010s broker-1 acknowledged orders/0@812..812",
            "        t=10.500s fault: kill broker-1",
            "    lost: producer-1:000418 acked at orders/0@813 (t=10.013s)",
        ]
    );
    let every = run_details(&report, Stories::Every);
    assert_eq!(
        every.lines().last(),
        Some("        t=10.011s broker-1 acknowledged orders/0@813..813")
    );
    assert_eq!(every.lines().count(), first.lines().count() + 1);
}

#[test]
fn a_claim_over_the_seeds_that_fails_is_not_called_a_failed_run() {
    let reports = [run("acks-1", 1, 0, 9), run("acks-1", 2, 0, 9)];
    let verdict = Summary::of(&reports).verdict();
    let lines: Vec<&str> = verdict.lines().collect();
    assert_eq!(
        lines,
        [
            "FAIL acks-1: expected lost > 0 in at least one seed, got 0 in all 2 seeds",
            "FAIL: 1 expectation over the seeds not met (each of the 2 runs met its own)",
        ]
    );
}

#[test]
fn the_json_of_a_run_carries_counts_latency_and_a_hex_trace_hash() {
    let json = run_json(&run("acks-all", 17, 3, 20));
    assert_eq!(json["scenario"], "leader-failure");
    assert_eq!(json["seed"], 17);
    assert_eq!(json["counts"]["lost"], 3);
    assert_eq!(json["counts"]["dirty_reads"], 0);
    assert_eq!(json["counts"]["unprocessed"], 0);
    assert!(
        json.get("group").is_none(),
        "only a group run's line says so"
    );
    assert_eq!(json["pass"], false);
    assert_eq!(json["failures"][0], "expected lost == 0, got 3");
    assert_eq!(json["trace_hash"], "3f2a9c0d11e2b4f7");
    assert_eq!(json["sim_time_ms"], 60_000.0);
    assert_eq!(json["wall_time_ms"], 830.0);
    assert_eq!(json["throughput"], 495.0);
    assert_eq!(json["ack_latency_ms"]["p99"], 20.0);
    assert_eq!(json["examples"][0]["count"], "lost");
}

/// What `hightide merge` reads back is the run that was written, down to the latency
/// histogram and the `[expect_some]` it is judged by.
#[test]
fn a_run_read_back_from_its_json_is_the_run() {
    for report in [
        run("acks-all", 17, 3, 20),
        run("acks-1", 4, 0, 7),
        group_run("at-most-once", 5, 11, 2),
        RunReport {
            modelled: Modelled::RocketMq(crate::config::rocketmq::Release::default()),
            ..run("sync-flush", 2, 0, 9)
        },
    ] {
        let back = run_from_json(run_json(&report)).expect("reads back");
        assert_eq!(back.verdict, report.verdict);
        assert_eq!(back.stats, report.stats);
        assert_eq!(back.expect_some, report.expect_some);
        assert_eq!(
            (
                back.seed,
                back.trace_hash,
                back.modelled,
                back.failures.clone()
            ),
            (
                report.seed,
                report.trace_hash,
                report.modelled,
                report.failures.clone()
            )
        );
        assert_eq!(
            (back.sim_time, back.wall_time),
            (report.sim_time, report.wall_time)
        );
        assert_eq!(run_line(&back), run_line(&report));
    }
    let mut broken = run_json(&run("acks-all", 1, 0, 5));
    broken["expect_some"] = serde_json::json!(["lots > 0"]);
    assert!(run_from_json(broken).is_err());
}

fn row(acks: &str, min_isr: &str, lost_per_run: &[u64], p99_ms: u64) -> SweepRow {
    let settings = vec![
        ("producer.acks".to_string(), acks.to_string()),
        (
            "broker.min.insync.replicas".to_string(),
            min_isr.to_string(),
        ),
        ("faults".to_string(), "leader-kill".to_string()),
    ];
    let reports: Vec<RunReport> = lost_per_run
        .iter()
        .enumerate()
        .map(|(seed, &lost)| {
            let mut r = run("x", seed as u64, lost, p99_ms);
            if acks == "0" {
                r.verdict.counts.acked = 0;
                r.verdict.counts.missing = 50;
                r.stats.histogram = LatencyHistogram::default();
            }
            r
        })
        .collect();
    SweepRow::from_reports(settings, &reports)
}

fn matrix() -> Vec<SweepRow> {
    vec![
        row("0", "1", &[0, 0], 0),
        row("1", "1", &[0, 6], 9),
        row("1", "2", &[3, 1], 9),
        row("all", "1", &[2, 0], 20),
        row("all", "2", &[0, 0], 20),
    ]
}

#[test]
fn a_sweep_row_accumulates_its_runs() {
    let r = row("1", "2", &[3, 1, 0], 9);
    assert_eq!((r.runs, r.runs_with_loss, r.lost, r.lost_max), (3, 2, 4, 3));
    assert!((r.lost_avg() - 4.0 / 3.0).abs() < 1e-12);
    assert_eq!(r.label(), "acks=1 min.isr=2 leader-kill");
    assert_eq!(
        r.description(),
        "acks=1, min.insync.replicas=2, faults=leader-kill"
    );
}

#[test]
fn the_sweep_report_has_a_row_per_configuration_and_reads_the_numbers() {
    let md = sweep_markdown("durability", &matrix(), &[]);
    assert!(
        md.starts_with(
            "# Sweep: durability\n\n5 configurations, 10 runs in all, varying acks, \
             min.insync.replicas and faults.\n\n## Findings\n\n\
             - 3 of 4 configurations that acknowledge writes lost acknowledged messages in at \
             least one run; 1 lost none.\n"
        ),
        "{md}"
    );
    assert!(md.contains("- Every configuration with acks=all and min.insync.replicas=2 kept every acknowledged message.\n"), "{md}");
    assert!(md.contains("- The worst was acks=1, min.insync.replicas=1, faults=leader-kill: 6 acknowledged messages lost in one run (loss in 1 of 2 runs).\n"), "{md}");
    assert!(md.contains("- 1 configuration acknowledged nothing (acks=0), so no loss can be counted against it; yet 0.5% of its sends never reached the final read.\n"), "{md}");
    assert!(!md.contains("price of safety"), "{md}");
    assert!(
        md.contains("| acks | min.insync.replicas | faults | runs | runs with loss |"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | 2 | leader-kill | 2 | 2 | 2.0 | 3 | 2.0 | 0 | 495 | 2.0 | 9.0 |"),
        "{md}"
    );
    assert!(
        md.contains("| 0 | 1 | leader-kill | 2 | n/a | n/a | n/a | 50.0 | 0 | 495 | n/a | n/a |"),
        "{md}"
    );
    assert!(
        md.contains("![Acknowledged messages lost per run](durability-lost.svg)"),
        "{md}"
    );
    assert!(
        md.contains("![Ack latency](durability-latency.svg)"),
        "{md}"
    );
}

/// Each setting is compared only between configurations equal in every other one: acks
/// 1 → all over the two min ISR values, min ISR 1 → 2 over the two acks that acknowledge
/// (acks=0 has nothing to compare, and no acks=0 configuration has min ISR 2).
#[test]
fn a_sweep_compares_one_setting_at_a_time_with_everything_else_equal() {
    let md = sweep_markdown("durability", &matrix(), &[]);
    assert!(md.contains("- acks=1 → all, everything else equal (2 pairs): loss in 1 of 2 configurations instead of 2, and a typical send waited as long (no median change in ack p50).\n"), "{md}");
    assert!(md.contains("- min.insync.replicas=1 → 2, everything else equal (2 pairs): loss in 1 of 2 configurations instead of 2, and a typical send waited as long (no median change in ack p50).\n"), "{md}");
    assert!(
        md.contains("agree in every other (acks, min.insync.replicas and faults)"),
        "{md}"
    );
    // p99 moved by +11 ms in both pairs (9 → 20); under min ISR 2 not at all.
    assert!(
        md.contains("| acks 1 → all | 2 | 2 → 1 | 10 → 2 | 0 | +11 | 0 |\n"),
        "{md}"
    );
    assert!(
        md.contains("| min.insync.replicas 1 → 2 | 2 | 2 → 1 | 8 → 4 | 0 | 0 | 0 |\n"),
        "{md}"
    );
    assert!(!md.contains("acks 0 → 1"), "{md}");
    // acks=1 ran only under a kill, acks=all only under a power loss: nothing to pair.
    let mut unlike = vec![row("1", "2", &[3, 1], 9), row("all", "2", &[0, 0], 30_000)];
    unlike[1].settings[2].1 = "leader-power-loss".to_string();
    let md = sweep_markdown("unlike", &unlike, &[]);
    assert!(!md.contains("One setting at a time"), "{md}");
    assert!(!md.contains("everything else equal"), "{md}");
}

#[test]
fn unusual_cells_are_marked_and_explained_beneath_the_table() {
    let mut rows = vec![row("1", "2", &[3, 1], 9), row("all", "2", &[0, 0], 30_000)];
    rows[1].context.request_timeout_ms = 30_000.0;
    rows[1].request_timeouts = 6;
    rows[0].duplicates = 4;
    let md = sweep_markdown("notes", &rows, &[]);
    assert!(md.contains("| 30000.0 ¹ |\n"), "{md}");
    assert!(md.contains("| 4 ² | 495 |"), "{md}");
    assert!(
        md.contains("\n¹ An ack latency at least half of `request.timeout.ms` (30000 ms)"),
        "{md}"
    );
    assert!(
        md.contains("(3.0 request timeouts per run in these rows)"),
        "{md}"
    );
    assert!(
        md.contains("\n² Duplicates from a producer that is not idempotent"),
        "{md}"
    );
    rows[0].context.idempotence = true;
    rows[1].context.request_timeout_ms = 120_000.0;
    let md = sweep_markdown("notes", &rows, &[]);
    assert!(!md.contains('¹') && !md.contains('²'), "{md}");
}

/// A RocketMQ sweep explains its cells in RocketMQ's words: `sendMsgTimeout`, not
/// `request.timeout.ms`; no deduplication, not `enable.idempotence`.
#[test]
fn a_rocketmq_sweep_explains_its_cells_in_rocketmq_s_words() {
    let mut rows = vec![row("1", "2", &[3, 1], 9), row("all", "2", &[0, 0], 3_000)];
    for row in &mut rows {
        row.context.system = crate::scenario::model::SystemName::RocketMq;
        row.context.request_timeout_ms = 3_000.0;
    }
    rows[0].duplicates = 4;
    let md = sweep_markdown("notes", &rows, &[]);
    assert!(
        md.contains("\n¹ An ack latency at least half of `sendMsgTimeout` (3000 ms)"),
        "{md}"
    );
    assert!(
        md.contains("\n² Duplicates: RocketMQ deduplicates nothing"),
        "{md}"
    );
    assert!(md.contains("nears `sendMsgTimeout`"), "{md}");
    assert!(
        md.contains("the only measure of loss for a send never answered"),
        "{md}"
    );
    assert!(!md.contains("request.timeout.ms"), "{md}");
    assert!(!md.contains("enable.idempotence"), "{md}");
}

#[test]
fn a_sweep_shows_unresolved_sends_only_where_there_are_some() {
    let md = sweep_markdown("durability", &matrix(), &[]);
    assert!(
        md.contains("- Every send had its outcome before the final read began."),
        "{md}"
    );
    assert!(!md.contains("| unresolved |"), "{md}");
    let mut rows = matrix();
    rows[2].unresolved = 7;
    let md = sweep_markdown("durability", &rows, &[]);
    assert!(md.contains("- 7 sends in 1 configuration were still unresolved when the final read began (the unresolved column)"), "{md}");
    assert!(md.contains(" ack p99 ms | unresolved |"), "{md}");
    assert!(
        md.contains("| 1 | 2 | leader-kill | 2 | 2 | 2.0 | 3 | 2.0 | 0 | 495 | 2.0 | 9.0 | 7 |"),
        "{md}"
    );
    assert!(
        md.contains("| 1 | 1 | leader-kill | 2 | 1 | 3.0 | 6 | 3.0 | 0 | 495 | 2.0 | 9.0 | 0 |"),
        "{md}"
    );
}

#[test]
fn a_sweep_without_loss_says_so() {
    let md = sweep_markdown("safe", &[row("all", "2", &[0, 0], 20)], &[]);
    assert!(md.contains("1 configuration, 2 runs in all, varying acks, min.insync.replicas and faults.\n\n## Findings\n\n- No configuration lost an acknowledged message.\n- No configuration produced duplicates.\n"), "{md}");
}

#[test]
fn charts_draw_a_cell_per_acknowledging_configuration_and_name_shared_settings_once() {
    let rows = matrix();
    let charts = sweep_charts("durability", &rows);
    assert_eq!(
        charts
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>(),
        ["durability-lost.svg", "durability-latency.svg"]
    );
    let lost = &charts[0].1;
    assert!(lost.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(lost.trim_end().ends_with("</svg>"));
    assert_eq!(
        lost.matches(" rx=\"3\"").count(),
        4,
        "a cell per acknowledging row: {lost}"
    );
    assert!(lost.contains(">acks=1 min.isr=1</text>"), "{lost}");
    assert!(lost.contains("every cell: leader-kill"), "{lost}");
    assert!(lost.contains(">3 · 6</text>"), "{lost}");
    assert!(lost.contains(">none</text>"), "{lost}");
    assert!(
        lost.contains(">left out: 1 configuration that acknowledged nothing (acks=0)</text>"),
        "{lost}"
    );
    let latency = &charts[1].1;
    assert!(latency.contains(">2 · 20</text>"), "{latency}");
    assert!(!latency.contains(">0 · 0</text>"), "{latency}");
}

fn release_row(kafka: &str, acks: &str, lost_per_run: &[u64]) -> SweepRow {
    let mut row = row(acks, "2", lost_per_run, 9);
    row.settings
        .insert(0, ("cluster.kafka".to_string(), kafka.to_string()));
    let release = Release::parse(kafka).unwrap();
    row.context.steps = release
        .history()
        .map(|step| StepReach {
            since: step.since,
            source: step.source,
            missed: if step.source == "KIP-1030" {
                Some("these runs set linger.ms".to_string())
            } else {
                (step.reach == Reach::Transactions)
                    .then(|| "these runs have no transactions".to_string())
            },
        })
        .collect();
    row
}

fn release_rows() -> Vec<SweepRow> {
    vec![
        release_row("3.6", "1", &[4, 4]),
        release_row("3.6", "all", &[0, 0]),
        release_row("3.9", "1", &[4, 4]),
        release_row("3.9", "all", &[0, 0]),
        release_row("4.1", "1", &[4, 0]),
        release_row("4.1", "all", &[0, 0]),
    ]
}

#[test]
fn a_sweep_over_releases_says_what_changed_between_each_pair() {
    let mut rows = release_rows();
    rows[5].duplicates = 9;
    let md = sweep_markdown("releases", &rows, &[]);
    assert!(
        md.contains(
            "- Kafka 3.6 → 3.9, everything else equal: no configuration lost a different number \
             of acknowledged messages (2 compared).\n"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "- Kafka 3.9 → 4.1, everything else equal: 1 of 2 configurations lost a different \
             number of acknowledged messages, most under acks=1 min.isr=2 leader-kill: 8 → 4 in \
             all; duplicates 0 → 9.\n"
        ),
        "{md}"
    );
    assert!(
        md.contains("| 3.6 → 3.9 | KAFKA-15583; KAFKA-12670 | 2 | 0 | none | 0 → 0 |\n"),
        "{md}"
    );
    assert!(
        md.contains(
            "| 3.9 → 4.1 | KIP-966 | 2 | 1 | acks=1 min.isr=2 leader-kill: 8 → 4 | 0 → 9 |\n"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "Left out, as they cannot change these runs: KIP-890 (TRANSACTION_ABORTABLE) \
             and KIP-890 part 2, KAFKA-14562, KAFKA-14563 (these runs have no transactions); KAFKA-15046 and KAFKA-16541 (3.8 undoes what \
             3.7 changed); KIP-1030 (these runs set linger.ms)."
        ),
        "{md}"
    );
    assert!(
        md.contains("| kafka | acks | min.insync.replicas |"),
        "{md}"
    );
    assert!(
        !md.contains("| kafka 3.6 → 3.9 |"),
        "the release is no setting to compare: {md}"
    );
    let one_release: Vec<SweepRow> = rows.into_iter().take(2).collect();
    assert!(!sweep_markdown("one", &one_release, &[]).contains("Release by release"));
}

#[test]
fn a_chart_over_releases_has_a_column_per_release() {
    let lost = &sweep_charts("releases", &release_rows())[0].1;
    for heading in ["Kafka 3.6", "Kafka 3.9", "Kafka 4.1"] {
        assert!(lost.contains(&format!(">{heading}</text>")), "{lost}");
    }
    assert!(
        lost.contains(">acks=1</text>") && lost.contains(">acks=all</text>"),
        "{lost}"
    );
    assert!(lost.contains("every cell: min.isr=2 leader-kill"), "{lost}");
    assert!(lost.contains(">2 · 4</text>"), "4.1's acks=1: {lost}");
}

#[test]
fn the_summary_explains_each_variants_most_anomalous_run_with_its_examples() {
    let reports = vec![
        run("acks-1", 1, 2, 9),
        run("acks-1", 2, 7, 9),
        run("acks-1", 3, 7, 9),
        run("acks-all", 1, 0, 20),
    ];
    let summary = Summary::of(&reports);
    let text = summary.explanations("hightide run s.toml");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "acks-1, seed 2 (lost 7); all of it: hightide run s.toml --seed 2 --variant acks-1 -v",
        "the most lost, the first such seed: {text}"
    );
    assert_eq!(
        lines[1..],
        [
            "    lost: producer-1:000417 acked at orders/0@812 (t=10.012s)",
            "        t=10.010s broker-1 acknowledged orders/0@812..812",
            "        t=10.500s fault: kill broker-1",
        ],
        "the example, its story beneath, and nothing to explain for acks-all: {text}"
    );
    assert!(Summary::of(&reports[3..]).explanations("x").is_empty());
}

/// A stream-processor configuration: each run's `eos_duplicates` and longest LSO stall.
fn processor_row(commit: &str, kafka: &str, runs: &[(u64, u64)]) -> SweepRow {
    let settings = vec![
        ("workload.commit".to_string(), commit.to_string()),
        ("cluster.kafka".to_string(), kafka.to_string()),
        ("faults".to_string(), "processor-kill".to_string()),
    ];
    let reports: Vec<RunReport> = runs
        .iter()
        .enumerate()
        .map(|(seed, &(eos_duplicates, lso_stall_max))| {
            let mut r = run("x", seed as u64, 0, 10);
            r.verdict.counts.eos_duplicates = eos_duplicates;
            r.verdict.counts.lso_stall_max = lso_stall_max;
            r.verdict.counts.reprocessed = 3;
            r
        })
        .collect();
    let mut row = SweepRow::from_reports(settings, &reports);
    row.context.processors = true;
    row.context.transactional = commit == "transactional";
    row
}

fn processors() -> Vec<SweepRow> {
    vec![
        processor_row("transactional", "2.4", &[(0, 1000), (40, 12000)]),
        processor_row("transactional", "2.5", &[(0, 1000), (0, 12000)]),
        processor_row("after-processing", "2.4", &[(7, 0), (9, 0)]),
        processor_row("after-processing", "2.5", &[(0, 0), (8, 0)]),
    ]
}

#[test]
fn a_sweep_without_transactions_or_processors_has_no_transactions_section() {
    let md = sweep_markdown("durability", &matrix(), &[]);
    assert!(!md.contains("## Transactions"), "{md}");
    assert!(!md.contains("Exactly once"), "{md}");
}

#[test]
fn the_transactions_section_says_which_settings_keep_each_effect_exactly_once() {
    let md = sweep_markdown("transactions", &processors(), &[]);
    for finding in [
        "- Exactly once held in 1 of 4 configurations; in 3 the read_committed reader saw some \
         input's effect twice, or never, or part of a transaction.\n",
        "- Every configuration with commit=transactional and kafka=2.5 held it.\n",
        "- Every configuration with commit=after-processing, or with kafka=2.4 broke it in some \
         run.\n",
        "- Most outputs seen twice downstream: 40 in 2 runs under commit=transactional, \
         kafka=2.4, faults=processor-kill.\n",
        "- The longest a transaction held read_committed readers back was 12.0 s, under \
         commit=transactional, kafka=2.4, faults=processor-kill (the median run's longest \
         there: 6.5 s).\n",
    ] {
        assert!(md.contains(finding), "missing {finding:?} in\n{md}");
    }
    assert!(!md.contains("inputs committed past"), "{md}");
    for line in [
        "| commit=transactional → after-processing | 2 | 1 → 2 | 40 → 24 | 0 → 0 | -6500 |\n",
        "| kafka=2.4 → 2.5 | 2 | 2 → 1 | 56 → 8 | 0 → 0 | 0 |\n",
        "| transactional | 2.4 | processor-kill | 2 | 1 | 40 | 0 | 0 | 0 | 0 | 6 | 0 | 0 | 0 | 6500 | 12000 |\n",
        "| after-processing | 2.5 | processor-kill | 2 | 1 | 8 | 0 | 0 | 0 | 0 | 6 | 0 | 0 | 0 | 0 | 0 |\n",
    ] {
        assert!(md.contains(line), "missing {line:?} in\n{md}");
    }
    // No row has transactional producers' outcomes: no columns for them.
    assert!(!md.contains("| committed |"), "{md}");
    // Transactional processors on 2.4: the note says what their one id per member means.
    assert!(
        md.contains("the rows before 2.5 show what that design needed KIP-447 for"),
        "{md}"
    );
    let later: Vec<SweepRow> = processors()
        .into_iter()
        .filter(|r| r.settings.iter().any(|(_, v)| v == "2.5"))
        .collect();
    assert!(
        !sweep_markdown("transactions", &later, &[]).contains("KIP-447 for"),
        "no row before 2.5, no note"
    );
}
