//! `hightide sweep MATRIX.toml`: the durability matrix. The scenario parser turns the cross
//! product of `[vary]` into variants of the base scenario (validated as in a scenario
//! file); every variant runs on every seed with the same faults, and the results become a
//! Markdown report with SVG charts.

use super::{shard, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK};
use crate::report::{self, RowContext, RunReport, SweepRow};
use crate::scenario;
use crate::scenario::model::SystemName;
use crate::sim::batch::{self, Job};
use crate::sim::runner::RunOptions;
use crate::systems;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct SweepArgs {
    /// The matrix file.
    file: PathBuf,
    /// Seeds to run instead of the matrix's: "20", "3,17,42" or "100..200".
    #[arg(long)]
    seeds: Option<String>,
    /// Where to write `<name>.md` and its charts.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
    /// Simulations to run at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Override a setting of the base scenario that the matrix does not vary (as in
    /// `hightide run`): `duration=10s`, `producer.linger.ms=5`. Repeatable; the report
    /// says what was set.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// Run the K-th of N shares of the runs and write them as JSON lines for `hightide
    /// merge`, which writes the report.
    #[arg(long, value_name = "K/N")]
    shard: Option<batch::Shard>,
}

/// A variant's settings from its generated name (`producer.acks=all faults=leader-kill`),
/// with Kafka's "never" spelt out.
fn settings(variant: &str) -> Vec<(String, String)> {
    variant
        .split(' ')
        .filter_map(|part| part.split_once('='))
        .map(|(path, value)| {
            let value = if value == i64::MAX.to_string() {
                "never"
            } else {
                value.trim_matches('"')
            };
            (path.to_string(), value.to_string())
        })
        .collect()
}

pub fn run(args: SweepArgs) -> i32 {
    let sweep = match scenario::Overrides::parse(&args.set)
        .and_then(|overrides| scenario::load_sweep(&args.file, &overrides))
    {
        Ok(sweep) => sweep,
        Err(error) => {
            eprintln!("{}", error.report());
            return EXIT_BAD_INPUT;
        }
    };
    let seeds = match &args.seeds {
        Some(spec) => match scenario::parse_seeds(spec) {
            Ok(seeds) => seeds,
            Err(error) => {
                eprintln!("error: --seeds {spec:?}: {error}");
                return EXIT_BAD_INPUT;
            }
        },
        None => sweep.scenario.seeds.clone(),
    };
    let scenario = &sweep.scenario;
    let mut jobs = jobs(scenario, &seeds);
    let all = jobs.len();
    if let Some(shard) = args.shard {
        jobs = shard.select(&jobs);
        let matrix = std::fs::read_to_string(&args.file).unwrap_or_default();
        let files = [matrix.as_str(), scenario.source.as_str()];
        super::out(&shard::header_line(&shard::Header {
            seeds: seeds.clone(),
            shard: shard.to_string(),
            ..shard::Header::new("sweep", &args.file, &args.set, &files)
        }));
    }
    eprintln!(
        "sweep {}: {} configurations x {} seeds = {all} runs{}",
        sweep.name,
        scenario.variants.len(),
        seeds.len(),
        args.shard
            .map(|s| format!(", {} of them in shard {s}", jobs.len()))
            .unwrap_or_default()
    );
    let threads = args.jobs.unwrap_or_else(batch::default_threads);
    let mut rows = rows(scenario);
    let started = std::time::Instant::now();
    let mut failure = None;
    let ran = batch::run_each(
        systems::run,
        &jobs,
        threads,
        &RunOptions::default(),
        super::interrupted(),
        |job, result| {
            result
                .map(|outcome| RunReport::from_outcome(&scenario.name, job.variant, &outcome))
                .map_err(|error| format!("seed {} {}: {error}", job.seed, job.variant.name))
        },
        |result| match result {
            Ok(report) if args.shard.is_some() => {
                super::out(&format!("{}\n", report::run_json(&report)));
            }
            Ok(report) => add(scenario, &mut rows, &report, seeds.len()),
            Err(error) => {
                failure.get_or_insert(error);
            }
        },
    );
    if let Some(error) = failure {
        eprintln!("error: {error}");
        return EXIT_FAILED;
    }
    if ran < jobs.len() {
        eprintln!(
            "interrupted after {ran} of {} runs: the report is not written",
            jobs.len()
        );
        return EXIT_INTERRUPTED;
    }
    if args.shard.is_some() {
        super::out(&shard::done_line(shard::Done {
            runs: ran,
            explored: 0,
            wall_time_ms: started.elapsed().as_secs_f64() * 1000.0,
        }));
        return EXIT_OK;
    }
    finish(&args.out, &sweep.name, &rows, &args.set)
}

/// Every configuration on every seed, configuration by configuration.
fn jobs<'a>(scenario: &'a scenario::model::Scenario, seeds: &[u64]) -> Vec<Job<'a>> {
    scenario
        .variants
        .iter()
        .flat_map(|variant| seeds.iter().map(move |&seed| Job { variant, seed }))
        .collect()
}

/// A row per configuration, with what its runs were set up with beyond the swept keys.
fn rows(scenario: &scenario::model::Scenario) -> Vec<SweepRow> {
    scenario
        .variants
        .iter()
        .map(|v| {
            let swept = settings(&v.name);
            let paths: Vec<&str> = swept.iter().map(|(path, _)| path.as_str()).collect();
            let settings = &v.settings;
            let system = settings.cluster.system;
            let context = match system {
                SystemName::Kafka => RowContext {
                    system,
                    request_timeout_ms: settings.producer.request_timeout.as_secs_f64() * 1000.0,
                    idempotence: settings.producer.idempotent(),
                    retries: settings.producer.retries,
                    steps: scenario::release_steps(settings, &paths),
                    transactional: settings.transactional(),
                    processors: settings.workload.output.is_some(),
                },
                SystemName::RocketMq => RowContext {
                    system,
                    request_timeout_ms: settings.rocketmq.producer.send_msg_timeout.as_secs_f64()
                        * 1000.0,
                    idempotence: false,
                    retries: settings.rocketmq.producer.retry_times_when_send_failed,
                    steps: Vec::new(),
                    transactional: false,
                    processors: false,
                },
            };
            let mut row = SweepRow::new(swept);
            row.context = context;
            row
        })
        .collect()
}

/// Add a run to its configuration's row, and print the row once all its seeds ran (a
/// configuration's seeds run one after another).
fn add(
    scenario: &scenario::model::Scenario,
    rows: &mut [SweepRow],
    report: &RunReport,
    seeds: usize,
) {
    let index = scenario
        .variants
        .iter()
        .position(|v| v.name == report.variant);
    if let Some(row) = index.map(|i| &mut rows[i]) {
        row.add(report);
        if row.runs == seeds as u64 {
            super::out(&format!(
                "{:<70} runs {:>4}  with loss {:>4}  lost avg {:>8.1}  worst {:>6}  dup {:>6}  p99 {:>8.1} ms\n",
                row.label(),
                row.runs,
                row.runs_with_loss,
                row.lost_avg(),
                row.lost_max,
                row.duplicates,
                row.p99_ms()
            ));
        }
    }
}

fn finish(out: &Path, name: &str, rows: &[SweepRow], set: &[String]) -> i32 {
    if let Err(error) = write_report(out, name, rows, set) {
        eprintln!("error: writing the report to {}: {error}", out.display());
        return EXIT_BAD_INPUT;
    }
    let report = out.join(format!("{name}.md"));
    super::out(&format!("wrote {}\n", report.display()));
    EXIT_OK
}

/// `hightide merge` of sweep shards: the rows and the report one sweep would have made,
/// the runs added in its order.
pub(super) fn merged(merged: shard::Merged, out: &Path) -> i32 {
    let header = merged.header;
    let sweep = match scenario::Overrides::parse(&header.sets)
        .and_then(|overrides| scenario::load_sweep(&header.file, &overrides))
    {
        Ok(sweep) => sweep,
        Err(error) => {
            eprintln!("{}", error.report());
            return EXIT_BAD_INPUT;
        }
    };
    let scenario = &sweep.scenario;
    let matrix = std::fs::read_to_string(&header.file).unwrap_or_default();
    if let Err(error) = header.check_current(&[&matrix, &scenario.source]) {
        eprintln!("error: {error}");
        return EXIT_BAD_INPUT;
    }
    let jobs = jobs(scenario, &header.seeds);
    let reports = match shard::in_job_order(merged.runs, &jobs) {
        Ok(reports) => reports,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    let mut rows = rows(scenario);
    for report in &reports {
        add(scenario, &mut rows, report, header.seeds.len());
    }
    finish(out, &sweep.name, &rows, &header.sets)
}

fn write_report(out: &Path, name: &str, rows: &[SweepRow], set: &[String]) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join(format!("{name}.md")),
        report::sweep_markdown(name, rows, set),
    )?;
    for (file, svg) in report::sweep_charts(name, rows) {
        std::fs::write(out.join(file), svg)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_come_back_from_the_variant_name() {
        let s = settings("producer.acks=all broker.log.flush.interval.messages=9223372036854775807 faults=leader-kill");
        assert_eq!(
            s,
            vec![
                ("producer.acks".to_string(), "all".to_string()),
                (
                    "broker.log.flush.interval.messages".to_string(),
                    "never".to_string()
                ),
                ("faults".to_string(), "leader-kill".to_string()),
            ]
        );
    }
}
