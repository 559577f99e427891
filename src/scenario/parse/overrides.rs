//! `--set PATH=VALUE`: settings from the command line, applied after everything the file
//! sets (its top level, then each variant's own), so that one run can try a setting
//! without editing the file. PATH is a sweep's dotted path (`producer.acks`,
//! `broker.min.insync.replicas`, `cluster.kafka`, `cluster.system`, `faults`) or
//! `duration` or `heal`.
//!
//! VALUE is read as a TOML value (`2`, `true`, `"30s"`, `[1, 2]`); anything else, a bare
//! word like `all`, `30s` or `3.9`, is a string. No key takes a float, and `3.9` as a
//! float could not tell 3.9 from 3.90.
//!
//! An argument's spans lie past [`ARGUMENTS`], in the arguments joined by newlines, so
//! that an error about a value, found however late, names the argument and its column.

use super::cluster::CLUSTER_PATHS;
use super::faults::{read_fault_choice, FaultChoice};
use super::keys;
use super::misplaced::unknown_path;
use super::sections::{Assign, Sec};
use super::top::{read_duration, Doc};
use super::variants::{variant_paths, RawVariant};
use crate::scenario::node::{self, Node, Value};
use crate::scenario::{Error, ScenarioError};
use std::ops::Range;

/// Where the spans of `--set` arguments begin: beyond any file hightide would read.
pub(crate) const ARGUMENTS: usize = 1 << 48;

/// The `--set` arguments of one command, checked: each path known, each set once.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// The arguments joined by newlines: what the spans point into.
    text: String,
    items: Vec<Item>,
}

#[derive(Clone, Debug)]
struct Item {
    path: String,
    path_span: Range<usize>,
    value: Node,
}

impl Overrides {
    /// Read `PATH=VALUE` arguments. An error names the argument, with its column.
    pub fn parse(arguments: &[String]) -> Result<Overrides, ScenarioError> {
        let text = arguments.join("\n");
        let mut overrides = Overrides {
            text,
            items: Vec::with_capacity(arguments.len()),
        };
        let valid = settable_paths();
        let valid: Vec<&str> = valid.iter().map(String::as_str).collect();
        let mut start = 0;
        for argument in arguments {
            let item = read_item(argument, start, &valid).and_then(|item| {
                match overrides.items.iter().find(|i| i.path == item.path) {
                    Some(_) => Err(Error::at(
                        &item.path_span,
                        format!("`{}` is set twice on the command line", item.path),
                    )),
                    None => Ok(item),
                }
            });
            overrides.items.push(item.map_err(|e| overrides.locate(e))?);
            start += argument.len() + 1;
        }
        Ok(overrides)
    }

    /// The argument an error's span falls in, and the column within `--set ARGUMENT`;
    /// `None` for a span in a file.
    pub(crate) fn place(&self, span: &Range<usize>) -> Option<(String, usize)> {
        let offset = span.start.checked_sub(ARGUMENTS)?;
        let mut start = 0;
        for argument in self.text.split('\n') {
            if offset <= start + argument.len() {
                let column = argument[..offset - start].chars().count() + 1;
                return Some((argument.to_owned(), "--set ".len() + column));
            }
            start += argument.len() + 1;
        }
        None
    }

    /// An error about an argument, as the command line prints it.
    pub(crate) fn locate(&self, error: Error) -> ScenarioError {
        let place = error.span.as_ref().and_then(|span| self.place(span));
        ScenarioError::argument(place, error.message)
    }

    /// Put the overrides into a document read from a file: `duration` and `heal` replace
    /// the file's, the rest waits in `doc.set` for [`resolve`](super::resolve) to apply
    /// after each variant's own.
    pub(super) fn apply(&self, doc: &mut Doc) -> Result<(), Error> {
        for item in &self.items {
            let value = &item.value;
            match item.path.as_str() {
                "duration" => doc.duration = Some(read_duration(value)?),
                "heal" => doc.heal = Some(keys::duration("heal", value)?),
                "faults" => match read_fault_choice(value)? {
                    FaultChoice::Set { name, span } => {
                        doc.set.faults = Some(FaultChoice::Set { name, span })
                    }
                    FaultChoice::Script(_) => {
                        return Err(keys::wrong_type(
                            "faults",
                            "the name of one of the file's fault sets",
                            value,
                        ))
                    }
                },
                path => {
                    if let Some((sec, key)) = Sec::split_path(path) {
                        doc.set.assigns.push(Assign {
                            sec,
                            key: key.to_owned(),
                            value: value.clone(),
                        });
                    } else {
                        // Only known paths were admitted: the rest are the cluster's.
                        doc.set.cluster.read(path, value)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// What the overrides replace of a variant's own settings, by variant: "--set X
    /// replaces what variant V sets".
    pub(super) fn replaced(&self, variants: &[RawVariant]) -> Vec<(String, String)> {
        let mut notes = Vec::new();
        for variant in variants {
            for item in &self.items {
                let own = match item.path.as_str() {
                    path if CLUSTER_PATHS.contains(&path) => variant.cluster.sets(path),
                    "faults" => variant.faults.is_some(),
                    path => Sec::split_path(path).is_some_and(|(sec, key)| {
                        variant.assigns.iter().any(|a| a.sec == sec && a.key == key)
                    }),
                };
                if own {
                    notes.push((
                        variant.name.clone(),
                        format!(
                            "--set {} replaces what variant {} sets",
                            item.path, variant.name
                        ),
                    ));
                }
            }
        }
        notes
    }

    /// Each override of a path the sweep varies: the sweep would try values that the
    /// override then replaces.
    pub(crate) fn check_not_varied<'a>(
        &self,
        varied: impl Iterator<Item = &'a str> + Clone,
    ) -> Result<(), Error> {
        match self
            .items
            .iter()
            .find(|item| varied.clone().any(|path| path == item.path))
        {
            Some(item) => Err(Error::at(
                &item.path_span,
                format!(
                    "the sweep varies `{}`: set it in [vary] or on the command line, not both",
                    item.path
                ),
            )),
            None => Ok(()),
        }
    }
}

/// The paths `--set` accepts: a sweep's, and the top-level `duration` and `heal`.
fn settable_paths() -> Vec<String> {
    let mut paths = variant_paths(false);
    paths.extend(["duration", "heal"].map(String::from));
    paths
}

/// One `PATH=VALUE` argument, which starts at `start` of the joined arguments.
fn read_item(argument: &str, start: usize, valid: &[&str]) -> Result<Item, Error> {
    let base = ARGUMENTS + start;
    let Some((path_text, value_text)) = argument.split_once('=') else {
        return Err(Error::at(
            &(base..base + argument.len()),
            "expected PATH=VALUE, like producer.acks=all or broker.min.insync.replicas=2"
                .to_owned(),
        ));
    };
    let path = path_text.trim();
    let path_start = base + (path_text.len() - path_text.trim_start().len());
    let path_span = path_start..path_start + path.len();
    if !valid.contains(&path) {
        return Err(unknown_path(path, &path_span, "--set", valid));
    }
    let value_start = base + path_text.len() + 1;
    let raw = value_text.trim();
    let raw_start = value_start + (value_text.len() - value_text.trim_start().len());
    Ok(Item {
        path: path.to_owned(),
        path_span,
        value: read_value(raw, raw_start),
    })
}

/// A value as TOML, its spans moved to `start`; a string where it is not TOML, or is a
/// float or a date-time.
fn read_value(raw: &str, start: usize) -> Node {
    const PREFIX: &str = "v = ";
    let parsed = node::parse_document(&format!("{PREFIX}{raw}"))
        .ok()
        .and_then(|mut root| match root.as_mut_slice() {
            [entry] if !matches!(entry.value.value, Value::Float(_) | Value::Datetime) => {
                Some(entry.value.clone())
            }
            _ => None,
        });
    match parsed {
        Some(mut value) => {
            shift(&mut value, start, PREFIX.len());
            value
        }
        None => Node {
            span: start..start + raw.len(),
            value: Value::String(raw.to_owned()),
        },
    }
}

/// Move a node's spans from the `v = VALUE` it was parsed in to the joined arguments.
fn shift(node: &mut Node, start: usize, prefix: usize) {
    let moved = |span: &Range<usize>| {
        start + span.start.saturating_sub(prefix)..start + span.end.saturating_sub(prefix)
    };
    node.span = moved(&node.span);
    match &mut node.value {
        Value::Array(items) => items.iter_mut().for_each(|i| shift(i, start, prefix)),
        Value::Table(entries) => {
            for entry in entries {
                entry.key_span = moved(&entry.key_span);
                shift(&mut entry.value, start, prefix);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(arguments: &[&str]) -> Result<Overrides, String> {
        let arguments: Vec<String> = arguments.iter().map(|a| a.to_string()).collect();
        Overrides::parse(&arguments).map_err(|e| e.report())
    }

    #[test]
    fn values_are_toml_or_else_strings() {
        let set = parse(&[
            "producer.acks=all",
            "broker.min.insync.replicas = 2",
            "cluster.kafka=3.9",
            "workload.rate=\"5\"",
        ])
        .unwrap();
        let values: Vec<&Value> = set.items.iter().map(|i| &i.value.value).collect();
        assert_eq!(
            values,
            [
                &Value::String("all".into()),
                &Value::Integer(2),
                &Value::String("3.9".into()),
                &Value::String("5".into()),
            ]
        );
        assert_eq!(set.items[1].path, "broker.min.insync.replicas");
        assert_eq!(
            set.text.lines().nth(1),
            Some("broker.min.insync.replicas = 2")
        );
    }

    #[test]
    fn spans_point_into_the_argument() {
        let set = parse(&["duration=10s", "broker.min.insync.replicas=[1, 2]"]).unwrap();
        let Value::Array(items) = &set.items[1].value.value else {
            panic!("not an array")
        };
        let (argument, column) = set.place(&items[1].span).unwrap();
        assert_eq!(argument, "broker.min.insync.replicas=[1, 2]");
        assert_eq!(&format!("--set {argument}")[column - 1..column], "2");
        assert_eq!(set.place(&(0..1)), None, "a span in a file");
    }

    #[test]
    fn bad_arguments_name_themselves_with_a_caret() {
        assert_eq!(
            parse(&["duration=10s", "producer.ack=all"]).unwrap_err(),
            "error: --set producer.ack=all: unknown key `producer.ack` in --set; did you mean \
             `producer.acks`?\n  | --set producer.ack=all\n  |       ^"
        );
        let error = parse(&["acks"]).unwrap_err();
        assert!(
            error.starts_with("error: --set acks: expected PATH=VALUE"),
            "{error}"
        );
        let error = parse(&["heal=1s", "heal=2s"]).unwrap_err();
        assert!(error.contains("`heal` is set twice"), "{error}");
    }

    #[test]
    fn nothing_set_has_no_arguments() {
        assert!(parse(&[]).unwrap().items.is_empty());
    }
}
