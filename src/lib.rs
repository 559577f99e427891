//! hightide: a deterministic simulation lab for Kafka-style message durability.
//!
//! Layers, top to bottom (see `ARCHITECTURE.md`): `scenario` (files) → `sim` (the world
//! and the runner) → `controller`, `broker`, `client` → `protocol` → `storage` →
//! `sim::disk`; then `check` and `report` over what a run leaves behind.

pub mod broker;
pub mod check;
pub mod cli;
pub mod client;
pub mod config;
pub mod controller;
pub mod protocol;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod storage;
pub mod types;
