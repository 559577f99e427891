//! A key in the wrong table: the error names the tables it is a key of
//! (`"request.timeout.ms"` under [broker] is a key of [producer] and [consumer]), not the
//! nearest key of the table it is in, which is seldom what was meant. The tables are the
//! parser's own (`parse::tables`), so a new key is placed wherever it is put.

use super::{keys, tables, THE_TOP_LEVEL};
use crate::scenario::{suggest, unknown_key as nearest, Error};
use std::ops::Range;

/// How a table that sets configuration names its keys.
#[derive(Clone, Copy)]
pub(super) enum Naming {
    /// By name: `[broker]`, a topic's `config`.
    Key,
    /// By `section.key`: a variant, `[vary]`, `--set`.
    Path,
}

impl Naming {
    /// Whether `prefix` and a dot begin a key of this table, or one of another table: the
    /// implicit tables of an unquoted dotted key are read on to the whole key, so that a
    /// misplaced one is named whole.
    pub(super) fn continues(self, prefix: &str, valid: &[&str]) -> bool {
        let dotted = format!("{prefix}.");
        match self {
            Naming::Key => valid
                .iter()
                .copied()
                .chain(tables().into_iter().flat_map(|(_, keys)| keys))
                .any(|key| key.starts_with(&dotted)),
            Naming::Path => {
                let key = format!("{}.", key_of(prefix, valid));
                valid.iter().any(|path| {
                    path.starts_with(&dotted)
                        || path
                            .split_once('.')
                            .is_some_and(|(_, other)| other.starts_with(&key))
                })
            }
        }
    }

    /// The error for `key`, which this table (`context`, holding `valid`) does not hold.
    pub(super) fn unknown(
        self,
        key: &str,
        span: &Range<usize>,
        context: &str,
        valid: &[&str],
    ) -> Error {
        match self {
            Naming::Key => unknown_key(key, span, context, valid),
            Naming::Path => unknown_path(key, span, context, valid),
        }
    }
}

/// A key the table `context` does not hold: the tables it is a key of, with the key of
/// this one it may stand for; a key of no table gets the nearest valid one.
pub(super) fn unknown_key(key: &str, span: &Range<usize>, context: &str, valid: &[&str]) -> Error {
    let homes: Vec<String> = tables()
        .into_iter()
        .filter(|(_, keys)| keys.contains(&key))
        .map(|(table, _)| match table.as_str() {
            // A key under a header belongs to that table, a common slip for a top-level one.
            THE_TOP_LEVEL => format!("{table} (above the first [table] header)"),
            _ => table,
        })
        .collect();
    if homes.is_empty() {
        return nearest(key, span, context, valid);
    }
    let mut message = format!(
        "`{key}` is not a key of {context}: it is a key of {}",
        listed(&homes, "and")
    );
    // A topic key in [broker], or a broker key in a topic's `config`, means the other name.
    let near = keys::kafka::topic_counterpart(key)
        .filter(|counterpart| valid.contains(counterpart))
        .or_else(|| suggest(key, valid));
    if let Some(near) = near {
        message.push_str(&format!("; did you mean `{near}`?"));
    }
    Error::at(span, message)
}

/// A path (`section.key`) that is not among `valid`: the sections whose key it names, with
/// their paths; a path that names no section's key gets the nearest valid one.
pub(super) fn unknown_path(
    path: &str,
    span: &Range<usize>,
    context: &str,
    valid: &[&str],
) -> Error {
    let key = key_of(path, valid);
    let homes: Vec<(&str, &str)> = valid
        .iter()
        .filter_map(|valid| {
            valid
                .split_once('.')
                .map(|(section, k)| (section, k, *valid))
        })
        .filter(|(_, k, _)| *k == key)
        .map(|(section, _, valid)| (section, valid))
        .collect();
    if homes.is_empty() {
        return nearest(path, span, context, valid);
    }
    let sections: Vec<String> = homes.iter().map(|(s, _)| format!("[{s}]")).collect();
    let paths: Vec<String> = homes.iter().map(|(_, p)| format!("`{p}`")).collect();
    let subject = if key == path {
        "it".to_owned()
    } else {
        format!("`{key}`")
    };
    Error::at(
        span,
        format!(
            "unknown key `{path}` in {context}: {subject} is a key of {}; did you mean {}?",
            listed(&sections, "and"),
            listed(&paths, "or")
        ),
    )
}

/// The key a path names: what follows its section, if it starts with a section of `valid`;
/// else the whole path, a key written without its section.
fn key_of<'a>(path: &'a str, valid: &[&str]) -> &'a str {
    match path.split_once('.') {
        Some((section, key))
            if valid
                .iter()
                .any(|v| v.split_once('.').is_some_and(|(s, _)| s == section)) =>
        {
            key
        }
        _ => path,
    }
}

/// `a`, `a and b`, `a, b and c` (with `and` the conjunction).
fn listed(items: &[String], conjunction: &str) -> String {
    match items.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} {conjunction} {last}", rest.join(", ")),
        None => String::new(),
    }
}
