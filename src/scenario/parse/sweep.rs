//! Sweep matrices (`hightide sweep`): a base scenario and the values each configuration
//! path takes; their cross product becomes the base's variants.

use super::cluster::ClusterSet;
use super::document::{document, file_stem};
use super::faults::FaultChoice;
use super::misplaced::Naming;
use super::overrides::Overrides;
use super::resolve::resolve_variants;
use super::sections::{config_entries, Assign, Sec};
use super::top::{read_seeds, Doc};
use super::variants::{variant_paths, RawVariant};
use super::{keys, table};
use crate::scenario::model::{Scenario, Variant};
use crate::scenario::node::{self, Node, Value};
use crate::scenario::{unknown_key, Error};
use std::ops::Range;
use std::path::Path;

/// A sweep matrix as written: its base file and the values each path takes.
pub(crate) struct Matrix {
    pub name: String,
    pub base: String,
    pub seeds: Option<Vec<u64>>,
    vary: Vec<(String, Vec<Node>)>,
    vary_span: Range<usize>,
}

pub(super) const MATRIX_KEYS: &[&str] = &["name", "base", "seeds", "vary"];
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
            "seeds" => seeds = Some(read_seeds("seeds", &entry.value)?),
            "vary" => {
                vary_span = entry.key_span.clone();
                let valid = variant_paths(false);
                let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
                for (path, e) in
                    config_entries(table("vary", &entry.value)?, &valid, "[vary]", Naming::Path)?
                {
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

impl Matrix {
    /// The paths `[vary]` varies.
    pub(crate) fn varied(&self) -> impl Iterator<Item = &str> + Clone {
        self.vary.iter().map(|(path, _)| path.as_str())
    }
}

/// A sweep's base scenario, read and checked.
pub(crate) struct Base(Doc);

/// Parse the base scenario of a sweep: errors here are about the base file.
pub(crate) fn sweep_base(
    text: &str,
    path: &Path,
    overrides: &Overrides,
) -> Result<(Base, Scenario), Error> {
    let (doc, settings) = document(text, overrides)?;
    let scenario = Scenario {
        name: doc.name.clone().unwrap_or_else(|| file_stem(path)),
        description: doc.description.clone(),
        path: path.to_owned(),
        source: text.to_owned(),
        seeds: doc.seeds(),
        test_seeds: doc.test_seeds(),
        variants: vec![Variant::new(
            file_stem(path),
            settings,
            doc.expect.clone(),
            doc.expect_some.clone(),
        )],
        warnings: Vec::new(),
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
            cluster: ClusterSet::default(),
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
            } else if let Some((sec, key)) = Sec::split_path(path) {
                raw.assigns.push(Assign {
                    sec,
                    key: key.to_owned(),
                    value: value.clone(),
                });
            } else {
                // [vary] admits only known paths: the rest are the cluster's.
                raw.cluster.read(path, value)?;
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
