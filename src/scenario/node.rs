//! A TOML document as a tree in which every key and every value keeps its byte span, so
//! that every error, of syntax or of meaning, can name the line and column it is about.
//!
//! The tree is read from toml_edit's `ImDocument`, whose keys and items keep their spans
//! through its public API. The implicit tables of unquoted dotted keys
//! (`min.insync.replicas = 1`) have no span of their own: they borrow a neighbour's.

use std::ops::Range;
use toml_edit::{ImDocument, InlineTable, Item, Key, Table};

/// Marks a span the document did not give; `fill_spans` replaces every one of them.
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
    let document = ImDocument::parse(text)
        .map_err(|e| (e.span(), e.message().trim_end().replace('\n', ": ")))?;
    let root = document.as_table();
    let mut entries = table_entries(root);
    fill_entries(&mut entries, &root.span().unwrap_or(0..0));
    Ok(entries)
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

/// `None` for `Item::None`, an entry removed from a table, which a parsed one never holds.
fn item(item: &Item) -> Option<Node> {
    match item {
        Item::None => None,
        Item::Value(value) => Some(self::value(value)),
        Item::Table(table) => Some(table_node(table)),
        Item::ArrayOfTables(tables) => Some(Node {
            span: spanned(tables.span()),
            value: Value::Array(tables.iter().map(table_node).collect()),
        }),
    }
}

fn table_node(table: &Table) -> Node {
    Node {
        span: spanned(table.span()),
        value: Value::Table(table_entries(table)),
    }
}

fn table_entries(table: &Table) -> Vec<Entry> {
    table
        .iter()
        .filter_map(|(name, _)| table.get_key_value(name))
        .filter_map(|(key, value)| Some(entry(key, item(value)?)))
        .collect()
}

fn value(value: &toml_edit::Value) -> Node {
    use toml_edit::Value as V;
    let converted = match value {
        V::String(text) => Value::String(text.value().clone()),
        V::Integer(integer) => Value::Integer(*integer.value()),
        V::Float(float) => Value::Float(*float.value()),
        V::Boolean(boolean) => Value::Boolean(*boolean.value()),
        V::Datetime(_) => Value::Datetime,
        V::Array(items) => Value::Array(items.iter().map(self::value).collect()),
        V::InlineTable(table) => Value::Table(inline_entries(table)),
    };
    Node {
        span: spanned(value.span()),
        value: converted,
    }
}

fn inline_entries(table: &InlineTable) -> Vec<Entry> {
    table
        .iter()
        .filter_map(|(name, _)| table.get_key_value(name))
        .filter_map(|(key, value)| Some(entry(key, item(value)?)))
        .collect()
}

fn entry(key: &Key, value: Node) -> Entry {
    Entry {
        key: key.get().to_owned(),
        key_span: spanned(key.span()),
        value,
    }
}

fn spanned(span: Option<Range<usize>>) -> Range<usize> {
    span.unwrap_or(UNKNOWN)
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
        Value::Table(entries) => fill_entries(entries, &here),
        _ => {}
    }
}

fn fill_entries(entries: &mut [Entry], parent: &Range<usize>) {
    for entry in entries {
        if entry.key_span == UNKNOWN {
            entry.key_span = if entry.value.span == UNKNOWN {
                parent.clone()
            } else {
                entry.value.span.clone()
            };
        }
        let key_span = entry.key_span.clone();
        fill_spans(&mut entry.value, &key_span);
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
