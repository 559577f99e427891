//! `[cluster]`: the system, the brokers (Kafka's count, RocketMQ's groups) and the
//! topics, with Kafka's rules for topic names; and what a variant, a sweep or `--set` may
//! set of it (`cluster.system`, `cluster.kafka`, `cluster.rocketmq`).

use super::misplaced::{unknown_key, Naming};
use super::sections::config_entries;
use super::{keys, table, TOPIC_CONFIG};
use crate::config::kafka::{Release, TopicConfig};
use crate::config::rocketmq;
use crate::scenario::model::{Cluster, SystemName, Topic};
use crate::scenario::node::{Entry, Node, Value};
use crate::scenario::{suggest, Error};
use crate::types::MAX_BROKER_GROUPS;
use std::ops::Range;

pub(super) const CLUSTER_KEYS: &[&str] = &[
    "brokers", "topics", "kafka", "system", "rocketmq", "groups", "replicas",
];
pub(super) const TOPIC_KEYS: &[&str] = &[
    "name",
    "partitions",
    "replication_factor",
    "queues",
    "config",
];
/// Partitions per topic a scenario may ask for: bounded so a typo cannot exhaust memory.
const MAX_PARTITIONS: i64 = 10_000;
/// RocketMQ queues per topic and broker group: bounded so a typo cannot exhaust memory.
const MAX_QUEUES: i64 = 1024;

/// `[cluster]` as read, before a run's system is known: a variant may switch it, and each
/// system needs its own keys (Kafka `brokers`) and refuses the other's (a topic's Kafka
/// `config` in a RocketMQ run). The spans are where those errors point.
pub(super) struct ClusterDoc {
    cluster: Cluster,
    /// The `[cluster]` header.
    span: Range<usize>,
    has_brokers: bool,
    /// Each topic's `replication_factor` (the topic's own span where it has none).
    replication_factors: Vec<Range<usize>>,
    /// The `config` of the first topic with one, which only Kafka reads.
    topic_config: Option<Range<usize>>,
}

pub(super) fn read_cluster(entry: &Entry) -> Result<ClusterDoc, Error> {
    let entries = table("cluster", &entry.value)?;
    let mut brokers = None;
    let mut topics_node = None;
    let mut kafka = Release::NEWEST;
    let mut system = SystemName::Kafka;
    let mut rocketmq = rocketmq::Release::NEWEST;
    let mut groups = 1;
    for e in entries {
        match e.key.as_str() {
            "kafka" => kafka = read_release(&e.value)?,
            "system" => system = read_system(&e.value)?,
            "rocketmq" => rocketmq = read_rocketmq_release(&e.value)?,
            "brokers" => {
                brokers = Some(keys::integer_in("brokers", &e.value, 1, keys::MAX_HOSTS)? as u32)
            }
            "groups" => {
                groups =
                    keys::integer_in("groups", &e.value, 1, i64::from(MAX_BROKER_GROUPS))? as u32
            }
            "replicas" => {
                let replicas = keys::integer_in("replicas", &e.value, 1, keys::MAX_HOSTS)?;
                if replicas != 1 {
                    return Err(Error::at(
                        &e.value.span,
                        format!(
                            "`replicas` = {replicas}: RocketMQ's master/slave replication is not \
                             modelled yet; each broker group is one master (replicas = 1)"
                        ),
                    ));
                }
            }
            "topics" => topics_node = Some(&e.value),
            other => return Err(unknown_key(other, &e.key_span, "[cluster]", CLUSTER_KEYS)),
        }
    }
    let topics_node = topics_node.ok_or_else(|| {
        Error::at(
            &entry.key_span,
            "missing `topics` in [cluster] (e.g. topics = [{ name = \"orders\", partitions = 1, replication_factor = 3 }])"
                .to_owned(),
        )
    })?;
    let Value::Array(items) = &topics_node.value else {
        return Err(keys::wrong_type(
            "topics",
            "an array of topic tables",
            topics_node,
        ));
    };
    if items.is_empty() {
        return Err(Error::at(
            &topics_node.span,
            "`topics` is empty: the workload needs a topic".to_owned(),
        ));
    }
    let mut topics: Vec<Topic> = Vec::with_capacity(items.len());
    let mut replication_factors = Vec::with_capacity(items.len());
    let mut topic_config = None;
    for item in items {
        let (topic, spans) = read_topic(item)?;
        if topics.iter().any(|t| t.name == topic.name) {
            return Err(Error::at(
                &spans.name,
                format!("topic `{}` is declared twice", topic.name),
            ));
        }
        topic_config = topic_config.or(spans.config);
        replication_factors.push(spans.replication_factor);
        topics.push(topic);
    }
    Ok(ClusterDoc {
        cluster: Cluster {
            system,
            brokers: brokers.unwrap_or(0),
            topics,
            kafka,
            rocketmq,
            groups,
            replicas: 1,
        },
        span: entry.key_span.clone(),
        has_brokers: brokers.is_some(),
        replication_factors,
        topic_config,
    })
}

impl ClusterDoc {
    /// The cluster of one run (`run` as its errors name it), with what the run sets of
    /// `[cluster]`, checked against the system it runs: Kafka needs `brokers` and
    /// replication factors within them; RocketMQ ignores `brokers` and refuses a topic's
    /// Kafka `config`.
    pub(super) fn resolve(&self, set: &ClusterSet, run: &str) -> Result<Cluster, Error> {
        let mut cluster = self.cluster.clone();
        cluster.system = set.system.unwrap_or(cluster.system);
        cluster.kafka = set.kafka.unwrap_or(cluster.kafka);
        cluster.rocketmq = set.rocketmq.unwrap_or(cluster.rocketmq);
        if cluster.system == SystemName::RocketMq {
            if let Some(span) = &self.topic_config {
                return Err(Error::at(
                    span,
                    format!(
                        "a topic's `config` is Kafka's, and {run} runs RocketMQ: RocketMQ's \
                         settings are in [rocketmq]"
                    ),
                ));
            }
            return Ok(cluster);
        }
        if !self.has_brokers {
            let why = if self.cluster.system == SystemName::Kafka {
                String::new()
            } else {
                format!(": {run} runs Kafka")
            };
            return Err(Error::at(
                &self.span,
                format!("missing `brokers` in [cluster] (e.g. brokers = 3){why}"),
            ));
        }
        let brokers = cluster.brokers;
        for (topic, span) in cluster.topics.iter().zip(&self.replication_factors) {
            if topic.replication_factor > brokers {
                return Err(Error::at(
                    span,
                    format!(
                        "replication factor {} of topic `{}` is above the broker count ({brokers})",
                        topic.replication_factor, topic.name
                    ),
                ));
            }
        }
        Ok(cluster)
    }
}

/// What a variant, a point of a sweep or `--set` sets of `[cluster]`.
#[derive(Clone, Default)]
pub(super) struct ClusterSet {
    pub(super) system: Option<SystemName>,
    pub(super) kafka: Option<Release>,
    pub(super) rocketmq: Option<rocketmq::Release>,
}

/// The paths of [`ClusterSet`], as a variant writes them.
pub(super) const CLUSTER_PATHS: [&str; 3] = ["cluster.kafka", "cluster.system", "cluster.rocketmq"];

impl ClusterSet {
    /// Read `value` into what `path` sets: false if `path` is not one of [`CLUSTER_PATHS`].
    pub(super) fn read(&mut self, path: &str, value: &Node) -> Result<bool, Error> {
        match path {
            "cluster.system" => self.system = Some(read_system(value)?),
            "cluster.kafka" => self.kafka = Some(read_release(value)?),
            "cluster.rocketmq" => self.rocketmq = Some(read_rocketmq_release(value)?),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether it sets `path`.
    pub(super) fn sets(&self, path: &str) -> bool {
        match path {
            "cluster.system" => self.system.is_some(),
            "cluster.kafka" => self.kafka.is_some(),
            "cluster.rocketmq" => self.rocketmq.is_some(),
            _ => false,
        }
    }

    /// These settings over `under`'s: what this one leaves unset, `under` sets.
    pub(super) fn over(&self, under: &ClusterSet) -> ClusterSet {
        ClusterSet {
            system: self.system.or(under.system),
            kafka: self.kafka.or(under.kafka),
            rocketmq: self.rocketmq.or(under.rocketmq),
        }
    }
}

/// `system = "kafka"` or `"rocketmq"`.
fn read_system(node: &Node) -> Result<SystemName, Error> {
    let names = SystemName::ALL.map(SystemName::name);
    Ok(SystemName::ALL[keys::choice("system", node, &names)?])
}

/// `rocketmq = "5.3.3"`: a release hightide models, named in full. A TOML float
/// (`rocketmq = 5.3`) is refused like `kafka`'s: a RocketMQ release has three parts.
fn read_rocketmq_release(node: &Node) -> Result<rocketmq::Release, Error> {
    match &node.value {
        Value::String(text) => {
            rocketmq::Release::parse(text).map_err(|m| Error::at(&node.span, m))
        }
        Value::Float(value) => Err(Error::at(
            &node.span,
            format!(
                "`rocketmq` must be a string naming a release in full, like \"5.3.3\", found the number {value}"
            ),
        )),
        _ => Err(keys::wrong_type(
            "rocketmq",
            "a release string like \"5.3.3\"",
            node,
        )),
    }
}

/// `kafka = "3.9"`: a release hightide models. A TOML float (`kafka = 3.9`) is refused
/// with its fix, since floats cannot tell 2.1 from 2.10.
pub(super) fn read_release(node: &Node) -> Result<Release, Error> {
    match &node.value {
        Value::String(text) => Release::parse(text).map_err(|m| Error::at(&node.span, m)),
        Value::Float(value) => Err(Error::at(
            &node.span,
            format!(
                "`kafka` must be a string, like \"{value}\": a number cannot tell 2.1 from 2.10"
            ),
        )),
        _ => Err(keys::wrong_type(
            "kafka",
            "a release string like \"3.9\"",
            node,
        )),
    }
}

struct TopicSpans {
    name: Range<usize>,
    replication_factor: Range<usize>,
    config: Option<Range<usize>>,
}

fn read_topic(node: &Node) -> Result<(Topic, TopicSpans), Error> {
    let entries = table("a topic", node)?;
    let mut name = None;
    let mut partitions = 1;
    let mut queues = None;
    let mut config_span = None;
    let mut replication_factor = 1;
    let mut rf_span = node.span.clone();
    let mut config = TopicConfig::default();
    for e in entries {
        match e.key.as_str() {
            "name" => {
                let text = keys::string("name", &e.value)?;
                check_topic_name(text).map_err(|m| Error::at(&e.value.span, m))?;
                name = Some((text.to_owned(), e.value.span.clone()));
            }
            "partitions" => {
                partitions = keys::integer_in("partitions", &e.value, 1, MAX_PARTITIONS)? as u32
            }
            "replication_factor" => {
                replication_factor =
                    keys::integer_in("replication_factor", &e.value, 1, keys::MAX_HOSTS)? as u32;
                rf_span = e.value.span.clone();
            }
            "queues" => queues = Some(keys::integer_in("queues", &e.value, 1, MAX_QUEUES)? as u32),
            "config" => {
                config_span = Some(e.key_span.clone());
                let valid = keys::kafka::TOPIC.names();
                for (key, entry) in config_entries(
                    table("config", &e.value)?,
                    &valid,
                    TOPIC_CONFIG,
                    Naming::Key,
                )? {
                    if let Some(found) = keys::kafka::TOPIC.find(&key) {
                        found.apply(&mut config, &entry.value)?;
                    }
                }
            }
            other => {
                return Err(unknown_key(
                    other,
                    &e.key_span,
                    "a topic of [cluster]",
                    TOPIC_KEYS,
                ))
            }
        }
    }
    let (name, name_span) =
        name.ok_or_else(|| Error::at(&node.span, "a topic needs a `name`".to_owned()))?;
    let spans = TopicSpans {
        name: name_span,
        replication_factor: rf_span,
        config: config_span,
    };
    Ok((
        Topic {
            name,
            partitions,
            replication_factor,
            // One topic table serves both systems: RocketMQ's queues default to Kafka's
            // partitions.
            queues,
            config,
        },
        spans,
    ))
}

/// Kafka's rule for topic names: 1 to 249 of `[a-zA-Z0-9._-]`, not `.` or `..`.
fn check_topic_name(name: &str) -> Result<(), String> {
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if name.is_empty() || name.len() > 249 || !valid_chars || name == "." || name == ".." {
        return Err(format!(
            "invalid topic name `{name}`: Kafka topic names are 1 to 249 of the characters a-z, A-Z, 0-9, '.', '_', '-'"
        ));
    }
    Ok(())
}

/// An unknown topic named in a target or `[workload]`, with the nearest known name.
pub(super) fn unknown_topic(topic: &str, names: &[&str]) -> String {
    match suggest(topic, names) {
        Some(near) => format!("unknown topic `{topic}`; did you mean `{near}`?"),
        None => format!(
            "unknown topic `{topic}`; the topics of [cluster] are: {}",
            names.join(", ")
        ),
    }
}
