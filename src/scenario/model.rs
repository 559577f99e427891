//! A parsed, validated scenario: plain data the runner executes. Every variant carries
//! its fully resolved settings, so the runner never looks at TOML.

use crate::check::Expectation;
use crate::config::{BrokerConfig, ConsumerConfig, ProducerConfig, TopicConfig};
use crate::os::disk::DiskConfig;
use crate::types::{HostName, TopicPartition};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
    pub seeds: Vec<u64>,
    /// At least one; a scenario without `[variants]` has one, named after the file.
    pub variants: Vec<Variant>,
}

#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub settings: Settings,
    pub expect: Vec<Expectation>,
    pub expect_some: Vec<Expectation>,
}

/// Everything one run needs besides the seed.
#[derive(Clone, Debug)]
pub struct Settings {
    pub duration: Duration,
    pub heal: Duration,
    pub cluster: Cluster,
    pub broker: BrokerConfig,
    pub producer: ProducerConfig,
    pub consumer: ConsumerConfig,
    pub workload: Workload,
    pub disk: DiskConfig,
    pub network: Network,
    pub faults: Vec<Fault>,
    pub nemesis: Option<Nemesis>,
}

#[derive(Clone, Debug)]
pub struct Cluster {
    pub brokers: u32,
    pub topics: Vec<Topic>,
}

#[derive(Clone, Debug)]
pub struct Topic {
    pub name: String,
    pub partitions: u32,
    pub replication_factor: u32,
    pub config: TopicConfig,
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub producers: u32,
    pub topic: String,
    /// Sends per simulated second, per producer.
    pub rate: u32,
    /// Stop after this many sends in all; `None`: send until `duration`.
    pub messages: Option<u64>,
    /// Distinct keys; 0 = null keys (sticky partitioner).
    pub keys: u32,
    pub value_bytes: u32,
    pub consumers: u32,
}

#[derive(Clone, Debug)]
pub struct Network {
    pub latency_min: Duration,
    pub latency_max: Duration,
}

/// A scripted fault: `action` at simulated time `at`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub at: Duration,
    pub action: FaultAction,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FaultAction {
    Kill(Target),
    Shutdown(Target),
    PowerLoss(Target),
    Restart(Target),
    Partition(Vec<Target>),
    Isolate(Target),
    Heal,
    SlowLink {
        between: (Target, Target),
        latency: Duration,
    },
    SlowDisk {
        target: Target,
        latency: Duration,
    },
    HealDisk(Target),
    FsyncError(Target),
    DiskFull(Target),
    Corrupt {
        target: Target,
        file: String,
        bytes: u64,
    },
}

/// A fault target; leader and follower targets are resolved when the fault fires.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Host(HostName),
    List(Vec<Target>),
    Brokers,
    Crashed,
    Leader(TopicPartition),
    Follower(TopicPartition),
    Followers(TopicPartition),
    RandomBroker,
}

/// `[nemesis]`: random faults from a seeded stream.
#[derive(Clone, Debug, PartialEq)]
pub struct Nemesis {
    /// Fault actions to draw from (scenario action names: `kill`, `power-loss`, ...).
    pub actions: Vec<NemesisAction>,
    /// Mean time between faults.
    pub interval: Duration,
    /// Mean time until each fault is undone.
    pub recover: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NemesisAction {
    Kill,
    PowerLoss,
    Shutdown,
    Partition,
    Isolate,
    SlowLink,
    SlowDisk,
    FsyncError,
    DiskFull,
}

impl std::fmt::Display for Target {
    /// As written in a scenario file.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Host(host) => write!(f, "{host}"),
            Target::List(targets) => {
                let names: Vec<String> = targets.iter().map(ToString::to_string).collect();
                write!(f, "[{}]", names.join(", "))
            }
            Target::Brokers => f.write_str("brokers"),
            Target::Crashed => f.write_str("crashed"),
            Target::Leader(tp) => write!(f, "leader:{tp}"),
            Target::Follower(tp) => write!(f, "follower:{tp}"),
            Target::Followers(tp) => write!(f, "followers:{tp}"),
            Target::RandomBroker => f.write_str("random-broker"),
        }
    }
}
