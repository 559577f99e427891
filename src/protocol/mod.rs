//! The wire protocol: typed requests and responses in length-prefixed frames.

pub mod messages;
pub mod frame;
