//! `[expect]` and `[expect_some]`: a bound on each named checker count.

use super::{keys, table};
use crate::check::{Comparison, Count, Expectation};
use crate::scenario::node::{Node, Value};
use crate::scenario::values::parse_comparison;
use crate::scenario::{suggest, Error};

const COUNTS: &[(&str, Count)] = &[
    ("attempted", Count::Attempted),
    ("acked", Count::Acked),
    ("failed", Count::Failed),
    ("indeterminate", Count::Indeterminate),
    ("lost", Count::Lost),
    ("moved", Count::Moved),
    ("duplicates", Count::Duplicates),
    ("unexpected", Count::Unexpected),
    ("reordered", Count::Reordered),
    ("dirty_reads", Count::DirtyReads),
    ("divergent", Count::Divergent),
    ("offline", Count::Offline),
];

pub(super) fn read_expect(node: &Node, context: &str) -> Result<Vec<Expectation>, Error> {
    let names: Vec<&str> = COUNTS.iter().map(|(n, _)| *n).collect();
    let mut expectations = Vec::new();
    for entry in table(context, node)? {
        let Some((_, count)) = COUNTS.iter().find(|(n, _)| *n == entry.key) else {
            let mut message = format!("unknown count `{}` in {context}", entry.key);
            match suggest(&entry.key, &names) {
                Some(near) => message.push_str(&format!("; did you mean `{near}`?")),
                None => message.push_str(&format!("; expected one of: {}", names.join(", "))),
            }
            return Err(Error::at(&entry.key_span, message));
        };
        let value = &entry.value;
        let (comparison, bound) = match &value.value {
            Value::Integer(exact) => match u64::try_from(*exact) {
                Ok(exact) => (Comparison::Eq, exact),
                Err(_) => {
                    return Err(Error::at(
                        &value.span,
                        format!(
                            "a count is never negative: `{}` = {exact} cannot hold",
                            entry.key
                        ),
                    ))
                }
            },
            Value::String(text) => parse_comparison(text).map_err(|m| Error::at(&value.span, m))?,
            _ => {
                return Err(keys::wrong_type(
                    &entry.key,
                    "an integer or a comparison like \"> 0\"",
                    value,
                ))
            }
        };
        expectations.push(Expectation {
            count: *count,
            comparison,
            value: bound,
        });
    }
    Ok(expectations)
}
