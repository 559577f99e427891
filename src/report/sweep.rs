//! The durability matrix: a row per configuration of a sweep, as a Markdown report with a
//! paragraph that says what the numbers show, and SVG charts beside it.

use super::latency::LatencyHistogram;
use super::run::RunReport;
use crate::config::kafka::Release;
use std::fmt::Write;

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
    throughput_sum: f64,
    /// Ack latencies of every run, pooled.
    pub latency: LatencyHistogram,
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
        self.throughput_sum += report.stats.throughput_per_s;
        self.latency.merge(&report.stats.histogram);
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
pub(super) fn common_settings(rows: &[SweepRow]) -> Vec<&(String, String)> {
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

/// `reports/<name>.md`: the paragraph, the table, the charts, and how to read them;
/// `set` is what the command line's `--set` changed of the base, said first so that the
/// report is not taken for the file's.
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
    let _ = write!(md, "{}\n\n", explain(rows));
    let keys = setting_keys(rows);
    let mut header = String::from("|");
    let mut rule = String::from("|");
    for key in &keys {
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
        for key in &keys {
            let value = row
                .settings
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| value_text(v))
                .unwrap_or("");
            let _ = write!(line, " {value} |");
        }
        let na = |text: String| {
            if row.acknowledges() {
                text
            } else {
                "n/a".to_string()
            }
        };
        let _ = writeln!(
            line,
            " {} | {} | {} | {} | {:.1} | {} | {:.0} | {} | {} |",
            row.runs,
            na(row.runs_with_loss.to_string()),
            na(format!("{:.1}", row.lost_avg())),
            na(row.lost_max.to_string()),
            row.missing_avg(),
            row.duplicates,
            row.throughput_per_s(),
            na(format!("{:.1}", row.p50_ms())),
            na(format!("{:.1}", row.p99_ms()))
        );
        if unresolved {
            line.pop();
            let _ = writeln!(line, " {} |", row.unresolved);
        }
        md.push_str(&line);
    }
    let [lost_chart, latency_chart] = chart_file_names(name);
    let _ = write!(
        md,
        "\n![Acknowledged messages lost per run]({lost_chart})\n\n![Ack latency]({latency_chart})\n\n\
         How to read it: *acked lost* counts messages the producer was told were written and that \
         the final read (after all faults healed) does not hold; *missing* counts sent messages, \
         acknowledged or not, that neither arrived nor definitely failed, the only measure of \
         loss for acks=0. Latency is from send to acknowledgement, in simulated time, pooled \
         over all runs of a configuration; throughput is acknowledged messages per simulated \
         second of the workload, averaged over runs."
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

/// The paragraph: which settings lost data, which did not, and the price in latency.
fn explain(rows: &[SweepRow]) -> String {
    let runs: u64 = rows.iter().map(|r| r.runs).sum();
    if runs == 0 {
        return "No run completed.".to_string();
    }
    let plural = if rows.len() == 1 { "" } else { "s" };
    let mut sentences = vec![format!(
        "{} configuration{plural}, {runs} runs in all.",
        rows.len()
    )];
    sentences.extend(loss_sentences(rows));
    sentences.extend(release_sentences(rows));
    sentences.extend(acks_0_sentence(rows));
    sentences.push(duplicates_sentence(rows));
    sentences.push(unresolved_sentence(rows));
    sentences.join(" ")
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

/// Which configurations lost acknowledged messages, the settings that decide it, the worst
/// case, and what safety cost.
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
        sentences.push(format!(
            "{} of {} configurations lost acknowledged messages; {} lost none.",
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
            "The worst was {}: {} acknowledged messages lost in one run, with loss in {} of {} runs.",
            worst.description(),
            worst.lost_max,
            worst.runs_with_loss,
            worst.runs
        ));
    }
    if !safe.is_empty() {
        sentences.push(price_sentence(&safe, &lossy));
    }
    sentences
}

/// Ack latency and throughput where nothing was lost against where data was lost.
fn price_sentence(safe: &[&SweepRow], lossy: &[&SweepRow]) -> String {
    let p99 = |rows: &[&SweepRow]| median(rows.iter().map(|r| r.p99_ms()).collect());
    let throughput =
        |rows: &[&SweepRow]| median(rows.iter().map(|r| r.throughput_per_s()).collect());
    let (safe_p99, lossy_p99) = (p99(safe), p99(lossy));
    let price = if safe_p99 > lossy_p99 && lossy_p99 > 0.0 {
        format!(
            "The price of safety is {:.1}x the p99 ack latency",
            safe_p99 / lossy_p99
        )
    } else {
        "Safety cost no ack latency here".to_string()
    };
    let (safe_rate, lossy_rate) = (throughput(safe), throughput(lossy));
    let rate = if (safe_rate - lossy_rate).abs() <= 0.02 * lossy_rate.max(safe_rate) {
        format!("at the same throughput ({lossy_rate:.0} acknowledged messages per second)")
    } else {
        format!("at {safe_rate:.0} against {lossy_rate:.0} acknowledged messages per second")
    };
    format!(
        "{price}: {safe_p99:.1} ms where nothing was lost against {lossy_p99:.1} ms where data was \
         lost (medians over configurations), {rate}."
    )
}

/// The sweep key of the Kafka release.
const RELEASE_KEY: &str = "cluster.kafka";

/// Release by release, for each pair of consecutive releases the sweep ran: what Kafka
/// changed between them (the sources of `config::RELEASE_STEPS`) and which configurations,
/// the same in every other setting, lost a different number of acknowledged messages.
fn release_sentences(rows: &[SweepRow]) -> Vec<String> {
    let release_of = |row: &SweepRow| {
        row.settings
            .iter()
            .find(|(key, _)| key == RELEASE_KEY)
            .and_then(|(_, value)| Release::parse(value).ok())
    };
    let others = |row: &SweepRow| -> Vec<(String, String)> {
        row.settings
            .iter()
            .filter(|(key, _)| key != RELEASE_KEY)
            .cloned()
            .collect()
    };
    let mut releases: Vec<Release> = rows.iter().filter_map(release_of).collect();
    releases.sort_unstable();
    releases.dedup();
    let mut sentences = Vec::new();
    for pair in releases.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        let sources: Vec<&str> = to
            .history()
            .filter(|step| step.since > from)
            .map(|step| step.source)
            .collect();
        let mut compared = 0;
        let mut moved: Vec<(&SweepRow, &SweepRow)> = Vec::new();
        for before in rows.iter().filter(|r| release_of(r) == Some(from)) {
            let rest = others(before);
            let Some(after) = rows
                .iter()
                .find(|r| release_of(r) == Some(to) && others(r) == rest)
            else {
                continue;
            };
            if !before.acknowledges() {
                continue;
            }
            compared += 1;
            if before.lost != after.lost {
                moved.push((before, after));
            }
        }
        if compared == 0 {
            continue;
        }
        let what = if sources.is_empty() {
            String::new()
        } else {
            format!(" ({})", sources.join("; "))
        };
        let most = moved
            .iter()
            .max_by_key(|(before, after)| before.lost.abs_diff(after.lost));
        sentences.push(match most {
            None => format!(
                "From Kafka {from} to {to}{what}, no configuration lost a different number of \
                 acknowledged messages."
            ),
            Some((before, after)) => format!(
                "From Kafka {from} to {to}{what}, {} of {compared} configurations lost a different \
                 number of acknowledged messages; most under {}: {} lost in all under {from}, {} \
                 under {to}, at {:.0} and {:.0} acknowledged messages per second.",
                moved.len(),
                short_settings(others(before).iter()),
                before.lost,
                after.lost,
                before.throughput_per_s(),
                after.throughput_per_s()
            ),
        });
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
