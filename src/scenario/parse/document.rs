//! A whole scenario file: the first pass (`top` and the parts it calls), then the second
//! (`resolve`) for the top-level settings and for each variant.

use super::faults::{check_faults, set_beside_script};
use super::overrides::Overrides;
use super::resolve::{resolve, resolve_variants, run_name};
use super::top::{read_document, Doc};
use crate::scenario::model::{Scenario, Settings, Variant};
use crate::scenario::node;
use crate::scenario::Error;
use std::path::Path;

pub(crate) fn scenario(text: &str, path: &Path, overrides: &Overrides) -> Result<Scenario, Error> {
    let (doc, base) = document(text, overrides)?;
    let stem = file_stem(path);
    let variants = if doc.variants.is_empty() {
        vec![Variant::new(
            stem.clone(),
            base,
            doc.expect.clone(),
            doc.expect_some.clone(),
        )]
    } else {
        resolve_variants(&doc, &doc.variants)?
    };
    Ok(Scenario {
        name: doc.name.clone().unwrap_or(stem),
        description: doc.description.clone(),
        path: path.to_owned(),
        source: text.to_owned(),
        seeds: doc.seeds(),
        test_seeds: doc.test_seeds(),
        variants,
        warnings: overrides.replaced(&doc.variants),
    })
}

pub(super) fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "scenario".to_owned())
}

/// Read a scenario file, put `--set`'s overrides in, and resolve its top-level settings
/// (no variant applied), which also checks every fault set.
pub(super) fn document(text: &str, overrides: &Overrides) -> Result<(Doc, Settings), Error> {
    if text.trim().is_empty() {
        return Err(Error::nowhere(
            "the file is empty: a scenario needs at least `duration` and [cluster]".to_owned(),
        ));
    }
    let root = node::parse_document(text).map_err(|(span, message)| {
        span.as_ref()
            .and_then(|span| set_beside_script(text, span.start))
            .unwrap_or(Error { span, message })
    })?;
    if root.is_empty() {
        return Err(Error::nowhere(
            "the file holds only comments: a scenario needs at least `duration` and [cluster]"
                .to_owned(),
        ));
    }
    let mut doc = read_document(&root)?;
    overrides.apply(&mut doc)?;
    let base = resolve(&doc, None)?;
    // Every fault set must be valid, used by a variant here or not: a sweep may pick it.
    for faults in doc.fault_sets.values() {
        check_faults(faults, &base, &run_name(None))?;
    }
    Ok((doc, base))
}
