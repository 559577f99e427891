//! `hightide sweep MATRIX.toml`: the durability matrix. The scenario parser turns the cross
//! product of `[vary]` into variants of the base scenario (validated as in a scenario
//! file); every variant runs on every seed with the same faults, and the results become a
//! Markdown report with SVG charts.

use super::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK};
use crate::report::{self, RunReport, SweepRow};
use crate::scenario;
use crate::sim::batch::{self, Job};
use crate::sim::runner::RunOptions;
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
    let jobs: Vec<Job> = scenario
        .variants
        .iter()
        .flat_map(|variant| seeds.iter().map(move |&seed| Job { variant, seed }))
        .collect();
    eprintln!(
        "sweep {}: {} configurations x {} seeds = {} runs",
        sweep.name,
        scenario.variants.len(),
        seeds.len(),
        jobs.len()
    );
    let threads = args.jobs.unwrap_or_else(batch::default_threads);
    let mut rows: Vec<SweepRow> = scenario
        .variants
        .iter()
        .map(|v| SweepRow::new(settings(&v.name)))
        .collect();
    let line = |row: &SweepRow| {
        format!(
            "{:<70} runs {:>4}  with loss {:>4}  lost avg {:>8.1}  worst {:>6}  dup {:>6}  p99 {:>8.1} ms\n",
            row.label(),
            row.runs,
            row.runs_with_loss,
            row.lost_avg(),
            row.lost_max,
            row.duplicates,
            row.p99_ms()
        )
    };
    let mut failure = None;
    let ran = batch::run_each(
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
            Ok(report) => {
                let index = scenario
                    .variants
                    .iter()
                    .position(|v| v.name == report.variant);
                if let Some(row) = index.map(|i| &mut rows[i]) {
                    row.add(&report);
                    // A configuration's seeds run one after another: print it when done.
                    if row.runs == seeds.len() as u64 {
                        super::out(&line(row));
                    }
                }
            }
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
    if let Err(error) = write_report(&args.out, &sweep.name, &rows, &args.set) {
        eprintln!(
            "error: writing the report to {}: {error}",
            args.out.display()
        );
        return EXIT_BAD_INPUT;
    }
    let report = args.out.join(format!("{}.md", sweep.name));
    super::out(&format!("wrote {}\n", report.display()));
    EXIT_OK
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
