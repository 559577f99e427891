//! The wire protocol: typed requests and responses in length-prefixed frames.

pub mod fetch_session;
pub mod frame;
pub mod messages;
