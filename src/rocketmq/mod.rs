//! Apache RocketMQ, the lab's second system, being built: its store (`store/`: the
//! CommitLog and ConsumeQueue formats, the files they live in, flushing and recovery) and
//! the broker's consumer offsets (`broker/`), as plain data over the simulated disk, each
//! rule by release (`config::rocketmq`). No scenario runs it yet: its services, its
//! clients and its side of the harness's seam come next. RocketMQ's own words throughout
//! (CommitLog, ConsumeQueue, queue offset, physical offset, `flushDiskType`), so that what
//! a user learns here transfers.

pub mod broker;
pub mod store;
