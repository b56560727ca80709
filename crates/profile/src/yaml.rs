//! A YAML document as a tree whose every node knows its line.
//!
//! Deserializing straight into typed structs stops at the first mistake;
//! a profile's author wants them all at once. So the document is read
//! into this untyped tree first (serde-saphyr's `Spanned` gives each node
//! its location) and [`super::parse`] walks it, collecting mistakes.
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

/// A node with where it is in the source.
pub(crate) type Node = Spanned<Value>;

#[derive(Debug)]
pub(crate) enum Value {
    Null,
    /// Booleans and floats are never what a profile field wants; only
    /// that they are one matters.
    Bool,
    Int(i128),
    Float,
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Value;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Value, E> {
                Ok(Value::Bool)
            }
            fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
                Ok(Value::Int(v.into()))
            }
            fn visit_i128<E>(self, v: i128) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u128<E>(self, v: u128) -> Result<Value, E> {
                Ok(i128::try_from(v).map_or(Value::Float, Value::Int))
            }
            fn visit_f64<E>(self, _: f64) -> Result<Value, E> {
                Ok(Value::Float)
            }
            fn visit_str<E>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Value, E> {
                Ok(Value::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = a.next_element()? {
                    items.push(item);
                }
                Ok(Value::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(key) = a.next_key()? {
                    let value = a.next_value()?;
                    entries.push((key, value));
                }
                Ok(Value::Map(entries))
            }
        }
        d.deserialize_any(V)
    }
}

/// A YAML syntax error: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub line: u64,
    pub message: String,
}

/// Parses one YAML document.
pub(crate) fn parse(src: &str) -> Result<Node, SyntaxError> {
    serde_saphyr::from_str::<Node>(src).map_err(|e| {
        let location = e.location();
        let line = location.map_or(0, |l| l.line());
        // The plain message ends with the location, which the caller says
        // its own way; the duplicate-key one carries advice for programmers.
        let mut message = e.without_snippet().to_string();
        if let Some(l) = location {
            let suffix = format!(" at line {}, column {}", l.line(), l.column());
            if let Some(m) = message.strip_suffix(&suffix) {
                message = format!("{m} (column {})", l.column());
            }
        }
        let message = message.replace(", set DuplicateKeyPolicy in Options if acceptable", "");
        SyntaxError { line, message }
    })
}

/// The line of a node (where it is used, for aliases).
pub(crate) fn line(node: &Node) -> u64 {
    node.referenced.line()
}

/// The node's text as written, for scalars YAML read as something else
/// than a string (`yes`, `n`, `0x1f`).
pub(crate) fn raw<'s>(src: &'s str, node: &Node) -> Option<&'s str> {
    let span = node.referenced.span();
    let start = usize::try_from(span.byte_offset()?).ok()?;
    let len = usize::try_from(span.byte_len()?).ok()?;
    src.get(start..start.checked_add(len)?)
}

/// What the node is, for "expected X, found Y" messages.
pub(crate) fn describe(src: &str, node: &Node) -> String {
    let text = || {
        raw(src, node)
            .map(|t| format!(" `{t}`"))
            .unwrap_or_default()
    };
    match &node.value {
        Value::Null => "nothing".to_owned(),
        Value::Bool => format!("a boolean{}", text()),
        Value::Int(_) | Value::Float => format!("a number{}", text()),
        Value::Str(s) => format!("the string `{s}`"),
        Value::Seq(_) => "a list".to_owned(),
        Value::Map(_) => "a mapping".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_know_their_lines_and_text() {
        let src = "# c\na: yes\nb:\n  - 1\n  - x\nc: \"q\"\n";
        let root = parse(src).unwrap();
        let Value::Map(entries) = &root.value else {
            panic!("{root:?}")
        };
        assert_eq!(entries.len(), 3);
        assert_eq!(line(&entries[0].0), 2);
        assert!(matches!(entries[0].1.value, Value::Bool));
        assert_eq!(raw(src, &entries[0].1), Some("yes"));
        let Value::Seq(items) = &entries[1].1.value else {
            panic!()
        };
        assert_eq!(items.iter().map(line).collect::<Vec<_>>(), [4, 5]);
        assert_eq!(describe(src, &items[0]), "a number `1`");
    }

    #[test]
    fn syntax_errors_have_a_line_and_no_advice_for_programmers() {
        let e = parse("a: [1, 2\nb: c\n").unwrap_err();
        assert_eq!(e.line, 2);
        assert_eq!(e.message, "illegal placement of ':' indicator (column 2)");
        let e = parse("a: 1\na: 2\n").unwrap_err();
        assert_eq!(
            e,
            SyntaxError {
                line: 2,
                message: "duplicate mapping key: a (column 1)".into()
            }
        );
    }
}
