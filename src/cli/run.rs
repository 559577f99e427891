//! `hightide run`: every variant of a scenario on every seed, side by side.

use super::scenario_args::{chosen_variants, load, load_shards_file, replay_command};
use super::{shard, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK};
use crate::config::Modelled;
use crate::report;
use crate::scenario;
use crate::scenario::model::{Scenario, SystemName};
use crate::sim::batch;
use crate::sim::runner::{DumpDisks, RunOptions, RunOutcome};
use crate::sim::trace::Print;
use crate::systems;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The scenario file.
    file: PathBuf,
    /// Run only this seed (the replay of a failing run).
    #[arg(long, conflicts_with = "seeds")]
    seed: Option<u64>,
    /// Seeds to run instead of the scenario's: "20" (1 to 20), "3,17,42" or "100..200"
    /// (100 to 199: the end is excluded).
    #[arg(long)]
    seeds: Option<String>,
    /// Run only this variant.
    #[arg(long)]
    variant: Option<String>,
    /// Override a setting over the file's top level and every variant, with a sweep's
    /// dotted path: `producer.acks=all`, `broker.min.insync.replicas=2`,
    /// `cluster.kafka=3.9`, `faults=NAME`, `duration=60s`. Repeatable.
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// One JSON object per seed and variant instead of text.
    #[arg(long)]
    json: bool,
    /// Also print every seed: a line per run, or its variants side by side.
    #[arg(short, long, conflicts_with_all = ["json", "quiet"])]
    verbose: bool,
    /// Print only the verdict, what failed and how to replay it (for CI).
    #[arg(short, long, conflicts_with = "json")]
    quiet: bool,
    /// Print the event trace (stamped with simulated time and host) to stderr, each run
    /// under a header.
    #[arg(long)]
    trace: bool,
    /// --trace with the simulator's own events too (turmoil's binds and addresses).
    #[arg(long)]
    trace_all: bool,
    /// Write the history of every run as JSON lines to this file.
    #[arg(long)]
    history: Option<PathBuf>,
    /// With --seed: draw the run as a timeline (hosts, leadership, faults, sends) in OUT.html.
    #[arg(long, requires = "seed", value_name = "OUT.html")]
    timeline: Option<PathBuf>,
    /// With --seed: write every host's files after the run to `DIR/<host>/`, or to
    /// `DIR/<variant>/<host>/` when several variants run.
    #[arg(long, requires = "seed")]
    dump_disks: Option<PathBuf>,
    /// Simulations to run at once (default: one per core).
    #[arg(long)]
    jobs: Option<usize>,
    /// Run the K-th of N shares of the (seed, variant) runs and write them as JSON lines
    /// for `hightide merge`.
    #[arg(long, value_name = "K/N", conflicts_with_all = ["verbose", "quiet", "seed", "timeline", "dump_disks", "trace", "trace_all"])]
    shard: Option<batch::Shard>,
}

pub fn run(mut args: RunArgs) -> i32 {
    // A shard's runs are for a merge to report.
    args.json |= args.shard.is_some();
    let scenario = match load(&args.file, &args.set) {
        Ok(scenario) => scenario,
        Err(status) => return status,
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
    let variants = match chosen_variants(&scenario, args.variant.as_deref(), &args.file) {
        Ok(variants) => variants,
        Err(status) => return status,
    };
    if let Some(dir) = &args.dump_disks {
        if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
            eprintln!("error: --dump-disks {}: the directory exists and is not empty; refusing to overwrite it", dir.display());
            return EXIT_BAD_INPUT;
        }
    }
    let mut jobs = batch::jobs(&seeds, &variants);
    if let Some(shard) = args.shard {
        jobs = shard.select(&jobs);
        super::out(&shard::header_line(&shard::Header {
            seeds: seeds.clone(),
            variant: args.variant.clone(),
            shard: shard.to_string(),
            ..shard::Header::new("run", &args.file, &args.set, &[&scenario.source])
        }));
    }
    let started = std::time::Instant::now();
    let options = RunOptions {
        trace: if args.trace_all {
            Print::All
        } else if args.trace {
            Print::Events
        } else {
            Print::Nothing
        },
        dump_disks: args.dump_disks.clone().map(|dir| DumpDisks {
            dir,
            per_variant: variants.len() > 1,
        }),
    };
    let threads = if args.trace || args.trace_all {
        1
    } else {
        args.jobs.unwrap_or_else(batch::default_threads)
    };
    let mut history = match &args.history {
        None => None,
        Some(path) => match std::fs::File::create(path) {
            Ok(file) => Some(std::io::BufWriter::new(file)),
            Err(error) => {
                eprintln!("error: --history {}: {error}", path.display());
                return EXIT_BAD_INPUT;
            }
        },
    };
    let mut printer = Printer::new(&scenario, &args, variants.len(), jobs.len());
    let keep_outcomes = args.timeline.is_some();
    let keep_history = history.is_some();
    let mut outcomes = Vec::new();
    let mut failure: Option<String> = None;
    let ran = batch::run_each(
        systems::run,
        &jobs,
        threads,
        &options,
        super::interrupted(),
        |job, result| {
            result.map(|outcome| {
                let report = report::RunReport::from_outcome(&scenario.name, job.variant, &outcome);
                // A finished run shrinks to its report, unless its history or timeline is
                // still to be written: memory stays flat over any number of seeds.
                let outcome = (keep_outcomes || keep_history).then_some(outcome);
                (report, outcome)
            })
        },
        |result| match result {
            Ok((report, outcome)) => {
                if let (Some(out), Some(outcome)) = (history.as_mut(), &outcome) {
                    if let Err(error) = write_history(out, outcome) {
                        failure.get_or_insert(format!("--history: {error}"));
                    }
                }
                printer.add(report);
                if keep_outcomes {
                    outcomes.extend(outcome);
                }
            }
            Err(error) => {
                failure.get_or_insert(error.to_string());
            }
        },
    );
    if let Some(error) = failure {
        eprintln!("error: {error}");
        return EXIT_FAILED;
    }
    if let Some(Err(error)) = history.as_mut().map(Write::flush) {
        eprintln!("error: --history: {error}");
        return EXIT_BAD_INPUT;
    }
    if let Some(dump) = &options.dump_disks {
        for variant in &variants {
            eprintln!("wrote {}", dump.target(&variant.name).display());
        }
    }
    if let Some(path) = &args.timeline {
        if let Err(error) = write_timelines(path, &scenario, &outcomes) {
            eprintln!("error: --timeline {}: {error}", path.display());
            return EXIT_BAD_INPUT;
        }
    }
    if args.shard.is_some() && ran == jobs.len() {
        super::out(&shard::done_line(shard::Done {
            runs: ran,
            explored: 0,
            wall_time_ms: started.elapsed().as_secs_f64() * 1000.0,
        }));
    }
    printer.finish(ran < jobs.len())
}

/// `hightide merge` of `run` shards: the runs in the order one `run` would have finished
/// them, printed as it would have printed them.
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
    let jobs = batch::jobs(&header.seeds, &variants);
    let reports = match shard::in_job_order(merged.runs, &jobs) {
        Ok(reports) => reports,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    let args = RunArgs {
        file: header.file,
        seed: None,
        seeds: None,
        variant: header.variant,
        set: header.sets,
        json: false,
        verbose: false,
        quiet: false,
        trace: false,
        trace_all: false,
        history: None,
        timeline: None,
        dump_disks: None,
        jobs: None,
        shard: None,
    };
    let mut printer = Printer::new(&scenario, &args, variants.len(), 0);
    for report in reports {
        printer.add(report);
    }
    printer.finish(false)
}

/// One page, a panel per variant of the seed, all on one time axis.
fn write_timelines(
    path: &Path,
    scenario: &Scenario,
    outcomes: &[RunOutcome],
) -> std::io::Result<()> {
    use report::timeline;
    let panels: Vec<timeline::Panel> = outcomes
        .iter()
        .map(|outcome| {
            let settings = &scenario
                .variants
                .iter()
                .find(|v| v.name == outcome.variant)
                .expect("every outcome is of a variant of the scenario")
                .settings;
            let topics = settings
                .cluster
                .topics
                .iter()
                .map(|t| {
                    let min_isr = t
                        .config
                        .min_insync_replicas
                        .unwrap_or(settings.broker.min_insync_replicas);
                    (t.name.clone(), (t.replication_factor, min_isr))
                })
                .collect();
            let counts = &outcome.verdict.counts;
            let mut group = if outcome.verdict.group {
                format!(
                    ", unprocessed {}, reprocessed {}",
                    counts.unprocessed, counts.reprocessed
                )
            } else {
                String::new()
            };
            if outcome.verdict.processors {
                group += &format!(
                    ", eos_duplicates {}, eos_missing {}",
                    counts.eos_duplicates, counts.eos_missing
                );
            }
            // The setting a reader compares first, in the run's system's words.
            let durability = match settings.cluster.system {
                SystemName::Kafka => format!("acks={}", settings.producer.acks),
                SystemName::RocketMq => format!(
                    "flushDiskType={}",
                    settings.rocketmq.store.flush_disk_type.name()
                ),
            };
            let summary = format!(
                "{durability}: attempted {}, acked {}, lost {}, duplicates {}, reordered {}, divergent {}, offline {}{group}; trace {}",
                counts.attempted,
                counts.acked,
                counts.lost,
                counts.duplicates,
                counts.reordered,
                counts.divergent,
                counts.offline,
                report::hash_text(outcome.trace_hash)
            );
            timeline::panel(&timeline::PanelInput {
                variant: &outcome.variant,
                summary,
                timeline: &outcome.timeline,
                history: &outcome.history,
                facts: &outcome.final_state.facts,
                verdict: &outcome.verdict,
                system: settings.cluster.system,
                topics: &topics,
            })
        })
        .collect();
    let seed = outcomes.first().map_or(0, |o| o.seed);
    let title = format!("{} — seed {seed}", scenario.name);
    std::fs::write(path, timeline::html(&title, &panels))?;
    let variants = match panels.len() {
        1 => "1 variant".to_owned(),
        n => format!("{n} variants, one panel each"),
    };
    eprintln!("wrote {} ({variants})", path.display());
    Ok(())
}

fn write_history(out: &mut impl Write, outcome: &RunOutcome) -> std::io::Result<()> {
    for event in &outcome.history {
        let mut value = serde_json::to_value(event).map_err(std::io::Error::other)?;
        if let Some(object) = value.as_object_mut() {
            object.insert("seed".into(), outcome.seed.into());
            object.insert("variant".into(), outcome.variant.clone().into());
        }
        writeln!(out, "{value}")?;
    }
    Ok(())
}

/// Prints runs as they finish, in seed order: a JSON line per run, or a seed's block once
/// all its variants ran; then the summary and the replay lines.
struct Printer<'a> {
    args: &'a RunArgs,
    variants: usize,
    /// The runs of the seed being printed.
    seed: Vec<report::RunReport>,
    summary: report::Summary,
    /// (seed, variant) of each run that failed an expectation.
    failed: Vec<(u64, String)>,
    /// Runs done, their rate and the time left, on stderr when it is a terminal.
    progress: Option<indicatif::ProgressBar>,
}

/// Replay lines printed at most; the rest are counted.
const REPLAY_LINES: usize = 10;

/// Which systems and releases the runs model: one, or each variant's when they differ
/// (the table then has a `kafka`, `rocketmq` or `system` row).
fn releases_line(scenario: &Scenario) -> String {
    let mut modelled: Vec<Modelled> = scenario
        .variants
        .iter()
        .map(|v| v.settings.cluster.modelled())
        .collect();
    modelled.sort_unstable();
    modelled.dedup();
    match modelled.as_slice() {
        [one] => format!("{one}: its rules and defaults (`{}`)", one.config_command()),
        many => {
            let names: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("{}, one per variant", names.join(", "))
        }
    }
}

impl<'a> Printer<'a> {
    fn new(scenario: &'a Scenario, args: &'a RunArgs, variants: usize, runs: usize) -> Printer<'a> {
        if !args.json && !args.quiet {
            let description = scenario.description.trim();
            let lesson = if description.is_empty() {
                String::new()
            } else {
                format!("{description}\n\n")
            };
            let set = if args.set.is_empty() {
                String::new()
            } else {
                format!(
                    "Set on the command line, over every variant: {}\n",
                    args.set.join(", ")
                )
            };
            super::out(&format!(
                "{}\n{}\n{set}\n{lesson}",
                scenario.name,
                releases_line(scenario)
            ));
        }
        for variant in &scenario.variants {
            let settings = &variant.settings;
            for why in [settings.never_acknowledges(), settings.ignored_power_loss()]
                .into_iter()
                .flatten()
            {
                eprintln!("warning: variant {}: {why}", variant.name);
            }
        }
        let progress =
            (std::io::stderr().is_terminal() && !args.trace && !args.trace_all && runs > 1).then(
                || {
                    let bar = indicatif::ProgressBar::new(runs as u64);
                    if let Ok(style) = indicatif::ProgressStyle::with_template(
                        "{elapsed_precise} [{bar:30}] {pos}/{len} runs, {per_sec}, {eta} left",
                    ) {
                        bar.set_style(style.progress_chars("=> "));
                    }
                    bar
                },
            );
        Printer {
            progress,
            args,
            variants,
            seed: Vec::new(),
            summary: report::Summary::default(),
            failed: Vec::new(),
        }
    }

    fn add(&mut self, report: report::RunReport) {
        self.summary.add(&report);
        if !report.pass() {
            self.failed.push((report.seed, report.variant.clone()));
        }
        if let Some(progress) = &self.progress {
            progress.inc(1);
        }
        if self.args.json {
            self.print(&format!("{}\n", report::run_json(&report)));
            return;
        }
        if !report.pass() && !self.args.verbose && self.failed.len() <= REPLAY_LINES {
            let mut text = format!("seed {} of {} failed:\n", report.seed, report.variant);
            text.push_str(&report::run_details(&report, report::Stories::FirstOfEach));
            self.print(&text);
        }
        if !self.args.verbose {
            return;
        }
        self.seed.push(report);
        if self.seed.len() == self.variants {
            self.flush_seed();
        }
    }

    fn flush_seed(&mut self) {
        if !self.seed.is_empty() {
            self.print(&report::runs_text(&self.seed));
            self.seed.clear();
        }
    }

    /// Print with the progress bar out of the way.
    fn print(&self, text: &str) {
        match &self.progress {
            Some(progress) => progress.suspend(|| super::out(text)),
            None => super::out(text),
        }
    }

    /// The summary (of the runs that finished, if interrupted) and the exit status.
    fn finish(mut self, interrupted: bool) -> i32 {
        if let Some(progress) = self.progress.take() {
            progress.finish_and_clear();
        }
        let failed = self.summary.failed();
        if !self.args.json {
            self.flush_seed();
            let mut text = String::from(if self.args.verbose { "\n" } else { "" });
            if interrupted {
                text.push_str(&format!(
                    "interrupted: the summary covers the {} runs that finished\n",
                    self.summary.runs()
                ));
            }
            let command = replay_command(&self.args.file, &self.args.set);
            if !self.args.quiet {
                text.push_str(&self.summary.table());
                let explained = self.summary.explanations(&command);
                if !explained.is_empty() {
                    text.push_str("\nThe run of each variant with the most to explain:\n");
                    text.push_str(&explained);
                }
                text.push('\n');
            }
            text.push_str(&self.summary.verdict());
            for (seed, variant) in self.failed.iter().take(REPLAY_LINES) {
                text.push_str(&format!(
                    "replay seed {seed} of {variant}: {command} --seed {seed} --variant {variant}\n"
                ));
            }
            if self.failed.len() > REPLAY_LINES {
                text.push_str(&format!(
                    "... and {} more failing runs\n",
                    self.failed.len() - REPLAY_LINES
                ));
            }
            super::out(&text);
        }
        if interrupted {
            EXIT_INTERRUPTED
        } else if failed {
            EXIT_FAILED
        } else {
            EXIT_OK
        }
    }
}
