//! `hightide bench`: figures to write down, never assertions. `storage` times the
//! partition log alone; `sim` times one whole run of a scenario (the simulation, the final
//! read and the checkers) and its peak memory; `scale` runs `sim` in a fresh process per
//! load and partition count, so each peak is that load's own, and prints the table of
//! `reports/performance.md`.

use super::{out, EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK};
use crate::scenario::{self, model::Variant};
use crate::sim::runner::RunOptions;
use crate::systems;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// The load the speed work is measured on (`bench/canonical.toml`).
const CANONICAL: &str = "bench/canonical.toml";

#[derive(clap::Subcommand, Debug)]
pub enum BenchCommand {
    /// Append and read throughput of the partition log.
    Storage,
    /// One run of a scenario: simulated seconds per wall second, wall time per message,
    /// peak memory.
    Sim(SimArgs),
    /// `sim` at rates x1, x4, x16 and at 6, 60, 600 partitions, each in its own process.
    Scale {
        /// The scenario (its first variant, seed 1).
        #[arg(default_value = CANONICAL)]
        file: PathBuf,
    },
}

#[derive(clap::Args, Debug)]
pub struct SimArgs {
    /// The scenario (its first variant unless --variant).
    #[arg(default_value = CANONICAL)]
    file: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long)]
    variant: Option<String>,
    /// Multiply every producer's rate.
    #[arg(long, default_value_t = 1)]
    rate_scale: u32,
    /// Give every topic this many partitions.
    #[arg(long)]
    partitions: Option<u32>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(command: BenchCommand) -> i32 {
    match command {
        BenchCommand::Storage => {
            out(&crate::kafka::storage::bench::run(
                crate::kafka::storage::bench::DEFAULT_TOTAL_RECORD_BYTES,
            ));
            EXIT_OK
        }
        BenchCommand::Sim(args) => sim(&args),
        BenchCommand::Scale { file } => scale(&file),
    }
}

/// What one timed run measured.
struct Measured {
    sim_seconds: f64,
    wall_seconds: f64,
    attempted: u64,
    partitions: u32,
    peak_rss_mib: Option<f64>,
}

impl Measured {
    fn speed(&self) -> f64 {
        self.sim_seconds / self.wall_seconds.max(1e-9)
    }

    fn micros_per_message(&self) -> f64 {
        self.wall_seconds * 1e6 / self.attempted.max(1) as f64
    }

    fn json(&self) -> String {
        serde_json::json!({
            "sim_seconds": self.sim_seconds,
            "wall_seconds": self.wall_seconds,
            "speed": self.speed(),
            "attempted": self.attempted,
            "partitions": self.partitions,
            "micros_per_message": self.micros_per_message(),
            "peak_rss_mib": self.peak_rss_mib,
        })
        .to_string()
    }
}

fn load_variant(args: &SimArgs) -> Result<Variant, String> {
    let scenario = scenario::load(&args.file).map_err(|e| e.to_string())?;
    let mut variant = match &args.variant {
        None => scenario.variants.into_iter().next(),
        Some(name) => scenario.variants.into_iter().find(|v| &v.name == name),
    }
    .ok_or_else(|| format!("{}: no such variant", args.file.display()))?;
    let settings = &mut variant.settings;
    settings.workload.rate = settings.workload.rate.saturating_mul(args.rate_scale);
    if let Some(partitions) = args.partitions {
        for topic in &mut settings.cluster.topics {
            topic.partitions = partitions;
        }
    }
    Ok(variant)
}

fn sim(args: &SimArgs) -> i32 {
    let variant = match load_variant(args) {
        Ok(variant) => variant,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    let started = Instant::now();
    let outcome = match systems::run(&variant, args.seed, &RunOptions::default()) {
        Ok(outcome) => outcome,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_FAILED;
        }
    };
    let measured = Measured {
        sim_seconds: outcome.sim_time.as_secs_f64(),
        wall_seconds: started.elapsed().as_secs_f64(),
        attempted: outcome.verdict.counts.attempted,
        partitions: variant
            .settings
            .cluster
            .topics
            .iter()
            .map(|t| t.partitions)
            .sum(),
        peak_rss_mib: peak_rss_mib(),
    };
    if args.json {
        out(&format!("{}\n", measured.json()));
    } else {
        out(&format!(
            "{} ({}, seed {}): {:.1} simulated s in {:.2} s wall = {:.1}x real time; {} messages, {:.2} us each; peak RSS {}\n",
            args.file.display(),
            variant.name,
            args.seed,
            measured.sim_seconds,
            measured.wall_seconds,
            measured.speed(),
            measured.attempted,
            measured.micros_per_message(),
            measured
                .peak_rss_mib
                .map_or("unknown".to_string(), |m| format!("{m:.0} MiB"))
        ));
    }
    EXIT_OK
}

/// The process's peak resident set so far (Linux's VmHWM), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn scale(file: &Path) -> i32 {
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("error: cannot find this program's path to run its measurements");
        return EXIT_FAILED;
    };
    let loads: [(u32, Option<u32>); 5] = [
        (1, None),
        (4, None),
        (16, None),
        (1, Some(60)),
        (1, Some(600)),
    ];
    let mut table = String::from(
        "| rate | partitions | messages | wall s | x real time | us per message | peak RSS MiB |\n|---|---|---|---|---|---|---|\n",
    );
    for (rate_scale, partitions) in loads {
        let mut command = std::process::Command::new(&exe);
        command
            .args(["bench", "sim", "--json", "--rate-scale"])
            .arg(rate_scale.to_string())
            .arg(file);
        if let Some(partitions) = partitions {
            command.arg("--partitions").arg(partitions.to_string());
        }
        let output = match command.output() {
            Ok(output) if output.status.success() => output,
            Ok(output) => {
                eprintln!("{}", String::from_utf8_lossy(&output.stderr));
                return EXIT_FAILED;
            }
            Err(error) => {
                eprintln!("error: running {}: {error}", exe.display());
                return EXIT_FAILED;
            }
        };
        let Ok(m) = serde_json::from_slice::<serde_json::Value>(&output.stdout) else {
            eprintln!("error: unreadable measurement from {}", exe.display());
            return EXIT_FAILED;
        };
        let number = |key: &str| m[key].as_f64().unwrap_or(f64::NAN);
        let row = format!(
            "| x{rate_scale} | {} | {} | {:.2} | {:.1} | {:.2} | {:.0} |\n",
            m["partitions"],
            m["attempted"],
            number("wall_seconds"),
            number("speed"),
            number("micros_per_message"),
            number("peak_rss_mib"),
        );
        eprint!("{row}");
        table.push_str(&row);
    }
    out(&table);
    EXIT_OK
}
