//! RocketMQ's clients as the workload runs them: the producer application on
//! `DefaultMQProducer`, the group's members on `DefaultMQPushConsumer`, and the final
//! read.

pub mod consumer;
pub mod final_read;
pub mod producer;
