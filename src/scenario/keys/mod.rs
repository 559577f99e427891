//! The one registry of configuration keys: for each section, every key's name, what it
//! means, how a TOML value sets its field, and (read back from the `Default` impls of
//! `config.rs` and the scenario defaults) its default. The parser and `hightide config`
//! both read this table, so what is documented is exactly what is accepted.
//!
//! This file holds the table's machinery and the harness's sections, which every system
//! shares (`[disk]`, `[network]`, `[workload]`); each system's own sections live in a file
//! of their own (`kafka.rs`, `rocketmq.rs`).

use super::model::{Arrivals, Commit, Network, OnError, Workload};
use super::node::{Node, Value};
use super::values::{format_duration, parse_duration};
use super::Error;
use crate::config::kafka::Release;
use crate::os::disk::{DiskConfig, Filesystem, PowerLossModel};
use std::fmt::Write as _;
use std::time::Duration;

/// Java's `Integer.MAX_VALUE`, the bound of Kafka's `int` settings.
const INT_MAX: i64 = i32::MAX as i64;
const LONG_MAX: i64 = i64::MAX;

/// One section of the scenario file (`[broker]`, ...) and the struct its keys set.
pub(crate) struct Section<T: 'static> {
    pub name: &'static str,
    pub title: &'static str,
    pub keys: &'static [Key<T>],
}

pub(crate) struct Key<T: 'static> {
    pub name: &'static str,
    pub kind: Kind<T>,
    /// What the key does, in one line.
    pub meaning: &'static str,
}

/// How a TOML value sets a field, and how the field reads back for `hightide config`.
pub(crate) enum Kind<T: 'static> {
    Int {
        min: i64,
        max: i64,
        get: fn(&T) -> i64,
        set: fn(&mut T, i64),
    },
    Bool {
        get: fn(&T) -> bool,
        set: fn(&mut T, bool),
    },
    Duration {
        get: fn(&T) -> Duration,
        set: fn(&mut T, Duration),
    },
    /// An override that, unset, inherits the key `inherits` of another section (a Kafka
    /// topic's, of `[broker]`).
    OptInt {
        min: i64,
        max: i64,
        inherits: &'static str,
        set: fn(&mut T, i64),
    },
    OptBool {
        inherits: &'static str,
        set: fn(&mut T, bool),
    },
    /// One of a few names, each naming one value of the field's enum (`names`, in the
    /// order of `get`'s and `set`'s indexes).
    Choice {
        names: &'static [&'static str],
        get: fn(&T) -> usize,
        set: fn(&mut T, usize),
    },
    /// Anything else (numbers or names, tables): its own reader and printer.
    Other {
        set: fn(&mut T, &Node) -> Result<(), Error>,
        show: fn(&T) -> String,
    },
}

impl<T> Section<T> {
    pub(crate) fn find(&self, name: &str) -> Option<&'static Key<T>> {
        self.keys.iter().find(|key| key.name == name)
    }

    pub(crate) fn names(&self) -> Vec<&'static str> {
        self.keys.iter().map(|key| key.name).collect()
    }
}

impl<T> Key<T> {
    /// The key of another section this one inherits while unset, if it does.
    pub(crate) fn inherits(&self) -> Option<&'static str> {
        match self.kind {
            Kind::OptInt { inherits, .. } | Kind::OptBool { inherits, .. } => Some(inherits),
            _ => None,
        }
    }

    /// Set the field from `node`, checking its type and range.
    pub(crate) fn apply(&self, target: &mut T, node: &Node) -> Result<(), Error> {
        match &self.kind {
            Kind::Int { min, max, set, .. } | Kind::OptInt { min, max, set, .. } => {
                set(target, integer_in(self.name, node, *min, *max)?);
                Ok(())
            }
            Kind::Bool { set, .. } | Kind::OptBool { set, .. } => {
                set(target, boolean(self.name, node)?);
                Ok(())
            }
            Kind::Duration { set, .. } => {
                set(target, duration(self.name, node)?);
                Ok(())
            }
            Kind::Choice { names, set, .. } => {
                set(target, choice(self.name, node, names)?);
                Ok(())
            }
            Kind::Other { set, .. } => set(target, node),
        }
    }

    /// The value as `hightide config` prints it; a key that inherits another shows what
    /// `inherited` says of that one.
    fn show(&self, value: &T, inherited: &dyn Fn(&'static str) -> String) -> String {
        match &self.kind {
            Kind::Int { get, .. } => get(value).to_string(),
            Kind::Bool { get, .. } => get(value).to_string(),
            Kind::Duration { get, .. } => format!("\"{}\"", format_duration(get(value))),
            Kind::OptInt { inherits, .. } | Kind::OptBool { inherits, .. } => inherited(inherits),
            Kind::Choice { names, get, .. } => format!("\"{}\"", names[get(value)]),
            Kind::Other { show, .. } => show(value),
        }
    }
}

/// `"a", "b" or "c"`
fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// `name` must be an integer in `min..=max`.
pub(crate) fn integer_in(name: &str, node: &Node, min: i64, max: i64) -> Result<i64, Error> {
    let Value::Integer(value) = node.value else {
        return Err(wrong_type(name, "an integer", node));
    };
    if value < min || value > max {
        let range = if max == LONG_MAX {
            format!("at least {min}")
        } else {
            format!("from {min} to {max}")
        };
        return Err(Error::at(
            &node.span,
            format!("`{name}` must be {range}, found {value}"),
        ));
    }
    Ok(value)
}

pub(crate) fn boolean(name: &str, node: &Node) -> Result<bool, Error> {
    match node.value {
        Value::Boolean(value) => Ok(value),
        _ => Err(wrong_type(name, "true or false", node)),
    }
}

pub(crate) fn string<'a>(name: &str, node: &'a Node) -> Result<&'a str, Error> {
    match &node.value {
        Value::String(value) => Ok(value),
        _ => Err(wrong_type(name, "a string", node)),
    }
}

/// One of `names`: its index.
pub(crate) fn choice(name: &str, node: &Node, names: &[&str]) -> Result<usize, Error> {
    let value = string(name, node)?;
    names.iter().position(|n| *n == value).ok_or_else(|| {
        Error::at(
            &node.span,
            format!("invalid `{name}` `{value}`: expected {}", one_of(names)),
        )
    })
}

/// A duration string (`"250ms"`).
pub(crate) fn duration(name: &str, node: &Node) -> Result<Duration, Error> {
    let text = match &node.value {
        Value::String(text) => text,
        Value::Integer(_) => {
            return Err(Error::at(
                &node.span,
                format!("`{name}` must be a duration with a unit, like \"250ms\" or \"10s\", found an integer"),
            ))
        }
        _ => return Err(wrong_type(name, "a duration string like \"10s\"", node)),
    };
    parse_duration(text).map_err(|message| Error::at(&node.span, message))
}

pub(crate) fn wrong_type(name: &str, expected: &str, node: &Node) -> Error {
    Error::at(
        &node.span,
        format!(
            "`{name}` must be {expected}, found {}",
            node.value.type_name()
        ),
    )
}

macro_rules! int {
    ($name:literal, $field:ident as $ty:ty, $min:expr, $max:expr, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Int {
                min: $min,
                max: $max,
                get: |c| c.$field as i64,
                set: |c, v| c.$field = v as $ty,
            },
        }
    };
}

macro_rules! boolean {
    ($name:literal, $field:ident, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Bool {
                get: |c| c.$field,
                set: |c, v| c.$field = v,
            },
        }
    };
}

/// A key naming one value of an enum with `ALL` and `name()`.
macro_rules! choice {
    ($name:literal, $field:ident: $ty:ident, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Choice {
                names: &{
                    let mut names = [""; $ty::ALL.len()];
                    let mut i = 0;
                    while i < names.len() {
                        names[i] = $ty::ALL[i].name();
                        i += 1;
                    }
                    names
                },
                get: |c| {
                    $ty::ALL
                        .iter()
                        .position(|v| *v == c.$field)
                        .expect("ALL holds every value")
                },
                set: |c, i| c.$field = $ty::ALL[i],
            },
        }
    };
}

macro_rules! duration {
    ($name:literal, $field:ident, $meaning:literal) => {
        Key {
            name: $name,
            meaning: $meaning,
            kind: Kind::Duration {
                get: |c| c.$field,
                set: |c, v| c.$field = v,
            },
        }
    };
}

/// Kafka's sections. Declared below the macros above, which its tables use: a
/// `macro_rules!` is in scope only after its definition.
pub(super) mod kafka;
/// RocketMQ's section, `[rocketmq]`.
pub(super) mod rocketmq;

pub(crate) static DISK: Section<DiskConfig> = Section {
    name: "disk",
    title: "The simulated disk of every broker and of the controller",
    keys: &[
        duration!("writeback", writeback,
            "How often the OS flusher runs (Linux dirty_writeback_centisecs)."),
        duration!("dirty_expire", dirty_expire,
            "Pages dirty at least this long are written back when the flusher runs (dirty_expire_centisecs)."),
        duration!("fsync_latency", fsync_latency, "How long an fsync takes."),
        choice!("power_loss", power_loss: PowerLossModel,
            "What of the page cache survives a power loss under filesystem = \"no-metadata-writeback\": \"drop-unflushed\" nothing, \"random-writeback\" a seeded subset of dirty pages, \"torn-tail\" each file's last dirty page up to a seeded 512-byte sector. Under ext4-ordered a page written at the power loss has no committed size: nothing survives but what a commit named."),
        choice!("filesystem", filesystem: Filesystem,
            "When names and sizes reach the medium: \"ext4-ordered\" at the journal's commits (ext4's data=ordered with delayed allocation: every journal_commit and at an fsync), \"no-metadata-writeback\" a name only through an fsync, a size with each page written back."),
        duration!("journal_commit", journal_commit,
            "How long ext4's running transaction stays open before it commits (the commit= mount option)."),
        Key {
            name: "throughput",
            meaning: "Bytes per second the device writes (write-back and fsync share it), or \"unlimited\": any amount at once.",
            kind: Kind::Other { set: set_throughput, show: show_throughput },
        },
        int!("memory", memory as u64, 1 << 20, LONG_MAX,
            "Bytes of the host's dirtyable memory (free and page cache), of which the dirty ratios are percentages."),
        int!("dirty_ratio", dirty_ratio as u64, 1, 100,
            "Writers wait while dirty pages exceed this percentage of memory (vm.dirty_ratio; balance_dirty_pages)."),
        int!("dirty_background_ratio", dirty_background_ratio as u64, 0, 100,
            "The flusher writes the oldest dirty pages while they exceed this percentage of memory (vm.dirty_background_ratio); at or above dirty_ratio it counts as half of dirty_ratio, as in Linux."),
    ],
};

fn set_throughput(disk: &mut DiskConfig, node: &Node) -> Result<(), Error> {
    disk.throughput = bytes_per_second_or_unlimited("throughput", node)?;
    Ok(())
}

fn show_throughput(disk: &DiskConfig) -> String {
    show_rate(disk.throughput)
}

/// A rate key: bytes per second, or `"unlimited"` (`None`).
fn bytes_per_second_or_unlimited(name: &str, node: &Node) -> Result<Option<u64>, Error> {
    match &node.value {
        Value::String(text) if text == "unlimited" => Ok(None),
        Value::Integer(_) => Ok(Some(integer_in(name, node, 1, LONG_MAX)? as u64)),
        _ => Err(wrong_type(
            name,
            "bytes per second (an integer) or \"unlimited\"",
            node,
        )),
    }
}

fn show_rate(bytes_per_second: Option<u64>) -> String {
    match bytes_per_second {
        Some(bytes_per_second) => bytes_per_second.to_string(),
        None => "\"unlimited\"".to_owned(),
    }
}

pub(crate) fn default_network() -> Network {
    Network {
        latency_min: Duration::from_millis(1),
        latency_max: Duration::from_millis(5),
        bandwidth: None,
    }
}

pub(crate) static NETWORK: Section<Network> = Section {
    name: "network",
    title: "The simulated network",
    keys: &[
        Key {
            name: "latency",
            meaning: "One-way latency of every message, drawn uniformly (seeded) from min to max.",
            kind: Kind::Other {
                set: set_latency,
                show: show_latency,
            },
        },
        Key {
            name: "bandwidth",
            meaning: "Bytes per second every link carries each way, or \"unlimited\": a message arrives its latency after its last byte is sent, behind what the link still had to send.",
            kind: Kind::Other {
                set: |network, node| {
                    network.bandwidth = bytes_per_second_or_unlimited("bandwidth", node)?;
                    Ok(())
                },
                show: |network| show_rate(network.bandwidth),
            },
        },
    ],
};

fn set_latency(network: &mut Network, node: &Node) -> Result<(), Error> {
    let Value::Table(entries) = &node.value else {
        return Err(wrong_type(
            "latency",
            "a table like { min = \"1ms\", max = \"5ms\" }",
            node,
        ));
    };
    let mut min = None;
    let mut max = None;
    for entry in entries {
        match entry.key.as_str() {
            "min" => min = Some(duration("min", &entry.value)?),
            "max" => max = Some(duration("max", &entry.value)?),
            other => {
                return Err(super::unknown_key(
                    other,
                    &entry.key_span,
                    "`latency`",
                    &["min", "max"],
                ))
            }
        }
    }
    let (Some(min), Some(max)) = (min, max) else {
        return Err(Error::at(
            &node.span,
            "`latency` needs both `min` and `max`".to_owned(),
        ));
    };
    if min > max {
        return Err(Error::at(
            &node.span,
            format!(
                "`latency` min ({}) is above its max ({})",
                format_duration(min),
                format_duration(max)
            ),
        ));
    }
    network.latency_min = min;
    network.latency_max = max;
    Ok(())
}

fn show_latency(network: &Network) -> String {
    format!(
        "{{ min = \"{}\", max = \"{}\" }}",
        format_duration(network.latency_min),
        format_duration(network.latency_max)
    )
}

/// The scenario's workload defaults; an empty topic means "the only topic of [cluster]".
pub(crate) fn default_workload() -> Workload {
    Workload {
        producers: 1,
        topic: String::new(),
        rate: 100,
        arrivals: Arrivals::Poisson,
        on_error: OnError::WhatItProves,
        messages: None,
        keys: 0,
        value_bytes: 64,
        consumers: 0,
        group: None,
        commit: Commit::Auto,
        processing: Duration::ZERO,
        transaction_messages: 10,
        output: None,
    }
}

/// Hosts of one kind a scenario may ask for: bounded so a typo cannot exhaust memory.
pub(crate) const MAX_HOSTS: i64 = 1000;

pub(crate) static WORKLOAD: Section<Workload> = Section {
    name: "workload",
    title: "What the clients do",
    keys: &[
        int!("producers", producers as u32, 1, MAX_HOSTS, "Producer hosts producer-1 .. producer-N."),
        Key {
            name: "topic",
            meaning: "The topic the producers write and the consumers read; unset: the only topic of [cluster].",
            kind: Kind::Other { set: set_topic, show: |_| "the only topic".to_owned() },
        },
        int!("rate", rate as u32, 1, 1_000_000, "Sends per simulated second, per producer, on average."),
        choice!("arrivals", arrivals: Arrivals,
            "When a producer sends, drawn from the seed: \"poisson\" independent sends at the mean rate (each seed meets a fault in another phase of the load), \"periodic\" one every 1/rate s from the producer's start (every seed in the same phase)."),
        choice!("on_error", on_error: OnError,
            "What the application records when a send ends in an exception: \"what-it-proves\" not written only where no attempt can have written it, unknown otherwise (a timeout); \"not-written\" every exception taken as not written, as many applications log it."),
        Key {
            name: "messages",
            meaning: "Stop after this many sends in all; unset: send until `duration`.",
            kind: Kind::Other { set: set_messages, show: |_| "unset".to_owned() },
        },
        int!("keys", keys as u32, 0, INT_MAX, "Distinct message keys; 0: null keys (the sticky partitioner)."),
        int!("value_bytes", value_bytes as u32, 0, 1_048_576, "Size of each message value (it starts with the message's id)."),
        int!("consumers", consumers as u32, 0, MAX_HOSTS,
            "Consumer hosts consumer-1 .. consumer-N, reading during the run (the dirty-read check)."),
        Key {
            name: "group",
            meaning: "The consumers' group.id: they join it, share the topic's partitions and commit offsets; unset: each reads every partition and commits nothing.",
            kind: Kind::Other { set: set_group, show: |_| "unset".to_owned() },
        },
        choice!("commit", commit: Commit,
            "When a group member commits: \"auto\" (enable.auto.commit), \"before-processing\" (at most once), \"after-processing\" (at least once) or, for processors (`output`), \"transactional\" (exactly once: outputs and offsets in one transaction)."),
        duration!("processing", processing, "Simulated work per record, between the poll that returned it and the commit."),
        Key {
            name: "output",
            meaning: "Makes the group's members stream processors: each record processed is written to this topic, its value carrying the input's id; unset: they only process.",
            kind: Kind::Other { set: set_output, show: |_| "unset".to_owned() },
        },
        int!("transaction_messages", transaction_messages as u32, 1, INT_MAX,
            "With `[producer] transactional.id`: sends per transaction; each producer begins a transaction before its first send and commits after the last (or when sending stops)."),
    ],
};

fn set_group(workload: &mut Workload, node: &Node) -> Result<(), Error> {
    let group = string("group", node)?;
    if group.is_empty() {
        return Err(Error::at(
            &node.span,
            "`group` is empty: Kafka needs a group.id".to_owned(),
        ));
    }
    workload.group = Some(group.to_owned());
    Ok(())
}

fn set_output(workload: &mut Workload, node: &Node) -> Result<(), Error> {
    workload.output = Some(string("output", node)?.to_owned());
    Ok(())
}

fn set_topic(workload: &mut Workload, node: &Node) -> Result<(), Error> {
    workload.topic = string("topic", node)?.to_owned();
    Ok(())
}

fn set_messages(workload: &mut Workload, node: &Node) -> Result<(), Error> {
    workload.messages = Some(integer_in("messages", node, 1, LONG_MAX)? as u64);
    Ok(())
}

/// What `hightide config` says of a section's keys besides their values.
struct Notes<'a> {
    /// Why the chosen release has no such key (given the section and the key), if it has
    /// none.
    lacks: &'a dyn Fn(&str, &str) -> Option<String>,
    /// What a key that inherits the named one shows.
    inherited: &'a dyn Fn(&'static str) -> String,
    /// What the key (given the section and the key) means in the chosen release, where
    /// that is not what the table says, which is its meaning in the newest.
    meaning: &'a dyn Fn(&str, &str) -> Option<String>,
}

/// The harness's keys are in every release, inherit none and mean the same in each.
const HARNESS: Notes = Notes {
    lacks: &|_, _| None,
    inherited: &|_| String::new(),
    meaning: &|_, _| None,
};

/// One section for `hightide config`: each key with its value in `defaults` (or why the
/// release lacks it) and its meaning.
fn render<T>(out: &mut String, section: &Section<T>, header: &str, defaults: &T, notes: &Notes) {
    let _ = writeln!(out, "{header}  # {}", section.title);
    for key in section.keys {
        let name = if key.name.contains('.') {
            format!("\"{}\"", key.name)
        } else {
            key.name.to_owned()
        };
        match (notes.lacks)(section.name, key.name) {
            Some(why) => {
                let _ = writeln!(out, "# {name}: {why}");
            }
            None => {
                let _ = writeln!(out, "{name} = {}", key.show(defaults, notes.inherited));
            }
        }
        let meaning = (notes.meaning)(section.name, key.name);
        let _ = writeln!(out, "    {}", meaning.as_deref().unwrap_or(key.meaning));
    }
    out.push('\n');
}

/// Every supported key by section, with its default in `release` and its meaning, after
/// the history of Kafka's changes up to that release (`hightide config [--kafka X.Y]`).
pub fn config_reference(release: Release) -> String {
    let mut out = String::new();
    out.push_str("# Every configuration key of a scenario file, its default, and what it does.\n");
    out.push_str("# Kafka keys keep Kafka's names, defaults and meanings; durations are strings\n");
    out.push_str("# with a unit (\"250ms\", \"10s\", \"2m\"); sizes are integers of bytes.\n\n");
    kafka::reference(&mut out, release);
    render(&mut out, &DISK, "[disk]", &DiskConfig::default(), &HARNESS);
    render(
        &mut out,
        &NETWORK,
        "[network]",
        &default_network(),
        &HARNESS,
    );
    render(
        &mut out,
        &WORKLOAD,
        "[workload]",
        &default_workload(),
        &HARNESS,
    );
    out
}

/// `hightide config --rocketmq X.Y.Z`: RocketMQ's keys with their defaults and meanings,
/// after the history of RocketMQ's changes up to `release` and the rules they make; then
/// the harness's sections, which every system shares.
pub fn rocketmq_reference(release: crate::config::rocketmq::Release) -> String {
    let mut out = String::new();
    out.push_str(
        "# Every configuration key of a RocketMQ scenario, its default, and what it does.\n",
    );
    out.push_str(
        "# RocketMQ keys keep RocketMQ's names, defaults and meanings; its intervals and\n",
    );
    out.push_str(
        "# timeouts are integers of milliseconds, as in RocketMQ; the harness's durations\n",
    );
    out.push_str(
        "# are strings with a unit (\"250ms\", \"10s\", \"2m\"); sizes are integers of bytes.\n\n",
    );
    rocketmq::reference(&mut out, release);
    render(&mut out, &DISK, "[disk]", &DiskConfig::default(), &HARNESS);
    render(
        &mut out,
        &NETWORK,
        "[network]",
        &default_network(),
        &HARNESS,
    );
    render(
        &mut out,
        &WORKLOAD,
        "[workload]",
        &default_workload(),
        &HARNESS,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Setting a key to the default it prints must leave the defaults unchanged, so the
    /// printed defaults are the real ones.
    pub(super) fn every_key_default_reads_back<T: PartialEq + std::fmt::Debug>(
        section: &Section<T>,
        defaults: fn() -> T,
    ) {
        for key in section.keys {
            let mut value = defaults();
            let shown = key.show(&value, &|_| String::new());
            // The prose defaults (inherited keys, "unset") are not TOML and are skipped.
            let Ok(root) = super::super::node::parse_document(&format!("v = {shown}")) else {
                continue;
            };
            key.apply(&mut value, &root[0].value).unwrap();
            assert_eq!(value, defaults(), "{}", key.name);
        }
    }

    pub(super) fn names_are_unique<T>(section: &Section<T>) {
        let mut names = section.names();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), section.keys.len(), "{}", section.name);
    }

    #[test]
    fn printed_defaults_are_the_defaults() {
        every_key_default_reads_back(&DISK, DiskConfig::default);
    }

    #[test]
    fn key_names_are_unique_per_section() {
        names_are_unique(&DISK);
        names_are_unique(&NETWORK);
        names_are_unique(&WORKLOAD);
    }

    #[test]
    fn reference_lists_every_key_with_its_default() {
        let text = config_reference(Release::NEWEST);
        assert!(text.contains("\"min.insync.replicas\" = 1\n"), "{text}");
        assert!(text.contains("\"log.flush.interval.messages\" = 9223372036854775807\n"));
        assert!(text.contains("acks = \"all\"\n"));
        assert!(text.contains("\"enable.idempotence\" = true\n"));
        assert!(text.contains("\"segment.bytes\" = [broker] log.segment.bytes (1073741824)\n"));
        assert!(text.contains("writeback = \"5s\"\n"));
        assert!(text.contains("power_loss = \"random-writeback\"\n"));
        assert!(text.contains("latency = { min = \"1ms\", max = \"5ms\" }\n"));
        assert!(text.contains("value_bytes = 64\n"));
        for section in [
            "[broker]",
            "[producer]",
            "[consumer]",
            "# topic config",
            "[disk]",
            "[network]",
            "[workload]",
        ] {
            assert!(text.contains(section), "{section}");
        }
        // `[cluster] kafka`, then the registry's keys.
        let keys = 1
            + kafka::BROKER.keys.len()
            + kafka::PRODUCER.keys.len()
            + kafka::CONSUMER.keys.len()
            + kafka::TOPIC.keys.len()
            + DISK.keys.len()
            + NETWORK.keys.len()
            + WORKLOAD.keys.len();
        assert_eq!(text.lines().filter(|l| l.starts_with("    ")).count(), keys);
    }
}
