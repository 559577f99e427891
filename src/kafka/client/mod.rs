//! Clients: the producer, consumers and the final read; what they are told goes into the
//! history (`crate::history`).

pub mod accumulator;
pub mod assignor;
pub mod consumer;
pub mod fetch;
pub mod final_read;
pub mod idempotence;
pub mod member;
pub mod membership;
pub mod metadata;
pub mod network;
pub mod outcome;
pub mod partitioner;
pub mod producer;
pub mod transaction;

pub use consumer::{run_consumer, ConsumerContext, GroupProgress, GroupSpec};
pub use final_read::{final_read, LeaderOf, PartitionRead, Reading};
pub use member::run_member;
pub use partitioner::{murmur2, partition_for_key};
pub use producer::{run_producer, Application, ProducerContext};
