//! From the spanned TOML tree to a validated `Scenario`.
//!
//! Two passes. The first reads the file into plain parts and rejects what is wrong on its
//! face (unknown keys, wrong types, malformed durations and targets). Configuration keys
//! are kept as assignments, not applied, because each variant applies the top-level ones
//! and then its own. The second pass (`resolve`) resolves each variant's `Settings` from
//! the defaults and checks what depends on the whole (targets against the cluster, `at`
//! against `duration`, Kafka's cross-key producer rules).
//!
//! `document` runs both passes over a whole file. One submodule per part of the file:
//! `top` the top level, `sections` the configuration sections, `cluster`, `faults` (with
//! `targets`), `nemesis`, `expect`, `variants`; `sweep` reads a sweep matrix, `overrides`
//! the command line's `--set`; `misplaced` tells a key in the wrong table where it belongs.
//! No two of them import each other.

mod cluster;
mod document;
mod expect;
mod faults;
mod misplaced;
mod nemesis;
mod overrides;
mod resolve;
mod sections;
mod sweep;
mod targets;
mod top;
mod variants;

pub(crate) use document::scenario;
pub use overrides::Overrides;
pub(crate) use overrides::ARGUMENTS;
pub(crate) use sweep::{matrix, sweep_base, sweep_variants};

use super::keys;
use super::node::{Entry, Node, Value};
use super::Error;

/// The top level of a file, as errors name it.
const THE_TOP_LEVEL: &str = "the top level";
/// A sweep matrix, as [`FILE_KEYS`] names it: a file of its own, not a table of a scenario.
const SWEEP_MATRIX: &str = "a sweep matrix";

/// The keys of each fixed table of a scenario file and of a sweep matrix, by table, as
/// the parser knows them (it lists them in its unknown-key errors), for the reference to
/// be checked against. The configuration sections' keys are the registry's, which
/// `hightide config` prints.
pub const FILE_KEYS: &[(&str, &[&str])] = &[
    (THE_TOP_LEVEL, top::TOP_LEVEL),
    ("[cluster]", cluster::CLUSTER_KEYS),
    ("a topic of [cluster]", cluster::TOPIC_KEYS),
    ("[[faults]]", faults::FAULT_FIELDS),
    ("[nemesis]", nemesis::NEMESIS_KEYS),
    (SWEEP_MATRIX, sweep::MATRIX_KEYS),
];

/// A topic's configuration overrides, as errors name them.
const TOPIC_CONFIG: &str = "a topic's `config`";

/// Every table of a scenario file that holds keys, by the name its errors give it, with
/// its keys: the registry's sections, then the fixed tables.
fn tables() -> Vec<(String, Vec<&'static str>)> {
    let sections = sections::SECTIONS
        .into_iter()
        .map(|sec| (format!("[{}]", sec.name()), sec.key_names()));
    let topic = (TOPIC_CONFIG.to_owned(), keys::kafka::TOPIC.names());
    let fixed = FILE_KEYS
        .iter()
        .filter(|(table, _)| *table != SWEEP_MATRIX)
        .map(|(table, keys)| ((*table).to_owned(), keys.to_vec()));
    sections.chain([topic]).chain(fixed).collect()
}

/// The entries of a table; anything else is an error naming `name`.
fn table<'a>(name: &str, node: &'a Node) -> Result<&'a [Entry], Error> {
    match &node.value {
        Value::Table(entries) => Ok(entries),
        _ => Err(keys::wrong_type(name, "a table", node)),
    }
}
