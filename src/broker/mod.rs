//! Brokers: replica manager, partitions, fetchers, purgatory.

pub mod hw;
pub mod isr;
pub mod purgatory;
pub mod truncation;
