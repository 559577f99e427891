//! The configuration sections (`[broker]`, `[producer]`, `[rocketmq]`, ...): their keys
//! read as assignments a variant can override, Kafka's dotted names joined back from
//! TOML's nested tables.

use super::keys::{self, Section};
use super::misplaced::Naming;
use crate::scenario::model::{Settings, SystemName};
use crate::scenario::node::{Entry, Node, Value};
use crate::scenario::Error;
use std::collections::BTreeSet;

/// The sections whose keys a variant may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Sec {
    Broker,
    Producer,
    Consumer,
    Workload,
    Disk,
    Network,
    RocketMq,
}

pub(super) const SECTIONS: [Sec; 7] = [
    Sec::Broker,
    Sec::Producer,
    Sec::Consumer,
    Sec::Workload,
    Sec::Disk,
    Sec::Network,
    Sec::RocketMq,
];

impl Sec {
    pub(super) fn name(self) -> &'static str {
        match self {
            Sec::Broker => keys::kafka::BROKER.name,
            Sec::Producer => keys::kafka::PRODUCER.name,
            Sec::Consumer => keys::kafka::CONSUMER.name,
            Sec::Workload => keys::WORKLOAD.name,
            Sec::Disk => keys::DISK.name,
            Sec::Network => keys::NETWORK.name,
            Sec::RocketMq => keys::rocketmq::ROCKETMQ.name,
        }
    }

    /// The system whose own section this is; `None` for the harness's, which every
    /// system shares.
    pub(super) fn system(self) -> Option<SystemName> {
        match self {
            Sec::Broker | Sec::Producer | Sec::Consumer => Some(SystemName::Kafka),
            Sec::RocketMq => Some(SystemName::RocketMq),
            Sec::Workload | Sec::Disk | Sec::Network => None,
        }
    }

    pub(super) fn from_name(name: &str) -> Option<Sec> {
        SECTIONS.into_iter().find(|sec| sec.name() == name)
    }

    /// `section.key` as the section and the key (`broker.min.insync.replicas`), if the
    /// path starts with a section a variant may change.
    pub(super) fn split_path(path: &str) -> Option<(Sec, &str)> {
        let (section, key) = path.split_once('.')?;
        Some((Sec::from_name(section)?, key))
    }

    pub(super) fn key_names(self) -> Vec<&'static str> {
        match self {
            Sec::Broker => keys::kafka::BROKER.names(),
            Sec::Producer => keys::kafka::PRODUCER.names(),
            Sec::Consumer => keys::kafka::CONSUMER.names(),
            Sec::Workload => keys::WORKLOAD.names(),
            Sec::Disk => keys::DISK.names(),
            Sec::Network => keys::NETWORK.names(),
            Sec::RocketMq => keys::rocketmq::ROCKETMQ.names(),
        }
    }

    pub(super) fn apply(
        self,
        settings: &mut Settings,
        key: &str,
        node: &Node,
    ) -> Result<(), Error> {
        fn set<T>(
            section: &Section<T>,
            target: &mut T,
            key: &str,
            node: &Node,
        ) -> Result<(), Error> {
            match section.find(key) {
                Some(found) => found.apply(target, node),
                None => Err(Error::at(
                    &node.span,
                    format!("unknown key `{key}` in [{}]", section.name),
                )),
            }
        }
        match self {
            Sec::Broker => set(&keys::kafka::BROKER, &mut settings.broker, key, node),
            Sec::Producer => set(&keys::kafka::PRODUCER, &mut settings.producer, key, node),
            Sec::Consumer => set(&keys::kafka::CONSUMER, &mut settings.consumer, key, node),
            Sec::Workload => set(&keys::WORKLOAD, &mut settings.workload, key, node),
            Sec::Disk => set(&keys::DISK, &mut settings.disk, key, node),
            Sec::Network => set(&keys::NETWORK, &mut settings.network, key, node),
            Sec::RocketMq => set(&keys::rocketmq::ROCKETMQ, &mut settings.rocketmq, key, node),
        }
    }
}

/// `key = value` of a configuration section, applied when a variant is resolved.
#[derive(Clone, Debug)]
pub(super) struct Assign {
    pub(super) sec: Sec,
    pub(super) key: String,
    pub(super) value: Node,
}

/// Walk a table, joining the implicit tables of unquoted dotted keys back into Kafka's
/// dotted names (`min.insync.replicas = 1` is three nested tables in TOML); a path stops
/// at the first valid key, or where no key of any table goes on.
fn flatten<'a>(
    entries: &'a [Entry],
    prefix: &str,
    valid: &[&str],
    naming: Naming,
    out: &mut Vec<(String, &'a Entry)>,
) {
    for entry in entries {
        let path = if prefix.is_empty() {
            entry.key.clone()
        } else {
            format!("{prefix}.{}", entry.key)
        };
        if !valid.contains(&path.as_str()) {
            if let Value::Table(inner) = &entry.value.value {
                if naming.continues(&path, valid) {
                    flatten(inner, &path, valid, naming, out);
                    continue;
                }
            }
        }
        out.push((path, entry));
    }
}

/// The keys of a table that sets configuration: each known, each once.
pub(super) fn config_entries<'a>(
    entries: &'a [Entry],
    valid: &[&str],
    context: &str,
    naming: Naming,
) -> Result<Vec<(String, &'a Entry)>, Error> {
    let mut flat = Vec::new();
    flatten(entries, "", valid, naming, &mut flat);
    let mut seen = BTreeSet::new();
    for (path, entry) in &flat {
        if !valid.contains(&path.as_str()) {
            return Err(naming.unknown(path, &entry.key_span, context, valid));
        }
        if !seen.insert(path.clone()) {
            return Err(Error::at(
                &entry.key_span,
                format!("`{path}` is set twice in {context}"),
            ));
        }
    }
    Ok(flat)
}

pub(super) fn read_section(sec: Sec, entries: &[Entry]) -> Result<Vec<Assign>, Error> {
    let valid = sec.key_names();
    let context = format!("[{}]", sec.name());
    Ok(config_entries(entries, &valid, &context, Naming::Key)?
        .into_iter()
        .map(|(key, entry)| Assign {
            sec,
            key,
            value: entry.value.clone(),
        })
        .collect())
}
