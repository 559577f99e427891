//! Storage: Kafka segmented logs, indexes, checkpoints and recovery.

pub mod checkpoint;
pub mod dump;
pub mod epoch_cache;
pub mod producer_state;
pub mod record;
