//! `hightide run --json`: one object per run, for scripts and for merging sharded sweeps.

use super::run::{hash_text, RunReport};
use crate::check::count_name;
use serde_json::{json, Value};

/// The trace hash is a string of 16 hex digits: JSON numbers lose precision above 2^53.
pub fn run_json(report: &RunReport) -> Value {
    let latency = &report.stats.latency;
    let examples: Vec<Value> = report
        .verdict
        .examples
        .iter()
        .map(|e| json!({ "count": count_name(e.count), "text": e.text, "why": e.why }))
        .collect();
    json!({
        "scenario": report.scenario,
        "variant": report.variant,
        "kafka": report.kafka.to_string(),
        "seed": report.seed,
        "counts": report.verdict.counts,
        "pass": report.pass(),
        "failures": report.failures,
        "trace_hash": hash_text(report.trace_hash),
        "sim_time_ms": millis(report.sim_time),
        "wall_time_ms": millis(report.wall_time),
        "throughput": report.stats.throughput_per_s,
        "ack_latency_ms": { "p50": latency.p50_ms, "p99": latency.p99_ms, "max": latency.max_ms },
        "examples": examples,
    })
}

fn millis(d: std::time::Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
