//! Kafka: the brokers, the controller, the clients, the partition log and the wire
//! protocol, as programs on simulated hosts.

pub mod broker;
pub mod client;
pub mod controller;
pub mod protocol;
pub mod record;
pub mod storage;
pub mod system;
pub mod teller;
pub mod types;
