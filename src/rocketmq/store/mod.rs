//! RocketMQ's message store (`org.apache.rocketmq.store`), as plain data over the
//! simulated disk: the CommitLog record codec, the files both logs live in, the
//! CommitLog itself.

pub mod checkpoint;
pub mod commit_log;
pub mod consume_queue;
pub mod mapped_file;
pub mod message;
pub mod recovery;
pub mod services;
