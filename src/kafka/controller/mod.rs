//! The controller: cluster metadata, liveness, elections (KRaft-flavoured).
//!
//! `state` holds every decision as a state machine over plain data, `election` the
//! leader-choice rule, `placement` the replica assignment, `store` the durable snapshot,
//! and `server` the async process that ties them to the network and the disk.

pub mod election;
pub mod placement;
pub mod server;
pub mod state;
pub mod store;

pub use placement::placement;
pub use server::{run, ControllerContext, MetadataView};
