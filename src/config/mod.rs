//! Each system's settings, with its own names and defaults, and its releases: what a
//! scenario resolves into and a system's programs read. One module per system, side by
//! side (RocketMQ's `flushDiskType`, `brokerRole`... go beside Kafka's), so a key always
//! means what its system's documentation says; and the workload's shape, which every
//! system's clients follow alike (`workload`: when sends arrive).

pub mod bugs;
pub mod kafka;
pub mod rocketmq;
pub mod workload;
