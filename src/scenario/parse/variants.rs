//! `[variants]`: named sets of overrides (configuration keys, a fault set, expectations)
//! that each run on top of the top-level settings.

use super::cluster::{ClusterSet, CLUSTER_PATHS};
use super::expect::read_expect;
use super::faults::FaultChoice;
use super::misplaced::Naming;
use super::sections::{config_entries, Assign, Sec, SECTIONS};
use super::{keys, table};
use crate::check::Expectation;
use crate::scenario::node::Node;
use crate::scenario::{unknown_key, Error};

pub(super) struct RawVariant {
    pub(super) name: String,
    /// `"cluster.system"`, `"cluster.kafka"`, `"cluster.rocketmq"`: the system and
    /// releases this variant models.
    pub(super) cluster: ClusterSet,
    pub(super) assigns: Vec<Assign>,
    pub(super) faults: Option<FaultChoice>,
    pub(super) expect: Vec<Expectation>,
    pub(super) expect_some: Vec<Expectation>,
}

/// The paths a variant (or a sweep) may set: `section.key` of every registry key,
/// the cluster's system and releases (`cluster.kafka`, ...) and `faults`; with `expect` and `expect_some` for variants.
pub(super) fn variant_paths(with_expect: bool) -> Vec<String> {
    let mut valid: Vec<String> = Vec::new();
    for sec in SECTIONS {
        valid.extend(
            sec.key_names()
                .into_iter()
                .map(|key| format!("{}.{key}", sec.name())),
        );
    }
    valid.extend(CLUSTER_PATHS.map(String::from));
    valid.push("faults".to_owned());
    if with_expect {
        valid.extend(["expect", "expect_some"].map(String::from));
    }
    valid
}

pub(super) fn read_variants(node: &Node) -> Result<Vec<RawVariant>, Error> {
    let entries = table("variants", node)?;
    let valid = variant_paths(true);
    let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
    let mut variants = Vec::with_capacity(entries.len());
    for entry in entries {
        let name = &entry.key;
        let context = format!("variant `{name}`");
        let mut raw = RawVariant {
            name: name.clone(),
            cluster: ClusterSet::default(),
            assigns: Vec::new(),
            faults: None,
            expect: Vec::new(),
            expect_some: Vec::new(),
        };
        for (path, e) in config_entries(
            table(&context, &entry.value)?,
            &valid,
            &context,
            Naming::Path,
        )? {
            if raw.cluster.read(&path, &e.value)? {
                continue;
            }
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
                    let Some((sec, key)) = Sec::split_path(&path) else {
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
