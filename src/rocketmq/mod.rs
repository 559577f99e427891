//! Apache RocketMQ, the lab's second system: so far its store (`store/`), the CommitLog
//! and ConsumeQueue formats a broker writes, as plain data over the simulated disk.
//! RocketMQ's own words throughout (CommitLog, ConsumeQueue, queue offset, physical
//! offset, `flushDiskType`), so that what a user learns here transfers.

pub mod store;
