//! `hightide merge`: every shard of one `run`, `sweep` or `explore`, reported as the one
//! unsharded command would have reported it (each command's `merged` does the printing).

use super::{explore, run, shard, sweep, EXIT_BAD_INPUT};
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct MergeArgs {
    /// The JSON lines of every shard (`--shard K/N` of `run`, `sweep` or `explore`).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// For a sweep: where to write the report.
    #[arg(long, default_value = "reports")]
    out: PathBuf,
}

pub fn run(args: MergeArgs) -> i32 {
    let merged = match shard::read(&args.files) {
        Ok(merged) => merged,
        Err(error) => {
            eprintln!("error: {error}");
            return EXIT_BAD_INPUT;
        }
    };
    match merged.header.command.as_str() {
        "run" => run::merged(merged),
        "sweep" => sweep::merged(merged, &args.out),
        "explore" => explore::merged(merged),
        other => {
            eprintln!("error: shards of `{other}`: merge knows run, sweep and explore");
            EXIT_BAD_INPUT
        }
    }
}
