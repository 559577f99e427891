//! hightide as a library, in a few calls: load a scenario file (or parse one written in
//! code), run it on a seed, read what the checkers counted; and turn a folder of scenario
//! files into tests.
//!
//! ```no_run
//! let scenario = hightide::load("scenarios/quickstart.toml")?;
//! for run in hightide::run_seeds(&scenario, &[1, 2, 3])? {
//!     println!("{} seed {}: lost {}", run.variant, run.seed, run.counts.lost);
//!     assert!(run.passed(), "{:?}", run.failures);
//! }
//! # Ok::<(), hightide::Error>(())
//! ```
//!
//! A folder of scenario files as tests, in `tests/scenarios.rs` with `harness = false`
//! under its `[[test]]` in Cargo.toml: `fn main() { hightide::test_folder("scenarios") }`.
//! Each file becomes a test that runs its `test_seeds` (or `HIGHTIDE_SEEDS`), holds every
//! `[expect]` on every seed and every `[expect_some]` on one, and names the command that
//! replays a failure.

use crate::check::{self, Example};
use crate::scenario::model::Variant;
use crate::scenario::{self, ScenarioError};
use crate::sim::batch;
use crate::sim::runner::{RunOptions, RunOutcome};
use crate::sim::system::RunError;
use crate::systems;
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

pub use crate::check::{Count, Counts};
/// A loaded scenario: its name, seeds and variants (each a set of settings with its
/// expectations).
pub use crate::scenario::model::Scenario;
/// A failing run cut down by [`shrink()`]: its settings, how it fails, the steps it took.
pub use crate::shrink::{Options as ShrinkOptions, Shrunk, Step as ShrinkStep};

/// Why a scenario could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file is not a valid scenario: where and why, as the command line prints it.
    #[error("{0}")]
    Scenario(#[from] ScenarioError),
    /// The scenario has no variant of that name.
    #[error("{scenario} has no variant {variant:?} (it has: {known})")]
    NoVariant {
        scenario: String,
        variant: String,
        known: String,
    },
    /// A shrink found nothing to shrink (the run passes), or could not go on.
    #[error("{0}")]
    Shrink(#[from] crate::shrink::Error),
    /// The simulation itself failed (a bug in hightide, not an anomaly it found).
    #[error("seed {seed} variant {variant}: {error}")]
    Run {
        seed: u64,
        variant: String,
        error: RunError,
    },
}

/// One variant of a scenario run on one seed, shrunk to what a test asserts on.
#[derive(Clone, Debug)]
pub struct Run {
    pub variant: String,
    pub seed: u64,
    /// Every checker count (`docs/checkers.md` defines each).
    pub counts: Counts,
    /// The file's `[expect]` lines this run broke, in words; empty when it met them all.
    pub failures: Vec<String>,
    /// A few examples of each anomaly, each with how it came about.
    pub examples: Vec<Example>,
    /// The hash of the run's event trace: the same scenario and seed always give the same.
    pub trace_hash: u64,
}

impl Run {
    /// Whether the run met every `[expect]` of its variant.
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    fn from_outcome(outcome: RunOutcome) -> Run {
        Run {
            variant: outcome.variant,
            seed: outcome.seed,
            counts: outcome.verdict.counts,
            failures: outcome.failures,
            examples: outcome.verdict.examples,
            trace_hash: outcome.trace_hash,
        }
    }
}

/// Read and check a scenario file.
pub fn load(path: impl AsRef<Path>) -> Result<Scenario, Error> {
    Ok(scenario::load(path.as_ref())?)
}

/// A scenario written in code, as the text of a scenario file; `name` is what errors
/// call it (`"my-test.toml"`) and where a `base` or relative path would be looked up.
pub fn parse(name: impl AsRef<Path>, text: &str) -> Result<Scenario, Error> {
    Ok(scenario::parse(text, name.as_ref())?)
}

/// Run one variant on one seed. A scenario without `[variants]` has one, named after its
/// file (`quickstart` for `quickstart.toml`).
pub fn run(scenario: &Scenario, variant: &str, seed: u64) -> Result<Run, Error> {
    let variant = find_variant(scenario, variant)?;
    let outcome =
        crate::systems::run(variant, seed, &RunOptions::default()).map_err(|error| Error::Run {
            seed,
            variant: variant.name.clone(),
            error,
        })?;
    Ok(Run::from_outcome(outcome))
}

/// Cut the failing run of `variant` on `seed` down to the fewest faults and the smallest
/// run that break the same expectation (the first the run broke). The result's
/// [`Shrunk::variant`] runs like any other; [`Shrunk::scenario_file`] writes it as a
/// standalone scenario file.
///
/// ```no_run
/// let scenario = hightide::load("scenarios/explore/unsafe-nemesis.toml")?;
/// let shrunk = hightide::shrink(&scenario, "unsafe-nemesis", 2, &Default::default())?;
/// println!("{} faults, {} {}", shrunk.variant.settings.faults.len(), shrunk.goal, shrunk.count);
/// # Ok::<(), hightide::Error>(())
/// ```
pub fn shrink(
    scenario: &Scenario,
    variant: &str,
    seed: u64,
    options: &ShrinkOptions,
) -> Result<Shrunk, Error> {
    let variant = find_variant(scenario, variant)?;
    Ok(crate::shrink::shrink(variant, seed, options, |_, _| {})?)
}

/// Every variant on each of `seeds`, one simulation per core, in seed order and then
/// in the file's order of variants.
pub fn run_seeds(scenario: &Scenario, seeds: &[u64]) -> Result<Vec<Run>, Error> {
    run_jobs(scenario, seeds, batch::default_threads())
}

fn run_jobs(scenario: &Scenario, seeds: &[u64], threads: usize) -> Result<Vec<Run>, Error> {
    let variants: Vec<&Variant> = scenario.variants.iter().collect();
    let jobs = batch::jobs(seeds, &variants);
    let mut runs = Vec::with_capacity(jobs.len());
    // Each run shrinks to its counts as it finishes, so memory does not grow with its history.
    batch::run_each(
        systems::run,
        &jobs,
        threads,
        &RunOptions::default(),
        &AtomicBool::new(false),
        |job, result| {
            result.map(Run::from_outcome).map_err(|error| Error::Run {
                seed: job.seed,
                variant: job.variant.name.clone(),
                error,
            })
        },
        |run| runs.push(run),
    );
    runs.into_iter().collect()
}

fn find_variant<'a>(scenario: &'a Scenario, name: &str) -> Result<&'a Variant, Error> {
    scenario
        .variants
        .iter()
        .find(|v| v.name == name)
        .ok_or_else(|| Error::NoVariant {
            scenario: scenario.name.clone(),
            variant: name.to_owned(),
            known: scenario
                .variants
                .iter()
                .map(|v| v.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Check a scenario as `cargo test` does: all its variants on its `test_seeds` (or on
/// `HIGHTIDE_SEEDS`: `all` for the file's full `seeds`, or a seed list), every `[expect]`
/// on every run and every `[expect_some]` on at least one. The error lists each failure
/// with the command that replays it.
pub fn check_file(path: impl AsRef<Path>) -> Result<(), String> {
    check_path(path.as_ref(), batch::default_threads())
}

fn check_path(path: &Path, threads: usize) -> Result<(), String> {
    let scenario = scenario::load(path).map_err(|e| e.to_string())?;
    let seeds = match std::env::var("HIGHTIDE_SEEDS").as_deref() {
        Ok("all") => scenario.seeds.clone(),
        Ok(spec) => scenario::parse_seeds(spec).map_err(|e| format!("HIGHTIDE_SEEDS: {e}"))?,
        Err(_) => scenario.test_seeds.clone(),
    };
    let runs = run_jobs(&scenario, &seeds, threads).map_err(|e| e.to_string())?;
    let file = shown_path(path);
    let mut failures = Vec::new();
    for run in &runs {
        for failure in &run.failures {
            failures.push(format!(
                "{}: seed {} variant {}: {failure}\n    replay: cargo run --release -- run {file} --seed {} --variant {}",
                scenario.name, run.seed, run.variant, run.seed, run.variant
            ));
        }
    }
    // A file's test_seeds were chosen to keep a witness of each rule; a change to the
    // model can take it away while another seed still has one.
    let rechoose = if seeds != scenario.seeds {
        format!("\n    the file's other seeds may: cargo run --release -- test-seeds {file}")
    } else {
        String::new()
    };
    for variant in &scenario.variants {
        let counts = runs
            .iter()
            .filter(|r| r.variant == variant.name)
            .map(|r| &r.counts);
        for failure in check::evaluate_some(&variant.expect_some, counts) {
            failures.push(format!(
                "{}: variant {}: expect_some {failure} held in none of seeds {seeds:?}\n    replay: cargo run --release -- run {file} --variant {}{rechoose}",
                scenario.name, variant.name, variant.name
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// The path as a person would type it from the crate's root.
fn shown_path(path: &Path) -> String {
    let here = std::env::current_dir().unwrap_or_default();
    path.strip_prefix(&here)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// The `main` of a test target with `harness = false`: one test per `*.toml` file in
/// `dir` (relative to the crate being tested), run by [`check_file`], with the usual
/// `cargo test` arguments (a name filter, `--list`, `--test-threads`). Exits the process.
pub fn test_folder(dir: impl AsRef<Path>) -> ! {
    let args = Arguments::from_args();
    let dir = dir.as_ref();
    let files = match scenario_files(dir) {
        Ok(files) => files,
        Err(error) => {
            eprintln!("error: {}: {error}", dir.display());
            std::process::exit(2);
        }
    };
    let trials = files
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            // libtest-mimic already runs one file per core.
            Trial::test(name, move || check_path(&path, 1).map_err(Failed::from))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit()
}

/// The `*.toml` files of `dir`, sorted.
pub fn scenario_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    files.sort();
    Ok(files)
}
