//! Clients: the producer, consumers and the history they record.

pub mod history;
