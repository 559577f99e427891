//! `hightide test-seeds`: run a scenario on every one of its seeds and suggest the
//! `test_seeds` line for `cargo test`: the fewest seconds that show every behaviour the
//! file's seeds show (see `check::coverage`). It prints; it never edits the file.

use super::{out, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::check::coverage::{self, SeedRuns};
use crate::scenario;
use crate::sim::batch;
use crate::sim::runner::RunOptions;
use crate::systems;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct TestSeedsArgs {
    /// The scenario file.
    file: PathBuf,
    /// Simulations to run at once (default: one per core). Each run's wall time is what
    /// the choice weighs, so a quiet machine gives the better choice.
    #[arg(long)]
    jobs: Option<usize>,
}

pub fn run(args: TestSeedsArgs) -> i32 {
    let scenario = match scenario::load(&args.file) {
        Ok(s) => s,
        Err(error) => {
            eprintln!("{}", error.report());
            return EXIT_BAD_INPUT;
        }
    };
    let variants: Vec<_> = scenario.variants.iter().collect();
    let jobs = batch::jobs(&scenario.seeds, &variants);
    let threads = args.jobs.unwrap_or_else(batch::default_threads);
    let variant_index = |name: &str| scenario.variants.iter().position(|v| v.name == name);
    let mut by_seed: BTreeMap<u64, SeedRuns> = BTreeMap::new();
    let mut errors = Vec::new();
    batch::run_each(
        systems::run,
        &jobs,
        threads,
        &RunOptions::default(),
        &AtomicBool::new(false),
        |job, result| {
            result
                .map(|o| (o.wall_time, o.verdict.counts))
                .map_err(|e| format!("seed {} variant {}: {e}", job.seed, job.variant.name))
                .map(|ran| (job.seed, job.variant.name.clone(), ran))
        },
        |ran| match ran {
            Ok((seed, variant, (wall, counts))) => {
                let runs = by_seed.entry(seed).or_insert_with(|| SeedRuns {
                    seed,
                    wall: Duration::ZERO,
                    counts: vec![Default::default(); scenario.variants.len()],
                });
                runs.wall += wall;
                if let Some(i) = variant_index(&variant) {
                    runs.counts[i] = counts;
                }
            }
            Err(error) => errors.push(error),
        },
    );
    if !errors.is_empty() {
        for error in errors {
            eprintln!("error: {error}");
        }
        return EXIT_FAILED;
    }
    let runs: Vec<SeedRuns> = by_seed.into_values().collect();
    let expect_some: Vec<_> = scenario
        .variants
        .iter()
        .map(|v| v.expect_some.clone())
        .collect();
    let picks = coverage::choose(&expect_some, &runs);
    out(&suggestion(
        &args.file,
        &runs,
        &picks,
        scenario.variants.len(),
    ));
    EXIT_OK
}

fn suggestion(
    file: &std::path::Path,
    runs: &[SeedRuns],
    picks: &[coverage::Pick],
    variants: usize,
) -> String {
    let wall_of = |seed: u64| {
        runs.iter()
            .find(|r| r.seed == seed)
            .map_or(Duration::ZERO, |r| r.wall)
    };
    let total: Duration = runs.iter().map(|r| r.wall).sum();
    let chosen: Duration = picks.iter().map(|p| wall_of(p.seed)).sum();
    let mut text = format!(
        "{}: {} seeds x {variants} variant{}, {:.1} s of runs\n\n seed   wall s   behaviours first shown\n",
        file.display(),
        runs.len(),
        if variants == 1 { "" } else { "s" },
        total.as_secs_f64()
    );
    for pick in picks {
        let _ = writeln!(
            text,
            "{:>5}  {:>7.2}   {}",
            pick.seed,
            wall_of(pick.seed).as_secs_f64(),
            pick.new
        );
    }
    let mut seeds: Vec<u64> = picks.iter().map(|p| p.seed).collect();
    seeds.sort_unstable();
    let list: Vec<String> = seeds.iter().map(u64::to_string).collect();
    let _ = write!(
        text,
        "\ntest_seeds = [{}]\n# {} of {} seeds, {:.1} s of {:.1} s: every behaviour the {} seeds show\n# (a behaviour: in one variant, a count's order of magnitude, 0, 1-9, 10-99, ...,\n# or an [expect_some] holding)\n",
        list.join(", "),
        seeds.len(),
        runs.len(),
        chosen.as_secs_f64(),
        total.as_secs_f64(),
        runs.len()
    );
    text
}
