//! `hightide run`: every variant of a scenario on every seed, side by side.

use super::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::report;
use crate::scenario::{self, model::Scenario};
use crate::sim::batch::{self, Job};
use crate::sim::runner::{RunOptions, RunOutcome};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The scenario file.
    file: PathBuf,
    /// Run only this seed (the replay of a failing run).
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Seeds to run instead of the scenario's: "20" (1 to 20), "3,17,42" or "100..200".
    #[arg(long)]
    seeds: Option<String>,
    /// Run only this variant.
    #[arg(long)]
    variant: Option<String>,
    /// One JSON object per seed and variant instead of text.
    #[arg(long)]
    json: bool,
    /// Print the event trace (stamped with simulated time and host) to stderr.
    #[arg(long)]
    trace: bool,
    /// Write the history of every run as JSON lines to this file.
    #[arg(long)]
    history: Option<PathBuf>,
    /// With --seed: draw the run as a timeline (hosts, leadership, faults, sends) in OUT.html.
    #[arg(long, requires = "seed", value_name = "OUT.html")]
    timeline: Option<PathBuf>,
    /// With --seed: write every host's files after the run to DIR/<host>/.
    #[arg(long, requires = "seed")]
    dump_disks: Option<PathBuf>,
    /// Simulations to run at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
}

pub fn run(args: RunArgs) -> i32 {
    let scenario = match scenario::load(&args.file) {
        Ok(s) => s,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    let seeds = match (&args.seed, &args.seeds) {
        (Some(seed), _) => vec![*seed],
        (None, Some(spec)) => match scenario::parse_seeds(spec) {
            Ok(seeds) => seeds,
            Err(error) => {
                eprintln!("error: --seeds {spec:?}: {error}");
                return EXIT_BAD_INPUT;
            }
        },
        (None, None) => scenario.seeds.clone(),
    };
    let variants: Vec<_> = scenario
        .variants
        .iter()
        .filter(|v| args.variant.as_ref().is_none_or(|name| &v.name == name))
        .collect();
    if variants.is_empty() {
        let names: Vec<_> = scenario.variants.iter().map(|v| v.name.as_str()).collect();
        eprintln!(
            "error: no variant {:?} in {}; it has: {}",
            args.variant.unwrap_or_default(),
            args.file.display(),
            names.join(", ")
        );
        return EXIT_BAD_INPUT;
    }
    if let Some(dir) = &args.dump_disks {
        if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
            eprintln!("error: --dump-disks {}: the directory exists and is not empty; refusing to overwrite it", dir.display());
            return EXIT_BAD_INPUT;
        }
    }
    let jobs: Vec<Job> = seeds
        .iter()
        .flat_map(|&seed| variants.iter().map(move |&variant| Job { variant, seed }))
        .collect();
    let options = RunOptions {
        trace: args.trace,
        dump_disks: args.dump_disks.clone(),
    };
    let threads = if args.trace {
        1
    } else {
        args.jobs.unwrap_or_else(batch::default_threads)
    };
    let results = batch::run_all(&jobs, threads, &options);

    let mut outcomes = Vec::new();
    for result in results {
        match result {
            Ok(outcome) => outcomes.push(outcome),
            Err(error) => {
                eprintln!("error: {error}");
                return EXIT_FAILED;
            }
        }
    }
    if let Some(path) = &args.timeline {
        if let Err(error) = write_timelines(path, &scenario, &outcomes) {
            eprintln!("error: --timeline {}: {error}", path.display());
            return EXIT_BAD_INPUT;
        }
    }
    if let Some(path) = &args.history {
        if let Err(error) = write_history(path, &outcomes) {
            eprintln!("error: --history {}: {error}", path.display());
            return EXIT_BAD_INPUT;
        }
    }
    print_outcomes(&scenario, &args, &outcomes)
}

/// One page per variant: `OUT.html` for a single variant, `OUT-<variant>.html` otherwise.
fn write_timelines(
    path: &Path,
    scenario: &Scenario,
    outcomes: &[RunOutcome],
) -> std::io::Result<()> {
    for outcome in outcomes {
        let file = if outcomes.len() == 1 {
            path.to_path_buf()
        } else {
            let stem = path
                .file_stem()
                .map_or("timeline".into(), |s| s.to_string_lossy());
            path.with_file_name(format!("{stem}-{}.html", outcome.variant))
        };
        let counts = &outcome.verdict.counts;
        let title = format!(
            "{} — {} — seed {}",
            scenario.name, outcome.variant, outcome.seed
        );
        let summary = format!(
            "attempted {}, acked {}, lost {}, duplicates {}, reordered {}, divergent {}, offline {}; trace {}",
            counts.attempted,
            counts.acked,
            counts.lost,
            counts.duplicates,
            counts.reordered,
            counts.divergent,
            counts.offline,
            report::hash_text(outcome.trace_hash)
        );
        let page = report::timeline::html(&report::timeline::TimelineInput {
            title: &title,
            timeline: &outcome.timeline,
            history: &outcome.history,
            lost_acked_at: &outcome.verdict.lost_acked_at,
            summary: &summary,
        });
        std::fs::write(&file, page)?;
        eprintln!("wrote {}", file.display());
    }
    Ok(())
}

fn write_history(path: &Path, outcomes: &[RunOutcome]) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for outcome in outcomes {
        for event in &outcome.history {
            let mut value = serde_json::to_value(event).map_err(std::io::Error::other)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("seed".into(), outcome.seed.into());
                object.insert("variant".into(), outcome.variant.clone().into());
            }
            writeln!(out, "{value}")?;
        }
    }
    out.flush()
}

/// Print every run, the expect_some verdicts and the summary; return the exit status.
fn print_outcomes(scenario: &Scenario, args: &RunArgs, outcomes: &[RunOutcome]) -> i32 {
    let reports: Vec<report::RunReport> = outcomes
        .iter()
        .filter_map(|o| {
            let variant = scenario.variants.iter().find(|v| v.name == o.variant)?;
            Some(report::RunReport::from_outcome(&scenario.name, variant, o))
        })
        .collect();
    let failed =
        reports.iter().any(|r| !r.pass()) || !report::expect_some_failures(&reports).is_empty();
    let mut text = String::new();
    if args.json {
        for r in &reports {
            text.push_str(&format!("{}\n", report::run_json(r)));
        }
        super::out(&text);
        return if failed { EXIT_FAILED } else { EXIT_OK };
    }
    text.push_str(&format!("{}\n\n", scenario.name));
    text.push_str(&report::runs_text(&reports));
    text.push('\n');
    text.push_str(&report::summary(&reports));
    let file = args.file.display();
    for r in reports.iter().filter(|r| !r.pass()) {
        text.push_str(&format!(
            "replay seed {} of {}: cargo run --release -- run {file} --seed {} --variant {}\n",
            r.seed, r.variant, r.seed, r.variant
        ));
    }
    super::out(&text);
    if failed {
        EXIT_FAILED
    } else {
        EXIT_OK
    }
}
