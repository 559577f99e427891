//! RocketMQ's message store (`org.apache.rocketmq.store`), as plain data: the CommitLog
//! record codec, the ConsumeQueue entries, and the files they live in.

pub mod message;
