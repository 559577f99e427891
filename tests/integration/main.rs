//! The integration tests, one binary for all of them (one link instead of one per file),
//! laid out by the area of `src/` they exercise: `os/disk.rs` tests `src/os/disk.rs`,
//! `storage/log.rs` the partition log, `sim/` the world and the runner's determinism, and
//! so on. `cargo test --test integration broker::` runs one area. The scenario catalog
//! (`tests/scenarios.rs`) keeps its own binary: it has its own harness.
//!
//! Tests share the process: each runs on its own thread, so the simulated clock
//! (a thread-local) starts at zero in each, and the one trace subscriber
//! (`sim::trace`) hashes each thread's run apart from the others.

mod broker;
mod check;
mod client;
mod controller;
mod docs;
mod eos_processor;
mod groups;
mod lab;
mod layers;
mod mutations;
mod shrink;
mod source;
mod support;
mod txn_coordinator;
mod txn_producer;

mod cli {
    mod explore;
    mod shard;
    mod shrink;
}

mod os {
    mod disk;
}

mod scenario {
    mod parse;
    mod releases;
    mod rocketmq;
}

mod sim {
    mod determinism;
    mod latency;
    mod network;
    mod outcomes;
    mod pause;
    mod release_fixes;
    mod world;
}

mod storage {
    mod log;
    mod txn;
}
