//! Each system's settings, with its own names and defaults, and its releases: what a
//! scenario resolves into and a system's programs read. One module per system, side by
//! side (RocketMQ's `flushDiskType`, `brokerRole`... go beside Kafka's), so a key always
//! means what its system's documentation says; and the workload's shape, which every
//! system's clients follow alike (`workload`: when sends arrive).

pub mod bugs;
pub mod kafka;
pub mod rocketmq;
pub mod workload;

use std::fmt;

/// The system and release a run models: what a report names so that a Kafka run and a
/// RocketMQ run side by side say which is which.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Modelled {
    Kafka(kafka::Release),
    RocketMq(rocketmq::Release),
}

impl Modelled {
    /// The command that prints this release's rules and defaults.
    pub fn config_command(self) -> String {
        match self {
            Modelled::Kafka(release) => format!("hightide config --kafka {release}"),
            Modelled::RocketMq(release) => format!("hightide config --rocketmq {release}"),
        }
    }

    /// The release alone, as a scenario file writes it.
    pub fn release(self) -> String {
        match self {
            Modelled::Kafka(release) => release.to_string(),
            Modelled::RocketMq(release) => release.to_string(),
        }
    }

    /// The system's name as its users write it.
    pub fn system(self) -> &'static str {
        match self {
            Modelled::Kafka(_) => "Kafka",
            Modelled::RocketMq(_) => "RocketMQ",
        }
    }
}

impl fmt::Display for Modelled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.system(), self.release())
    }
}
