//! A parsed JSON or YAML value that remembers where each part of it was in the source, so that
//! problems found while mapping it onto the case model can name a line and column.

use std::borrow::Cow;

use serde_json::{Number, Value};

use crate::pointer::Ptr;

/// Largest integer every JSON implementation reads exactly (2^53).
pub const MAX_SAFE_INTEGER: u64 = 1 << 53;

#[derive(Debug, Clone, PartialEq)]
pub struct Node<'s> {
    /// Byte offset of the node's first character in its document.
    pub offset: usize,
    pub value: NodeValue<'s>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue<'s> {
    Null,
    Bool(bool),
    /// A number as written: its JSON spelling, already checked against the JSON grammar.
    Number(Cow<'s, str>),
    /// Borrowed from the source text unless it had escapes.
    String(Cow<'s, str>),
    Array(Vec<Node<'s>>),
    Object(Vec<Entry<'s>>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'s> {
    pub key: Cow<'s, str>,
    pub key_offset: usize,
    pub value: Node<'s>,
}

/// What a streaming parser hands over while it parses (see `json::parse_streaming` and
/// `yaml::parse_streaming`).
pub enum Streamed<'a> {
    /// A list at one of the streamed paths begins. `root` is the document so far, with that list
    /// present and empty; `path` says which one it is.
    Begin { path: &'static [&'static str], root: Node<'a>, offset: usize },
    /// The next item of that list.
    Item(Node<'a>),
}

/// Why a node could not become a JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum ValueError {
    /// An integer beyond ±2^53, which not every reader can hold exactly.
    IntegerRange { offset: usize, pointer: String, text: String },
    /// A number that JSON cannot represent (YAML `.inf`, `.nan`) or that overflows a float.
    NotFinite { offset: usize, pointer: String, text: String },
}

impl NodeValue<'_> {
    /// What a user would call this kind of value, for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Number(text) if is_integer(text) => "an integer",
            NodeValue::Number(_) => "a number",
            NodeValue::String(_) => "a string",
            NodeValue::Array(_) => "an array",
            NodeValue::Object(_) => "an object",
        }
    }
}

impl<'s> Node<'s> {
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::String(text) => Some(text),
            _ => None,
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, NodeValue::Null)
    }

    /// The same node, owning all its text.
    pub fn into_owned(self) -> Node<'static> {
        let value = match self.value {
            NodeValue::Null => NodeValue::Null,
            NodeValue::Bool(b) => NodeValue::Bool(b),
            NodeValue::Number(n) => NodeValue::Number(Cow::Owned(n.into_owned())),
            NodeValue::String(s) => NodeValue::String(Cow::Owned(s.into_owned())),
            NodeValue::Array(items) => NodeValue::Array(items.into_iter().map(Node::into_owned).collect()),
            NodeValue::Object(entries) => NodeValue::Object(
                entries
                    .into_iter()
                    .map(|e| Entry {
                        key: Cow::Owned(e.key.into_owned()),
                        key_offset: e.key_offset,
                        value: e.value.into_owned(),
                    })
                    .collect(),
            ),
        };
        Node { offset: self.offset, value }
    }

    /// Looks up a key of an object node.
    pub fn get(&self, key: &str) -> Option<&Node<'s>> {
        match &self.value {
            NodeValue::Object(entries) => entries.iter().find(|e| e.key == key).map(|e| &e.value),
            _ => None,
        }
    }

    /// Converts to a JSON value, refusing integers that are not exactly portable.
    pub fn to_value(&self, ptr: &Ptr<'_>) -> Result<Value, ValueError> {
        Ok(match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Number(text) => Value::Number(number(text, self.offset, ptr)?),
            NodeValue::String(s) => Value::String(s.to_string()),
            NodeValue::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    out.push(item.to_value(&ptr.index(i))?);
                }
                Value::Array(out)
            }
            NodeValue::Object(entries) => {
                let mut out = serde_json::Map::with_capacity(entries.len());
                for entry in entries {
                    out.insert(entry.key.to_string(), entry.value.to_value(&ptr.key(&entry.key))?);
                }
                Value::Object(out)
            }
        })
    }
}

pub fn is_integer(text: &str) -> bool {
    !text.bytes().any(|b| matches!(b, b'.' | b'e' | b'E'))
}

fn number(text: &str, offset: usize, ptr: &Ptr<'_>) -> Result<Number, ValueError> {
    if is_integer(text) {
        let (negative, digits) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        match digits.parse::<u64>() {
            Ok(magnitude) if magnitude <= MAX_SAFE_INTEGER => {
                let value = magnitude as i64;
                return Ok(Number::from(if negative { -value } else { value }));
            }
            _ => {
                return Err(ValueError::IntegerRange { offset, pointer: ptr.to_string(), text: text.to_owned() });
            }
        }
    }
    text.parse::<f64>().ok().and_then(Number::from_f64).ok_or_else(|| ValueError::NotFinite {
        offset,
        pointer: ptr.to_string(),
        text: text.to_owned(),
    })
}
