//! The transaction coordinator (KIP-98): the leader of a transactional id's
//! `__transaction_state` partition keeps that id's transaction, fences its old producers,
//! and ends its transactions with markers on every partition they wrote.

pub mod decide;
pub mod load;
pub mod log_record;
pub mod metadata;
