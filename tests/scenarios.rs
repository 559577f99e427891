//! Every file in `scenarios/` is a test: all its variants on its `test_seeds` (all its
//! seeds where it names none; `HIGHTIDE_SEEDS=all` runs every file's full `seeds`, and
//! `HIGHTIDE_SEEDS=SPEC` runs those seeds instead), every `[expect]` on every seed and
//! every `[expect_some]` on at least one. A failure names the scenario, the seed, the
//! expectation and the command that replays it.

use hightide::check;
use hightide::scenario;
use hightide::sim::batch;
use hightide::sim::runner::RunOptions;
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "toml"));
    files.sort();
    files
}

fn run_scenario(path: &Path) -> Result<(), Failed> {
    let scenario = scenario::load(path).map_err(|e| format!("{e}"))?;
    let seeds = match std::env::var("HIGHTIDE_SEEDS").as_deref() {
        Ok("all") => scenario.seeds.clone(),
        Ok(spec) => scenario::parse_seeds(spec).map_err(|e| format!("HIGHTIDE_SEEDS: {e}"))?,
        Err(_) => scenario.test_seeds.clone(),
    };
    let variants: Vec<_> = scenario.variants.iter().collect();
    let jobs = batch::jobs(&seeds, &variants);
    // libtest-mimic already runs one scenario per core.
    let results = batch::run_all(&jobs, 1, &RunOptions::default());
    let relative = path
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap_or(path)
        .display()
        .to_string();
    let relative = relative.trim_start_matches('/');
    let mut failures = Vec::new();
    let mut outcomes = Vec::new();
    for (job, result) in jobs.iter().zip(results) {
        let outcome =
            result.map_err(|e| format!("seed {} variant {}: {e}", job.seed, job.variant.name))?;
        for failure in &outcome.failures {
            failures.push(format!(
                "{}: seed {} variant {}: {failure}\n    replay: cargo run --release -- run {relative} --seed {} --variant {}",
                scenario.name, job.seed, job.variant.name, job.seed, job.variant.name
            ));
        }
        outcomes.push(outcome);
    }
    for variant in &scenario.variants {
        let counts: Vec<_> = outcomes
            .iter()
            .filter(|o| o.variant == variant.name)
            .map(|o| o.verdict.counts.clone())
            .collect();
        // A file's test_seeds were chosen to keep a witness of each rule; a change to the
        // model can take it away while another seed still has one.
        let rechoose = if seeds != scenario.seeds {
            format!(
                "\n    the file's other seeds may: cargo run --release -- test-seeds {relative}"
            )
        } else {
            String::new()
        };
        for failure in check::evaluate_some(&variant.expect_some, &counts) {
            failures.push(format!(
                "{}: variant {}: expect_some {failure} held in none of seeds {:?}\n    replay: cargo run --release -- run {relative} --variant {}{rechoose}",
                scenario.name, variant.name, seeds, variant.name
            ));
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n").into())
    }
}

fn main() {
    let args = Arguments::from_args();
    let trials = scenario_files()
        .into_iter()
        .map(|path| {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Trial::test(name, move || run_scenario(&path))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
