//! A RocketMQ broker's own state beside its store: so far the consumer groups' committed
//! offsets and the file they are persisted to.

pub mod consumer_offsets;
