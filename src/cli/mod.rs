//! The command line (docs/scenarios.md, "The command line"). Exit status: 0 every
//! expectation holds, 1 an expectation failed (for `dump-log`: a file is damaged), 2 bad
//! input.

mod bench;
mod dump_log;
mod explore;
mod merge;
mod run;
mod scenario_args;
mod shard;
mod shrink;
mod sweep;
mod test_seeds;

use clap::{Parser, Subcommand};

pub const EXIT_OK: i32 = 0;
pub const EXIT_FAILED: i32 = 1;
pub const EXIT_BAD_INPUT: i32 = 2;
/// Interrupted (Ctrl-C) after printing what finished: 128 + SIGINT, as a shell reports it.
pub const EXIT_INTERRUPTED: i32 = 130;

/// Set by Ctrl-C: runs in progress finish, no new one starts, and the command prints what
/// it has. A second Ctrl-C ends the process at once.
pub(crate) fn interrupted() -> &'static std::sync::atomic::AtomicBool {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Once;
    static INTERRUPTED: AtomicBool = AtomicBool::new(false);
    static HANDLER: Once = Once::new();
    HANDLER.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::Relaxed) {
                std::process::exit(EXIT_INTERRUPTED);
            }
        });
    });
    &INTERRUPTED
}

#[derive(Parser, Debug)]
#[command(
    name = "hightide",
    version,
    about = "A deterministic simulation lab for Kafka-style message durability"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run a scenario over its seeds and variants, check every expectation.
    Run(run::RunArgs),
    /// Run a scenario (usually one with a `[nemesis]`) over many seeds and report the first
    /// failing ones, each with its replay line.
    Explore(explore::ExploreArgs),
    /// Cut a failing seed down to a small scenario file that fails the same way: the
    /// nemesis's draws written out as faults, then as few faults, as short a run and as
    /// small a workload and cluster as still break the same expectation.
    Shrink(shrink::ShrinkArgs),
    /// Report the JSON lines of every `--shard K/N` of a run, sweep or explore as the one
    /// unsharded command would have: the same summary, verdict and sweep report.
    Merge(merge::MergeArgs),
    /// Run a base scenario under every combination of settings and write a report.
    Sweep(sweep::SweepArgs),
    /// Suggest a scenario's `test_seeds`: the seeds that show, in the least time, every
    /// behaviour its seeds show.
    TestSeeds(test_seeds::TestSeedsArgs),
    /// List every supported configuration key with its default and meaning.
    Config {
        /// The Kafka release whose defaults to list (default: the newest modelled), with
        /// the changes up to it.
        #[arg(long, value_name = "X.Y")]
        kafka: Option<String>,
        /// List RocketMQ's keys instead: their defaults, and the rules of this RocketMQ
        /// release with the changes up to it.
        #[arg(long, value_name = "X.Y.Z", conflicts_with = "kafka")]
        rocketmq: Option<String>,
    },
    /// Print log segments, their indexes and checkpoint files, as Kafka's kafka-dump-log.sh.
    ///
    /// Kafka's options and lines (DumpLogSegments) for `.log`, `.index` and `.timeindex`
    /// files; indexes are checked against the `.log` beside them, the mismatches listed on
    /// stderr at the end. hightide's addition: the checkpoint files (`leader-epoch-checkpoint`,
    /// `recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
    /// `log-start-offset-checkpoint`), which Kafka's tool does not read. Where a file is
    /// damaged, it says where and why and goes on (Kafka's tool stops with an exception).
    #[command(after_help = dump_log::EXIT_HELP)]
    DumpLog(dump_log::DumpLogArgs),
    /// Measure speed and memory (not a test: figures to write down).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// Write to stdout. A reader that went away (`hightide dump-log x.log | head`) ends the
/// output quietly, as for any Unix tool, instead of a panic.
pub(crate) fn out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(error) = stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        if error.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: writing to stdout: {error}");
        }
    }
}

/// Parse the arguments, run the command, return the exit status.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let _ = error.print();
            return if error.use_stderr() {
                EXIT_BAD_INPUT
            } else {
                EXIT_OK
            };
        }
    };
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Explore(args) => explore::run(args),
        Command::Shrink(args) => shrink::run(args),
        Command::Merge(args) => merge::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::TestSeeds(args) => test_seeds::run(args),
        Command::Config {
            rocketmq: Some(rocketmq),
            ..
        } => match crate::config::rocketmq::Release::parse(&rocketmq) {
            Ok(release) => {
                out(&crate::scenario::rocketmq_reference(release));
                EXIT_OK
            }
            Err(error) => {
                eprintln!("error: --rocketmq: {error}");
                EXIT_BAD_INPUT
            }
        },
        Command::Config { kafka, .. } => {
            let release = match kafka.as_deref().map(crate::config::kafka::Release::parse) {
                None => crate::config::kafka::Release::NEWEST,
                Some(Ok(release)) => release,
                Some(Err(error)) => {
                    eprintln!("error: --kafka: {error}");
                    return EXIT_BAD_INPUT;
                }
            };
            out(&crate::scenario::config_reference(release));
            EXIT_OK
        }
        Command::DumpLog(args) => dump_log::run(args),
        Command::Bench(command) => bench::run(command),
    }
}
