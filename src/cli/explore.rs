//! `hightide explore`: a scenario (usually one with a `[nemesis]`) over many seeds, looking
//! for runs that break an `[expect]`. It reports the first K failing seeds in seed order,
//! whatever the number of threads, each with what failed and the line that replays it,
//! and stops there.

use super::scenario_args::{chosen_variants, load, load_shards_file, replay_command};
use super::{shard, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK};
use crate::report;
use crate::scenario;
use crate::sim::batch;
use crate::sim::runner::RunOptions;
use crate::systems;
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
    /// Explore the K-th of N shares of the seeds and write the failing seeds' runs as JSON
    /// lines for `hightide merge`, which reports the first failing seeds of them all.
    #[arg(long, value_name = "K/N")]
    shard: Option<batch::Shard>,
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
    let all_seeds = seeds;
    let seeds = match args.shard {
        Some(shard) => {
            super::out(&shard::header_line(&shard::Header {
                seeds: all_seeds.clone(),
                variant: args.variant.clone(),
                stop_after: Some(args.stop_after),
                shard: shard.to_string(),
                ..shard::Header::new("explore", &args.file, &args.set, &[&scenario.source])
            }));
            shard.select(&all_seeds)
        }
        None => {
            super::out(&opening(
                &scenario.name,
                all_seeds.len(),
                variants.len(),
                args.stop_after,
            ));
            all_seeds.clone()
        }
    };
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
        systems::run,
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
                    if args.shard.is_some() {
                        for run in &failing.runs {
                            print(&format!("{}\n", report::run_json(run)));
                        }
                    } else {
                        print(&failing_seed(failing, &command));
                    }
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
    let seconds = started.elapsed().as_secs_f64();
    if args.shard.is_some() {
        if !interrupted {
            super::out(&shard::done_line(shard::Done {
                runs: found.iter().map(|f| f.runs.len()).sum(),
                explored,
                wall_time_ms: seconds * 1000.0,
            }));
        }
    } else {
        let tried = Tried {
            explored,
            seeds: seeds.len(),
            runs: consumed,
            seconds,
        };
        super::out(&closing(
            &tried,
            &found,
            args.stop_after,
            interrupted,
            &command,
        ));
    }
    if interrupted {
        EXIT_INTERRUPTED
    } else if found.is_empty() {
        EXIT_OK
    } else {
        EXIT_FAILED
    }
}

/// The first line: what is explored, and when it stops.
fn opening(name: &str, seeds: usize, variants: usize, stop_after: usize) -> String {
    format!(
        "exploring {name}: {seeds} seeds × {variants} variants, stopping at the {} failing seed\n",
        ordinal(stop_after)
    )
}

/// How far an exploration got.
struct Tried {
    explored: usize,
    seeds: usize,
    runs: usize,
    seconds: f64,
}

/// The closing lines: how far it got, why it stopped, and each failing run's replay line.
fn closing(
    tried: &Tried,
    found: &[Found],
    stop_after: usize,
    interrupted: bool,
    command: &str,
) -> String {
    let mut text = format!(
        "\nexplored {} of {} seeds ({} runs) in {:.1} s: ",
        tried.explored, tried.seeds, tried.runs, tried.seconds
    );
    text.push_str(&match found.len() {
        0 => "no seed broke an expectation\n".to_owned(),
        n => format!("{n} failing {}\n", if n == 1 { "seed" } else { "seeds" }),
    });
    if interrupted {
        text.push_str("interrupted: the seeds after these were not tried\n");
    } else if found.len() == stop_after && tried.explored < tried.seeds {
        text.push_str(&format!(
            "stopped at the {} failing seed (--stop-after {stop_after})\n",
            ordinal(stop_after),
        ));
    }
    for seed in found {
        for run in &seed.runs {
            text.push_str(&format!(
                "replay seed {} of {}: {command} --seed {} --variant {}\n",
                seed.seed, run.variant, seed.seed, run.variant
            ));
        }
    }
    text
}

/// `hightide merge` of explore shards: the first `--stop-after` failing seeds of them
/// all, in seed order, reported as one exploration would have. Each shard stopped at its
/// own K-th failing seed, so the first K of all of them are among the shards' runs; the
/// seeds explored are those up to the K-th (all, when fewer failed), and the time is the
/// longest shard's.
pub(super) fn merged(merged: shard::Merged) -> i32 {
    let header = merged.header;
    let scenario = match load_shards_file(&header) {
        Ok(scenario) => scenario,
        Err(status) => return status,
    };
    let variants = match chosen_variants(&scenario, header.variant.as_deref(), &header.file) {
        Ok(variants) => variants,
        Err(status) => return status,
    };
    let stop_after = header.stop_after.unwrap_or(1).max(1);
    let mut by_seed: std::collections::BTreeMap<usize, Found> = std::collections::BTreeMap::new();
    for run in merged.runs {
        let Some(position) = header.seeds.iter().position(|&s| s == run.seed) else {
            eprintln!(
                "error: the shards hold seed {}, which the exploration does not",
                run.seed
            );
            return EXIT_BAD_INPUT;
        };
        by_seed
            .entry(position)
            .or_insert_with(|| Found {
                seed: run.seed,
                runs: Vec::new(),
            })
            .runs
            .push(run);
    }
    let order: Vec<&str> = variants.iter().map(|v| v.name.as_str()).collect();
    let mut found: Vec<(usize, Found)> = by_seed.into_iter().take(stop_after).collect();
    for (_, seed) in &mut found {
        seed.runs
            .sort_by_key(|run| order.iter().position(|&name| name == run.variant));
    }
    let explored = match found.last() {
        Some((position, _)) if found.len() == stop_after => position + 1,
        _ if merged.explored != header.seeds.len() => {
            eprintln!(
                "error: the shards tried {} of the {} seeds and found fewer than {stop_after} failing: a shard stopped early",
                merged.explored,
                header.seeds.len()
            );
            return EXIT_BAD_INPUT;
        }
        _ => header.seeds.len(),
    };
    let found: Vec<Found> = found.into_iter().map(|(_, seed)| seed).collect();
    let command = replay_command(&header.file, &header.sets);
    let mut text = opening(
        &scenario.name,
        header.seeds.len(),
        variants.len(),
        stop_after,
    );
    for seed in &found {
        text.push_str(&failing_seed(seed, &command));
    }
    let tried = Tried {
        explored,
        seeds: header.seeds.len(),
        runs: explored * variants.len(),
        seconds: merged.wall_time_ms / 1000.0,
    };
    text.push_str(&closing(&tried, &found, stop_after, false, &command));
    super::out(&text);
    if found.is_empty() {
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
