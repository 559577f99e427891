//! Storage: Kafka segmented logs, indexes, checkpoints and recovery, over the simulated
//! disk (`crate::os::disk`); the record format is `crate::kafka::record`.

pub mod bench;
pub mod checkpoint;
pub mod dump;
pub mod epoch_cache;
pub mod index;
pub mod log;
pub mod producer_state;
pub mod recovery;
pub mod segment;
pub mod txn_index;
