//! One variant of a scenario, on one seed, written back as a standalone scenario file: the
//! original text edited in place (its comments and layout kept), with the variant's
//! faults spelled out as `[[faults]]`, its expectations as one `[expect]`, and the
//! settings a caller changed (`duration`, the workload, the cluster's size) written
//! where the file keeps them. The other variants, the nemesis, the fault sets and
//! `test_seeds` go.
//!
//! The edit knows the file's layout, not the resolver's rules, so whoever writes a file
//! must parse it again and check that it resolves to the settings meant (`hightide
//! shrink` does).

use super::model::{added_latency, CorruptRegion, Fault, FaultAction, Settings, Target};
use super::values::format_duration;
use crate::check::{comparison_symbol, count_name, Comparison, Expectation};
use std::time::Duration;
use toml_edit::{value, Array, ArrayOfTables, DocumentMut, Item, Table, TableLike, Value};

/// What to write: the original file's text and what the standalone file holds instead.
pub struct Standalone<'a> {
    pub text: &'a str,
    /// The variant kept (the file's `[variants]`, if it has any, are cut to it).
    pub variant: &'a str,
    /// The settings the file resolved to for that variant, and the ones to write.
    pub original: &'a Settings,
    pub settings: &'a Settings,
    /// `--set PATH=VALUE` arguments the run had, written into the file.
    pub sets: &'a [String],
    pub expect: &'a [Expectation],
    /// Only those `[expect_some]` lines that stand in for a default zero
    /// (`check::DEFAULT_ZERO`): the rest speak of many seeds, and the file has one.
    pub expect_some: &'a [Expectation],
    pub name: &'a str,
    pub seed: u64,
    /// Comment lines (without `# `) to open the file with.
    pub header: &'a [String],
}

/// The standalone file's text. Errors say what of the original could not be edited.
pub fn standalone(what: &Standalone<'_>) -> Result<String, String> {
    let mut doc: DocumentMut = what
        .text
        .parse()
        .map_err(|e| format!("the original file no longer parses: {e}"))?;
    let root = doc.as_table_mut();
    for key in [
        "test_seeds",
        "nemesis",
        "fault_sets",
        "faults",
        "expect",
        "expect_some",
    ] {
        root.remove(key);
    }
    root.insert("name", value(what.name));
    root.insert("seeds", value(Array::from_iter([what.seed as i64])));
    let variant = keep_variant(root, what.variant)?;
    for set in what.sets {
        let (path, text) = set
            .split_once('=')
            .ok_or_else(|| format!("--set {set}: no `=`"))?;
        let path = path.trim();
        if path != "faults" {
            assign(root, variant, path, set_value(text.trim()))?;
        }
    }
    write_changes(root, variant, what.original, what.settings)?;
    root.insert("faults", Item::ArrayOfTables(faults(&what.settings.faults)));
    // A count the variant bounds twice (the top level's and its own) keeps its second
    // bound in the variant, as the file had it; one table holds one bound per count.
    let (first, again) = split_repeats(what.expect);
    root.insert("expect", Item::Table(expect(&first)));
    if !what.expect_some.is_empty() {
        root.insert("expect_some", Item::Table(expect(what.expect_some)));
    }
    if !again.is_empty() {
        let name = variant.ok_or("a count bounded twice in a file without [variants]")?;
        variant_table(root, name)?.insert(
            "expect",
            Item::Value(Value::InlineTable(expect(&again).into_inline_table())),
        );
    }
    let mut out = String::new();
    for line in what.header {
        out.push_str(&format!("# {line}\n").replace("# \n", "#\n"));
    }
    out.push('\n');
    out.push_str(doc.to_string().trim_start());
    Ok(out)
}

/// Drop every variant but `name`, and its own expectations and fault choice: the file's
/// top level now says them.
fn keep_variant<'a>(root: &mut Table, name: &'a str) -> Result<Option<&'a str>, String> {
    if !root.contains_key("variants") {
        return Ok(None);
    }
    let variants = root
        .get_mut("variants")
        .and_then(Item::as_table_like_mut)
        .ok_or("the file has no [variants]")?;
    let others: Vec<String> = variants
        .iter()
        .map(|(key, _)| key.to_owned())
        .filter(|key| key != name)
        .collect();
    for other in others {
        variants.remove(&other);
    }
    let kept = variant_table(root, name)?;
    for key in ["expect", "expect_some", "faults"] {
        kept.remove(key);
    }
    Ok(Some(name))
}

fn variant_table<'t>(root: &'t mut Table, name: &str) -> Result<&'t mut dyn TableLike, String> {
    root.get_mut("variants")
        .and_then(Item::as_table_like_mut)
        .and_then(|variants| variants.get_mut(name))
        .and_then(Item::as_table_like_mut)
        .ok_or_else(|| format!("the file has no variant `{name}`"))
}

/// A `--set` value as the command line reads it (`parse/overrides.rs`): TOML, except that
/// a float or a date-time (`3.9`) is a string, as is anything that is not TOML.
fn set_value(text: &str) -> Item {
    match text.parse::<Value>() {
        Ok(Value::Float(_) | Value::Datetime(_)) | Err(_) => value(text),
        Ok(mut parsed) => {
            // The file's own spacing, not the argument's.
            parsed.decor_mut().clear();
            Item::Value(parsed)
        }
    }
}

/// Set `path` (`duration`, `workload.rate`, `broker.min.insync.replicas`) at the top
/// level, taking it out of the kept variant, which would otherwise win over it.
fn assign(root: &mut Table, variant: Option<&str>, path: &str, item: Item) -> Result<(), String> {
    if let Some(name) = variant {
        remove_path(variant_table(root, name)?, path);
    }
    match path.split_once('.') {
        None => {
            root.insert(path, item);
        }
        Some((section, key)) => {
            let table = root
                .entry(section)
                .or_insert_with(toml_edit::table)
                .as_table_like_mut()
                .ok_or_else(|| format!("`{section}` is not a table"))?;
            remove_path(table, key);
            table.insert(key, item);
        }
    }
    Ok(())
}

/// Remove the value at dotted `path` however the file spells it: `"workload.rate"`,
/// `workload.rate` or `workload = { rate = 5 }`; a table it empties goes too.
fn remove_path(table: &mut dyn TableLike, path: &str) -> bool {
    if table.remove(path).is_some() {
        return true;
    }
    let keys: Vec<String> = table.iter().map(|(key, _)| key.to_owned()).collect();
    for key in keys {
        let Some(rest) = path
            .strip_prefix(key.as_str())
            .and_then(|rest| rest.strip_prefix('.'))
        else {
            continue;
        };
        let Some(inner) = table.get_mut(&key).and_then(Item::as_table_like_mut) else {
            continue;
        };
        if remove_path(inner, rest) {
            if inner.is_empty() {
                table.remove(&key);
            }
            return true;
        }
    }
    false
}

/// The settings a shrink may change, written where they differ from the original's.
fn write_changes(
    root: &mut Table,
    variant: Option<&str>,
    original: &Settings,
    settings: &Settings,
) -> Result<(), String> {
    if settings.duration != original.duration {
        let duration = format_duration(settings.duration);
        assign(root, variant, "duration", value(duration))?;
    }
    let (old, new) = (&original.workload, &settings.workload);
    let counts = [
        ("workload.rate", old.rate, new.rate),
        ("workload.producers", old.producers, new.producers),
        ("workload.consumers", old.consumers, new.consumers),
    ];
    for (path, old, new) in counts {
        if old != new {
            assign(root, variant, path, value(i64::from(new)))?;
        }
    }
    if let (Some(messages), true) = (new.messages, new.messages != old.messages) {
        let messages = i64::try_from(messages).map_err(|_| "too many messages")?;
        assign(root, variant, "workload.messages", value(messages))?;
    }
    if settings.cluster.brokers != original.cluster.brokers {
        let brokers = i64::from(settings.cluster.brokers);
        assign(root, variant, "cluster.brokers", value(brokers))?;
    }
    for (i, (old, new)) in original
        .cluster
        .topics
        .iter()
        .zip(&settings.cluster.topics)
        .enumerate()
    {
        if old.partitions != new.partitions {
            set_partitions(root, i, new.partitions)?;
        }
    }
    Ok(())
}

/// `partitions` of the `i`-th topic of `[cluster] topics`, an array of inline tables or
/// of `[[cluster.topics]]` tables.
fn set_partitions(root: &mut Table, i: usize, partitions: u32) -> Result<(), String> {
    let topics = root
        .get_mut("cluster")
        .and_then(Item::as_table_like_mut)
        .and_then(|cluster| cluster.get_mut("topics"))
        .ok_or("the file's [cluster] has no topics")?;
    let partitions = i64::from(partitions);
    let topic: Option<&mut dyn TableLike> = match topics {
        Item::ArrayOfTables(tables) => tables.get_mut(i).map(|t| t as &mut dyn TableLike),
        Item::Value(Value::Array(array)) => array
            .get_mut(i)
            .and_then(Value::as_inline_table_mut)
            .map(|t| t as &mut dyn TableLike),
        _ => None,
    };
    let topic = topic.ok_or_else(|| format!("topic {} of [cluster] is not a table", i + 1))?;
    match topic.get_mut("partitions") {
        Some(item) => *item = value(partitions),
        None => {
            topic.insert("partitions", value(partitions));
        }
    }
    Ok(())
}

/// A slowdown's `latency` and its rate (`bandwidth` or `throughput`), each if it has one.
fn insert_slowdown(table: &mut Table, latency: Duration, (key, rate): (&str, Option<u64>)) {
    if let Some(latency) = added_latency(latency, rate) {
        table.insert("latency", value(format_duration(latency)));
    }
    if let Some(bytes_per_second) = rate {
        table.insert(
            key,
            value(i64::try_from(bytes_per_second).unwrap_or(i64::MAX)),
        );
    }
}

/// Each fault as a `[[faults]]` table, in firing order.
fn faults(faults: &[Fault]) -> ArrayOfTables {
    let mut tables = ArrayOfTables::new();
    for fault in faults {
        let mut table = Table::new();
        table.insert("at", value(format_duration(fault.at)));
        if !fault.jitter.is_zero() {
            table.insert("jitter", value(format_duration(fault.jitter)));
        }
        table.insert("action", value(fault.action.kind().name()));
        if let Some(target) = fault.action.target() {
            table.insert("target", value(target_value(target)));
        }
        match &fault.action {
            FaultAction::Partition(groups) => {
                let groups: Array = groups.iter().map(target_value).collect();
                table.insert("groups", value(groups));
            }
            FaultAction::SlowLink {
                between,
                latency,
                bandwidth,
            } => {
                let pair = Array::from_iter([target_value(&between.0), target_value(&between.1)]);
                table.insert("between", value(pair));
                insert_slowdown(&mut table, *latency, ("bandwidth", *bandwidth));
            }
            FaultAction::SlowDisk {
                latency,
                throughput,
                ..
            } => insert_slowdown(&mut table, *latency, ("throughput", *throughput)),
            FaultAction::Corrupt {
                file,
                bytes,
                region,
                ..
            } => {
                table.insert("file", value(file.as_str()));
                table.insert("bytes", value(i64::try_from(*bytes).unwrap_or(i64::MAX)));
                if *region != CorruptRegion::Tail {
                    table.insert("region", value(region.name()));
                }
            }
            _ => {}
        }
        tables.push(table);
    }
    tables
}

/// A target as a file writes it: a name, or an array of names for a list.
fn target_value(target: &Target) -> Value {
    match target {
        Target::List(targets) => Value::Array(targets.iter().map(target_value).collect()),
        one => Value::from(one.to_string()),
    }
}

/// The expectations with each count's first bound, and the later bounds of a count.
fn split_repeats(expect: &[Expectation]) -> (Vec<Expectation>, Vec<Expectation>) {
    let mut first: Vec<Expectation> = Vec::new();
    let mut again = Vec::new();
    for &e in expect {
        if first.iter().any(|f| f.count == e.count) {
            again.push(e);
        } else {
            first.push(e);
        }
    }
    (first, again)
}

/// `[expect]` with every expectation: `lost = 0`, `acked = "> 10000"`.
fn expect(expect: &[Expectation]) -> Table {
    let mut table = Table::new();
    for e in expect {
        let item = match (e.comparison, i64::try_from(e.value)) {
            (Comparison::Eq, Ok(exact)) => value(exact),
            (comparison, _) => value(format!("{} {}", comparison_symbol(comparison), e.value)),
        };
        table.insert(count_name(e.count), item);
    }
    table
}
