//! A parsed, validated scenario: plain data the runner executes. Every variant carries
//! its fully resolved settings, so the runner never looks at TOML.

use crate::check::{self, Expectation};
use crate::config::bugs::Bugs;
use crate::config::kafka::{
    Acks, BrokerConfig, ConsumerConfig, ProducerConfig, Release, TopicConfig,
};
use crate::config::rocketmq::{self, RocketMqConfig};
use crate::config::Modelled;
use crate::os::disk::{DiskConfig, Filesystem};
use crate::types::{HostName, TopicPartition};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
    /// The file's text, from which `scenario::write` writes one variant back.
    pub source: String,
    pub seeds: Vec<u64>,
    /// The seeds `cargo test` runs (`test_seeds`): a subset of `seeds` chosen for coverage
    /// per second, or all of them.
    pub test_seeds: Vec<u64>,
    /// At least one; a scenario without `[variants]` has one, named after the file.
    pub variants: Vec<Variant>,
    /// What loading it warns of, by variant: each `--set` that replaces a variant's own
    /// setting.
    pub warnings: Vec<(String, String)>,
}

#[derive(Clone, Debug)]
pub struct Variant {
    pub name: String,
    pub settings: Settings,
    /// What the file expects of every seed, plus the default zeros it did not replace.
    pub expect: Vec<Expectation>,
    pub expect_some: Vec<Expectation>,
}

impl Variant {
    pub fn new(
        name: String,
        settings: Settings,
        expect: Vec<Expectation>,
        expect_some: Vec<Expectation>,
    ) -> Variant {
        Variant {
            name,
            settings,
            expect: check::with_defaults(expect, &expect_some),
            expect_some,
        }
    }
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
    /// `[rocketmq]`: RocketMQ's keys, for a run whose `cluster.system` is RocketMQ.
    pub rocketmq: RocketMqConfig,
    pub disk: DiskConfig,
    pub network: Network,
    pub faults: Vec<Fault>,
    pub nemesis: Option<Nemesis>,
    /// Injected bugs, for the checkers' mutation tests only: no file sets them.
    pub bugs: Bugs,
}

impl Settings {
    /// Whether the run has transactions: transactional producers, or exactly-once
    /// processors.
    pub fn transactional(&self) -> bool {
        self.producer.transactional_id.is_some() || self.workload.commit == Commit::Transactional
    }

    /// Why this configuration can never acknowledge a write, if it cannot: acks=all with
    /// the workload topic's `min.insync.replicas` above its replication factor, so every
    /// produce fails with NOT_ENOUGH_REPLICAS (Kafka accepts the configuration).
    pub fn never_acknowledges(&self) -> Option<String> {
        if self.producer.acks != Acks::All {
            return None;
        }
        let topic = self
            .cluster
            .topics
            .iter()
            .find(|t| t.name == self.workload.topic)?;
        let min_isr = topic
            .config
            .min_insync_replicas
            .unwrap_or(self.broker.min_insync_replicas);
        (min_isr > topic.replication_factor).then(|| {
            format!(
                "acks=all with min.insync.replicas {min_isr} above the replication factor {} of `{}`: every produce fails with NOT_ENOUGH_REPLICAS, nothing is ever acknowledged",
                topic.replication_factor, topic.name
            )
        })
    }

    /// Why `[disk] power_loss` does nothing here, if it does not: ext4's journal commits a
    /// size only after the pages under it, so every model keeps what the commits named.
    /// Only a model other than the default can be told apart from the key left unset.
    pub fn ignored_power_loss(&self) -> Option<String> {
        let disk = &self.disk;
        (disk.filesystem == Filesystem::Ext4Ordered
            && disk.power_loss != DiskConfig::default().power_loss)
            .then(|| {
                format!(
                    "power_loss = \"{}\" changes nothing under filesystem = \"{}\": a power loss keeps what the journal's commits named (set filesystem = \"{}\" for the power-loss models)",
                    disk.power_loss.name(),
                    disk.filesystem.name(),
                    Filesystem::NoMetadataWriteback.name()
                )
            })
    }
}

/// The broker system a run models (`[cluster] system`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum SystemName {
    #[default]
    Kafka,
    RocketMq,
}

impl SystemName {
    pub const ALL: [SystemName; 2] = [SystemName::Kafka, SystemName::RocketMq];

    /// As a scenario file writes it.
    pub const fn name(self) -> &'static str {
        match self {
            SystemName::Kafka => "kafka",
            SystemName::RocketMq => "rocketmq",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Cluster {
    pub system: SystemName,
    /// Kafka's brokers, `broker-1` to `broker-N`.
    pub brokers: u32,
    pub topics: Vec<Topic>,
    /// The Kafka release whose rules and defaults apply (`kafka = "3.9"`).
    pub kafka: Release,
    /// The RocketMQ release whose rules and defaults apply (`rocketmq = "5.3.3"`).
    pub rocketmq: rocketmq::Release,
    /// RocketMQ's broker groups, `broker-a`, `broker-b`, ...
    pub groups: u32,
    /// Hosts per RocketMQ broker group: its master `broker-a-0`, then its slaves.
    pub replicas: u32,
}

impl Cluster {
    /// The system and release the cluster runs.
    pub fn modelled(&self) -> Modelled {
        match self.system {
            SystemName::Kafka => Modelled::Kafka(self.kafka),
            SystemName::RocketMq => Modelled::RocketMq(self.rocketmq),
        }
    }

    /// The broker hosts of the run's system, in order: what `brokers` and
    /// `random-broker` pick from.
    pub fn broker_hosts(&self) -> Vec<HostName> {
        match self.system {
            SystemName::Kafka => (1..=self.brokers).map(HostName::Broker).collect(),
            SystemName::RocketMq => (0..self.groups)
                .flat_map(|group| {
                    (0..self.replicas).map(move |id| HostName::GroupBroker { group, id })
                })
                .collect(),
        }
    }

    /// The host that keeps the cluster's metadata: Kafka's controller, RocketMQ's
    /// NameServer.
    pub fn metadata_host(&self) -> HostName {
        match self.system {
            SystemName::Kafka => HostName::Controller,
            SystemName::RocketMq => HostName::NameServer,
        }
    }

    /// The topics' names, in file order, for messages that list them.
    pub fn topic_names(&self) -> Vec<&str> {
        self.topics.iter().map(|t| t.name.as_str()).collect()
    }
}

impl Topic {
    /// The topic's queues on each broker group; the topic's queues are numbered across
    /// groups, broker-a's first.
    pub fn queues(&self) -> u32 {
        self.queues.unwrap_or(self.partitions)
    }
}

#[derive(Clone, Debug)]
pub struct Topic {
    pub name: String,
    /// Kafka's partitions of the topic.
    pub partitions: u32,
    pub replication_factor: u32,
    /// RocketMQ's queues of the topic on each broker group (its `writeQueueNums` and
    /// `readQueueNums`), as the file gives them; unset, as many as `partitions`. Read
    /// through [`Topic::queues`].
    pub queues: Option<u32>,
    pub config: TopicConfig,
}

#[derive(Clone, Debug)]
pub struct Workload {
    pub producers: u32,
    pub topic: String,
    /// Sends per simulated second, per producer: a mean, the instants drawn by `arrivals`.
    pub rate: u32,
    pub arrivals: Arrivals,
    pub on_error: OnError,
    /// Stop after this many sends in all; `None`: send until `duration`.
    pub messages: Option<u64>,
    /// Distinct keys; 0 = null keys (sticky partitioner).
    pub keys: u32,
    pub value_bytes: u32,
    pub consumers: u32,
    /// With a group, the consumers join it (`group.id`), share its partitions and
    /// commit offsets; without, each reads every partition and commits nothing.
    pub group: Option<String>,
    pub commit: Commit,
    /// Simulated work per record, between the poll that returned it and the commit.
    pub processing: Duration,
    /// A transactional producer's sends per transaction: it begins one before its first
    /// send and commits after the last (or when sending stops).
    pub transaction_messages: u32,
    /// The topic the group's members write one output to per record they process, which
    /// makes them stream processors; `None`: they only process.
    pub output: Option<String>,
}

pub use crate::config::kafka::Commit;
pub use crate::config::workload::{Arrivals, OnError};

#[derive(Clone, Debug)]
pub struct Network {
    pub latency_min: Duration,
    pub latency_max: Duration,
    /// Bytes per second every link carries each way; `None` carries any amount at once.
    pub bandwidth: Option<u64>,
}

/// A scripted fault: `action` at simulated time `at`, or, with a `jitter`, at an instant
/// the seed draws within `at ± jitter`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    pub at: Duration,
    pub jitter: Duration,
    pub action: FaultAction,
}

#[derive(Clone, Debug, PartialEq)]
pub enum FaultAction {
    Kill(Target),
    Shutdown(Target),
    PowerLoss(Target),
    Restart(Target),
    /// The process stops (SIGSTOP, a long GC pause) until `resume`: it runs nothing and
    /// answers nothing, its timers stand still, what arrives for it waits.
    Pause(Target),
    Resume(Target),
    Partition(Vec<Target>),
    Isolate(Target),
    Heal,
    /// Links whose messages take `latency` longer, and carry at most `bandwidth` bytes a
    /// second each way if given.
    SlowLink {
        between: (Target, Target),
        latency: Duration,
        bandwidth: Option<u64>,
    },
    /// A disk whose writes and fsyncs take `latency` longer, and whose device writes at
    /// most `throughput` bytes a second if given.
    SlowDisk {
        target: Target,
        latency: Duration,
        throughput: Option<u64>,
    },
    HealDisk(Target),
    FsyncError(Target),
    DiskFull(Target),
    Corrupt {
        target: Target,
        file: String,
        bytes: u64,
        region: CorruptRegion,
    },
}

/// A `corrupt` fault's `region`: where in the file its bytes rot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CorruptRegion {
    /// The last `bytes` durable bytes. A log's tail ends in a record's last byte, so a
    /// reader finds a record it cannot parse there, CRC or not.
    Tail,
    /// `bytes` contiguous durable bytes from a seeded position: most land inside a
    /// record's value, which only the batch CRC tells from a good one.
    Anywhere,
}

impl CorruptRegion {
    pub const ALL: [CorruptRegion; 2] = [CorruptRegion::Tail, CorruptRegion::Anywhere];

    /// As a scenario file writes it.
    pub const fn name(self) -> &'static str {
        match self {
            CorruptRegion::Tail => "tail",
            CorruptRegion::Anywhere => "anywhere",
        }
    }
}

/// The one table of fault actions: a row per action with its name in a scenario file, the
/// fields it takes besides `at` and `action` (then those it may take), and whether it acts
/// on a disk (so only hosts with one qualify). The parser, the nemesis and the timeline
/// read their names here.
macro_rules! fault_kinds {
    ($($kind:ident: $name:literal, [$($field:literal),*] $(or [$($optional:literal),*])?, disk: $disk:literal;)*) => {
        /// A fault action without its arguments.
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum FaultKind {
            $($kind,)*
        }

        impl FaultKind {
            /// Every action, in the order errors list them.
            pub const ALL: &'static [FaultKind] = &[$(FaultKind::$kind,)*];

            /// As written in a scenario file: `power-loss`.
            pub fn name(self) -> &'static str {
                match self {
                    $(FaultKind::$kind => $name,)*
                }
            }

            /// The fields it takes besides `at` and `action`, all required.
            pub fn fields(self) -> &'static [&'static str] {
                match self {
                    $(FaultKind::$kind => &[$($field),*],)*
                }
            }

            /// The fields it may take as well, each with a default.
            pub fn optional_fields(self) -> &'static [&'static str] {
                match self {
                    $(FaultKind::$kind => &[$($($optional),*)?],)*
                }
            }

            pub fn on_disk(self) -> bool {
                match self {
                    $(FaultKind::$kind => $disk,)*
                }
            }
        }
    };
}

fault_kinds! {
    Kill: "kill", ["target"], disk: false;
    Shutdown: "shutdown", ["target"], disk: false;
    PowerLoss: "power-loss", ["target"], disk: false;
    Restart: "restart", ["target"], disk: false;
    Pause: "pause", ["target"], disk: false;
    Resume: "resume", ["target"], disk: false;
    Partition: "partition", ["groups"], disk: false;
    Isolate: "isolate", ["target"], disk: false;
    Heal: "heal", [], disk: false;
    SlowLink: "slow-link", ["between"] or ["latency", "bandwidth"], disk: false;
    SlowDisk: "slow-disk", ["target"] or ["latency", "throughput"], disk: true;
    HealDisk: "heal-disk", ["target"], disk: true;
    FsyncError: "fsync-error", ["target"], disk: true;
    DiskFull: "disk-full", ["target"], disk: true;
    Corrupt: "corrupt", ["target", "file", "bytes"] or ["region"], disk: true;
}

impl FaultAction {
    pub fn kind(&self) -> FaultKind {
        match self {
            FaultAction::Kill(_) => FaultKind::Kill,
            FaultAction::Shutdown(_) => FaultKind::Shutdown,
            FaultAction::PowerLoss(_) => FaultKind::PowerLoss,
            FaultAction::Restart(_) => FaultKind::Restart,
            FaultAction::Pause(_) => FaultKind::Pause,
            FaultAction::Resume(_) => FaultKind::Resume,
            FaultAction::Partition(_) => FaultKind::Partition,
            FaultAction::Isolate(_) => FaultKind::Isolate,
            FaultAction::Heal => FaultKind::Heal,
            FaultAction::SlowLink { .. } => FaultKind::SlowLink,
            FaultAction::SlowDisk { .. } => FaultKind::SlowDisk,
            FaultAction::HealDisk(_) => FaultKind::HealDisk,
            FaultAction::FsyncError(_) => FaultKind::FsyncError,
            FaultAction::DiskFull(_) => FaultKind::DiskFull,
            FaultAction::Corrupt { .. } => FaultKind::Corrupt,
        }
    }
}

impl FaultAction {
    /// The action's `target` field, for the actions that have one.
    pub fn target(&self) -> Option<&Target> {
        match self {
            FaultAction::Kill(target)
            | FaultAction::Shutdown(target)
            | FaultAction::PowerLoss(target)
            | FaultAction::Restart(target)
            | FaultAction::Pause(target)
            | FaultAction::Resume(target)
            | FaultAction::Isolate(target)
            | FaultAction::HealDisk(target)
            | FaultAction::FsyncError(target)
            | FaultAction::DiskFull(target)
            | FaultAction::SlowDisk { target, .. }
            | FaultAction::Corrupt { target, .. } => Some(target),
            FaultAction::Partition(_) | FaultAction::Heal | FaultAction::SlowLink { .. } => None,
        }
    }

    /// Every target expression it holds: its `target`, each group, both ends of a link.
    pub fn targets(&self) -> Vec<&Target> {
        match self {
            FaultAction::Partition(groups) => groups.iter().collect(),
            FaultAction::SlowLink { between, .. } => vec![&between.0, &between.1],
            other => other.target().into_iter().collect(),
        }
    }

    /// [`FaultAction::targets`], to edit: the shrinker narrows lists through it.
    pub fn targets_mut(&mut self) -> Vec<&mut Target> {
        match self {
            FaultAction::Kill(target)
            | FaultAction::Shutdown(target)
            | FaultAction::PowerLoss(target)
            | FaultAction::Restart(target)
            | FaultAction::Pause(target)
            | FaultAction::Resume(target)
            | FaultAction::Isolate(target)
            | FaultAction::HealDisk(target)
            | FaultAction::FsyncError(target)
            | FaultAction::DiskFull(target)
            | FaultAction::SlowDisk { target, .. }
            | FaultAction::Corrupt { target, .. } => vec![target],
            FaultAction::Partition(groups) => groups.iter_mut().collect(),
            FaultAction::SlowLink { between, .. } => vec![&mut between.0, &mut between.1],
            FaultAction::Heal => Vec::new(),
        }
    }
}

/// The latency a `slow-link` or `slow-disk` adds: the one it names, or, when it names no
/// rate in bytes per second, its latency whatever it is.
pub fn added_latency(latency: Duration, rate: Option<u64>) -> Option<Duration> {
    (rate.is_none() || !latency.is_zero()).then_some(latency)
}

/// ` +50ms at 1000000 B/s`: what a slowdown adds, as a fired fault reads.
fn write_slowdown(
    f: &mut std::fmt::Formatter<'_>,
    latency: Duration,
    rate: Option<u64>,
) -> std::fmt::Result {
    if let Some(latency) = added_latency(latency, rate) {
        write!(f, " +{}ms", latency.as_millis())?;
    }
    match rate {
        Some(bytes_per_second) => write!(f, " at {bytes_per_second} B/s"),
        None => Ok(()),
    }
}

impl std::fmt::Display for FaultAction {
    /// As a person would write it in a scenario file: `slow-link broker-1 <-> broker-2 +50ms`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.kind().name())?;
        match self {
            FaultAction::Kill(target)
            | FaultAction::Shutdown(target)
            | FaultAction::PowerLoss(target)
            | FaultAction::Restart(target)
            | FaultAction::Pause(target)
            | FaultAction::Resume(target)
            | FaultAction::Isolate(target)
            | FaultAction::HealDisk(target)
            | FaultAction::FsyncError(target)
            | FaultAction::DiskFull(target) => write!(f, " {target}"),
            FaultAction::Partition(groups) => {
                let groups: Vec<String> = groups.iter().map(ToString::to_string).collect();
                write!(f, " {}", groups.join(" | "))
            }
            FaultAction::Heal => Ok(()),
            FaultAction::SlowLink {
                between,
                latency,
                bandwidth,
            } => {
                write!(f, " {} <-> {}", between.0, between.1)?;
                write_slowdown(f, *latency, *bandwidth)
            }
            FaultAction::SlowDisk {
                target,
                latency,
                throughput,
            } => {
                write!(f, " {target}")?;
                write_slowdown(f, *latency, *throughput)
            }
            FaultAction::Corrupt {
                target,
                file,
                bytes,
                region,
            } => {
                write!(f, " {target} {file} {bytes}B")?;
                match region {
                    CorruptRegion::Tail => Ok(()),
                    CorruptRegion::Anywhere => write!(f, " anywhere"),
                }
            }
        }
    }
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
    /// The workload group's coordinator: the leader of its `__consumer_offsets` partition.
    Coordinator,
    /// producer-1's transaction coordinator: the leader of its transactional id's
    /// `__transaction_state` partition.
    TxnCoordinator,
    /// A RocketMQ broker group's master now (`master:broker-a`, group 0).
    Master(u32),
}

/// The forms of one target as a scenario file writes it (a target is one of them, or a
/// list of them): the parser reads targets by this table and its errors list it, so what
/// is documented is what is accepted.
#[derive(Clone, Debug)]
pub enum TargetForm {
    /// A fixed word (`brokers`) and the target it names.
    Word(&'static str, Target),
    /// A host numbered from 1: `broker` for `broker-1`, `broker-2`, ...
    Numbered(&'static str, fn(u32) -> HostName),
    /// A role in one partition, resolved when the fault fires: `leader` for
    /// `leader:orders/0`.
    Role(&'static str, fn(TopicPartition) -> Target),
    /// A host of a RocketMQ broker group, by the group's letter and the host's id from 0:
    /// `broker` for `broker-a-0`.
    GroupHost(&'static str, fn(u32, u32) -> HostName),
    /// A role in a RocketMQ broker group, resolved when the fault fires: `master` for
    /// `master:broker-a`.
    GroupRole(&'static str, fn(u32) -> Target),
}

impl TargetForm {
    /// Every form, in the order errors list them.
    pub const ALL: &'static [TargetForm] = &[
        TargetForm::Numbered("broker", HostName::Broker),
        TargetForm::Word("controller", Target::Host(HostName::Controller)),
        TargetForm::Numbered("producer", HostName::Producer),
        TargetForm::Numbered("consumer", HostName::Consumer),
        TargetForm::Word("brokers", Target::Brokers),
        TargetForm::Word("crashed", Target::Crashed),
        TargetForm::Word("random-broker", Target::RandomBroker),
        TargetForm::Word("coordinator", Target::Coordinator),
        TargetForm::Word("txn-coordinator", Target::TxnCoordinator),
        TargetForm::Role("leader", Target::Leader),
        TargetForm::Role("follower", Target::Follower),
        TargetForm::Role("followers", Target::Followers),
        TargetForm::GroupRole("master", Target::Master),
        TargetForm::GroupHost("broker", |group, id| HostName::GroupBroker { group, id }),
        TargetForm::Word("namesrv", Target::Host(HostName::NameServer)),
    ];

    /// As a person reads it: `broker-N`, `brokers`, `leader:<topic>/<partition>`,
    /// `broker-<letter>-<id>`, `master:broker-<letter>`.
    pub fn syntax(&self) -> String {
        match self {
            TargetForm::Word(word, _) => (*word).to_owned(),
            TargetForm::Numbered(prefix, _) => format!("{prefix}-N"),
            TargetForm::Role(role, _) => format!("{role}:<topic>/<partition>"),
            TargetForm::GroupHost(prefix, _) => format!("{prefix}-<letter>-<id>"),
            TargetForm::GroupRole(role, _) => format!("{role}:broker-<letter>"),
        }
    }
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

/// The fault actions the nemesis draws from, named after the fault actions they start
/// (the variant names must match `FaultKind`'s), in the order errors list them.
macro_rules! nemesis_actions {
    ($($kind:ident),* $(,)?) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum NemesisAction {
            $($kind,)*
        }

        impl NemesisAction {
            pub const ALL: &'static [NemesisAction] = &[$(NemesisAction::$kind,)*];

            /// The fault action it starts; its name is the action's.
            pub fn kind(self) -> FaultKind {
                match self {
                    $(NemesisAction::$kind => FaultKind::$kind,)*
                }
            }
        }
    };
}

nemesis_actions! {
    Kill,
    PowerLoss,
    Shutdown,
    Pause,
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
            Target::Coordinator => f.write_str("coordinator"),
            Target::TxnCoordinator => f.write_str("txn-coordinator"),
            Target::Master(group) => write!(f, "master:{}", crate::types::broker_name(*group)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_names_are_distinct_and_the_nemesis_uses_them() {
        let names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        let mut distinct = names.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), names.len());
        for action in NemesisAction::ALL {
            assert!(names.contains(&action.kind().name()), "{action:?}");
        }
    }

    #[test]
    fn a_fired_fault_reads_as_written() {
        let broker = |n| Target::Host(HostName::Broker(n));
        let cases = [
            (FaultAction::Kill(broker(1)), "kill broker-1"),
            (FaultAction::Heal, "heal"),
            (
                FaultAction::Partition(vec![broker(1), Target::List(vec![broker(2), broker(3)])]),
                "partition broker-1 | [broker-2, broker-3]",
            ),
            (
                FaultAction::SlowLink {
                    between: (broker(1), Target::Leader(TopicPartition::new("orders", 0))),
                    latency: Duration::from_millis(50),
                    bandwidth: None,
                },
                "slow-link broker-1 <-> leader:orders/0 +50ms",
            ),
            (
                FaultAction::SlowLink {
                    between: (broker(1), broker(2)),
                    latency: Duration::ZERO,
                    bandwidth: Some(1_000_000),
                },
                "slow-link broker-1 <-> broker-2 at 1000000 B/s",
            ),
            (
                FaultAction::Corrupt {
                    target: Target::Brokers,
                    file: "*.log".into(),
                    bytes: 4,
                    region: CorruptRegion::Tail,
                },
                "corrupt brokers *.log 4B",
            ),
            (
                FaultAction::Corrupt {
                    target: broker(1),
                    file: "orders-0/*.log".into(),
                    bytes: 1,
                    region: CorruptRegion::Anywhere,
                },
                "corrupt broker-1 orders-0/*.log 1B anywhere",
            ),
        ];
        for (action, text) in cases {
            assert_eq!(action.to_string(), text);
        }
    }
}
