//! `hightide shrink`: one failing seed cut down to a small scenario file that fails the
//! same way, written to `--out`, read back and run once more to show that it does.

use super::scenario_args::{chosen_variants, load, replay_command};
use super::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::check::Expectation;
use crate::scenario::format_duration;
use crate::shrink::{self, Options, Shrunk, Step};
use crate::sim::batch;
use crate::sim::runner::RunOptions;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct ShrinkArgs {
    /// The scenario file.
    file: PathBuf,
    /// The failing seed (as `explore` or a failed `run` names it).
    #[arg(long)]
    seed: u64,
    /// The failing variant; needed when the file has several.
    #[arg(long)]
    variant: Option<String>,
    /// Override a setting, as for `run`; the value is written into the shrunk file.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// Where to write the shrunk scenario. An existing file is never overwritten.
    #[arg(long, value_name = "MIN.toml")]
    out: PathBuf,
    /// Give up after this many runs, keeping the smallest failing run found.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_runs: usize,
    /// Candidate runs at once (default: one per core); the result is the same for any.
    #[arg(long)]
    jobs: Option<usize>,
}

pub fn run(args: ShrinkArgs) -> i32 {
    let scenario = match load(&args.file, &args.set) {
        Ok(scenario) => scenario,
        Err(status) => return status,
    };
    let variant = match chosen_variants(&scenario, args.variant.as_deref(), &args.file) {
        Ok(variants) if variants.len() == 1 => variants[0],
        Ok(variants) => {
            let names: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
            eprintln!(
                "error: {} has {} variants ({}): choose the failing one with --variant",
                args.file.display(),
                variants.len(),
                names.join(", ")
            );
            return EXIT_BAD_INPUT;
        }
        Err(status) => return status,
    };
    if args.out.exists() {
        eprintln!(
            "error: --out {}: the file exists; shrink never overwrites a file (remove it or choose another name)",
            args.out.display()
        );
        return EXIT_BAD_INPUT;
    }
    let options = Options {
        max_runs: args.max_runs,
        threads: args.jobs.unwrap_or_else(batch::default_threads),
    };
    super::out(&format!(
        "shrinking seed {} of {} ({}), at most {} runs\n",
        args.seed,
        variant.name,
        args.file.display(),
        options.max_runs.max(2)
    ));
    let started = Instant::now();
    let shrunk = match shrink::shrink(variant, args.seed, &options, |goal, step| {
        print_step(goal, step)
    }) {
        Ok(shrunk) => shrunk,
        Err(error @ shrink::Error::NothingToShrink { .. }) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_FAILED;
        }
    };
    super::out(&summary(&shrunk, started.elapsed().as_secs_f64()));
    let text = match shrunk.scenario_file(&scenario, &args.set, &args.out) {
        Ok(text) => text,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_FAILED;
        }
    };
    if let Err(error) = write_new(&args.out, &text) {
        eprintln!("error: --out {}: {error}", args.out.display());
        return EXIT_BAD_INPUT;
    }
    match replay(&args.out, &shrunk) {
        Ok(line) => {
            super::out(&line);
            EXIT_OK
        }
        Err(error) => {
            eprintln!("error: {error}");
            EXIT_FAILED
        }
    }
}

/// `1 fault`, `3 faults`.
fn faults(n: usize) -> String {
    format!("{n} {}", if n == 1 { "fault" } else { "faults" })
}

fn print_step(goal: &Expectation, step: &Step) {
    super::out(&format!(
        "  run {:>4}: {} → {}, {} {}\n",
        step.run,
        step.change,
        faults(step.faults),
        crate::check::count_name(goal.count),
        step.count
    ));
}

fn summary(shrunk: &Shrunk, seconds: f64) -> String {
    let settings = &shrunk.variant.settings;
    let count = crate::check::count_name(shrunk.goal.count);
    let mut text = format!(
        "shrunk in {} runs ({seconds:.1} s), {} changes kept: `{}` fails with {count} {} (was {}), {} (was {}), duration {} (was {})\n",
        shrunk.runs,
        shrunk.steps.len().saturating_sub(1),
        shrunk.goal,
        shrunk.count,
        shrunk.original_count,
        faults(settings.faults.len()),
        shrunk.original_faults,
        format_duration(settings.duration),
        format_duration(shrunk.original_duration),
    );
    if shrunk.kept_workload {
        text.push_str(&format!(
            "duration, the workload and the cluster keep their size: `{}` bounds {count} from below, and a smaller run would break it merely by doing less\n",
            shrunk.goal
        ));
    }
    if shrunk.out_of_runs {
        text.push_str("stopped at --max-runs: a longer shrink may find a smaller run\n");
    }
    text
}

/// Write `text` to a new file at `path`: beside it first, then linked into place, which
/// fails if a file appeared there meanwhile, so an interrupted write leaves nothing
/// half-written and no file is ever replaced.
fn write_new(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    let partial = PathBuf::from(partial);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&partial)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", partial.display())))?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::hard_link(&partial, path));
    let _ = std::fs::remove_file(&partial);
    written.map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => std::io::Error::new(
            e.kind(),
            "the file appeared while shrinking; it was left as it is",
        ),
        _ => e,
    })
}

/// Read the written file back and run it, as `hightide run` would: it must break the goal
/// with the shrunk count.
fn replay(path: &Path, shrunk: &Shrunk) -> Result<String, String> {
    let scenario = crate::scenario::load(path).map_err(|e| e.report())?;
    let variant = scenario
        .variants
        .first()
        .ok_or("the shrunk file has no variant")?;
    let outcome = crate::systems::run(variant, shrunk.seed, &RunOptions::default())
        .map_err(|e| e.to_string())?;
    let count = outcome.verdict.counts.get(shrunk.goal.count);
    if crate::check::holds(&shrunk.goal, count) || count != shrunk.count {
        return Err(format!(
            "{} does not fail as the shrunk run did: {} {count}, not {}",
            path.display(),
            crate::check::count_name(shrunk.goal.count),
            shrunk.count
        ));
    }
    Ok(format!(
        "wrote {}: `{}` fails it ({})\n",
        path.display(),
        replay_command(path, &[]),
        outcome.failures.join("; ")
    ))
}
