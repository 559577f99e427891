//! hightide: a deterministic simulation lab for Kafka-style message durability.
//!
//! Layers, top to bottom; each module imports only modules on rows below its own, and
//! `tests/integration/layers.rs` keeps it so (see `docs/architecture.md`):
//!
//! ```text
//! cli                         the command line
//! report                      what runs left behind, as text, JSON, Markdown, SVG, HTML
//! sim                         the harness: world, runner, faults, seeds in parallel, trace
//! scenario                    scenario files into plain data
//! broker controller client    the processes on simulated hosts
//! check                       anomaly counts from the history and the final state
//! storage                     Kafka's partition log
//! protocol record history     wire messages, the RecordBatch v2 codec, the client history
//! os                          the simulated machine: page-cache disk, clock
//! types config                Kafka's vocabulary and configuration
//! ```

pub mod broker;
pub mod check;
pub mod cli;
pub mod client;
pub mod config;
pub mod controller;
pub mod history;
pub mod os;
pub mod protocol;
pub mod record;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod storage;
pub mod types;
