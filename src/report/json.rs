//! `--json`: one object per run, for scripts and for `hightide merge`, which reads the runs
//! of sharded commands back ([`run_from_json`]) and reports them as one command would.
//! Each line carries what a merge needs: the `[expect_some]` to judge over the seeds and
//! the ack latencies as a histogram, so merged percentiles are exact.

use super::latency::{HistoryStats, LatencyHistogram, LatencyStats};
use super::run::{hash_text, RunReport};
use crate::check::{count_name, Count, Counts, Example, Expectation, Verdict};
use crate::config::{kafka, rocketmq, Modelled};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A run as a JSON line. Keys come out sorted (serde_json's map).
#[derive(Serialize, Deserialize)]
struct RunLine {
    scenario: String,
    variant: String,
    /// The Kafka release of a Kafka run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    kafka: Option<String>,
    /// The RocketMQ release of a RocketMQ run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rocketmq: Option<String>,
    seed: u64,
    counts: Counts,
    pass: bool,
    failures: Vec<String>,
    /// 16 hex digits: JSON numbers lose precision above 2^53.
    trace_hash: String,
    sim_time_ms: f64,
    wall_time_ms: f64,
    throughput: f64,
    ack_latency_ms: Percentiles,
    /// `[µs, acks]` per distinct ack latency.
    ack_latency_histogram_us: Vec<(u64, u64)>,
    events: u64,
    /// The variant's `[expect_some]`, as `lost > 0`.
    expect_some: Vec<String>,
    /// The counts the variant's expectations name, whose rows the tables show.
    #[serde(default)]
    named: Vec<String>,
    examples: Vec<ExampleLine>,
    /// Only on a run that consumed as a group, so that other runs' lines stay as they were.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    group: bool,
    /// Only on a run whose group's members were stream processors.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    processors: bool,
}

#[derive(Serialize, Deserialize)]
struct Percentiles {
    p50: f64,
    p99: f64,
    max: f64,
}

#[derive(Serialize, Deserialize)]
struct ExampleLine {
    count: String,
    text: String,
    why: Vec<String>,
}

pub fn run_json(report: &RunReport) -> serde_json::Value {
    let latency = &report.stats.latency;
    let line = RunLine {
        scenario: report.scenario.clone(),
        variant: report.variant.clone(),
        kafka: match report.modelled {
            Modelled::Kafka(release) => Some(release.to_string()),
            Modelled::RocketMq(_) => None,
        },
        rocketmq: match report.modelled {
            Modelled::RocketMq(release) => Some(release.to_string()),
            Modelled::Kafka(_) => None,
        },
        seed: report.seed,
        counts: report.verdict.counts.clone(),
        pass: report.pass(),
        failures: report.failures.clone(),
        trace_hash: hash_text(report.trace_hash),
        sim_time_ms: millis(report.sim_time),
        wall_time_ms: millis(report.wall_time),
        throughput: report.stats.throughput_per_s,
        ack_latency_ms: Percentiles {
            p50: latency.p50_ms,
            p99: latency.p99_ms,
            max: latency.max_ms,
        },
        ack_latency_histogram_us: report.stats.histogram.entries().collect(),
        events: report.stats.events,
        expect_some: report.expect_some.iter().map(ToString::to_string).collect(),
        named: report
            .named
            .iter()
            .map(|&c| count_name(c).to_owned())
            .collect(),
        examples: report
            .verdict
            .examples
            .iter()
            .map(|e| ExampleLine {
                count: count_name(e.count).to_owned(),
                text: e.text.clone(),
                why: e.why.clone(),
            })
            .collect(),
        group: report.verdict.group,
        processors: report.verdict.processors,
    };
    serde_json::to_value(line).unwrap_or_default()
}

/// A run read back from its `--json` line: everything the reports use (not the lost
/// messages' ack times, which only the timeline draws).
pub fn run_from_json(value: serde_json::Value) -> Result<RunReport, String> {
    let line: RunLine = serde_json::from_value(value).map_err(|e| e.to_string())?;
    let count = |name: &str| {
        Count::ALL
            .iter()
            .copied()
            .find(|&c| count_name(c) == name)
            .ok_or_else(|| format!("unknown count `{name}`"))
    };
    let examples = line
        .examples
        .into_iter()
        .map(|e| {
            Ok(Example {
                count: count(&e.count)?,
                text: e.text,
                why: e.why,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let expect_some = line
        .expect_some
        .iter()
        .map(|text| {
            let (name, rule) = text
                .split_once(' ')
                .ok_or_else(|| format!("not an expectation: `{text}`"))?;
            let (comparison, value) = crate::scenario::parse_comparison(rule)?;
            Ok(Expectation {
                count: count(name)?,
                comparison,
                value,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let modelled = match (&line.kafka, &line.rocketmq) {
        (Some(release), None) => Modelled::Kafka(kafka::Release::parse(release)?),
        (None, Some(release)) => Modelled::RocketMq(rocketmq::Release::parse(release)?),
        _ => return Err("a run names one release: `kafka` or `rocketmq`".into()),
    };
    let histogram = LatencyHistogram::from_entries(line.ack_latency_histogram_us);
    let latency: LatencyStats = histogram.stats();
    Ok(RunReport {
        scenario: line.scenario,
        variant: line.variant,
        modelled,
        seed: line.seed,
        verdict: Verdict {
            counts: line.counts,
            examples,
            lost_acked_at: Vec::new(),
            group: line.group,
            processors: line.processors,
        },
        failures: line.failures,
        expect_some,
        named: line
            .named
            .iter()
            .map(|name| count(name))
            .collect::<Result<Vec<_>, String>>()?,
        trace_hash: u64::from_str_radix(&line.trace_hash, 16)
            .map_err(|_| format!("trace_hash `{}` is not 16 hex digits", line.trace_hash))?,
        sim_time: from_millis(line.sim_time_ms),
        wall_time: from_millis(line.wall_time_ms),
        stats: HistoryStats {
            events: line.events,
            latency,
            histogram,
            throughput_per_s: line.throughput,
        },
    })
}

fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn from_millis(ms: f64) -> Duration {
    Duration::from_secs_f64(ms.max(0.0) / 1000.0)
}
