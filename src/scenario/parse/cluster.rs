//! `[cluster]`: the broker count and the topics, with Kafka's rules for topic names.

use super::misplaced::{unknown_key, Naming};
use super::sections::config_entries;
use super::{keys, table, TOPIC_CONFIG};
use crate::config::kafka::{Release, TopicConfig};
use crate::scenario::model::{Cluster, SystemName, Topic};
use crate::scenario::node::{Entry, Node, Value};
use crate::scenario::{suggest, Error};
use std::ops::Range;

struct TopicSpans {
    name: Range<usize>,
    replication_factor: Range<usize>,
}

pub(super) const CLUSTER_KEYS: &[&str] = &["brokers", "topics", "kafka"];
pub(super) const TOPIC_KEYS: &[&str] = &["name", "partitions", "replication_factor", "config"];
/// Partitions per topic a scenario may ask for: bounded so a typo cannot exhaust memory.
const MAX_PARTITIONS: i64 = 10_000;

pub(super) fn read_cluster(entry: &Entry) -> Result<Cluster, Error> {
    let entries = table("cluster", &entry.value)?;
    let mut brokers = None;
    let mut topics_node = None;
    let mut kafka = Release::NEWEST;
    for e in entries {
        match e.key.as_str() {
            "kafka" => kafka = read_release(&e.value)?,
            "brokers" => {
                brokers = Some(keys::integer_in("brokers", &e.value, 1, keys::MAX_HOSTS)? as u32)
            }
            "topics" => topics_node = Some(&e.value),
            other => return Err(unknown_key(other, &e.key_span, "[cluster]", CLUSTER_KEYS)),
        }
    }
    let brokers = brokers.ok_or_else(|| {
        Error::at(
            &entry.key_span,
            "missing `brokers` in [cluster] (e.g. brokers = 3)".to_owned(),
        )
    })?;
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
    for item in items {
        let (topic, spans) = read_topic(item)?;
        if topics.iter().any(|t| t.name == topic.name) {
            return Err(Error::at(
                &spans.name,
                format!("topic `{}` is declared twice", topic.name),
            ));
        }
        if topic.replication_factor > brokers {
            return Err(Error::at(
                &spans.replication_factor,
                format!(
                    "replication factor {} of topic `{}` is above the broker count ({brokers})",
                    topic.replication_factor, topic.name
                ),
            ));
        }
        topics.push(topic);
    }
    Ok(Cluster {
        system: SystemName::Kafka,
        brokers,
        topics,
        kafka,
        rocketmq: crate::config::rocketmq::Release::NEWEST,
        groups: 1,
        replicas: 1,
    })
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

fn read_topic(node: &Node) -> Result<(Topic, TopicSpans), Error> {
    let entries = table("a topic", node)?;
    let mut name = None;
    let mut partitions = 1;
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
            "config" => {
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
    };
    Ok((
        Topic {
            name,
            partitions,
            replication_factor,
            queues: partitions,
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
