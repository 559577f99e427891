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
//! systems                     picks a variant's system and runs it under the harness
//! kafka::system               Kafka's side of the harness's seam
//! sim                         the harness: world, runner, faults, seeds in parallel, trace;
//!                             generic over `sim::system::System`
//! scenario                    scenario files into plain data
//! kafka                       Kafka's brokers, controller, clients, log, protocol, codec,
//!                             and its teller (the checkers' examples in Kafka's words)
//! check                       anomaly counts from the history and the final state, in
//!                             terms every system shares; the `Teller` a system implements
//! history                     the client history, each system's facts, the final state
//! os                          the simulated machine: page-cache disk, clock
//! types config                the shared vocabulary; each system's settings by release
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
pub mod rocketmq;
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
