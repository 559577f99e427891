//! `hightide explore`: a scenario (usually one with a `[nemesis]`) over many seeds, looking
//! for runs that break an `[expect]`. It reports the first K failing seeds in seed order,
//! whatever the number of threads, each with what failed and the line that replays it,
//! and stops there.

use super::run::{chosen_variants, load, replay_command};
use super::{EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK};
use crate::report;
use crate::scenario;
use crate::sim::batch;
use crate::sim::runner::RunOptions;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(clap::Args, Debug)]
pub struct ExploreArgs {
    /// The scenario file.
    file: PathBuf,
    /// The seeds to try: "10000" (1 to 10000), "3,17,42" or "100..200" (the end excluded).
    #[arg(long, default_value = "10000")]
    seeds: String,
    /// Stop at the K-th failing seed.
    #[arg(long, value_name = "K", default_value_t = 10)]
    stop_after: usize,
    /// Explore only this variant.
    #[arg(long)]
    variant: Option<String>,
    /// Override a setting, as for `run` (`producer.acks=1`). Repeatable.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// Simulations to run at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
}

/// A failing seed: its runs that broke an `[expect]`, as the report prints them.
struct Found {
    seed: u64,
    runs: Vec<report::RunReport>,
}

pub fn run(args: ExploreArgs) -> i32 {
    if args.stop_after == 0 {
        eprintln!("error: --stop-after must be at least 1");
        return EXIT_BAD_INPUT;
    }
    let scenario = match load(&args.file, &args.set) {
        Ok(scenario) => scenario,
        Err(status) => return status,
    };
    let seeds = match scenario::parse_seeds(&args.seeds) {
        Ok(seeds) => seeds,
        Err(error) => {
            eprintln!("error: --seeds {:?}: {error}", args.seeds);
            return EXIT_BAD_INPUT;
        }
    };
    let variants = match chosen_variants(&scenario, args.variant.as_deref(), &args.file) {
        Ok(variants) => variants,
        Err(status) => return status,
    };
    super::out(&format!(
        "exploring {}: {} seeds × {} variants, stopping at the {} failing seed\n",
        scenario.name,
        seeds.len(),
        variants.len(),
        ordinal(args.stop_after)
    ));
    let jobs = batch::jobs(&seeds, &variants);
    let threads = args.jobs.unwrap_or_else(batch::default_threads);
    let progress = (std::io::stderr().is_terminal() && jobs.len() > 1).then(|| {
        let bar = indicatif::ProgressBar::new(jobs.len() as u64);
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{elapsed_precise} [{bar:30}] {pos}/{len} runs, {per_sec}, {msg}",
        ) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar
    });
    let print = |text: &str| match &progress {
        Some(bar) => bar.suspend(|| super::out(text)),
        None => super::out(text),
    };
    let command = replay_command(&args.file, &args.set);
    let started = Instant::now();
    // Set at the K-th failing seed, or by Ctrl-C: no run starts after it, and runs already
    // under way are not reported, so what is printed depends on the seeds alone.
    let stop = AtomicBool::new(false);
    let mut found: Vec<Found> = Vec::new();
    let (mut consumed, mut error) = (0usize, None);
    batch::run_each(
        &jobs,
        threads,
        &RunOptions::default(),
        &stop,
        |job, result| {
            result.map(|outcome| {
                report::RunReport::from_outcome(&scenario.name, job.variant, &outcome)
            })
        },
        |result| {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            if super::interrupted().load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
                return;
            }
            consumed += 1;
            if let Some(bar) = &progress {
                bar.inc(1);
            }
            let run = match result {
                Ok(run) => run,
                Err(e) => {
                    error.get_or_insert(e.to_string());
                    stop.store(true, Ordering::Relaxed);
                    return;
                }
            };
            let seed = run.seed;
            let last_of_seed = consumed.is_multiple_of(variants.len());
            if !run.pass() {
                match found.last_mut() {
                    Some(seed) if seed.seed == run.seed => seed.runs.push(run),
                    _ => found.push(Found {
                        seed: run.seed,
                        runs: vec![run],
                    }),
                }
                if let Some(bar) = &progress {
                    bar.set_message(format!("{} failing seeds", found.len()));
                }
            }
            // A seed is reported once all its variants ran.
            match found.last() {
                Some(failing) if last_of_seed && failing.seed == seed => {
                    print(&failing_seed(failing, &command));
                    if found.len() == args.stop_after {
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                _ => {}
            }
        },
    );
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    if let Some(error) = error {
        eprintln!("error: {error}");
        return EXIT_FAILED;
    }
    let explored = consumed / variants.len();
    let interrupted = super::interrupted().load(Ordering::Relaxed);
    let mut text = format!(
        "\nexplored {explored} of {} seeds ({consumed} runs) in {:.1} s: ",
        seeds.len(),
        started.elapsed().as_secs_f64()
    );
    text.push_str(&match found.len() {
        0 => "no seed broke an expectation\n".to_owned(),
        n => format!("{n} failing {}\n", if n == 1 { "seed" } else { "seeds" }),
    });
    if interrupted {
        text.push_str("interrupted: the seeds after these were not tried\n");
    } else if found.len() == args.stop_after && explored < seeds.len() {
        text.push_str(&format!(
            "stopped at the {} failing seed (--stop-after {})\n",
            ordinal(args.stop_after),
            args.stop_after
        ));
    }
    for seed in &found {
        for run in &seed.runs {
            text.push_str(&format!(
                "replay seed {} of {}: {command} --seed {} --variant {}\n",
                seed.seed, run.variant, seed.seed, run.variant
            ));
        }
    }
    super::out(&text);
    if interrupted {
        EXIT_INTERRUPTED
    } else if found.is_empty() {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

fn failing_seed(seed: &Found, command: &str) -> String {
    let mut text = String::new();
    for run in &seed.runs {
        text.push_str(&format!("seed {} of {} failed:\n", seed.seed, run.variant));
        text.push_str(&report::run_details(run, report::Stories::FirstOfEach));
        text.push_str(&format!(
            "    replay: {command} --seed {} --variant {}\n",
            seed.seed, run.variant
        ));
    }
    text
}

/// `1st`, `2nd`, `3rd`, `4th`, `11th`, `21st`.
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::ordinal;

    #[test]
    fn ordinals_read_as_english() {
        let words: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            words,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st",
                "111th"
            ]
        );
    }
}
