//! Apache RocketMQ, the lab's second system: one master per broker group with its store
//! (`store/`: the CommitLog and ConsumeQueue formats, the files they live in, flushing,
//! dispatch and recovery, each rule by release in `config::rocketmq`), the broker that
//! runs the store's services and answers sends and pulls (`broker/`), the NameServer,
//! the producer and the final read (`client/`), and its side of the harness's seam
//! (`system`). RocketMQ's own words throughout (CommitLog, ConsumeQueue, queue offset,
//! physical offset, `flushDiskType`), so that what a user learns here transfers.

pub mod broker;
pub mod client;
pub mod namesrv;
pub mod remoting;
pub mod store;
pub mod system;
pub mod teller;
