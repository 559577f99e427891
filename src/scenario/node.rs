//! A TOML document as a tree in which every key and every value keeps its byte span, so
//! that every error, of syntax or of meaning, can name the line and column it is about.
//!
//! toml 0.8 hands spans out through serde_spanned's private struct protocol. We speak it
//! ourselves rather than use `toml::Spanned` because `toml::Spanned` fails on the
//! implicit tables of dotted keys (`min.insync.replicas = 1` unquoted), which carry no
//! span: we take the span when it is offered and borrow a neighbour's when it is not.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use std::fmt;
use std::ops::Range;

const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
/// toml presents a date-time as a one-entry map under this key.
const DATETIME_FIELD: &str = "$__toml_private_datetime";

/// Marks a span toml did not give; `fill_spans` replaces every one of them.
const UNKNOWN: Range<usize> = usize::MAX..usize::MAX;

/// A value and where it stands in the file.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node {
    pub span: Range<usize>,
    pub value: Value,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    String(String),
    Integer(i64),
    Float(f64),
    Boolean(bool),
    Datetime,
    Array(Vec<Node>),
    /// Entries in file order.
    Table(Vec<Entry>),
}

/// One `key = value` of a table.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub key: String,
    pub key_span: Range<usize>,
    pub value: Node,
}

impl Value {
    /// "a string", "an integer", ...: for "must be X, found Y" messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::String(_) => "a string",
            Value::Integer(_) => "an integer",
            Value::Float(_) => "a float",
            Value::Boolean(_) => "a boolean",
            Value::Datetime => "a date-time",
            Value::Array(_) => "an array",
            Value::Table(_) => "a table",
        }
    }
}

/// Parse `text` into its root table. Errors carry toml's span and message.
pub(crate) fn parse_document(text: &str) -> Result<Vec<Entry>, (Option<Range<usize>>, String)> {
    let mut root: Node = toml::from_str::<NodeSeedOwned>(text)
        .map(|n| n.0)
        .map_err(|e| (e.span(), e.message().trim_end().replace('\n', ": ")))?;
    fill_spans(&mut root, &(0..0));
    match root.value {
        Value::Table(entries) => Ok(entries),
        other => Err((
            None,
            format!("expected a table at the top, found {}", other.type_name()),
        )),
    }
}

/// 1-based line and column (in characters) of byte `offset`.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut end = offset.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let before = &text[..end];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// Give every node and key without a span the nearest known one: a value takes its key's
/// span, a key its value's, and both their parent's when neither is known.
fn fill_spans(node: &mut Node, parent: &Range<usize>) {
    if node.span == UNKNOWN {
        node.span = parent.clone();
    }
    let here = node.span.clone();
    match &mut node.value {
        Value::Array(items) => {
            for item in items {
                fill_spans(item, &here);
            }
        }
        Value::Table(entries) => {
            for entry in entries {
                if entry.key_span == UNKNOWN {
                    entry.key_span = if entry.value.span == UNKNOWN {
                        here.clone()
                    } else {
                        entry.value.span.clone()
                    };
                }
                let key_span = entry.key_span.clone();
                fill_spans(&mut entry.value, &key_span);
            }
        }
        _ => {}
    }
}

/// A whole node: asks for a span first (`deserialize_struct` with the spanned protocol).
struct NodeSeedOwned(Node);

impl<'de> de::Deserialize<'de> for NodeSeedOwned {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        SpannedSeed.deserialize(deserializer).map(NodeSeedOwned)
    }
}

struct SpannedSeed;

impl<'de> DeserializeSeed<'de> for SpannedSeed {
    type Value = Node;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, NodeVisitor)
    }
}

/// The value inside a span: must not ask for a span again (toml would offer it again).
struct InnerSeed;

impl<'de> DeserializeSeed<'de> for InnerSeed {
    type Value = Node;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Node, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

fn unspanned(value: Value) -> Node {
    Node {
        span: UNKNOWN,
        value,
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Node, E> {
        Ok(unspanned(Value::Boolean(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Node, E> {
        Ok(unspanned(Value::Integer(v)))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Node, E> {
        i64::try_from(v)
            .map(|v| unspanned(Value::Integer(v)))
            .map_err(|_| E::custom(format!("integer {v} is out of range")))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Node, E> {
        Ok(unspanned(Value::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Node, E> {
        Ok(unspanned(Value::String(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Node, E> {
        Ok(unspanned(Value::String(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(SpannedSeed)? {
            items.push(item);
        }
        Ok(unspanned(Value::Array(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
        let Some(first) = map.next_key_seed(KeySeed)? else {
            return Ok(unspanned(Value::Table(Vec::new())));
        };
        match first.key.as_str() {
            SPANNED_START => {
                let start: usize = map.next_value()?;
                let mut end = start;
                let mut inner = None;
                while let Some(field) = map.next_key_seed(KeySeed)? {
                    match field.key.as_str() {
                        SPANNED_END => end = map.next_value()?,
                        SPANNED_VALUE => inner = Some(map.next_value_seed(InnerSeed)?),
                        other => return Err(de::Error::unknown_field(other, SPANNED_FIELDS)),
                    }
                }
                let mut node = inner.ok_or_else(|| de::Error::missing_field(SPANNED_VALUE))?;
                node.span = start..end;
                Ok(node)
            }
            DATETIME_FIELD => {
                let _text: String = map.next_value()?;
                Ok(unspanned(Value::Datetime))
            }
            _ => {
                let mut entries = Vec::new();
                let value = map.next_value_seed(SpannedSeed)?;
                entries.push(Entry {
                    key: first.key,
                    key_span: first.span,
                    value,
                });
                while let Some(key) = map.next_key_seed(KeySeed)? {
                    let value = map.next_value_seed(SpannedSeed)?;
                    entries.push(Entry {
                        key: key.key,
                        key_span: key.span,
                        value,
                    });
                }
                Ok(unspanned(Value::Table(entries)))
            }
        }
    }
}

struct Key {
    key: String,
    span: Range<usize>,
}

struct KeySeed;

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, KeyVisitor)
    }
}

struct KeyVisitor;

impl<'de> Visitor<'de> for KeyVisitor {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(Key {
            key: v.to_owned(),
            span: UNKNOWN,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
        let mut start = None;
        let mut end = None;
        let mut key = None;
        while let Some(field) = map.next_key::<String>()? {
            match field.as_str() {
                SPANNED_START => start = Some(map.next_value::<usize>()?),
                SPANNED_END => end = Some(map.next_value::<usize>()?),
                SPANNED_VALUE => key = Some(map.next_value::<String>()?),
                other => return Err(de::Error::unknown_field(other, SPANNED_FIELDS)),
            }
        }
        let key = key.ok_or_else(|| de::Error::missing_field(SPANNED_VALUE))?;
        let span = match (start, end) {
            (Some(start), Some(end)) => start..end,
            _ => UNKNOWN,
        };
        Ok(Key { key, span })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice<'a>(text: &'a str, span: &Range<usize>) -> &'a str {
        &text[span.clone()]
    }

    #[test]
    fn keys_and_values_keep_their_spans() {
        let text = "a = 1\n[broker]\n\"min.insync.replicas\" = 2\nlist = [\"x\", 3]\n";
        let root = parse_document(text).unwrap();
        assert_eq!(root[0].key, "a");
        assert_eq!(slice(text, &root[0].key_span), "a");
        assert_eq!(slice(text, &root[0].value.span), "1");
        let Value::Table(broker) = &root[1].value.value else {
            panic!("not a table")
        };
        assert_eq!(slice(text, &broker[0].key_span), "\"min.insync.replicas\"");
        assert_eq!(broker[0].value.value, Value::Integer(2));
        let Value::Array(items) = &broker[1].value.value else {
            panic!("not an array")
        };
        assert_eq!(slice(text, &items[1].span), "3");
    }

    #[test]
    fn dotted_keys_parse_and_borrow_spans() {
        let text = "[broker]\nmin.insync.replicas = 2\n";
        let root = parse_document(text).unwrap();
        let Value::Table(broker) = &root[0].value.value else {
            panic!("not a table")
        };
        assert_eq!(broker[0].key, "min");
        let Value::Table(min) = &broker[0].value.value else {
            panic!("not a table")
        };
        assert_eq!(min[0].key, "insync");
        assert!(min[0].key_span.end <= text.len());
        let (line, _) = line_col(text, min[0].key_span.start);
        assert_eq!(line, 2);
    }

    #[test]
    fn datetimes_become_a_type_not_an_error() {
        let root = parse_document("a = 1979-05-27\n").unwrap();
        assert_eq!(root[0].value.value, Value::Datetime);
        assert_eq!(root[0].value.span, 4..14);
    }

    #[test]
    fn syntax_errors_carry_a_span() {
        let (span, message) = parse_document("a = 1\nb = [1, 2\n").unwrap_err();
        assert_eq!(span, Some(16..16));
        assert!(message.contains("invalid array"), "{message}");
    }

    #[test]
    fn line_col_counts_characters() {
        let text = "ab\ncdé f";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 3), (2, 1));
        assert_eq!(line_col(text, 7), (2, 4));
        assert_eq!(line_col(text, 6), (2, 3));
        assert_eq!(line_col(text, 1000), (2, 6));
    }
}
