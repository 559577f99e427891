//! Storage: Kafka segmented logs, indexes, checkpoints and recovery.

pub mod checkpoint;
pub mod epoch_cache;
pub mod record;
