//! `[nemesis]`: which fault actions the nemesis draws from, and how often.

use super::misplaced::unknown_key;
use super::{keys, table};
use crate::scenario::model::{Nemesis, NemesisAction};
use crate::scenario::node::{Node, Value};
use crate::scenario::{suggest, Error};
use std::time::Duration;

pub(super) const NEMESIS_KEYS: &[&str] = &["actions", "interval", "recover"];

pub(super) fn read_nemesis(node: &Node) -> Result<Nemesis, Error> {
    let entries = table("nemesis", node)?;
    let mut actions = None;
    let mut interval = None;
    let mut recover = None;
    for e in entries {
        match e.key.as_str() {
            "actions" => {
                let Value::Array(items) = &e.value.value else {
                    return Err(keys::wrong_type(
                        "actions",
                        "an array of fault actions",
                        &e.value,
                    ));
                };
                if items.is_empty() {
                    return Err(Error::at(&e.value.span, "`actions` is empty".to_owned()));
                }
                let mut list = Vec::with_capacity(items.len());
                for item in items {
                    let name = keys::string("an action", item)?;
                    let names: Vec<&str> =
                        NemesisAction::ALL.iter().map(|a| a.kind().name()).collect();
                    let Some(action) = NemesisAction::ALL.iter().find(|a| a.kind().name() == name)
                    else {
                        let mut message = format!("unknown nemesis action `{name}`");
                        match suggest(name, &names) {
                            Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
                            None => message
                                .push_str(&format!("; expected one of: {}", names.join(", "))),
                        }
                        return Err(Error::at(&item.span, message));
                    };
                    list.push(*action);
                }
                actions = Some(list);
            }
            "interval" => interval = Some(positive_duration("interval", &e.value)?),
            "recover" => recover = Some(positive_duration("recover", &e.value)?),
            other => return Err(unknown_key(other, &e.key_span, "[nemesis]", NEMESIS_KEYS)),
        }
    }
    let missing = |key: &str| Error::at(&node.span, format!("missing `{key}` in [nemesis]"));
    Ok(Nemesis {
        actions: actions.ok_or_else(|| missing("actions"))?,
        interval: interval.ok_or_else(|| missing("interval"))?,
        recover: recover.ok_or_else(|| missing("recover"))?,
    })
}

fn positive_duration(name: &str, node: &Node) -> Result<Duration, Error> {
    let duration = keys::duration(name, node)?;
    if duration.is_zero() {
        return Err(Error::at(
            &node.span,
            format!("`{name}` must be longer than 0s"),
        ));
    }
    Ok(duration)
}
