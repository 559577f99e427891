//! Helpers more than one area's tests use.

use hightide::os::clock::{self, SimTime};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// One step of a turmoil simulation, with the simulated time published first as the world
/// does (storage and the history read it from the clock). True once every client is done.
pub fn step(sim: &mut turmoil::Sim<'_>) -> turmoil::Result<bool> {
    clock::set(SimTime::after_start(sim.elapsed()));
    sim.step()
}

/// A small scenario file whose acks=1 runs lose acknowledged writes to a leader power
/// loss on most seeds, and so break its `[expect] lost = 0`.
pub const ACKS_1_POWER_LOSS: &str = r#"
name = "in code"
seeds = [1, 2]
duration = "6s"
heal = "14s"    # broker-1 registers once its old session expired, about 16.7 s

[cluster]
brokers = 3
topics = [{ name = "orders", partitions = 1, replication_factor = 3 }]

[producer]
acks = 1
"request.timeout.ms" = 2000

[workload]
rate = 500
arrivals = "periodic"   # every seed in the same phase: seeds 1 and 2 both lose

[[faults]]
at = "0s"
action = "slow-link"
between = ["broker-1", ["broker-2", "broker-3"]]
latency = "20ms"

[[faults]]
at = "3s"
action = "power-loss"
target = "leader:orders/0"

[[faults]]
at = "4s"
action = "restart"
target = "crashed"

[expect]
lost = 0
"#;

/// An empty directory for one command-line test: `target/tmp/<area>/<name>`, emptied
/// first so a rerun starts clean.
pub fn fresh_dir(area: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(area).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The hightide binary run with `args`, to completion.
pub fn hightide(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_hightide"))
        .args(args)
        .output()
        .unwrap()
}

/// Output bytes as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
