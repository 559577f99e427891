//! Scripted faults: `[[faults]]`, `[[fault_sets.NAME]]` and `faults = "NAME"`; each action
//! with the fields it takes, and the checks against the resolved settings.

use super::misplaced::unknown_key;
use super::targets::{check_target, read_target};
use super::{keys, table};
use crate::scenario::model::{CorruptRegion, Fault, FaultAction, FaultKind, Settings, Target};
use crate::scenario::node::{self, Entry, Node, Value};
use crate::scenario::values::format_duration;
use crate::scenario::{suggest, Error};
use std::collections::BTreeMap;
use std::ops::Range;
use std::time::Duration;

/// A fault as written, with the spans its checks need.
#[derive(Clone, Debug)]
pub(super) struct ParsedFault {
    pub(super) fault: Fault,
    pub(super) at_span: Range<usize>,
    /// Every target expression it holds (list members one by one), with its span.
    pub(super) targets: Vec<(Target, Range<usize>)>,
    /// Disk faults only apply to hosts with a disk.
    pub(super) needs_disk: bool,
}

#[derive(Clone, Debug)]
pub(super) enum FaultChoice {
    Script(Vec<ParsedFault>),
    Set { name: String, span: Range<usize> },
}

pub(super) fn read_fault_choice(node: &Node) -> Result<FaultChoice, Error> {
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

/// `faults = "NAME"` and `[[faults]]` (or `faults = [...]`) in one file, which TOML can
/// only call a duplicate key: given where the parse stopped, the error that says the two
/// forms exclude each other, if that is why it stopped.
pub(super) fn set_beside_script(text: &str, stop: usize) -> Option<Error> {
    let faults = |part: &str| {
        node::parse_document(part)
            .ok()?
            .into_iter()
            .find(|entry| entry.key == "faults")
    };
    let earlier = faults(text.get(..stop)?)?;
    let later_text = text.get(stop..)?;
    let later = faults(later_text)?;
    // The second `faults` must be what the parse stopped at, not one further on.
    if later_text.get(..later.key_span.start)?.contains('\n') {
        return None;
    }
    // Whether it is a script, and as the message shows it.
    let form = |entry: &Entry| match &entry.value.value {
        Value::String(name) => Some((false, format!("`faults = \"{name}\"`"))),
        Value::Array(_) => Some((true, "[[faults]]".to_owned())),
        _ => None,
    };
    let ((earlier_script, earlier_form), (later_script, later_form)) =
        (form(&earlier)?, form(&later)?);
    if earlier_script == later_script {
        return None;
    }
    let (line, _) = node::line_col(text, earlier.key_span.start);
    Some(Error::at(
        &(stop..stop),
        format!(
            "{later_form} and {earlier_form} on line {line} exclude each other: a scenario \
             either scripts its faults in [[faults]] or picks a named set of \
             [[fault_sets.NAME]] with `faults = \"NAME\"`"
        ),
    ))
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

pub(super) fn read_fault_sets(node: &Node) -> Result<BTreeMap<String, Vec<ParsedFault>>, Error> {
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

pub(super) const FAULT_FIELDS: &[&str] = &[
    "at",
    "jitter",
    "action",
    "target",
    "groups",
    "between",
    "latency",
    "throughput",
    "bandwidth",
    "file",
    "bytes",
    "region",
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
    let jitter = match fields.get("jitter") {
        Some(entry) => keys::duration("jitter", &entry.value)?,
        None => Duration::ZERO,
    };
    let action_entry = fields
        .get("action")
        .ok_or_else(|| Error::at(&node.span, format!("missing `action` in {context}")))?;
    let action_node = &action_entry.value;
    let action = keys::string("action", action_node)?;
    let Some(kind) = FaultKind::ALL.iter().copied().find(|k| k.name() == action) else {
        let names: Vec<&str> = FaultKind::ALL.iter().map(|k| k.name()).collect();
        let mut message = format!("unknown fault action `{action}`");
        match suggest(action, &names) {
            Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
            None => message.push_str(&format!("; expected one of: {}", names.join(", "))),
        }
        return Err(Error::at(&action_node.span, message));
    };
    let takes = kind.fields();
    let may_take = kind.optional_fields();
    for (name, entry) in &fields {
        if !["at", "jitter", "action"].contains(name)
            && !takes.contains(name)
            && !may_take.contains(name)
        {
            let takes = if takes.is_empty() {
                "it takes only `at`".to_owned()
            } else {
                format!(
                    "it takes {}",
                    takes
                        .iter()
                        .chain(may_take)
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
    for field in takes {
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
    let fault_action = match kind {
        FaultKind::Kill => FaultAction::Kill(target("target")?),
        FaultKind::Shutdown => FaultAction::Shutdown(target("target")?),
        FaultKind::PowerLoss => FaultAction::PowerLoss(target("target")?),
        FaultKind::Restart => FaultAction::Restart(target("target")?),
        FaultKind::Pause => FaultAction::Pause(target("target")?),
        FaultKind::Resume => FaultAction::Resume(target("target")?),
        FaultKind::Isolate => FaultAction::Isolate(target("target")?),
        FaultKind::HealDisk => FaultAction::HealDisk(target("target")?),
        FaultKind::FsyncError => FaultAction::FsyncError(target("target")?),
        FaultKind::DiskFull => FaultAction::DiskFull(target("target")?),
        FaultKind::Heal => FaultAction::Heal,
        FaultKind::SlowDisk => {
            let target = target("target")?;
            let (latency, throughput) =
                latency_and_rate(&fields, action, "throughput", action_node)?;
            FaultAction::SlowDisk {
                target,
                latency,
                throughput,
            }
        }
        FaultKind::Corrupt => {
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
            let region = match fields.get("region") {
                Some(entry) => {
                    let names = CorruptRegion::ALL.map(CorruptRegion::name);
                    CorruptRegion::ALL[keys::choice("region", &entry.value, &names)?]
                }
                None => CorruptRegion::Tail,
            };
            FaultAction::Corrupt {
                target,
                file: pattern.to_owned(),
                bytes,
                region,
            }
        }
        FaultKind::Partition => {
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
        FaultKind::SlowLink => {
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
            let (latency, bandwidth) = latency_and_rate(&fields, action, "bandwidth", action_node)?;
            FaultAction::SlowLink {
                between: pair,
                latency,
                bandwidth,
            }
        }
    };
    Ok(ParsedFault {
        fault: Fault {
            at,
            jitter,
            action: fault_action,
        },
        at_span: at_entry.value.span.clone(),
        targets,
        needs_disk: kind.on_disk(),
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

/// A slowdown's `latency` (zero if not given) and its rate in bytes per second (`rate`),
/// of which it needs one or both.
fn latency_and_rate(
    fields: &BTreeMap<&str, &Entry>,
    action: &str,
    rate: &str,
    action_node: &Node,
) -> Result<(Duration, Option<u64>), Error> {
    let latency = match fields.get("latency") {
        Some(entry) => keys::duration("latency", &entry.value)?,
        None => Duration::ZERO,
    };
    let bytes_per_second = match fields.get(rate) {
        Some(entry) => Some(keys::integer_in(rate, &entry.value, 1, i64::MAX)? as u64),
        None => None,
    };
    if !fields.contains_key("latency") && bytes_per_second.is_none() {
        return Err(Error::at(
            &action_node.span,
            format!("action `{action}` needs `latency`, `{rate}` (bytes per second) or both"),
        ));
    }
    Ok((latency, bytes_per_second))
}

/// The faults of a run (`run` as errors about its system name it) against its settings.
pub(super) fn check_faults(
    faults: &[ParsedFault],
    settings: &Settings,
    run: &str,
) -> Result<(), Error> {
    for fault in faults {
        if fault.fault.at > settings.duration {
            return Err(Error::at(
                &fault.at_span,
                format!(
                    "fault at {} is beyond `duration` ({})",
                    format_duration(fault.fault.at),
                    format_duration(settings.duration)
                ),
            ));
        }
        for (target, span) in &fault.targets {
            check_target(target, settings, fault.needs_disk, run)
                .map_err(|m| Error::at(span, m))?;
        }
    }
    Ok(())
}
