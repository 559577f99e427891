//! Storage: Kafka segmented logs, indexes, checkpoints and recovery.

pub mod record;
