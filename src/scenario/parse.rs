//! From the spanned TOML tree to a validated `Scenario`.
//!
//! Two passes. The first reads the file into plain parts and rejects what is wrong on its
//! face (unknown keys, wrong types, malformed durations and targets). Configuration keys
//! are kept as assignments, not applied, because each variant applies the top-level ones
//! and then its own. The second pass resolves each variant's `Settings` from the defaults
//! and checks what depends on the whole (targets against the cluster, `at` against
//! `duration`, Kafka's cross-key producer rules).

use super::keys::{self, Section};
use super::model::{
    Cluster, Fault, FaultAction, Nemesis, NemesisAction, Scenario, Settings, Target, Topic, Variant,
};
use super::node::{self, Entry, Node, Value};
use super::values::{check_seed_list, parse_comparison, parse_seeds, seed_count};
use super::{suggest, unknown_key, Error};
use crate::check::{Comparison, Count, Expectation};
use crate::config::{Acks, ProducerConfig, TopicConfig};
use crate::types::{HostName, TopicPartition};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::Path;
use std::time::Duration;

const TOP_LEVEL: &[&str] = &[
    "name",
    "description",
    "seeds",
    "duration",
    "heal",
    "cluster",
    "broker",
    "producer",
    "consumer",
    "workload",
    "disk",
    "network",
    "faults",
    "fault_sets",
    "nemesis",
    "expect",
    "expect_some",
    "variants",
];

/// The sections whose keys a variant may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Sec {
    Broker,
    Producer,
    Consumer,
    Workload,
    Disk,
    Network,
}

const SECTIONS: [Sec; 6] = [
    Sec::Broker,
    Sec::Producer,
    Sec::Consumer,
    Sec::Workload,
    Sec::Disk,
    Sec::Network,
];

impl Sec {
    fn name(self) -> &'static str {
        match self {
            Sec::Broker => keys::BROKER.name,
            Sec::Producer => keys::PRODUCER.name,
            Sec::Consumer => keys::CONSUMER.name,
            Sec::Workload => keys::WORKLOAD.name,
            Sec::Disk => keys::DISK.name,
            Sec::Network => keys::NETWORK.name,
        }
    }

    fn from_name(name: &str) -> Option<Sec> {
        SECTIONS.into_iter().find(|sec| sec.name() == name)
    }

    fn key_names(self) -> Vec<&'static str> {
        match self {
            Sec::Broker => keys::BROKER.names(),
            Sec::Producer => keys::PRODUCER.names(),
            Sec::Consumer => keys::CONSUMER.names(),
            Sec::Workload => keys::WORKLOAD.names(),
            Sec::Disk => keys::DISK.names(),
            Sec::Network => keys::NETWORK.names(),
        }
    }

    fn apply(self, settings: &mut Settings, key: &str, node: &Node) -> Result<(), Error> {
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
            Sec::Broker => set(&keys::BROKER, &mut settings.broker, key, node),
            Sec::Producer => set(&keys::PRODUCER, &mut settings.producer, key, node),
            Sec::Consumer => set(&keys::CONSUMER, &mut settings.consumer, key, node),
            Sec::Workload => set(&keys::WORKLOAD, &mut settings.workload, key, node),
            Sec::Disk => set(&keys::DISK, &mut settings.disk, key, node),
            Sec::Network => set(&keys::NETWORK, &mut settings.network, key, node),
        }
    }
}

/// `key = value` of a configuration section, applied when a variant is resolved.
#[derive(Clone, Debug)]
struct Assign {
    sec: Sec,
    key: String,
    value: Node,
}

/// A fault as written, with the spans its checks need.
#[derive(Clone, Debug)]
struct ParsedFault {
    fault: Fault,
    at_span: Range<usize>,
    /// Every target expression it holds (list members one by one), with its span.
    targets: Vec<(Target, Range<usize>)>,
    /// Disk faults only apply to hosts with a disk.
    needs_disk: bool,
}

#[derive(Clone, Debug)]
enum FaultChoice {
    Script(Vec<ParsedFault>),
    Set { name: String, span: Range<usize> },
}

struct TopicSpans {
    name: Range<usize>,
    replication_factor: Range<usize>,
}

struct RawVariant {
    name: String,
    assigns: Vec<Assign>,
    faults: Option<FaultChoice>,
    expect: Vec<Expectation>,
    expect_some: Vec<Expectation>,
}

#[derive(Default)]
struct Doc {
    name: Option<String>,
    description: String,
    seeds: Option<Vec<u64>>,
    duration: Option<(Duration, Range<usize>)>,
    heal: Option<Duration>,
    cluster: Option<Cluster>,
    assigns: Vec<Assign>,
    faults: Option<FaultChoice>,
    fault_sets: BTreeMap<String, Vec<ParsedFault>>,
    nemesis: Option<Nemesis>,
    expect: Vec<Expectation>,
    expect_some: Vec<Expectation>,
    variants: Vec<RawVariant>,
}

pub(crate) fn scenario(text: &str, path: &Path) -> Result<Scenario, Error> {
    let (doc, base) = document(text)?;
    let stem = file_stem(path);
    let variants = if doc.variants.is_empty() {
        vec![Variant {
            name: stem.clone(),
            settings: base,
            expect: doc.expect.clone(),
            expect_some: doc.expect_some.clone(),
        }]
    } else {
        resolve_variants(&doc, &doc.variants)?
    };
    Ok(Scenario {
        name: doc.name.clone().unwrap_or(stem),
        description: doc.description.clone(),
        path: path.to_owned(),
        seeds: doc.seeds.clone().unwrap_or_else(|| vec![1]),
        variants,
    })
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "scenario".to_owned())
}

/// Read a scenario file and resolve its top-level settings (no variant applied), which
/// also checks every fault set.
fn document(text: &str) -> Result<(Doc, Settings), Error> {
    if text.trim().is_empty() {
        return Err(Error::nowhere(
            "the file is empty: a scenario needs at least `duration` and [cluster]".to_owned(),
        ));
    }
    let root = node::parse_document(text).map_err(|(span, message)| Error { span, message })?;
    if root.is_empty() {
        return Err(Error::nowhere(
            "the file holds only comments: a scenario needs at least `duration` and [cluster]"
                .to_owned(),
        ));
    }
    let doc = read_document(&root)?;
    let base = resolve(&doc, &[], doc.faults.as_ref())?;
    // Every fault set must be valid, used by a variant here or not: a sweep may pick it.
    for faults in doc.fault_sets.values() {
        check_faults(faults, &base)?;
    }
    Ok((doc, base))
}

fn resolve_variants(doc: &Doc, raws: &[RawVariant]) -> Result<Vec<Variant>, Error> {
    let mut variants = Vec::with_capacity(raws.len());
    for raw in raws {
        let faults = raw.faults.as_ref().or(doc.faults.as_ref());
        let settings = resolve(doc, &raw.assigns, faults)?;
        let mut expect = doc.expect.clone();
        expect.extend(raw.expect.iter().copied());
        let mut expect_some = doc.expect_some.clone();
        expect_some.extend(raw.expect_some.iter().copied());
        variants.push(Variant {
            name: raw.name.clone(),
            settings,
            expect,
            expect_some,
        });
    }
    Ok(variants)
}

/// A sweep matrix as written: its base file and the values each path takes.
pub(crate) struct Matrix {
    pub name: String,
    pub base: String,
    pub seeds: Option<Vec<u64>>,
    vary: Vec<(String, Vec<Node>)>,
    vary_span: Range<usize>,
}

const MATRIX_KEYS: &[&str] = &["name", "base", "seeds", "vary"];
/// Configurations one sweep may generate: bounded so a typo cannot exhaust memory.
const MAX_SWEEP_VARIANTS: usize = 10_000;

/// Read a sweep matrix file (`hightide sweep`).
pub(crate) fn matrix(text: &str) -> Result<Matrix, Error> {
    let root = node::parse_document(text).map_err(|(span, message)| Error { span, message })?;
    let mut name = None;
    let mut base = None;
    let mut seeds = None;
    let mut vary = Vec::new();
    let mut vary_span = 0..0;
    for entry in &root {
        match entry.key.as_str() {
            "name" => name = Some(keys::string("name", &entry.value)?.to_owned()),
            "base" => base = Some(keys::string("base", &entry.value)?.to_owned()),
            "seeds" => seeds = Some(read_seeds(&entry.value)?),
            "vary" => {
                vary_span = entry.key_span.clone();
                let valid = variant_paths(false);
                let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
                for (path, e) in config_entries(table("vary", &entry.value)?, &valid, "[vary]")? {
                    let Value::Array(values) = &e.value.value else {
                        return Err(keys::wrong_type(
                            &path,
                            "an array of the values to try",
                            &e.value,
                        ));
                    };
                    if values.is_empty() {
                        return Err(Error::at(
                            &e.value.span,
                            format!("`{path}` has no values to try"),
                        ));
                    }
                    vary.push((path, values.clone()));
                }
            }
            other => {
                return Err(unknown_key(
                    other,
                    &entry.key_span,
                    "the top level",
                    MATRIX_KEYS,
                ))
            }
        }
    }
    let missing = |key: &str| Error::nowhere(format!("missing `{key}` in the sweep matrix"));
    let size = vary
        .iter()
        .try_fold(1usize, |n, (_, values)| n.checked_mul(values.len()));
    if size.is_none_or(|n| n > MAX_SWEEP_VARIANTS) {
        return Err(Error::at(
            &vary_span,
            format!("[vary] makes more than {MAX_SWEEP_VARIANTS} configurations"),
        ));
    }
    Ok(Matrix {
        name: name.ok_or_else(|| missing("name"))?,
        base: base.ok_or_else(|| missing("base"))?,
        seeds,
        vary,
        vary_span,
    })
}

/// A sweep's base scenario, read and checked.
pub(crate) struct Base(Doc);

/// Parse the base scenario of a sweep: errors here are about the base file.
pub(crate) fn sweep_base(text: &str, path: &Path) -> Result<(Base, Scenario), Error> {
    let (doc, settings) = document(text)?;
    let scenario = Scenario {
        name: doc.name.clone().unwrap_or_else(|| file_stem(path)),
        description: doc.description.clone(),
        path: path.to_owned(),
        seeds: doc.seeds.clone().unwrap_or_else(|| vec![1]),
        variants: vec![Variant {
            name: file_stem(path),
            settings,
            expect: doc.expect.clone(),
            expect_some: doc.expect_some.clone(),
        }],
    };
    Ok((Base(doc), scenario))
}

/// The base scenario's variants replaced by the cross product of the matrix's `[vary]`
/// (the first path varies slowest). Errors here are about the matrix file.
pub(crate) fn sweep_variants(base: &Base, matrix: &Matrix) -> Result<Vec<Variant>, Error> {
    let doc = &base.0;
    let mut points: Vec<Vec<(&str, &Node)>> = vec![Vec::new()];
    for (path, values) in &matrix.vary {
        points = points
            .iter()
            .flat_map(|point| {
                values.iter().map(move |value| {
                    let mut next = point.clone();
                    next.push((path.as_str(), value));
                    next
                })
            })
            .collect();
    }
    let mut raws = Vec::with_capacity(points.len());
    for point in points {
        let mut raw = RawVariant {
            name: String::new(),
            assigns: Vec::new(),
            faults: None,
            expect: Vec::new(),
            expect_some: Vec::new(),
        };
        let mut name = Vec::with_capacity(point.len());
        for (path, value) in point {
            name.push(format!("{path}={}", render(value)));
            if path == "faults" {
                let set = keys::string("faults", value)?;
                raw.faults = Some(FaultChoice::Set {
                    name: set.to_owned(),
                    span: value.span.clone(),
                });
            } else if let Some((sec, key)) = path
                .split_once('.')
                .and_then(|(s, k)| Some((Sec::from_name(s)?, k)))
            {
                raw.assigns.push(Assign {
                    sec,
                    key: key.to_owned(),
                    value: value.clone(),
                });
            }
        }
        raw.name = if name.is_empty() {
            "base".to_owned()
        } else {
            name.join(" ")
        };
        raws.push(raw);
    }
    if raws.is_empty() {
        return Err(Error::at(
            &matrix.vary_span,
            "[vary] makes no configuration".to_owned(),
        ));
    }
    resolve_variants(doc, &raws)
}

/// A value as it reads in a generated variant name: `all`, `2`, `{min=1ms,max=5ms}`.
fn render(node: &Node) -> String {
    match &node.value {
        Value::String(text) => text.clone(),
        Value::Integer(value) => value.to_string(),
        Value::Float(value) => value.to_string(),
        Value::Boolean(value) => value.to_string(),
        Value::Datetime => "date-time".to_owned(),
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(render).collect::<Vec<_>>().join(",")
        ),
        Value::Table(entries) => format!(
            "{{{}}}",
            entries
                .iter()
                .map(|e| format!("{}={}", e.key, render(&e.value)))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

/// The paths a variant (or a sweep) may set: `section.key` of every registry key, and
/// `faults`; with `expect` and `expect_some` for variants.
fn variant_paths(with_expect: bool) -> Vec<String> {
    let mut valid: Vec<String> = Vec::new();
    for sec in SECTIONS {
        valid.extend(
            sec.key_names()
                .into_iter()
                .map(|key| format!("{}.{key}", sec.name())),
        );
    }
    valid.push("faults".to_owned());
    if with_expect {
        valid.extend(["expect", "expect_some"].map(String::from));
    }
    valid
}

fn read_document(root: &[Entry]) -> Result<Doc, Error> {
    let mut doc = Doc::default();
    for entry in root {
        let value = &entry.value;
        match entry.key.as_str() {
            "name" => doc.name = Some(keys::string("name", value)?.to_owned()),
            "description" => doc.description = keys::string("description", value)?.to_owned(),
            "seeds" => doc.seeds = Some(read_seeds(value)?),
            "duration" => {
                let duration = keys::duration("duration", value)?;
                if duration.is_zero() {
                    return Err(Error::at(
                        &value.span,
                        "`duration` must be longer than 0s".to_owned(),
                    ));
                }
                doc.duration = Some((duration, value.span.clone()));
            }
            "heal" => doc.heal = Some(keys::duration("heal", value)?),
            "cluster" => doc.cluster = Some(read_cluster(entry)?),
            "faults" => doc.faults = Some(read_fault_choice(value)?),
            "fault_sets" => doc.fault_sets = read_fault_sets(value)?,
            "nemesis" => doc.nemesis = Some(read_nemesis(value)?),
            "expect" => doc.expect = read_expect(value, "[expect]")?,
            "expect_some" => doc.expect_some = read_expect(value, "[expect_some]")?,
            "variants" => doc.variants = read_variants(value)?,
            key => match Sec::from_name(key) {
                Some(sec) => {
                    let entries = table(key, value)?;
                    doc.assigns.extend(read_section(sec, entries)?);
                }
                None => {
                    return Err(unknown_key(
                        key,
                        &entry.key_span,
                        "the top level",
                        TOP_LEVEL,
                    ))
                }
            },
        }
    }
    Ok(doc)
}

fn table<'a>(name: &str, node: &'a Node) -> Result<&'a [Entry], Error> {
    match &node.value {
        Value::Table(entries) => Ok(entries),
        _ => Err(keys::wrong_type(name, "a table", node)),
    }
}

fn read_seeds(node: &Node) -> Result<Vec<u64>, Error> {
    let at = |message: String| Error::at(&node.span, message);
    match &node.value {
        Value::Integer(count) => seed_count(u64::try_from(*count).unwrap_or(0)).map_err(at),
        Value::String(spec) => parse_seeds(spec).map_err(at),
        Value::Array(items) => {
            let mut seeds = Vec::with_capacity(items.len());
            for item in items {
                match item.value {
                    Value::Integer(seed) if seed >= 0 => seeds.push(seed as u64),
                    _ => {
                        return Err(Error::at(
                            &item.span,
                            format!(
                                "a seed must be an integer of 0 or more, found {}",
                                describe(item)
                            ),
                        ))
                    }
                }
            }
            check_seed_list(seeds).map_err(at)
        }
        _ => Err(keys::wrong_type(
            "seeds",
            "a count, a list of seeds or a range string like \"100..200\"",
            node,
        )),
    }
}

/// A value as a message shows it: small scalars verbatim, the rest by type.
fn describe(node: &Node) -> String {
    match &node.value {
        Value::Integer(value) => value.to_string(),
        Value::String(text) if text.chars().count() <= 40 => format!("\"{text}\""),
        other => other.type_name().to_owned(),
    }
}

/// Walk a table, joining the implicit tables of unquoted dotted keys back into Kafka's
/// dotted names (`min.insync.replicas = 1` is three nested tables in TOML); a path stops
/// at the first valid key.
fn flatten<'a>(
    entries: &'a [Entry],
    prefix: &str,
    valid: &[&str],
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
                let dotted = format!("{path}.");
                if valid.iter().any(|v| v.starts_with(&dotted)) {
                    flatten(inner, &path, valid, out);
                    continue;
                }
            }
        }
        out.push((path, entry));
    }
}

/// The keys of a table that sets configuration: each known, each once.
fn config_entries<'a>(
    entries: &'a [Entry],
    valid: &[&str],
    context: &str,
) -> Result<Vec<(String, &'a Entry)>, Error> {
    let mut flat = Vec::new();
    flatten(entries, "", valid, &mut flat);
    let mut seen = BTreeSet::new();
    for (path, entry) in &flat {
        if !valid.contains(&path.as_str()) {
            return Err(unknown_key(path, &entry.key_span, context, valid));
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

fn read_section(sec: Sec, entries: &[Entry]) -> Result<Vec<Assign>, Error> {
    let valid = sec.key_names();
    let context = format!("[{}]", sec.name());
    Ok(config_entries(entries, &valid, &context)?
        .into_iter()
        .map(|(key, entry)| Assign {
            sec,
            key,
            value: entry.value.clone(),
        })
        .collect())
}

const CLUSTER_KEYS: &[&str] = &["brokers", "topics"];
const TOPIC_KEYS: &[&str] = &["name", "partitions", "replication_factor", "config"];
/// Partitions per topic a scenario may ask for: bounded so a typo cannot exhaust memory.
const MAX_PARTITIONS: i64 = 10_000;

fn read_cluster(entry: &Entry) -> Result<Cluster, Error> {
    let entries = table("cluster", &entry.value)?;
    let mut brokers = None;
    let mut topics_node = None;
    for e in entries {
        match e.key.as_str() {
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
    Ok(Cluster { brokers, topics })
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
                let valid = keys::TOPIC.names();
                for (key, entry) in
                    config_entries(table("config", &e.value)?, &valid, "a topic's `config`")?
                {
                    if let Some(found) = keys::TOPIC.find(&key) {
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

fn read_fault_choice(node: &Node) -> Result<FaultChoice, Error> {
    match &node.value {
        Value::String(name) => Ok(FaultChoice::Set {
            name: name.clone(),
            span: node.span.clone(),
        }),
        Value::Array(items) => Ok(FaultChoice::Script(read_faults(items, "[[faults]]")?)),
        _ => Err(keys::wrong_type(
            "faults",
            "[[faults]] tables or the name of a fault set",
            node,
        )),
    }
}

fn read_faults(items: &[Node], context: &str) -> Result<Vec<ParsedFault>, Error> {
    let mut faults = items
        .iter()
        .map(|item| read_fault(item, context))
        .collect::<Result<Vec<_>, _>>()?;
    // The runner fires faults in time order; equal times keep the file's order.
    faults.sort_by_key(|f| f.fault.at);
    Ok(faults)
}

fn read_fault_sets(node: &Node) -> Result<BTreeMap<String, Vec<ParsedFault>>, Error> {
    let mut sets = BTreeMap::new();
    for entry in table("fault_sets", node)? {
        let context = format!("[[fault_sets.{}]]", entry.key);
        let Value::Array(items) = &entry.value.value else {
            return Err(keys::wrong_type(
                &entry.key,
                &format!("{context} tables"),
                &entry.value,
            ));
        };
        sets.insert(entry.key.clone(), read_faults(items, &context)?);
    }
    Ok(sets)
}

const FAULT_FIELDS: &[&str] = &[
    "at", "action", "target", "groups", "between", "latency", "file", "bytes",
];

/// Each action and the fields it takes besides `at` and `action`.
const ACTIONS: &[(&str, &[&str])] = &[
    ("kill", &["target"]),
    ("shutdown", &["target"]),
    ("power-loss", &["target"]),
    ("restart", &["target"]),
    ("partition", &["groups"]),
    ("isolate", &["target"]),
    ("heal", &[]),
    ("slow-link", &["between", "latency"]),
    ("slow-disk", &["target", "latency"]),
    ("heal-disk", &["target"]),
    ("fsync-error", &["target"]),
    ("disk-full", &["target"]),
    ("corrupt", &["target", "file", "bytes"]),
];

const DISK_ACTIONS: &[&str] = &[
    "slow-disk",
    "heal-disk",
    "fsync-error",
    "disk-full",
    "corrupt",
];

fn read_fault(node: &Node, context: &str) -> Result<ParsedFault, Error> {
    let entries = table(context, node)?;
    let mut fields: BTreeMap<&str, &Entry> = BTreeMap::new();
    for entry in entries {
        if !FAULT_FIELDS.contains(&entry.key.as_str()) {
            return Err(unknown_key(
                &entry.key,
                &entry.key_span,
                context,
                FAULT_FIELDS,
            ));
        }
        fields.insert(entry.key.as_str(), entry);
    }
    let at_entry = fields
        .get("at")
        .ok_or_else(|| Error::at(&node.span, format!("missing `at` in {context}")))?;
    let at = keys::duration("at", &at_entry.value)?;
    let action_entry = fields
        .get("action")
        .ok_or_else(|| Error::at(&node.span, format!("missing `action` in {context}")))?;
    let action_node = &action_entry.value;
    let action = keys::string("action", action_node)?;
    let Some((action, takes)) = ACTIONS.iter().find(|(name, _)| *name == action) else {
        let names: Vec<&str> = ACTIONS.iter().map(|(name, _)| *name).collect();
        let mut message = format!("unknown fault action `{action}`");
        match suggest(action, &names) {
            Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
            None => message.push_str(&format!("; expected one of: {}", names.join(", "))),
        }
        return Err(Error::at(&action_node.span, message));
    };
    for (name, entry) in &fields {
        if *name != "at" && *name != "action" && !takes.contains(name) {
            let takes = if takes.is_empty() {
                "it takes only `at`".to_owned()
            } else {
                format!(
                    "it takes {}",
                    takes
                        .iter()
                        .map(|t| format!("`{t}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            return Err(Error::at(
                &entry.key_span,
                format!("`{name}` does not apply to action `{action}` ({takes})"),
            ));
        }
    }
    for field in *takes {
        if !fields.contains_key(field) {
            return Err(Error::at(
                &action_node.span,
                format!("action `{action}` needs `{field}`"),
            ));
        }
    }
    let mut targets = Vec::new();
    let mut target = |name: &str| -> Result<Target, Error> {
        match fields.get(name) {
            Some(entry) => read_target(&entry.value, &mut targets),
            None => Err(Error::at(
                &action_node.span,
                format!("action `{action}` needs `{name}`"),
            )),
        }
    };
    let fault_action = match *action {
        "kill" => FaultAction::Kill(target("target")?),
        "shutdown" => FaultAction::Shutdown(target("target")?),
        "power-loss" => FaultAction::PowerLoss(target("target")?),
        "restart" => FaultAction::Restart(target("target")?),
        "isolate" => FaultAction::Isolate(target("target")?),
        "heal-disk" => FaultAction::HealDisk(target("target")?),
        "fsync-error" => FaultAction::FsyncError(target("target")?),
        "disk-full" => FaultAction::DiskFull(target("target")?),
        "heal" => FaultAction::Heal,
        "slow-disk" => {
            let target = target("target")?;
            FaultAction::SlowDisk {
                target,
                latency: field_duration(&fields, "latency", action_node)?,
            }
        }
        "corrupt" => {
            let target = target("target")?;
            let file = fields
                .get("file")
                .map(|e| &e.value)
                .ok_or_else(|| needs(action, "file", action_node))?;
            let pattern = keys::string("file", file)?;
            globset::Glob::new(pattern).map_err(|e| {
                Error::at(
                    &file.span,
                    format!("invalid file pattern `{pattern}`: {}", e.kind()),
                )
            })?;
            let bytes = fields
                .get("bytes")
                .map(|e| &e.value)
                .ok_or_else(|| needs(action, "bytes", action_node))?;
            let bytes = keys::integer_in("bytes", bytes, 1, i64::MAX)? as u64;
            FaultAction::Corrupt {
                target,
                file: pattern.to_owned(),
                bytes,
            }
        }
        "partition" => {
            let groups = fields
                .get("groups")
                .map(|e| &e.value)
                .ok_or_else(|| needs(action, "groups", action_node))?;
            let Value::Array(items) = &groups.value else {
                return Err(keys::wrong_type(
                    "groups",
                    "an array of groups, like [[\"broker-1\"], [\"broker-2\", \"broker-3\"]]",
                    groups,
                ));
            };
            if items.len() < 2 {
                return Err(Error::at(
                    &groups.span,
                    "`groups` needs at least two groups to cut links between".to_owned(),
                ));
            }
            let groups = items
                .iter()
                .map(|g| read_target(g, &mut targets))
                .collect::<Result<Vec<_>, _>>()?;
            FaultAction::Partition(groups)
        }
        "slow-link" => {
            let between = fields
                .get("between")
                .map(|e| &e.value)
                .ok_or_else(|| needs(action, "between", action_node))?;
            let pair = match &between.value {
                Value::Array(items) if items.len() == 2 => (read_target(&items[0], &mut targets)?, read_target(&items[1], &mut targets)?),
                _ => {
                    return Err(Error::at(
                        &between.span,
                        format!("`between` must be two targets, like [\"broker-1\", \"broker-2\"], found {}", describe_len(between)),
                    ))
                }
            };
            FaultAction::SlowLink {
                between: pair,
                latency: field_duration(&fields, "latency", action_node)?,
            }
        }
        _ => {
            return Err(Error::at(
                &action_node.span,
                format!("unknown fault action `{action}`"),
            ))
        }
    };
    Ok(ParsedFault {
        fault: Fault {
            at,
            action: fault_action,
        },
        at_span: at_entry.value.span.clone(),
        targets,
        needs_disk: DISK_ACTIONS.contains(action),
    })
}

fn needs(action: &str, field: &str, action_node: &Node) -> Error {
    Error::at(
        &action_node.span,
        format!("action `{action}` needs `{field}`"),
    )
}

fn describe_len(node: &Node) -> String {
    match &node.value {
        Value::Array(items) => format!("{} items", items.len()),
        other => other.type_name().to_owned(),
    }
}

fn field_duration(
    fields: &BTreeMap<&str, &Entry>,
    name: &str,
    action_node: &Node,
) -> Result<Duration, Error> {
    match fields.get(name) {
        Some(entry) => keys::duration(name, &entry.value),
        None => Err(Error::at(&action_node.span, format!("missing `{name}`"))),
    }
}

/// A target expression: one name, or a list of names. Every name goes to `all` with its
/// span, for the checks against the cluster.
fn read_target(node: &Node, all: &mut Vec<(Target, Range<usize>)>) -> Result<Target, Error> {
    match &node.value {
        Value::String(text) => {
            let target = parse_target(text).map_err(|m| Error::at(&node.span, m))?;
            all.push((target.clone(), node.span.clone()));
            Ok(target)
        }
        Value::Array(items) if !items.is_empty() => {
            let mut list = Vec::with_capacity(items.len());
            for item in items {
                let Value::String(text) = &item.value else {
                    return Err(keys::wrong_type(
                        "a target in a list",
                        "a string like \"broker-1\"",
                        item,
                    ));
                };
                let target = parse_target(text).map_err(|m| Error::at(&item.span, m))?;
                all.push((target.clone(), item.span.clone()));
                list.push(target);
            }
            Ok(Target::List(list))
        }
        Value::Array(_) => Err(Error::at(&node.span, "an empty target list".to_owned())),
        _ => Err(keys::wrong_type(
            "target",
            "a target string like \"broker-1\" or a list of them",
            node,
        )),
    }
}

const TARGET_HELP: &str = "expected broker-N, controller, producer-N, consumer-N, brokers, crashed, random-broker, leader:<topic>/<partition>, follower:<topic>/<partition> or followers:<topic>/<partition>";

fn parse_target(text: &str) -> Result<Target, String> {
    match text {
        "controller" => return Ok(Target::Host(HostName::Controller)),
        "brokers" => return Ok(Target::Brokers),
        "crashed" => return Ok(Target::Crashed),
        "random-broker" => return Ok(Target::RandomBroker),
        _ => {}
    }
    let numbered = |prefix: &str, make: fn(u32) -> HostName| -> Option<Result<Target, String>> {
        let number = text.strip_prefix(prefix)?;
        Some(match number.parse::<u32>() {
            Ok(n) if n >= 1 && number.bytes().all(|b| b.is_ascii_digit()) => {
                Ok(Target::Host(make(n)))
            }
            _ => Err(format!(
                "invalid target `{text}`: host numbers start at 1 (`{prefix}1`)"
            )),
        })
    };
    if let Some(result) = numbered("broker-", HostName::Broker)
        .or_else(|| numbered("producer-", HostName::Producer))
        .or_else(|| numbered("consumer-", HostName::Consumer))
    {
        return result;
    }
    if let Some((kind, partition)) = text.split_once(':') {
        let make: fn(TopicPartition) -> Target = match kind {
            "leader" => Target::Leader,
            "follower" => Target::Follower,
            "followers" => Target::Followers,
            _ => return Err(format!("invalid target `{text}`: {TARGET_HELP}")),
        };
        let parsed = partition.rsplit_once('/').and_then(|(topic, p)| {
            let digits = !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
            match (topic.is_empty(), digits, p.parse::<u32>()) {
                (false, true, Ok(p)) => Some(TopicPartition::new(topic, p)),
                _ => None,
            }
        });
        return parsed
            .map(make)
            .ok_or_else(|| format!("invalid target `{text}`: expected {kind}:<topic>/<partition>, like `{kind}:orders/0`"));
    }
    Err(format!("invalid target `{text}`: {TARGET_HELP}"))
}

const NEMESIS_KEYS: &[&str] = &["actions", "interval", "recover"];
const NEMESIS_ACTIONS: &[(&str, NemesisAction)] = &[
    ("kill", NemesisAction::Kill),
    ("power-loss", NemesisAction::PowerLoss),
    ("shutdown", NemesisAction::Shutdown),
    ("partition", NemesisAction::Partition),
    ("isolate", NemesisAction::Isolate),
    ("slow-link", NemesisAction::SlowLink),
    ("slow-disk", NemesisAction::SlowDisk),
    ("fsync-error", NemesisAction::FsyncError),
    ("disk-full", NemesisAction::DiskFull),
];

fn read_nemesis(node: &Node) -> Result<Nemesis, Error> {
    let entries = table("nemesis", node)?;
    let mut actions = None;
    let mut interval = None;
    let mut recover = None;
    for e in entries {
        match e.key.as_str() {
            "actions" => {
                let Value::Array(items) = &e.value.value else {
                    return Err(keys::wrong_type(
                        "actions",
                        "an array of fault actions",
                        &e.value,
                    ));
                };
                if items.is_empty() {
                    return Err(Error::at(&e.value.span, "`actions` is empty".to_owned()));
                }
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    let name = keys::string("an action", item)?;
                    let names: Vec<&str> = NEMESIS_ACTIONS.iter().map(|(n, _)| *n).collect();
                    let Some((_, action)) = NEMESIS_ACTIONS.iter().find(|(n, _)| *n == name) else {
                        let mut message = format!("unknown nemesis action `{name}`");
                        match suggest(name, &names) {
                            Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
                            None => message
                                .push_str(&format!("; expected one of: {}", names.join(", "))),
                        }
                        return Err(Error::at(&item.span, message));
                    };
                    list.push(*action);
                }
                actions = Some(list);
            }
            "interval" => interval = Some(positive_duration("interval", &e.value)?),
            "recover" => recover = Some(positive_duration("recover", &e.value)?),
            other => return Err(unknown_key(other, &e.key_span, "[nemesis]", NEMESIS_KEYS)),
        }
    }
    let missing = |key: &str| Error::at(&node.span, format!("missing `{key}` in [nemesis]"));
    Ok(Nemesis {
        actions: actions.ok_or_else(|| missing("actions"))?,
        interval: interval.ok_or_else(|| missing("interval"))?,
        recover: recover.ok_or_else(|| missing("recover"))?,
    })
}

fn positive_duration(name: &str, node: &Node) -> Result<Duration, Error> {
    let duration = keys::duration(name, node)?;
    if duration.is_zero() {
        return Err(Error::at(
            &node.span,
            format!("`{name}` must be longer than 0s"),
        ));
    }
    Ok(duration)
}

const COUNTS: &[(&str, Count)] = &[
    ("attempted", Count::Attempted),
    ("acked", Count::Acked),
    ("failed", Count::Failed),
    ("indeterminate", Count::Indeterminate),
    ("lost", Count::Lost),
    ("moved", Count::Moved),
    ("duplicates", Count::Duplicates),
    ("unexpected", Count::Unexpected),
    ("reordered", Count::Reordered),
    ("dirty_reads", Count::DirtyReads),
    ("divergent", Count::Divergent),
    ("offline", Count::Offline),
];

fn read_expect(node: &Node, context: &str) -> Result<Vec<Expectation>, Error> {
    let names: Vec<&str> = COUNTS.iter().map(|(n, _)| *n).collect();
    let mut expectations = Vec::new();
    for entry in table(context, node)? {
        let Some((_, count)) = COUNTS.iter().find(|(n, _)| *n == entry.key) else {
            let mut message = format!("unknown count `{}` in {context}", entry.key);
            match suggest(&entry.key, &names) {
                Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
                None => message.push_str(&format!("; expected one of: {}", names.join(", "))),
            }
            return Err(Error::at(&entry.key_span, message));
        };
        let value = &entry.value;
        let (comparison, bound) = match &value.value {
            Value::Integer(exact) => match u64::try_from(*exact) {
                Ok(exact) => (Comparison::Eq, exact),
                Err(_) => {
                    return Err(Error::at(
                        &value.span,
                        format!(
                            "a count is never negative: `{}` = {exact} cannot hold",
                            entry.key
                        ),
                    ))
                }
            },
            Value::String(text) => parse_comparison(text).map_err(|m| Error::at(&value.span, m))?,
            _ => {
                return Err(keys::wrong_type(
                    &entry.key,
                    "an integer or a comparison like \"> 0\"",
                    value,
                ))
            }
        };
        expectations.push(Expectation {
            count: *count,
            comparison,
            value: bound,
        });
    }
    Ok(expectations)
}

fn read_variants(node: &Node) -> Result<Vec<RawVariant>, Error> {
    let entries = table("variants", node)?;
    let valid = variant_paths(true);
    let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
    let mut variants = Vec::with_capacity(entries.len());
    for entry in entries {
        let name = &entry.key;
        let context = format!("variant `{name}`");
        let mut raw = RawVariant {
            name: name.clone(),
            assigns: Vec::new(),
            faults: None,
            expect: Vec::new(),
            expect_some: Vec::new(),
        };
        for (path, e) in config_entries(table(&context, &entry.value)?, &valid, &context)? {
            match path.as_str() {
                "faults" => {
                    let set = keys::string("faults", &e.value)?;
                    raw.faults = Some(FaultChoice::Set {
                        name: set.to_owned(),
                        span: e.value.span.clone(),
                    });
                }
                "expect" => {
                    raw.expect = read_expect(&e.value, &format!("[variants.{name}.expect]"))?
                }
                "expect_some" => {
                    raw.expect_some =
                        read_expect(&e.value, &format!("[variants.{name}.expect_some]"))?
                }
                _ => {
                    // `config_entries` admitted only `section.key` paths of known sections.
                    let Some((sec, key)) = path
                        .split_once('.')
                        .and_then(|(s, k)| Some((Sec::from_name(s)?, k)))
                    else {
                        return Err(unknown_key(&path, &e.key_span, &context, &valid));
                    };
                    raw.assigns.push(Assign {
                        sec,
                        key: key.to_owned(),
                        value: e.value.clone(),
                    });
                }
            }
        }
        variants.push(raw);
    }
    Ok(variants)
}

/// One variant's settings: defaults, then the top-level assignments, then the variant's.
fn resolve(doc: &Doc, variant: &[Assign], faults: Option<&FaultChoice>) -> Result<Settings, Error> {
    let (duration, _) = doc
        .duration
        .clone()
        .ok_or_else(|| Error::nowhere("missing `duration` (the simulated time of the workload phase, e.g. duration = \"30s\")".to_owned()))?;
    let cluster = doc
        .cluster
        .clone()
        .ok_or_else(|| Error::nowhere("missing [cluster] (brokers and topics)".to_owned()))?;
    let mut settings = Settings {
        duration,
        heal: doc.heal.unwrap_or(Duration::from_secs(30)),
        cluster,
        broker: Default::default(),
        producer: Default::default(),
        consumer: Default::default(),
        workload: keys::default_workload(),
        disk: Default::default(),
        network: keys::default_network(),
        faults: Vec::new(),
        nemesis: doc.nemesis.clone(),
    };
    // The value span of every key set explicitly (the last setting wins).
    let mut explicit: BTreeMap<(Sec, &str), Range<usize>> = BTreeMap::new();
    for assign in doc.assigns.iter().chain(variant) {
        assign
            .sec
            .apply(&mut settings, &assign.key, &assign.value)?;
        explicit.insert((assign.sec, assign.key.as_str()), assign.value.span.clone());
    }
    producer_rules(&mut settings.producer, &explicit)?;
    resolve_workload_topic(&mut settings, explicit.get(&(Sec::Workload, "topic")))?;
    let chosen = match faults {
        None => Vec::new(),
        Some(FaultChoice::Script(faults)) => faults.clone(),
        Some(FaultChoice::Set { name, span }) => match doc.fault_sets.get(name) {
            Some(faults) => faults.clone(),
            None => {
                let names: Vec<&str> = doc.fault_sets.keys().map(String::as_str).collect();
                let message = if names.is_empty() {
                    format!(
                        "unknown fault set `{name}`: the scenario defines no [[fault_sets.NAME]]"
                    )
                } else {
                    match suggest(name, &names) {
                        Some(near) => format!("unknown fault set `{name}`; did you mean `{near}`?"),
                        None => format!(
                            "unknown fault set `{name}`; the sets are: {}",
                            names.join(", ")
                        ),
                    }
                };
                return Err(Error::at(span, message));
            }
        },
    };
    check_faults(&chosen, &settings)?;
    settings.faults = chosen.into_iter().map(|f| f.fault).collect();
    Ok(settings)
}

/// Kafka's producer rules between keys (KafkaProducer's constructor): idempotence needs
/// acks=all, retries and at most 5 requests in flight (explicitly enabled it is an error
/// without them, left at its default it is quietly off); `delivery.timeout.ms` left at its
/// default is raised to `linger.ms + request.timeout.ms`. Set explicitly below that, Kafka
/// refuses it, but the contract's own example does so (30000 < 5 + 30000) and must run: the
/// value stands, and a request may be cut short by the delivery timeout.
fn producer_rules(
    producer: &mut ProducerConfig,
    explicit: &BTreeMap<(Sec, &str), Range<usize>>,
) -> Result<(), Error> {
    let span_of = |key: &'static str| explicit.get(&(Sec::Producer, key));
    if producer.enable_idempotence {
        let conflict = if producer.acks != Acks::All {
            Some(("acks", "`acks` = \"all\""))
        } else if producer.max_in_flight_requests_per_connection > 5 {
            Some((
                "max.in.flight.requests.per.connection",
                "`max.in.flight.requests.per.connection` <= 5",
            ))
        } else if producer.retries == 0 {
            Some(("retries", "`retries` > 0"))
        } else {
            None
        };
        if let Some((key, need)) = conflict {
            if let Some(idempotence) = span_of("enable.idempotence") {
                let span = span_of(key).unwrap_or(idempotence);
                return Err(Error::at(
                    span,
                    format!("`enable.idempotence` = true needs {need} (Kafka rejects this producer configuration)"),
                ));
            }
            producer.enable_idempotence = false;
        }
    }
    let floor = producer
        .linger_ms
        .saturating_add(producer.request_timeout_ms);
    if producer.delivery_timeout_ms < floor && span_of("delivery.timeout.ms").is_none() {
        producer.delivery_timeout_ms = floor;
    }
    Ok(())
}

fn resolve_workload_topic(
    settings: &mut Settings,
    span: Option<&Range<usize>>,
) -> Result<(), Error> {
    let names: Vec<&str> = settings
        .cluster
        .topics
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    match span {
        None => match names.as_slice() {
            [only] => {
                settings.workload.topic = (*only).to_owned();
                Ok(())
            }
            _ => Err(Error::nowhere(format!(
                "[workload] needs a `topic`: the cluster has {} topics ({})",
                names.len(),
                names.join(", ")
            ))),
        },
        Some(span) => {
            let topic = &settings.workload.topic;
            if names.contains(&topic.as_str()) {
                return Ok(());
            }
            Err(Error::at(span, unknown_topic(topic, &names)))
        }
    }
}

fn unknown_topic(topic: &str, names: &[&str]) -> String {
    match suggest(topic, names) {
        Some(near) => format!("unknown topic `{topic}`; did you mean `{near}`?"),
        None => format!(
            "unknown topic `{topic}`; the topics of [cluster] are: {}",
            names.join(", ")
        ),
    }
}

fn check_faults(faults: &[ParsedFault], settings: &Settings) -> Result<(), Error> {
    for fault in faults {
        if fault.fault.at > settings.duration {
            return Err(Error::at(
                &fault.at_span,
                format!(
                    "fault at {} is beyond `duration` ({})",
                    super::format_duration(fault.fault.at),
                    super::format_duration(settings.duration)
                ),
            ));
        }
        for (target, span) in &fault.targets {
            check_target(target, settings, fault.needs_disk).map_err(|m| Error::at(span, m))?;
        }
    }
    Ok(())
}

fn plural(n: u32, one: &str) -> String {
    if n == 1 {
        format!("{n} {one}")
    } else {
        format!("{n} {one}s")
    }
}

fn check_target(target: &Target, settings: &Settings, needs_disk: bool) -> Result<(), String> {
    let brokers = settings.cluster.brokers;
    match target {
        Target::Host(HostName::Broker(n)) if *n > brokers => Err(format!(
            "no host `broker-{n}`: the cluster has {} (broker-1 to broker-{brokers})",
            plural(brokers, "broker")
        )),
        Target::Host(host @ (HostName::Producer(n) | HostName::Consumer(n))) => {
            let (kind, have) = match host {
                HostName::Producer(_) => ("producer", settings.workload.producers),
                _ => ("consumer", settings.workload.consumers),
            };
            if *n > have {
                Err(format!(
                    "no host `{host}`: [workload] has {}",
                    plural(have, kind)
                ))
            } else if needs_disk {
                Err(format!(
                    "`{host}` has no disk: disk faults apply to brokers and the controller"
                ))
            } else {
                Ok(())
            }
        }
        Target::Leader(tp) | Target::Follower(tp) | Target::Followers(tp) => {
            let names: Vec<&str> = settings
                .cluster
                .topics
                .iter()
                .map(|t| t.name.as_str())
                .collect();
            let Some(topic) = settings.cluster.topics.iter().find(|t| t.name == tp.topic) else {
                return Err(format!(
                    "{} (in target `{}`)",
                    unknown_topic(&tp.topic, &names),
                    describe_target(target)
                ));
            };
            if tp.partition >= topic.partitions {
                return Err(format!(
                    "partition {} of topic `{}` does not exist: it has {} (0 to {})",
                    tp.partition,
                    tp.topic,
                    plural(topic.partitions, "partition"),
                    topic.partitions - 1
                ));
            }
            if !matches!(target, Target::Leader(_)) && topic.replication_factor < 2 {
                return Err(format!(
                    "`{tp}` has no followers: topic `{}` has replication factor 1",
                    tp.topic
                ));
            }
            Ok(())
        }
        Target::List(list) => list
            .iter()
            .try_for_each(|t| check_target(t, settings, needs_disk)),
        _ => Ok(()),
    }
}

fn describe_target(target: &Target) -> String {
    match target {
        Target::Leader(tp) => format!("leader:{tp}"),
        Target::Follower(tp) => format!("follower:{tp}"),
        Target::Followers(tp) => format!("followers:{tp}"),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse() {
        assert_eq!(
            parse_target("broker-3"),
            Ok(Target::Host(HostName::Broker(3)))
        );
        assert_eq!(
            parse_target("controller"),
            Ok(Target::Host(HostName::Controller))
        );
        assert_eq!(
            parse_target("producer-1"),
            Ok(Target::Host(HostName::Producer(1)))
        );
        assert_eq!(
            parse_target("consumer-2"),
            Ok(Target::Host(HostName::Consumer(2)))
        );
        assert_eq!(parse_target("brokers"), Ok(Target::Brokers));
        assert_eq!(parse_target("crashed"), Ok(Target::Crashed));
        assert_eq!(parse_target("random-broker"), Ok(Target::RandomBroker));
        assert_eq!(
            parse_target("leader:orders/0"),
            Ok(Target::Leader(TopicPartition::new("orders", 0)))
        );
        assert_eq!(
            parse_target("follower:a.b-c/12"),
            Ok(Target::Follower(TopicPartition::new("a.b-c", 12)))
        );
        assert_eq!(
            parse_target("followers:orders/1"),
            Ok(Target::Followers(TopicPartition::new("orders", 1)))
        );
        for bad in [
            "broker-0",
            "broker-",
            "broker-x",
            "broker-+1",
            "leader:orders",
            "leader:/0",
            "leader:orders/-1",
            "leader:orders/+1",
            "leaders:orders/0",
            "Broker-1",
            "",
            "broker-99999999999",
        ] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
