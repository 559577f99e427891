//! hightide: a deterministic simulation lab for Kafka-style message durability.
//!
//! As a library: [`load`] or [`parse`] a scenario, [`run`] a seed or [`run_seeds`], read
//! each [`Run`]'s [`Counts`]; [`shrink()`] a failing run to a small scenario file;
//! [`test_folder`] turns a folder of scenario files into tests
//! (see [`lab`]). The modules below it are the simulator itself: public so that the
//! project's own tests can reach every layer, hidden from these docs, and free to change.
//!
//! Layers, top to bottom; each module imports only modules on rows below its own, and
//! `tests/integration/layers.rs` keeps it so (see `docs/architecture.md`):
//!
//! ```text
//! lab cli                     the library's front door; the command line
//! report shrink               what runs left behind, as text, JSON, Markdown, SVG, HTML;
//!                             a failing run cut down to a small scenario file
//! sim                         the harness: world, runner, faults, seeds in parallel, trace
//! scenario                    scenario files into plain data
//! broker controller client    the processes on simulated hosts
//! check                       anomaly counts from the history and the final state
//! storage                     Kafka's partition log
//! protocol record history     wire messages, the RecordBatch v2 codec, the client history
//! os                          the simulated machine: page-cache disk, clock
//! types config                Kafka's vocabulary and configuration
//! ```

pub mod lab;
#[doc(inline)]
pub use lab::{
    check_file, load, parse, run, run_seeds, shrink, test_folder, Count, Counts, Error, Run,
    Scenario, ShrinkOptions, ShrinkStep, Shrunk,
};

#[doc(hidden)]
pub mod check;
#[doc(hidden)]
pub mod cli;
#[doc(hidden)]
pub mod config;
#[doc(hidden)]
pub mod history;
#[doc(hidden)]
pub mod kafka;
#[doc(hidden)]
pub mod os;
#[doc(hidden)]
pub mod report;
#[doc(hidden)]
pub mod scenario;
#[doc(hidden)]
pub mod shrink;
#[doc(hidden)]
pub mod sim;
#[doc(hidden)]
pub mod systems;
#[doc(hidden)]
pub mod types;
