//! The durability matrix: a row per configuration of a sweep, as a Markdown report that
//! states its findings one sentence each, compares like with like (one setting at a time,
//! one release to the next, everything else equal), explains its unusual cells, and links
//! SVG charts beside it.

use super::latency::LatencyHistogram;
use super::run::RunReport;
use crate::config::kafka::{Release, StepReach};
use crate::scenario::model::SystemName;
use std::fmt::Write;

mod transactions;
pub use transactions::TxnTally;

/// Scenario sections: a sweep key `broker.min.insync.replicas` is shown as the Kafka name.
const SECTIONS: [&str; 8] = [
    "producer", "broker", "consumer", "workload", "disk", "network", "cluster", "topic",
];

/// Kafka's `Long.MAX_VALUE`, used for "never" (e.g. `log.flush.interval.messages`).
const LONG_MAX: &str = "9223372036854775807";

/// Rules (settings that decide an outcome) quoted in the paragraph, at most.
const RULES_SHOWN: usize = 3;

/// One configuration of a sweep, accumulated over its runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepRow {
    /// The `[vary]` settings of this configuration: `("producer.acks", "all")`, ...
    pub settings: Vec<(String, String)>,
    pub runs: u64,
    pub runs_with_loss: u64,
    /// Runs that failed an `[expect]`.
    pub failed_runs: u64,
    pub attempted: u64,
    pub acked: u64,
    pub lost: u64,
    /// The most acked messages lost in one run.
    pub lost_max: u64,
    pub missing: u64,
    /// Sends still without an outcome when the final read began.
    pub unresolved: u64,
    pub duplicates: u64,
    /// Sends that ended without an answer.
    pub indeterminate: u64,
    /// Requests that got no answer within `request.timeout.ms`.
    pub request_timeouts: u64,
    throughput_sum: f64,
    /// Ack latencies of every run, pooled.
    pub latency: LatencyHistogram,
    /// What transactions and stream processors did, for the transactions section.
    pub txn: TxnTally,
    pub context: RowContext,
}

/// What a configuration's runs were set up with beyond its swept settings: what the report
/// needs to explain a cell, and which release steps can change these runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowContext {
    pub system: SystemName,
    /// How long a send waits for its answer: Kafka's `request.timeout.ms` (per request),
    /// RocketMQ's `sendMsgTimeout` (for a send and its retries together).
    pub request_timeout_ms: f64,
    pub idempotence: bool,
    /// The producer's `retries` (RocketMQ's `retryTimesWhenSendFailed`).
    pub retries: u32,
    /// The steps of its release, each with whether it can change these runs.
    pub steps: Vec<StepReach>,
    /// Transactional producers or exactly-once processors.
    pub transactional: bool,
    /// Stream processors: consumers that write an output per input.
    pub processors: bool,
}

impl SweepRow {
    pub fn new(settings: Vec<(String, String)>) -> SweepRow {
        SweepRow {
            settings,
            ..SweepRow::default()
        }
    }

    pub fn from_reports(settings: Vec<(String, String)>, reports: &[RunReport]) -> SweepRow {
        let mut row = SweepRow::new(settings);
        for report in reports {
            row.add(report);
        }
        row
    }

    pub fn add(&mut self, report: &RunReport) {
        let counts = report.counts();
        self.runs += 1;
        self.runs_with_loss += u64::from(counts.lost > 0);
        self.failed_runs += u64::from(!report.pass());
        self.attempted += counts.attempted;
        self.acked += counts.acked;
        self.lost += counts.lost;
        self.lost_max = self.lost_max.max(counts.lost);
        self.missing += counts.missing;
        self.unresolved += counts.unresolved;
        self.duplicates += counts.duplicates;
        self.indeterminate += counts.indeterminate;
        self.request_timeouts += counts.request_timeouts;
        self.throughput_sum += report.stats.throughput_per_s;
        self.latency.merge(&report.stats.histogram);
        self.txn.add(counts);
    }

    fn per_run(&self, total: u64) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            total as f64 / self.runs as f64
        }
    }

    pub fn lost_avg(&self) -> f64 {
        self.per_run(self.lost)
    }

    pub fn missing_avg(&self) -> f64 {
        self.per_run(self.missing)
    }

    /// Mean over runs of acked messages per simulated second.
    pub fn throughput_per_s(&self) -> f64 {
        if self.runs == 0 {
            0.0
        } else {
            self.throughput_sum / self.runs as f64
        }
    }

    pub fn p50_ms(&self) -> f64 {
        self.latency.quantile_ms(0.50)
    }

    pub fn p99_ms(&self) -> f64 {
        self.latency.quantile_ms(0.99)
    }

    /// Sent messages but acknowledged none (acks=0): "lost" cannot apply to it.
    pub fn acknowledges(&self) -> bool {
        self.acked > 0 || self.attempted == 0
    }

    /// `acks=all min.isr=2 flush.msgs=MAX leader-kill`: short enough for a chart axis.
    pub fn label(&self) -> String {
        short_settings(self.settings.iter())
    }

    /// `acks=all, min.insync.replicas=2, faults=leader-kill`: Kafka's names, for prose.
    pub fn description(&self) -> String {
        let parts: Vec<String> = self.settings.iter().map(setting_text).collect();
        parts.join(", ")
    }

    fn has(&self, setting: &(String, String)) -> bool {
        self.settings.contains(setting)
    }
}

/// `broker.min.insync.replicas` -> `min.insync.replicas`.
/// The setting that bounds a send's wait, in the rows' system's words.
fn timeout_name(rows: &[SweepRow]) -> &'static str {
    if rows
        .iter()
        .all(|r| r.context.system == SystemName::RocketMq)
    {
        "sendMsgTimeout"
    } else {
        "request.timeout.ms"
    }
}

fn kafka_name(key: &str) -> &str {
    match key.split_once('.') {
        Some((section, rest)) if SECTIONS.contains(&section) => rest,
        _ => key,
    }
}

fn abbreviation(name: &str) -> &str {
    match name {
        "min.insync.replicas" => "min.isr",
        "log.flush.interval.messages" => "flush.msgs",
        "log.flush.interval.ms" => "flush.ms",
        "unclean.leader.election.enable" => "unclean",
        "enable.idempotence" => "idempotence",
        "max.in.flight.requests.per.connection" => "in.flight",
        "replication.truncation" => "truncation",
        other => other,
    }
}

fn value_text(value: &str) -> &str {
    if value == LONG_MAX {
        "MAX"
    } else {
        value
    }
}

/// `acks=all min.isr=2 flush.msgs=MAX leader-kill`
pub(super) fn short_settings<'a>(settings: impl Iterator<Item = &'a (String, String)>) -> String {
    let parts: Vec<String> = settings
        .map(|(key, value)| {
            if key == "faults" {
                value_text(value).to_string()
            } else {
                format!("{}={}", abbreviation(kafka_name(key)), value_text(value))
            }
        })
        .collect();
    parts.join(" ")
}

/// `min.insync.replicas=2`
fn setting_text((key, value): &(String, String)) -> String {
    format!("{}={}", kafka_name(key), value_text(value))
}

/// `acks=all and min.insync.replicas=2`
fn rule_text(rule: &[&(String, String)]) -> String {
    let parts: Vec<String> = rule.iter().map(|s| setting_text(s)).collect();
    parts.join(" and ")
}

/// Settings every row shares: charts name them once, in the subtitle.
pub(super) fn common_settings<'a>(rows: &[&'a SweepRow]) -> Vec<&'a (String, String)> {
    match rows.split_first() {
        None => Vec::new(),
        Some((first, rest)) => first
            .settings
            .iter()
            .filter(|s| rest.iter().all(|r| r.has(s)))
            .collect(),
    }
}

/// The chart files [`sweep_markdown`] links to, named after the sweep.
pub fn chart_file_names(name: &str) -> [String; 2] {
    [format!("{name}-lost.svg"), format!("{name}-latency.svg")]
}

/// `reports/<name>.md`: the findings, one sentence each; each swept setting compared with
/// everything else equal; release by release; every configuration, with notes beneath
/// for its unusual cells; the charts. `set` is what the command line's `--set` changed of
/// the base, said first so that the report is not taken for the file's.
pub fn sweep_markdown(name: &str, rows: &[SweepRow], set: &[String]) -> String {
    let mut md = format!("# Sweep: {name}\n\n");
    if !set.is_empty() {
        let set: Vec<String> = set.iter().map(|s| format!("`{s}`")).collect();
        let _ = writeln!(
            md,
            "Run with settings from the command line over the base scenario: {}.\n",
            set.join(", ")
        );
    }
    let runs: u64 = rows.iter().map(|r| r.runs).sum();
    if runs == 0 {
        md.push_str("No run completed.\n");
        return md;
    }
    let keys = setting_keys(rows);
    let names: Vec<&str> = keys.iter().map(|k| kafka_name(k)).collect();
    let plural = if rows.len() == 1 { "" } else { "s" };
    let _ = writeln!(
        md,
        "{} configuration{plural}, {runs} runs in all{}.\n",
        rows.len(),
        if names.is_empty() {
            String::new()
        } else {
            format!(", varying {}", list(&names))
        }
    );
    let comparisons = one_at_a_time(rows);
    let releases = release_steps(rows);
    md.push_str("## Findings\n\n");
    let mut findings = loss_sentences(rows);
    findings.extend(comparisons.iter().map(Comparison::finding));
    findings.extend(releases.iter().map(ReleaseStep::finding));
    findings.extend(acks_0_sentence(rows));
    findings.push(duplicates_sentence(rows));
    findings.push(unresolved_sentence(rows));
    let transactions = transactions::applies(rows);
    if transactions {
        findings.extend(transactions::findings(rows));
    }
    for finding in findings {
        let _ = writeln!(md, "- {finding}");
    }
    md.push('\n');
    if !comparisons.is_empty() {
        comparison_section(&mut md, &comparisons, &keys, timeout_name(rows));
    }
    if !releases.is_empty() {
        release_section(&mut md, &releases);
    }
    configuration_section(&mut md, rows, &keys);
    if transactions {
        transactions::section(&mut md, rows, &keys);
    }
    let [lost_chart, latency_chart] = chart_file_names(name);
    let _ = write!(
        md,
        "## Charts\n\n![Acknowledged messages lost per run]({lost_chart})\n\n![Ack latency]({latency_chart})\n\n\
         How to read it: *acked lost* counts messages the producer was told were written and that \
         the final read (after all faults healed) does not hold; *missing* counts sent messages, \
         acknowledged or not, that neither arrived nor definitely failed, the only measure of \
         loss {}. Latency is from send to acknowledgement, in simulated time, pooled \
         over all runs of a configuration; throughput is acknowledged messages per simulated \
         second of the workload, averaged over runs.",
        if timeout_name(rows) == "sendMsgTimeout" {
            "for a send never answered"
        } else {
            "for acks=0"
        }
    );
    if rows
        .iter()
        .any(|r| r.settings.iter().any(|(_, v)| v == LONG_MAX))
    {
        md.push_str(" MAX stands for 9223372036854775807 (Long.MAX_VALUE, i.e. never).");
    }
    md.push('\n');
    md
}

/// `a`, `a and b`, `a, b and c`.
fn list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// Every `[vary]` key, in the order the rows first name them.
fn setting_keys(rows: &[SweepRow]) -> Vec<&str> {
    let mut keys: Vec<&str> = Vec::new();
    for (key, _) in rows.iter().flat_map(|r| &r.settings) {
        if !keys.contains(&key.as_str()) {
            keys.push(key);
        }
    }
    keys
}

fn value_of<'a>(row: &'a SweepRow, key: &str) -> Option<&'a str> {
    row.settings
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// `row`'s settings other than `key`: two rows equal in them differ only in `key`.
fn others<'a>(row: &'a SweepRow, key: &str) -> Vec<&'a (String, String)> {
    row.settings.iter().filter(|(k, _)| k != key).collect()
}

/// Pairs of acknowledging rows equal in every setting but `key`, which is `from` in the
/// first and `to` in the second.
fn pairs<'a>(
    rows: &'a [SweepRow],
    key: &str,
    from: &str,
    to: &str,
) -> Vec<(&'a SweepRow, &'a SweepRow)> {
    rows.iter()
        .filter(|r| value_of(r, key) == Some(from) && r.acknowledges() && r.runs > 0)
        .filter_map(|before| {
            let rest = others(before, key);
            rows.iter()
                .find(|r| {
                    value_of(r, key) == Some(to)
                        && r.acknowledges()
                        && r.runs > 0
                        && others(r, key) == rest
                })
                .map(|after| (before, after))
        })
        .collect()
}

/// One swept setting changed from one value to the next, everything else equal.
struct Comparison<'a> {
    key: &'a str,
    from: &'a str,
    to: &'a str,
    pairs: Vec<(&'a SweepRow, &'a SweepRow)>,
}

/// Each swept setting but the release and the fault set (conditions, not choices), from
/// each of its values to the next, over the pairs of configurations equal in all else.
fn one_at_a_time(rows: &[SweepRow]) -> Vec<Comparison<'_>> {
    comparisons(rows, &[RELEASE_KEY, "faults"])
}

/// Each swept setting but those in `skip`, from each of its values to the next, over the
/// pairs of configurations equal in all else.
fn comparisons<'a>(rows: &'a [SweepRow], skip: &[&str]) -> Vec<Comparison<'a>> {
    let mut comparisons = Vec::new();
    for key in setting_keys(rows) {
        if skip.contains(&key) {
            continue;
        }
        let mut values: Vec<&str> = Vec::new();
        for row in rows {
            if let Some(value) = value_of(row, key) {
                if !values.contains(&value) {
                    values.push(value);
                }
            }
        }
        for step in values.windows(2) {
            let pairs = pairs(rows, key, step[0], step[1]);
            if !pairs.is_empty() {
                comparisons.push(Comparison {
                    key,
                    from: step[0],
                    to: step[1],
                    pairs,
                });
            }
        }
    }
    comparisons
}

impl<'a> Comparison<'a> {
    /// The pairs that met the fault set `faults`.
    fn under(&self, faults: &str) -> Comparison<'a> {
        Comparison {
            pairs: self
                .pairs
                .iter()
                .copied()
                .filter(|(before, _)| value_of(before, "faults") == Some(faults))
                .collect(),
            ..self.under_any()
        }
    }

    fn under_any(&self) -> Comparison<'a> {
        Comparison {
            key: self.key,
            from: self.from,
            to: self.to,
            pairs: self.pairs.clone(),
        }
    }

    fn name(&self) -> String {
        format!(
            "{} {} → {}",
            kafka_name(self.key),
            value_text(self.from),
            value_text(self.to)
        )
    }

    fn side(&self, after: bool) -> impl Iterator<Item = &SweepRow> {
        self.pairs
            .iter()
            .map(move |(before, later)| if after { *later } else { *before })
    }

    fn with_loss(&self, after: bool) -> usize {
        self.side(after).filter(|r| r.runs_with_loss > 0).count()
    }

    fn lost(&self, after: bool) -> u64 {
        self.side(after).map(|r| r.lost).sum()
    }

    /// How `of` moved within each pair (after minus before): the median change and the
    /// range. Each difference is between runs equal in all but the setting, so they can be
    /// set side by side even where the levels cannot (a p99 under a kill and under a power
    /// loss measure different waits).
    fn change(&self, of: impl Fn(&SweepRow) -> f64) -> Change {
        let mut changes: Vec<f64> = self.pairs.iter().map(|(b, a)| of(a) - of(b)).collect();
        changes.sort_by(f64::total_cmp);
        Change {
            low: changes.first().copied().unwrap_or(0.0),
            median: median(changes.clone()),
            high: changes.last().copied().unwrap_or(0.0),
        }
    }

    /// The change in one sentence: what it did to losses, and to what a typical send waits.
    fn finding(&self) -> String {
        let n = self.pairs.len();
        let (before, after) = (self.with_loss(false), self.with_loss(true));
        let loss = if self.lost(false) == self.lost(true) {
            "the same acknowledged losses".to_string()
        } else if before == after {
            format!(
                "loss in the same {after} of {n} configurations, {} acknowledged messages lost in all instead of {}",
                self.lost(true),
                self.lost(false)
            )
        } else {
            format!("loss in {after} of {n} configurations instead of {before}")
        };
        let p50 = self.change(SweepRow::p50_ms);
        let wait = match p50.median.round() {
            0.0 => "a typical send waited as long (no median change in ack p50)".to_string(),
            ms => format!(
                "a typical send waited {:.0} ms {} (the median change in ack p50 over the pairs; {})",
                ms.abs(),
                if ms > 0.0 { "longer" } else { "less" },
                p50.range()
            ),
        };
        format!(
            "{}={} → {}, everything else equal ({n} pairs): {loss}, and {wait}.",
            kafka_name(self.key),
            value_text(self.from),
            value_text(self.to)
        )
    }
}

fn comparison_section(md: &mut String, comparisons: &[Comparison], keys: &[&str], timeout: &str) {
    let names: Vec<&str> = keys.iter().map(|k| kafka_name(k)).collect();
    // Under different faults the slowest sends wait for different things: a row per fault
    // set keeps each median among runs that met the same faults.
    let fault_sets = {
        let mut sets: Vec<&str> = Vec::new();
        for (before, _) in comparisons.iter().flat_map(|c| &c.pairs) {
            if let Some(set) = value_of(before, "faults") {
                if !sets.contains(&set) {
                    sets.push(set);
                }
            }
        }
        sets
    };
    let by_faults = fault_sets.len() > 1;
    let _ = writeln!(
        md,
        "## One setting at a time\n\n\
         Each row pairs configurations that differ in the one setting it names and agree in \
         every other ({}){}. *With loss* and *acked lost* count configurations and messages \
         before → after the change: what it does to durability. The other columns give how \
         much the change moved each pair, the median and, in brackets, the range over the \
         pairs: *ack p50* what a typical send waits for it; *ack p99*, under these faults, \
         how long the slowest sends waited through the fault (see the notes under the full \
         table where it nears `{}`); *acked msg/s* what the workload got \
         through.\n",
        list(&names),
        if by_faults {
            ", a row per fault set"
        } else {
            ""
        },
        timeout,
    );
    md.push_str(if by_faults {
        "| change | faults | pairs | with loss | acked lost, all runs | ack p50, ms | ack p99, ms | acked msg/s |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    } else {
        "| change | pairs | with loss | acked lost, all runs | ack p50, ms | ack p99, ms | acked msg/s |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n"
    });
    for comparison in comparisons {
        let parts: Vec<(Option<&str>, Comparison)> = if by_faults {
            fault_sets
                .iter()
                .map(|set| (Some(*set), comparison.under(set)))
                .filter(|(_, c)| !c.pairs.is_empty())
                .collect()
        } else {
            vec![(None, comparison.under_any())]
        };
        for (faults, c) in parts {
            let both = |f: &dyn Fn(bool) -> String| format!("{} → {}", f(false), f(true));
            let _ = writeln!(
                md,
                "| {} |{} {} | {} | {} | {} | {} | {} |",
                c.name(),
                faults.map(|f| format!(" {f} |")).unwrap_or_default(),
                c.pairs.len(),
                both(&|after| c.with_loss(after).to_string()),
                both(&|after| c.lost(after).to_string()),
                c.change(SweepRow::p50_ms).cell(),
                c.change(SweepRow::p99_ms).cell(),
                c.change(SweepRow::throughput_per_s).cell(),
            );
        }
    }
    md.push('\n');
}

/// How a measure moved over the pairs of a comparison.
struct Change {
    low: f64,
    median: f64,
    high: f64,
}

impl Change {
    /// `+300 (+140 to +316)`, or `+300` when every pair moved alike.
    fn cell(&self) -> String {
        if self.low.round() == self.high.round() {
            signed(self.median)
        } else {
            format!("{} ({})", signed(self.median), self.range_numbers())
        }
    }

    fn range_numbers(&self) -> String {
        format!("{} to {}", signed(self.low), signed(self.high))
    }

    /// `from +140 to +316 ms`, or `the same in every pair`.
    fn range(&self) -> String {
        if self.low.round() == self.high.round() {
            "the same in every pair".to_string()
        } else {
            format!("from {} ms", self.range_numbers())
        }
    }
}

/// `+300`, `-2`, `0`: a change, rounded, with its sign.
fn signed(value: f64) -> String {
    match value.round() {
        0.0 => "0".to_string(),
        rounded => format!("{rounded:+.0}"),
    }
}

/// The sweep key of the Kafka release.
const RELEASE_KEY: &str = "cluster.kafka";

fn release_of(row: &SweepRow) -> Option<Release> {
    value_of(row, RELEASE_KEY).and_then(|value| Release::parse(value).ok())
}

/// Two consecutive releases of a sweep: the steps between them that can change its runs,
/// and the configurations, equal in all else, that lost a different number of messages.
struct ReleaseStep<'a> {
    from: Release,
    to: Release,
    /// Sources of the steps between them that can change these runs, oldest first.
    reaching: Vec<&'static str>,
    /// Steps that cannot, each with why.
    left_out: Vec<(&'static str, String)>,
    compared: usize,
    moved: Vec<(&'a SweepRow, &'a SweepRow)>,
    /// Duplicates over the compared configurations, under each release.
    duplicates: (u64, u64),
}

/// For each pair of consecutive releases the sweep ran, the steps between them (from
/// `config::RELEASE_STEPS`, as each configuration meets them) and what moved.
fn release_steps<'a>(rows: &'a [SweepRow]) -> Vec<ReleaseStep<'a>> {
    let mut releases: Vec<Release> = rows.iter().filter_map(release_of).collect();
    releases.sort_unstable();
    releases.dedup();
    let mut steps = Vec::new();
    for pair in releases.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let pairs = pairs(rows, RELEASE_KEY, &from.to_string(), &to.to_string());
        if pairs.is_empty() {
            continue;
        }
        let mut reaching: Vec<&'static str> = Vec::new();
        let mut left_out: Vec<(&'static str, String)> = Vec::new();
        // A step is left out only if it cannot change the runs of any configuration.
        let between = |row: &'a SweepRow| {
            row.context
                .steps
                .iter()
                .filter(move |step| step.since > from && step.since <= to)
        };
        for step in between(pairs[0].1) {
            let missed_by_all = pairs.iter().all(|(_, after)| {
                between(after).any(|s| s.source == step.source && s.missed.is_some())
            });
            match (&step.missed, missed_by_all) {
                (Some(why), true) => left_out.push((step.source, why.clone())),
                _ => reaching.push(step.source),
            }
        }
        for (first, second) in from.cancelling_steps(to) {
            let why = format!("{} undoes what {} changed", second.since, first.since);
            for source in [first.source, second.source] {
                if let Some(at) = reaching.iter().position(|s| *s == source) {
                    reaching.remove(at);
                    left_out.push((source, why.clone()));
                }
            }
        }
        let moved = pairs
            .iter()
            .copied()
            .filter(|(before, after)| before.lost != after.lost)
            .collect();
        let duplicates = (
            pairs.iter().map(|(before, _)| before.duplicates).sum(),
            pairs.iter().map(|(_, after)| after.duplicates).sum(),
        );
        steps.push(ReleaseStep {
            from,
            to,
            reaching,
            left_out,
            compared: pairs.len(),
            moved,
            duplicates,
        });
    }
    steps
}

impl ReleaseStep<'_> {
    fn largest(&self) -> Option<(&SweepRow, &SweepRow)> {
        self.moved
            .iter()
            .copied()
            .max_by_key(|(before, after)| before.lost.abs_diff(after.lost))
    }

    fn finding(&self) -> String {
        let (from, to) = (self.from, self.to);
        let loss = match self.largest() {
            None => format!(
                "no configuration lost a different number of acknowledged messages ({} compared)",
                self.compared
            ),
            Some((before, after)) => format!(
                "{} of {} configurations lost a different number of acknowledged messages, most \
                 under {}: {} → {} in all",
                self.moved.len(),
                self.compared,
                short_settings(others(before, RELEASE_KEY).into_iter()),
                before.lost,
                after.lost
            ),
        };
        let (before, after) = self.duplicates;
        let duplicates = if before == after {
            String::new()
        } else {
            format!("; duplicates {before} → {after}")
        };
        format!("Kafka {from} → {to}, everything else equal: {loss}{duplicates}.")
    }
}

fn release_section(md: &mut String, releases: &[ReleaseStep]) {
    md.push_str(
        "## Release by release\n\n\
         Each row compares configurations equal in every other setting under two consecutive \
         releases, and names the changes between them that can reach these runs (`hightide \
         config --kafka X.Y` describes each).\n\n\
         | Kafka | changes that can reach these runs | compared | lost a different number | largest difference (acked lost, all runs) | duplicates, all runs |\n\
         | --- | --- | ---: | ---: | --- | ---: |\n",
    );
    for step in releases {
        let largest = step
            .largest()
            .map_or("none".to_string(), |(before, after)| {
                format!(
                    "{}: {} → {}",
                    short_settings(others(before, RELEASE_KEY).into_iter()),
                    before.lost,
                    after.lost
                )
            });
        let _ = writeln!(
            md,
            "| {} → {} | {} | {} | {} | {largest} | {} → {} |",
            step.from,
            step.to,
            if step.reaching.is_empty() {
                "none".to_string()
            } else {
                step.reaching.join("; ")
            },
            step.compared,
            step.moved.len(),
            step.duplicates.0,
            step.duplicates.1
        );
    }
    // The steps left out, grouped by why.
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for (source, why) in releases.iter().flat_map(|r| &r.left_out) {
        match reasons.iter_mut().find(|(w, _)| w == why) {
            Some((_, sources)) => sources.push(source),
            None => reasons.push((why, vec![source])),
        }
    }
    if !reasons.is_empty() {
        let parts: Vec<String> = reasons
            .iter()
            .map(|(why, sources)| format!("{} ({why})", list(sources)))
            .collect();
        let _ = writeln!(
            md,
            "\nLeft out, as they cannot change these runs: {}.",
            parts.join("; ")
        );
    }
    md.push('\n');
}

/// An unusual kind of cell in the full table, explained once beneath it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Note {
    /// An ack latency near `request.timeout.ms`.
    RequestTimeout,
    /// Duplicates from a producer that is not idempotent.
    NotIdempotent,
    /// Many more sends missing than acknowledged ones lost.
    Indeterminate,
}

impl Note {
    const ALL: [Note; 3] = [
        Note::RequestTimeout,
        Note::NotIdempotent,
        Note::Indeterminate,
    ];

    fn text(self, rows: &[SweepRow]) -> String {
        match self {
            Note::RequestTimeout => {
                let noted: Vec<&SweepRow> = rows.iter().filter(|r| self.marks(r)).collect();
                let timeouts: u64 = noted.iter().map(|r| r.request_timeouts).sum();
                let runs: u64 = noted.iter().map(|r| r.runs).sum();
                let half = noted
                    .iter()
                    .any(|r| r.p50_ms() >= r.context.request_timeout_ms / 2.0);
                if noted
                    .iter()
                    .all(|r| r.context.system == SystemName::RocketMq)
                {
                    return format!(
                        "An ack latency at least half of `sendMsgTimeout` ({} ms): the slowest \
                         sends waited on a master that had lost power. A powered-off host \
                         answers nothing, so a send waits until its `sendMsgTimeout`, which \
                         bounds the send and all its retries together, runs out{}. The number \
                         measures the timeout, not what the row's settings cost. A kill, whose \
                         connections the kernel resets, fails the send at once and it retries \
                         on another broker group if there is one.",
                        number_list(noted.iter().map(|r| r.context.request_timeout_ms).collect()),
                        if half {
                            "; a p50 this long means half the sends waited so"
                        } else {
                            ""
                        },
                    );
                }
                format!(
                    "An ack latency at least half of `request.timeout.ms` ({} ms): the slowest \
                     sends waited on a request to a broker that had lost power. A powered-off \
                     host answers nothing, not even a TCP reset, so the producer waits out the \
                     request timeout before it retries against the new leader{}. The number \
                     measures the timeout, not what the row's settings cost ({:.1} request \
                     timeouts per run in these rows). A kill, whose connections the kernel \
                     resets, shows the failover's own length.",
                    number_list(noted.iter().map(|r| r.context.request_timeout_ms).collect()),
                    if half {
                        "; a p50 this long means half the sends queued behind such a request"
                    } else {
                        ""
                    },
                    timeouts as f64 / runs.max(1) as f64
                )
            }
            Note::NotIdempotent
                if rows
                    .iter()
                    .filter(|r| self.marks(r))
                    .all(|r| r.context.system == SystemName::RocketMq) =>
            {
                "Duplicates: RocketMQ deduplicates nothing, so a send retried after its first \
                 attempt was stored (its answer lost, or timed out) is stored again. A timeout \
                 also closes the connection the producer's sends share (from 5.1.4, #7057, not \
                 when getting the connection took most of the time), failing the others on it, \
                 whose retries store them again."
                    .to_string()
            }
            Note::NotIdempotent => "Duplicates from a producer that is not idempotent \
                 (`enable.idempotence` = false): a batch retried after its first attempt was \
                 written (its answer lost, or timed out) is written again. An idempotent \
                 producer's retry carries the same sequence numbers, and the leader drops it."
                .to_string(),
            Note::Indeterminate => {
                let noted: Vec<&SweepRow> = rows.iter().filter(|r| self.marks(r)).collect();
                let open: u64 = noted.iter().map(|r| r.indeterminate).sum();
                let runs: u64 = noted.iter().map(|r| r.runs).sum();
                let kafka = noted.iter().all(|r| r.context.system == SystemName::Kafka);
                let unretried = kafka && noted.iter().all(|r| r.context.retries == 0);
                format!(
                    "Missing far above acknowledged loss: sends that ended without an answer \
                     ({:.1} indeterminate sends per run in these rows: {}{}) and never reached \
                     the log. Nobody \
                     was told they were written, so they are not lost in the strict sense, but \
                     the application lost them all the same.",
                    open as f64 / runs.max(1) as f64,
                    if kafka {
                        "a reset connection, a request timeout or an expired batch"
                    } else {
                        "a reset connection, or `sendMsgTimeout` run out"
                    },
                    if unretried {
                        ", none of them retried: `retries` = 0 here, the default before 2.1"
                    } else {
                        ""
                    },
                )
            }
        }
    }

    fn marks(self, row: &SweepRow) -> bool {
        match self {
            Note::RequestTimeout => {
                row.acknowledges()
                    && row.latency.count() > 0
                    && row.context.request_timeout_ms > 0.0
                    && row.p99_ms() >= row.context.request_timeout_ms / 2.0
            }
            Note::NotIdempotent => row.duplicates > 0 && !row.context.idempotence,
            Note::Indeterminate => {
                row.acknowledges() && row.missing_avg() >= 10.0 + 2.0 * row.lost_avg()
            }
        }
    }
}

/// `30000` or `30000 or 10000`: the distinct values, in order.
fn number_list(values: Vec<f64>) -> String {
    let mut distinct: Vec<String> = Vec::new();
    for value in values {
        let text = format!("{value:.0}");
        if !distinct.contains(&text) {
            distinct.push(text);
        }
    }
    distinct.join(" or ")
}

fn superscript(n: usize) -> &'static str {
    ["¹", "²", "³", "⁴"][n.min(3)]
}

fn configuration_section(md: &mut String, rows: &[SweepRow], keys: &[&str]) {
    let notes: Vec<Note> = Note::ALL
        .into_iter()
        .filter(|note| rows.iter().any(|r| note.marks(r)))
        .collect();
    let mark = |note: Note, row: &SweepRow| match notes.iter().position(|n| *n == note) {
        Some(i) if note.marks(row) => format!(" {}", superscript(i)),
        _ => String::new(),
    };
    md.push_str("## Every configuration\n\n");
    let mut header = String::from("|");
    let mut rule = String::from("|");
    for key in keys {
        let _ = write!(header, " {} |", kafka_name(key));
        rule.push_str(" --- |");
    }
    header.push_str(
        " runs | runs with loss | acked lost (avg) | acked lost (worst) | missing (avg) | duplicates | acked msg/s | ack p50 ms | ack p99 ms |",
    );
    rule.push_str(" ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    let unresolved = rows.iter().any(|r| r.unresolved > 0);
    if unresolved {
        header.push_str(" unresolved |");
        rule.push_str(" ---: |");
    }
    let _ = writeln!(md, "{header}\n{rule}");
    for row in rows {
        let mut line = String::from("|");
        for key in keys {
            let _ = write!(line, " {} |", value_of(row, key).map_or("", value_text));
        }
        let na = |text: String| {
            if row.acknowledges() {
                text
            } else {
                "n/a".to_string()
            }
        };
        let timeout = |ms: f64| {
            if row.context.request_timeout_ms > 0.0 && ms >= row.context.request_timeout_ms / 2.0 {
                mark(Note::RequestTimeout, row)
            } else {
                String::new()
            }
        };
        let _ = write!(
            line,
            " {} | {} | {} | {} | {:.1}{} | {}{} | {:.0} | {} | {} |",
            row.runs,
            na(row.runs_with_loss.to_string()),
            na(format!("{:.1}", row.lost_avg())),
            na(row.lost_max.to_string()),
            row.missing_avg(),
            mark(Note::Indeterminate, row),
            row.duplicates,
            mark(Note::NotIdempotent, row),
            row.throughput_per_s(),
            na(format!("{:.1}{}", row.p50_ms(), timeout(row.p50_ms()))),
            na(format!("{:.1}{}", row.p99_ms(), timeout(row.p99_ms())))
        );
        if unresolved {
            let _ = write!(line, " {} |", row.unresolved);
        }
        let _ = writeln!(md, "{line}");
    }
    md.push('\n');
    for (i, note) in notes.iter().enumerate() {
        let _ = writeln!(md, "{} {}\n", superscript(i), note.text(rows));
    }
}

/// Whether every send had an outcome before the final read: otherwise a row's missing
/// count and latencies mix resolved sends with sends whose outcome is unknown.
fn unresolved_sentence(rows: &[SweepRow]) -> String {
    let open: Vec<&SweepRow> = rows.iter().filter(|r| r.unresolved > 0).collect();
    if open.is_empty() {
        return "Every send had its outcome before the final read began.".to_string();
    }
    let sends: u64 = open.iter().map(|r| r.unresolved).sum();
    let plural = if open.len() == 1 { "" } else { "s" };
    format!(
        "{sends} sends in {} configuration{plural} were still unresolved when the final read began \
         (the unresolved column): their outcome is unknown, so a longer heal phase would change \
         those rows.",
        open.len()
    )
}

/// Which configurations lost acknowledged messages, the settings that decide it, and the
/// worst case: one finding each.
fn loss_sentences(rows: &[SweepRow]) -> Vec<String> {
    let acking: Vec<&SweepRow> = rows.iter().filter(|r| r.acknowledges()).collect();
    let (lossy, safe): (Vec<&SweepRow>, Vec<&SweepRow>) =
        acking.iter().partition(|r| r.runs_with_loss > 0);
    if acking.is_empty() {
        return vec!["No configuration acknowledged a message, so none can have lost one.".into()];
    }
    if lossy.is_empty() {
        return vec!["No configuration lost an acknowledged message.".into()];
    }
    let mut sentences = Vec::new();
    if safe.is_empty() {
        sentences
            .push("Every configuration lost acknowledged messages in at least one run.".into());
    } else {
        let which = if acking.len() < rows.len() {
            " that acknowledge writes"
        } else {
            ""
        };
        sentences.push(format!(
            "{} of {} configurations{which} lost acknowledged messages in at least one run; {} lost none.",
            lossy.len(),
            acking.len(),
            safe.len()
        ));
        let keeps = rules(&acking, |r| r.runs_with_loss == 0);
        if !keeps.is_empty() {
            sentences.push(format!(
                "Every configuration with {} kept every acknowledged message.",
                keeps.join(", or with ")
            ));
        }
        let loses = rules(&acking, |r| r.runs_with_loss > 0);
        if !loses.is_empty() {
            let every = if acking.len() < rows.len() {
                "Among the configurations that acknowledge writes, every one"
            } else {
                "Every configuration"
            };
            sentences.push(format!(
                "{every} with {} lost some.",
                loses.join(", or with ")
            ));
        }
    }
    let worst = lossy.iter().max_by(|a, b| {
        (a.lost_max, a.lost)
            .cmp(&(b.lost_max, b.lost))
            .then(b.label().cmp(&a.label()))
    });
    if let Some(worst) = worst {
        sentences.push(format!(
            "The worst was {}: {} acknowledged messages lost in one run (loss in {} of {} runs).",
            worst.description(),
            worst.lost_max,
            worst.runs_with_loss,
            worst.runs
        ));
    }
    sentences
}

/// acks=0 acknowledges nothing: only `missing` can show what it loses.
fn acks_0_sentence(rows: &[SweepRow]) -> Option<String> {
    let silent: Vec<&SweepRow> = rows.iter().filter(|r| !r.acknowledges()).collect();
    if silent.is_empty() {
        return None;
    }
    let attempted: u64 = silent.iter().map(|r| r.attempted).sum();
    let missing: u64 = silent.iter().map(|r| r.missing).sum();
    let (plural, them, their) = if silent.len() == 1 {
        ("", "it", "its")
    } else {
        ("s", "them", "their")
    };
    Some(format!(
        "{} configuration{plural} acknowledged nothing (acks=0), so no loss can be counted against \
         {them}; yet {:.1}% of {their} sends never reached the final read.",
        silent.len(),
        100.0 * missing as f64 / attempted.max(1) as f64
    ))
}

fn duplicates_sentence(rows: &[SweepRow]) -> String {
    let duplicated: Vec<&SweepRow> = rows.iter().filter(|r| r.duplicates > 0).collect();
    let most = duplicated.iter().max_by(|a, b| {
        a.duplicates
            .cmp(&b.duplicates)
            .then(b.label().cmp(&a.label()))
    });
    match most {
        None => "No configuration produced duplicates.".to_string(),
        Some(most) => format!(
            "Duplicates appeared in {} configuration{}, most under {} ({} in all).",
            duplicated.len(),
            if duplicated.len() == 1 { "" } else { "s" },
            most.description(),
            most.duplicates
        ),
    }
}

/// Settings, alone or in pairs, under which every row satisfies `outcome` while some row
/// without them does not: the settings that decide it. A pair is quoted only if neither
/// half decides alone. Settings are taken in column order, so rules read like the table.
fn rules(rows: &[&SweepRow], outcome: impl Fn(&SweepRow) -> bool) -> Vec<String> {
    let mut settings: Vec<&(String, String)> = Vec::new();
    for setting in rows.iter().flat_map(|r| &r.settings) {
        if !settings.contains(&setting) {
            settings.push(setting);
        }
    }
    let column: Vec<&str> = rows
        .iter()
        .flat_map(|r| &r.settings)
        .map(|(key, _)| key.as_str())
        .collect();
    settings.sort_by_key(|(key, _)| column.iter().position(|k| k == key));
    let decides = |rule: &[&(String, String)]| {
        let mut with = rows
            .iter()
            .filter(|r| rule.iter().all(|s| r.has(s)))
            .peekable();
        with.peek().is_some()
            && with.all(|r| outcome(r))
            && rows
                .iter()
                .any(|r| !rule.iter().all(|s| r.has(s)) && !outcome(r))
    };
    let singles: Vec<&(String, String)> = settings
        .iter()
        .copied()
        .filter(|s| decides(&[*s]))
        .collect();
    let mut found: Vec<String> = singles.iter().map(|s| rule_text(&[*s])).collect();
    for (i, a) in settings.iter().enumerate() {
        for b in &settings[i + 1..] {
            if a.0 != b.0 && !singles.contains(a) && !singles.contains(b) && decides(&[*a, *b]) {
                found.push(rule_text(&[*a, *b]));
            }
        }
    }
    found.truncate(RULES_SHOWN);
    found
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}
