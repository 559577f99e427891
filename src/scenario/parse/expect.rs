//! `[expect]` and `[expect_some]`: a bound on each named checker count.

use super::{keys, table};
use crate::check::{count_name, Comparison, Count, Expectation};
use crate::scenario::node::{Node, Value};
use crate::scenario::values::parse_comparison;
use crate::scenario::{suggest, Error};

pub(super) fn read_expect(node: &Node, context: &str) -> Result<Vec<Expectation>, Error> {
    let names: Vec<&str> = Count::ALL.iter().map(|c| count_name(*c)).collect();
    let mut expectations = Vec::new();
    for entry in table(context, node)? {
        let Some(count) = Count::ALL.iter().find(|c| count_name(**c) == entry.key) else {
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
