//! The first pass over the top level of a scenario file: its name, seeds and duration, and
//! which part of the file each top-level key holds, read into a [`Doc`].

use super::cluster::{read_cluster, ClusterDoc, ClusterSet};
use super::expect::read_expect;
use super::faults::{read_fault_choice, read_fault_sets, FaultChoice, ParsedFault};
use super::misplaced::unknown_key;
use super::nemesis::read_nemesis;
use super::sections::{read_section, Assign, Sec};
use super::variants::{read_variants, RawVariant};
use super::{keys, table, THE_TOP_LEVEL};
use crate::check::Expectation;
use crate::scenario::model::Nemesis;
use crate::scenario::node::{Entry, Node, Value};
use crate::scenario::values::{check_seed_list, parse_seeds, seed_count};
use crate::scenario::Error;
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

pub(super) const TOP_LEVEL: &[&str] = &[
    "name",
    "description",
    "seeds",
    "test_seeds",
    "duration",
    "heal",
    "cluster",
    "broker",
    "producer",
    "consumer",
    "rocketmq",
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

/// A scenario file after the first pass: its parts read, its configuration unapplied.
#[derive(Default)]
pub(super) struct Doc {
    pub(super) name: Option<String>,
    pub(super) description: String,
    pub(super) seeds: Option<Vec<u64>>,
    /// The seeds `cargo test` runs, with where the file gives them.
    pub(super) test_seeds: Option<(Vec<u64>, Range<usize>)>,
    pub(super) duration: Option<(Duration, Range<usize>)>,
    pub(super) heal: Option<Duration>,
    pub(super) cluster: Option<ClusterDoc>,
    pub(super) assigns: Vec<Assign>,
    pub(super) faults: Option<FaultChoice>,
    pub(super) fault_sets: BTreeMap<String, Vec<ParsedFault>>,
    pub(super) nemesis: Option<Nemesis>,
    pub(super) expect: Vec<Expectation>,
    pub(super) expect_some: Vec<Expectation>,
    pub(super) variants: Vec<RawVariant>,
    /// What the command line's `--set` sets, over the top level and every variant.
    pub(super) set: Set,
}

pub(super) fn read_document(root: &[Entry]) -> Result<Doc, Error> {
    let mut doc = Doc::default();
    for entry in root {
        let value = &entry.value;
        match entry.key.as_str() {
            "name" => doc.name = Some(keys::string("name", value)?.to_owned()),
            "description" => doc.description = keys::string("description", value)?.to_owned(),
            "seeds" => doc.seeds = Some(read_seeds("seeds", value)?),
            "test_seeds" => {
                doc.test_seeds = Some((read_seeds("test_seeds", value)?, value.span.clone()));
            }
            "duration" => doc.duration = Some(read_duration(value)?),
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
                None => return Err(unknown_key(key, &entry.key_span, THE_TOP_LEVEL, TOP_LEVEL)),
            },
        }
    }
    if let Some((test_seeds, span)) = &doc.test_seeds {
        let seeds = doc.seeds();
        if let Some(stray) = test_seeds.iter().find(|seed| !seeds.contains(seed)) {
            return Err(Error::at(
                span,
                format!(
                    "test seed {stray} is not among `seeds`: `test_seeds` picks the seeds \
                     `cargo test` runs out of the file's own"
                ),
            ));
        }
    }
    Ok(doc)
}

/// What `--set` sets in a document, kept for `resolve` to apply after each variant's own.
#[derive(Default)]
pub(super) struct Set {
    pub(super) assigns: Vec<Assign>,
    pub(super) cluster: ClusterSet,
    pub(super) faults: Option<FaultChoice>,
}

/// `duration`, with where it is given.
pub(super) fn read_duration(value: &Node) -> Result<(Duration, Range<usize>), Error> {
    let duration = keys::duration("duration", value)?;
    if duration.is_zero() {
        return Err(Error::at(
            &value.span,
            "`duration` must be longer than 0s".to_owned(),
        ));
    }
    Ok((duration, value.span.clone()))
}

impl Doc {
    /// The file's seeds: `seeds = 1` where it is silent.
    pub(super) fn seeds(&self) -> Vec<u64> {
        self.seeds.clone().unwrap_or_else(|| vec![1])
    }

    /// The seeds `cargo test` runs: all of [`seeds`](Self::seeds) where the file is silent.
    pub(super) fn test_seeds(&self) -> Vec<u64> {
        self.test_seeds
            .as_ref()
            .map_or_else(|| self.seeds(), |(seeds, _)| seeds.clone())
    }
}

pub(super) fn read_seeds(key: &str, node: &Node) -> Result<Vec<u64>, Error> {
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
            key,
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
