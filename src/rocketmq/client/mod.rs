//! RocketMQ's clients as the workload runs them: the producer application on
//! `DefaultMQProducer`, and the final read.

pub mod final_read;
pub mod producer;
