//! The JSON Schema of a profile file, for editors: with a first line
//! `# yaml-language-server: $schema=PATH` in a profile, the YAML language
//! server (VS Code's YAML extension, Neovim, Helix, ...) completes keys and
//! mode, capability and fault names, shows each field's description, and
//! marks unknown keys and wrong shapes as one types.
//!
//! Generated from [`super::shape`], the description the checker takes
//! fields by, never written by hand: the two cannot drift apart. The schema
//! never rejects what `profile check` accepts (tests try every field's
//! mutations on both); it is looser where the checker looks at values
//! (name syntax, placeholders, files, fields one mode needs, how faults
//! are planted), which an editor cannot know in full anyway.
use serde_json::{Map, Value, json};

use super::shape::{self, Choice, Field, Kind, Shape};

/// The draft the schema is written in: draft-07, the one editors' YAML
/// support understands best; the schema needs nothing newer.
pub const DRAFT: &str = "http://json-schema.org/draft-07/schema#";

/// The start of the comment line that points the YAML language server at
/// the schema.
pub const COMMENT_PREFIX: &str = "# yaml-language-server: $schema=";

/// Where the schema is committed, relative to the repository.
pub const COMMITTED: &str = "docs/profile.schema.json";

/// The comment line naming `reference` (a path relative to the profile, or
/// a URL) as the profile's schema, without its newline.
pub fn comment(reference: &str) -> String {
    format!("{COMMENT_PREFIX}{reference}")
}

/// The schema of a profile file.
pub fn schema() -> Value {
    let mut root = object(&shape::PROFILE);
    let mut head = Map::new();
    head.insert("$schema".into(), json!(DRAFT));
    head.insert("title".into(), json!("dra-e2e driver profile"));
    head.append(&mut root);
    Value::Object(head)
}

/// The schema as written to a file: pretty, with a final newline.
pub fn text() -> String {
    let mut s = serde_json::to_string_pretty(&schema()).unwrap_or_else(|e| {
        // Serializing a Value of strings, numbers and maps cannot fail.
        unreachable!("serializing the schema: {e}")
    });
    s.push('\n');
    s
}

/// A mapping: its fields, no others, the required ones and the choice.
fn object(shape: &'static Shape) -> Map<String, Value> {
    let mut properties = Map::new();
    for f in shape.fields {
        properties.insert(f.key.into(), field(f, !f.required));
    }
    let mut o = Map::new();
    o.insert("description".into(), json!(shape.doc));
    o.insert("type".into(), json!("object"));
    o.insert("properties".into(), Value::Object(properties));
    // The checker reports every key the shape does not list.
    o.insert("additionalProperties".into(), json!(false));
    let required: Vec<&str> = shape
        .fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.key)
        .collect();
    if !required.is_empty() {
        o.insert("required".into(), json!(required));
    }
    let mut rules = mode_rules(shape);
    rules.extend(shape.choice.as_ref().map(|c| choice(shape, c)));
    if !rules.is_empty() {
        o.insert("allOf".into(), Value::Array(rules));
    }
    o
}

/// The alternative fields of which one (or at least one) must be set. Only
/// for a mapping: a null field (unset) would pass every branch, since
/// `required` holds for any non-object.
fn choice(shape: &'static Shape, choice: &Choice) -> Value {
    let (keyword, keys) = match choice {
        Choice::OneOf(keys) => ("oneOf", keys),
        Choice::AnyOf(keys) => ("anyOf", keys),
    };
    // Set means there and not null: a null field is unset.
    let branches: Vec<Value> = keys
        .iter()
        .filter_map(|k| shape.field(k))
        .map(|f| json!({"required": [f.key], "properties": {f.key: field(f, false)}}))
        .collect();
    json!({"if": {"type": "object"}, "then": {keyword: branches}})
}

/// For each field only some modes take: with any other mode it must be
/// unset (absent or null).
fn mode_rules(shape: &'static Shape) -> Vec<Value> {
    shape
        .fields
        .iter()
        .filter(|f| !f.modes.is_empty())
        .map(|f| {
            let others: Vec<&str> = crate::Mode::ALL
                .into_iter()
                .filter(|m| !f.modes.contains(m))
                .map(crate::Mode::name)
                .collect();
            json!({
                "if": {
                    "properties": {shape::MODE: {"enum": others}},
                    "required": [shape::MODE]
                },
                "then": {"properties": {f.key: {"type": "null"}}}
            })
        })
        .collect()
}

/// A field's value; `nullable` for a field that may be left without one
/// (`key:` with nothing is unset, as the checker reads it).
fn field(f: &Field, nullable: bool) -> Value {
    let mut s = Map::new();
    s.insert("description".into(), json!(f.doc));
    let ty = match &f.kind {
        Kind::Text { blank_ok } => {
            if !blank_ok {
                s.insert("pattern".into(), json!("\\S"));
            }
            "string"
        }
        Kind::Name(names) => {
            let mut values: Vec<Value> = names().into_iter().map(Value::from).collect();
            if nullable {
                values.push(Value::Null);
            }
            s.insert("enum".into(), Value::Array(values));
            "string"
        }
        Kind::List {
            names,
            min_items,
            unique,
        } => {
            let mut item = json!({"type": "string"});
            if let Some(names) = names {
                item["enum"] = json!(names());
            }
            s.insert("items".into(), item);
            if *min_items > 0 {
                s.insert("minItems".into(), json!(min_items));
            }
            if *unique {
                s.insert("uniqueItems".into(), json!(true));
            }
            "array"
        }
        Kind::Count => {
            s.insert("minimum".into(), json!(1));
            s.insert("maximum".into(), json!(u32::MAX));
            "integer"
        }
        Kind::Mapping(shape) => {
            let mut o = object(shape);
            // The field's own description goes first; the mapping's says
            // how to fill it in.
            if let Some(Value::String(how)) = o.remove("description") {
                s.insert("description".into(), json!(format!("{} {how}", f.doc)));
            }
            o.remove("type");
            s.append(&mut o);
            "object"
        }
    };
    let ty = if nullable {
        json!([ty, "null"])
    } else {
        json!(ty)
    };
    s.insert("type".into(), ty);
    Value::Object(s)
}

#[cfg(test)]
mod tests;
