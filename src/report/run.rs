//! What `hightide run` prints: a line per seed and variant (a table when several variants
//! ran on one seed), the details of a failing run, and a summary per variant.

pub use crate::check::ANOMALIES;

use super::latency::HistoryStats;
use crate::check::{count_name, Count, Counts, SomeTally, Verdict};
use crate::check::{Comparison, Expectation, DEFAULT_ZERO};
use crate::config::Modelled;
use crate::scenario::model::Variant;
use crate::sim::runner::RunOutcome;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// Everything known about one run (one seed of one variant).
#[derive(Clone, Debug)]
pub struct RunReport {
    pub scenario: String,
    pub variant: String,
    /// The system and release the variant models.
    pub modelled: Modelled,
    pub seed: u64,
    pub verdict: Verdict,
    /// The `[expect]` expectations this run fails (`check::evaluate`).
    pub failures: Vec<String>,
    /// The variant's `[expect_some]`: judged across seeds by [`Summary`].
    pub expect_some: Vec<Expectation>,
    /// The counts the variant's expectations name (not the default zeros every scenario
    /// holds): the side-by-side table shows their rows whatever their values.
    pub named: Vec<Count>,
    pub trace_hash: u64,
    /// Simulated time of the whole run, workload and heal.
    pub sim_time: Duration,
    pub wall_time: Duration,
    pub stats: HistoryStats,
}

impl RunReport {
    /// The report of a finished run of `variant` of `scenario`.
    pub fn from_outcome(scenario: &str, variant: &Variant, outcome: &RunOutcome) -> RunReport {
        RunReport {
            scenario: scenario.to_string(),
            variant: outcome.variant.clone(),
            modelled: variant.settings.cluster.modelled(),
            seed: outcome.seed,
            verdict: outcome.verdict.clone(),
            failures: outcome.failures.clone(),
            expect_some: variant.expect_some.clone(),
            named: named_counts(variant),
            trace_hash: outcome.trace_hash,
            sim_time: outcome.sim_time,
            wall_time: outcome.wall_time,
            stats: HistoryStats::from_history(&outcome.history),
        }
    }

    /// Whether every `[expect]` holds for this run.
    pub fn pass(&self) -> bool {
        self.failures.is_empty()
    }

    pub fn counts(&self) -> &Counts {
        &self.verdict.counts
    }
}

/// The counts `variant`'s expectations name, in `Count::ALL` order. A default zero
/// (`moved == 0`, ...) counts as named only if the file wrote another rule for it.
fn named_counts(variant: &Variant) -> Vec<Count> {
    let default = |e: &Expectation| {
        DEFAULT_ZERO.contains(&e.count) && e.comparison == Comparison::Eq && e.value == 0
    };
    let named: Vec<Count> = variant
        .expect
        .iter()
        .filter(|e| !default(e))
        .chain(&variant.expect_some)
        .map(|e| e.count)
        .collect();
    Count::ALL
        .iter()
        .copied()
        .filter(|c| named.contains(c))
        .collect()
}

/// A trace hash as printed everywhere: 16 hex digits.
pub fn hash_text(hash: u64) -> String {
    format!("{hash:016x}")
}

fn verdict_text(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}

/// One line per run:
/// `seed    17  acks-1               acked   9876  lost    12  dup     0  ...  FAIL  3f2a9c0d11e2b4f7`
/// A run with a consumer group adds `unproc` and `reproc` after `offline`.
pub fn run_line(report: &RunReport) -> String {
    let c = report.counts();
    let group = if report.verdict.group {
        format!("  unproc {:>5}  reproc {:>5}", c.unprocessed, c.reprocessed)
    } else {
        String::new()
    };
    let mut line = format!(
        "seed {:>5}  {:<20}  acked {:>7}  lost {:>5}  dup {:>5}  reord {:>5}  dirty {:>5}  diverg {:>2}  offline {:>2}{group}  {}  {}",
        report.seed,
        report.variant,
        c.acked,
        c.lost,
        c.duplicates,
        c.reordered,
        c.dirty_reads,
        c.divergent,
        c.offline,
        verdict_text(report.pass()),
        hash_text(report.trace_hash)
    );
    // Rare, and it changes what the other numbers mean: shown only when it happens.
    if c.unresolved > 0 {
        let _ = write!(
            line,
            "  ({} sends still unresolved at the final read)",
            c.unresolved
        );
    }
    line
}

/// Which examples are told with their story.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stories {
    /// The first example of each count: the others mostly repeat it.
    FirstOfEach,
    /// Every example (`-v`).
    Every,
}

/// The examples of a run's non-zero anomaly counts, each with its story's steps beneath.
fn examples_text(text: &mut String, report: &RunReport, stories: Stories) {
    for &count in ANOMALIES {
        if report.counts().get(count) == 0 {
            continue;
        }
        for (i, example) in report.verdict.examples_of(count).enumerate() {
            let _ = writeln!(text, "    {}: {}", count_name(count), example.text);
            if i == 0 || stories == Stories::Every {
                for step in &example.why {
                    let _ = writeln!(text, "        {step}");
                }
            }
        }
    }
}

/// The failed expectations of a run and the examples of its non-zero anomaly counts, indented
/// to sit under its line.
pub fn run_details(report: &RunReport, stories: Stories) -> String {
    let mut text = String::new();
    for failure in &report.failures {
        let _ = writeln!(text, "    {failure}");
    }
    examples_text(&mut text, report, stories);
    text
}

/// Rows of the side-by-side table: the count of a cell, or a label and how to write it.
#[derive(Clone, Copy)]
enum Row {
    Count(Count),
    Other(&'static str, fn(&RunReport) -> String),
}

/// Rows every table shows: what became of the sends, and the anomalies every scenario
/// is checked for.
const ALWAYS: [Count; 15] = [
    Count::Attempted,
    Count::Acked,
    Count::Failed,
    Count::Indeterminate,
    Count::Lost,
    Count::Moved,
    Count::Duplicates,
    Count::Unexpected,
    Count::Reordered,
    Count::OutOfOrder,
    Count::DirtyReads,
    Count::Divergent,
    Count::Offline,
    Count::Missing,
    Count::Unresolved,
];

/// Anomalies shown when some run has one, or the scenario names them.
const WHEN_SEEN: [Count; 3] = [
    Count::FalseFailures,
    Count::UnderReplicated,
    Count::Unreadable,
];

/// Rows shown when some run of the table consumed as a group.
const GROUP_ROWS: [Count; 2] = [Count::Unprocessed, Count::Reprocessed];

/// Rows shown when some run of the table had stream processors.
const PROCESSOR_ROWS: [Count; 2] = [Count::EosDuplicates, Count::EosMissing];

/// What the cluster and the clients did: shown when the runs differ in it, or the
/// scenario names it.
const WHEN_DIFFERENT: [Count; 12] = [
    Count::Elections,
    Count::UncleanElections,
    Count::IsrShrinks,
    Count::IsrExpands,
    Count::Truncated,
    Count::Recoveries,
    Count::Retries,
    Count::RequestTimeouts,
    Count::Fenced,
    Count::TxnTimeouts,
    Count::Markers,
    Count::LsoStallMax,
];

/// The rows after the counts.
const RUN_ROWS: [Row; 3] = [
    Row::Other("ack p99 ms", |r| {
        if r.counts().acked == 0 {
            "n/a".to_string()
        } else {
            format!("{:.1}", r.stats.latency.p99_ms)
        }
    }),
    Row::Other("result", |r| verdict_text(r.pass()).to_string()),
    Row::Other("trace", |r| hash_text(r.trace_hash)),
];

impl Row {
    /// A count's label is its `[expect]` name, but for the one that is not a key.
    fn label(self) -> &'static str {
        match self {
            Row::Count(Count::OutOfOrder) => "out of order",
            Row::Count(count) => count_name(count),
            Row::Other(label, _) => label,
        }
    }

    fn cell(self, report: &RunReport) -> String {
        match self {
            Row::Count(count) => report.counts().get(count).to_string(),
            Row::Other(_, cell) => cell(report),
        }
    }
}

/// Several variants of one seed, a column each, so that the one setting that differs
/// shows as the one column that differs. Every outcome a lesson compares has its row:
/// the ones every run has, the rarer ones where they happen, differ or are named.
pub fn side_by_side(reports: &[&RunReport]) -> String {
    const LABEL_WIDTH: usize = 17;
    let widths: Vec<usize> = reports.iter().map(|r| r.variant.len().max(16)).collect();
    let mut text = format!(
        "{:<LABEL_WIDTH$}",
        reports
            .first()
            .map(|r| format!("seed {}", r.seed))
            .unwrap_or_default()
    );
    for (report, width) in reports.iter().zip(&widths) {
        let _ = write!(text, "  {:>width$}", report.variant);
    }
    text.push('\n');
    let named = |count: Count| reports.iter().any(|r| r.named.contains(&count));
    let seen = |count: Count| named(count) || reports.iter().any(|r| r.counts().get(count) > 0);
    let differ = |count: Count| {
        named(count)
            || reports
                .windows(2)
                .any(|w| w[0].counts().get(count) != w[1].counts().get(count))
    };
    // The release is a row only when it is one of the things that differ.
    // A row named for the system when only its release differs ("kafka 4.1"), "system"
    // when the systems do ("Kafka 4.1" beside "RocketMQ 5.3.3").
    let systems_differ = reports
        .windows(2)
        .any(|w| w[0].modelled.system() != w[1].modelled.system());
    let release_row = match reports.first().map(|r| r.modelled) {
        _ if systems_differ => Row::Other("system", |r| r.modelled.to_string()),
        Some(Modelled::RocketMq(_)) => Row::Other("rocketmq", |r| r.modelled.release()),
        _ => Row::Other("kafka", |r| r.modelled.release()),
    };
    let releases_differ = reports.windows(2).any(|w| w[0].modelled != w[1].modelled);
    let group = reports.iter().any(|r| r.verdict.group);
    let processors = reports.iter().any(|r| r.verdict.processors);
    let counts = ALWAYS
        .into_iter()
        .chain(WHEN_SEEN.into_iter().filter(|&c| seen(c)))
        .chain(GROUP_ROWS.into_iter().filter(|_| group))
        .chain(PROCESSOR_ROWS.into_iter().filter(|_| processors))
        .chain(WHEN_DIFFERENT.into_iter().filter(|&c| differ(c)))
        .map(Row::Count);
    let rows = releases_differ
        .then_some(release_row)
        .into_iter()
        .chain(counts)
        .chain(RUN_ROWS);
    for row in rows {
        let _ = write!(text, "{:<LABEL_WIDTH$}", row.label());
        for (report, width) in reports.iter().zip(&widths) {
            let _ = write!(text, "  {:>width$}", row.cell(report));
        }
        text.push('\n');
    }
    text
}

/// All runs: a line per run, or a side-by-side table for each seed that ran several
/// variants; a failing run is followed by its details.
pub fn runs_text(reports: &[RunReport]) -> String {
    let mut order: Vec<u64> = Vec::new();
    let mut by_seed: BTreeMap<u64, Vec<&RunReport>> = BTreeMap::new();
    for report in reports {
        let runs = by_seed.entry(report.seed).or_default();
        if runs.is_empty() {
            order.push(report.seed);
        }
        runs.push(report);
    }
    let mut text = String::new();
    for runs in order.iter().filter_map(|seed| by_seed.get(seed)) {
        if let [single] = runs.as_slice() {
            let _ = writeln!(text, "{}", run_line(single));
            if !single.pass() {
                text.push_str(&run_details(single, Stories::Every));
            }
            continue;
        }
        text.push_str(&side_by_side(runs));
        for run in runs.iter().filter(|r| !r.pass()) {
            let _ = writeln!(text, "  {}:", run.variant);
            text.push_str(&run_details(run, Stories::Every));
        }
        text.push('\n');
    }
    text
}

/// What the summary needs of the runs so far, per variant in the order they first ran:
/// totals, the worst loss, a merged latency histogram and the `[expect_some]` tallies, not
/// the runs, so that its memory stays flat over any number of seeds.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    variants: Vec<VariantTotals>,
}

#[derive(Clone, Debug)]
struct VariantTotals {
    name: String,
    runs: u64,
    passed: u64,
    acked: u64,
    lost: u64,
    worst: u64,
    duplicates: u64,
    failed: u64,
    indeterminate: u64,
    /// Totals over the runs whose workload consumed as a group (`group`).
    group: bool,
    unprocessed: u64,
    reprocessed: u64,
    /// Totals over the runs with stream processors (`processors`).
    processors: bool,
    eos_duplicates: u64,
    eos_missing: u64,
    throughput_sum: f64,
    latency: super::LatencyHistogram,
    expect_some: Vec<SomeTally>,
    /// The run that shows the most anomalies (the first such seed), kept whole for its
    /// examples.
    most_anomalous: Option<RunReport>,
}

/// How much a run has to explain: lost first, then the other anomalies, inverted pairs
/// last (they grow with the square of the sends).
fn anomaly_rank(counts: &Counts) -> (u64, u64, u64) {
    let others: u64 = ANOMALIES
        .iter()
        .filter(|&&count| !matches!(count, Count::Lost | Count::Reordered))
        .map(|&count| counts.get(count))
        .sum();
    (counts.lost, others, counts.reordered)
}

impl Summary {
    pub fn of(reports: &[RunReport]) -> Summary {
        let mut summary = Summary::default();
        for report in reports {
            summary.add(report);
        }
        summary
    }

    pub fn add(&mut self, report: &RunReport) {
        let index = match self.variants.iter().position(|v| v.name == report.variant) {
            Some(index) => index,
            None => {
                self.variants.push(VariantTotals {
                    name: report.variant.clone(),
                    runs: 0,
                    passed: 0,
                    acked: 0,
                    lost: 0,
                    worst: 0,
                    duplicates: 0,
                    failed: 0,
                    indeterminate: 0,
                    group: false,
                    unprocessed: 0,
                    reprocessed: 0,
                    processors: false,
                    eos_duplicates: 0,
                    eos_missing: 0,
                    throughput_sum: 0.0,
                    latency: super::LatencyHistogram::default(),
                    expect_some: report
                        .expect_some
                        .iter()
                        .cloned()
                        .map(SomeTally::new)
                        .collect(),
                    most_anomalous: None,
                });
                self.variants.len() - 1
            }
        };
        let totals = &mut self.variants[index];
        let counts = report.counts();
        totals.runs += 1;
        totals.passed += u64::from(report.pass());
        totals.acked += counts.acked;
        totals.lost += counts.lost;
        totals.worst = totals.worst.max(counts.lost);
        totals.duplicates += counts.duplicates;
        totals.failed += counts.failed;
        totals.indeterminate += counts.indeterminate;
        totals.group |= report.verdict.group;
        totals.unprocessed += counts.unprocessed;
        totals.reprocessed += counts.reprocessed;
        totals.processors |= report.verdict.processors;
        totals.eos_duplicates += counts.eos_duplicates;
        totals.eos_missing += counts.eos_missing;
        totals.throughput_sum += report.stats.throughput_per_s;
        totals.latency.merge(&report.stats.histogram);
        for tally in &mut totals.expect_some {
            tally.add(counts);
        }
        let rank = anomaly_rank(counts);
        let kept = totals
            .most_anomalous
            .as_ref()
            .map(|r| anomaly_rank(r.counts()));
        if rank > (0, 0, 0) && kept.is_none_or(|kept| rank > kept) {
            totals.most_anomalous = Some(report.clone());
        }
    }

    /// For each variant with an anomaly, its most anomalous run explained: its counts and
    /// the examples behind them, and how to see the whole run.
    pub fn explanations(&self, replay: &str) -> String {
        let mut text = String::new();
        for run in self
            .variants
            .iter()
            .filter_map(|v| v.most_anomalous.as_ref())
        {
            let counts: Vec<String> = ANOMALIES
                .iter()
                .filter(|&&count| run.counts().get(count) > 0)
                .map(|&count| match count {
                    Count::Reordered => format!(
                        "reordered {} pairs, {} sends out of order",
                        run.counts().reordered,
                        run.counts().out_of_order
                    ),
                    _ => format!("{} {}", count_name(count), run.counts().get(count)),
                })
                .collect();
            let _ = writeln!(
                text,
                "{}, seed {} ({}); all of it: {replay} --seed {} --variant {} -v",
                run.variant,
                run.seed,
                counts.join(", "),
                run.seed,
                run.variant
            );
            examples_text(&mut text, run, Stories::FirstOfEach);
        }
        text
    }

    pub fn runs(&self) -> u64 {
        self.variants.iter().map(|v| v.runs).sum()
    }

    pub fn failed_runs(&self) -> u64 {
        self.variants.iter().map(|v| v.runs - v.passed).sum()
    }

    /// `[expect_some]` failures per variant: `acks-1: expected lost > 0 in at least one
    /// seed, ...`.
    pub fn expect_some_failures(&self) -> Vec<String> {
        self.variants
            .iter()
            .flat_map(|v| {
                v.expect_some
                    .iter()
                    .filter_map(|t| t.failure())
                    .map(move |failure| format!("{}: {failure}", v.name))
            })
            .collect()
    }

    /// Whether any run failed an `[expect]`, or any `[expect_some]` went unmet.
    pub fn failed(&self) -> bool {
        self.failed_runs() > 0 || !self.expect_some_failures().is_empty()
    }

    /// Per variant: seeds passed, lost (total, average, worst), duplicates, throughput and
    /// ack latency; then the `[expect_some]` verdict.
    /// The table of variants and the verdict.
    pub fn text(&self) -> String {
        self.table() + &self.verdict()
    }

    /// A row per variant: runs passed, acknowledged messages lost, duplicates, sends that
    /// failed or were left indeterminate (when any were), throughput and ack latency;
    /// with a consumer group, what the group never processed and what it processed twice,
    /// in total; with stream processors, their outputs seen twice and missing.
    pub fn table(&self) -> String {
        let width = self
            .variants
            .iter()
            .map(|v| v.name.len())
            .max()
            .unwrap_or(0)
            .max(7);
        let group = self.variants.iter().any(|v| v.group);
        let processors = self.variants.iter().any(|v| v.processors);
        let unacked = self.variants.iter().any(|v| v.failed + v.indeterminate > 0);
        let mut text = format!(
            "{:<width$}  {:>8}  {:>10}  {:>8}  {:>6}  {:>10}",
            "variant", "passed", "lost total", "lost avg", "worst", "duplicates",
        );
        if unacked {
            let _ = write!(text, "  {:>8}  {:>13}", "failed", "indeterminate");
        }
        if group {
            let _ = write!(text, "  {:>11}  {:>11}", "unprocessed", "reprocessed");
        }
        if processors {
            let _ = write!(text, "  {:>14}  {:>11}", "eos_duplicates", "eos_missing");
        }
        let _ = writeln!(text, "  {:>8}  {:>10}", "acked/s", "p99 ms");
        for v in &self.variants {
            let n = v.runs.max(1) as f64;
            // What nothing acknowledged cannot have: a loss of acknowledged messages or an
            // ack latency. Markdown reports say n/a too.
            let acknowledged = |text: String| {
                if v.acked == 0 {
                    "n/a".to_string()
                } else {
                    text
                }
            };
            let _ = write!(
                text,
                "{:<width$}  {:>8}  {:>10}  {:>8}  {:>6}  {:>10}",
                v.name,
                format!("{}/{}", v.passed, v.runs),
                acknowledged(v.lost.to_string()),
                acknowledged(format!("{:.1}", v.lost as f64 / n)),
                acknowledged(v.worst.to_string()),
                v.duplicates,
            );
            if unacked {
                let _ = write!(text, "  {:>8}  {:>13}", v.failed, v.indeterminate);
            }
            if group {
                let _ = write!(text, "  {:>11}  {:>11}", v.unprocessed, v.reprocessed);
            }
            if processors {
                let _ = write!(text, "  {:>14}  {:>11}", v.eos_duplicates, v.eos_missing);
            }
            let _ = writeln!(
                text,
                "  {:>8.0}  {:>10}",
                v.throughput_sum / n,
                acknowledged(format!("{:.1}", v.latency.quantile_ms(0.99)))
            );
        }
        text
    }

    /// Whether every expectation held, and which did not: the `[expect_some]` failures and
    /// the PASS or FAIL line.
    pub fn verdict(&self) -> String {
        let mut text = String::new();
        let some = self.expect_some_failures();
        for failure in &some {
            let _ = writeln!(text, "FAIL {failure}");
        }
        let failed_runs = self.failed_runs();
        if failed_runs == 0 && some.is_empty() {
            let _ = writeln!(
                text,
                "PASS: every expectation holds ({})",
                runs(self.runs())
            );
        } else if failed_runs == 0 {
            // Every run passed its own expectations; what failed is a claim over the seeds.
            let expectations = match some.len() {
                1 => "1 expectation".to_owned(),
                n => format!("{n} expectations"),
            };
            let each = match self.runs() {
                1 => "the run met its own".to_owned(),
                n => format!("each of the {n} runs met its own"),
            };
            let _ = writeln!(text, "FAIL: {expectations} over the seeds not met ({each})");
        } else {
            let _ = writeln!(
                text,
                "FAIL: {failed_runs} of {} failed an expectation",
                runs(self.runs())
            );
        }
        text
    }
}

/// "1 run", "40 runs".
fn runs(n: u64) -> String {
    if n == 1 {
        "1 run".to_string()
    } else {
        format!("{n} runs")
    }
}
