//! The walk's tools: the context that collects mistakes, and mappings
//! whose fields are taken by their key in the shape, so that every reader
//! reports a wrong type, a missing field or an unknown key the same way,
//! with its line and field path.
use std::path::{Path, PathBuf};

use super::Options;
use crate::Mistake;
use crate::names::closest;
use crate::shape::{self, Kind, Shape};
use crate::yaml::{self, Node, Value, describe, line};

pub(super) struct Ctx<'s> {
    pub(super) src: &'s str,
    pub(super) dir: PathBuf,
    pub(super) options: Options,
    pub(super) mistakes: Vec<Mistake>,
}

impl Ctx<'_> {
    pub(super) fn mistake(&mut self, line: u64, field: &str, message: impl Into<String>) {
        self.mistakes.push(Mistake {
            line,
            field: Some(field.to_owned()),
            message: message.into(),
        });
    }

    pub(super) fn expected(&mut self, node: &Node, field: &str, what: &str) {
        let found = describe(self.src, node);
        let hint = match &node.value {
            Value::Bool | Value::Int(_) | Value::Float if what.contains("string") => {
                " (quote it to make it a string)"
            }
            _ => "",
        };
        self.mistake(
            line(node),
            field,
            format!("expected {what}, found {found}{hint}"),
        );
    }

    pub(super) fn string(&mut self, node: &Node, field: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                self.expected(node, field, "a string");
                None
            }
        }
    }

    /// A list of strings: each item with its line and field path; items
    /// that are no string are reported and left out.
    pub(super) fn strings(&mut self, node: &Node, field: &str) -> Option<Vec<Item>> {
        let Value::Seq(items) = &node.value else {
            self.expected(node, field, "a list of strings");
            return None;
        };
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let f = format!("{field}[{i}]");
            if let Some(s) = self.string(item, &f) {
                out.push(Item {
                    value: s,
                    line: line(item),
                    field: f,
                });
            }
        }
        Some(out)
    }

    /// A mapping of `shape`, whose fields are then taken one by one.
    pub(super) fn map<'n>(
        &mut self,
        node: &'n Node,
        field: &str,
        at: u64,
        shape: &'static Shape,
    ) -> Option<Map<'n>> {
        let Value::Map(entries) = &node.value else {
            self.expected(node, field, "a mapping");
            return None;
        };
        let entries = entries
            .iter()
            .map(|(k, v)| {
                let key = match &k.value {
                    Value::Str(s) => s.clone(),
                    _ => yaml::raw(self.src, k)
                        .map(str::to_owned)
                        .unwrap_or_else(|| describe(self.src, k)),
                };
                // `: value` has a key of no text; a path ending in nothing
                // (field ``) would not say which field is meant.
                let key = if key.trim().is_empty() {
                    format!("<empty key {key:?}>")
                } else {
                    key
                };
                (key, line(k), v)
            })
            .collect();
        Some(Map {
            shape,
            field: field.to_owned(),
            line: at,
            entries,
            taken: Vec::new(),
        })
    }

    /// The mapping a field of kind [`Kind::Mapping`] holds, of the shape
    /// that kind names.
    pub(super) fn mapping<'n>(&mut self, f: &Field<'n>) -> Option<Map<'n>> {
        let Kind::Mapping(shape) = f.spec.kind else {
            self.bug(f, "a mapping");
            return None;
        };
        self.map(f.node, &f.path, f.line, shape)
    }

    /// A field of kind [`Kind::Text`] or [`Kind::Name`].
    pub(super) fn text(&mut self, f: &Field) -> Option<String> {
        if !matches!(f.spec.kind, Kind::Text { .. } | Kind::Name(_)) {
            self.bug(f, "a string");
            return None;
        }
        self.string(f.node, &f.path)
    }

    /// A field of kind [`Kind::List`].
    pub(super) fn list(&mut self, f: &Field) -> Option<Vec<Item>> {
        if !matches!(f.spec.kind, Kind::List { .. }) {
            self.bug(f, "a list");
            return None;
        }
        self.strings(f.node, &f.path)
    }

    /// The checker reads a field otherwise than [`shape`] describes it: a
    /// bug of dra-e2e's, said rather than hidden (tests walk every field).
    pub(super) fn bug(&mut self, f: &Field, read_as: &str) {
        self.mistake(
            f.line,
            &f.path,
            format!(
                "read as {read_as}, but the profile's shape says {} (a bug in dra-e2e)",
                f.spec.kind.what()
            ),
        );
    }

    /// A relative path resolved against the profile's directory and, when
    /// files are checked, required to be an existing file.
    pub(super) fn file(&mut self, item: &Item, what: &str) -> PathBuf {
        let path = lexical(&self.dir.join(&item.value));
        if self.options.check_files {
            let problem = match std::fs::metadata(&path) {
                Ok(m) if m.is_file() => None,
                Ok(_) => Some(format!("{what} {} is not a file", path.display())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Some(format!("{what} {} does not exist", path.display()))
                }
                Err(e) => Some(format!("{what} {}: {e}", path.display())),
            };
            if let Some(p) = problem {
                let relative = if Path::new(&item.value).is_relative() {
                    " (relative paths are relative to the profile's directory; `--no-files` \
                     skips this check for files a build has yet to produce)"
                } else {
                    " (`--no-files` skips this check for files a build has yet to produce)"
                };
                self.mistake(item.line, &item.field, format!("{p}{relative}"));
            }
        }
        path
    }
}

/// `a/b/../c` as `a/c`, for paths the user reads back in messages (a
/// profile's `../target/x` stays readable); symlinks are not resolved.
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other),
        }
    }
    out
}

pub(super) struct Item {
    pub(super) value: String,
    pub(super) line: u64,
    pub(super) field: String,
}

pub(super) struct Map<'n> {
    /// Its keys and their kinds.
    pub(super) shape: &'static Shape,
    pub(super) field: String,
    /// Where the mapping is: its key's line (the first field's for the
    /// root), where missing fields are reported.
    pub(super) line: u64,
    pub(super) entries: Vec<(String, u64, &'n Node)>,
    pub(super) taken: Vec<usize>,
}

/// A field that is set: its value, the line of its key, its path and
/// what the shape says it is.
pub(super) struct Field<'n> {
    pub(super) spec: &'static shape::Field,
    pub(super) node: &'n Node,
    pub(super) line: u64,
    pub(super) path: String,
}

impl<'n> Map<'n> {
    pub(super) fn path(&self, key: &str) -> String {
        if self.field.is_empty() {
            key.to_owned()
        } else {
            format!("{}.{key}", self.field)
        }
    }

    /// The field `key` of the shape; `None` when absent or null (`key:`
    /// with nothing).
    pub(super) fn take(&mut self, key: &str) -> Option<Field<'n>> {
        // A key the shape lacks is never taken, so a user's field of that
        // name is reported unknown: the checker cannot accept more than the
        // schema. Tests catch the slip.
        let Some(spec) = self.shape.field(key) else {
            debug_assert!(false, "{key} is no field of {}", self.field);
            return None;
        };
        let i = self.entries.iter().position(|(k, _, _)| k == key)?;
        self.taken.push(i);
        let (_, line, node) = self.entries[i];
        match node.value {
            Value::Null => None,
            _ => Some(Field {
                spec,
                node,
                line,
                path: self.path(key),
            }),
        }
    }

    /// Whether `key` is there with a value (a null one counts as unset).
    pub(super) fn has(&self, key: &str) -> bool {
        self.entries
            .iter()
            .any(|(k, _, n)| k == key && !matches!(n.value, Value::Null))
    }

    pub(super) fn missing(&self, ctx: &mut Ctx, key: &str, what: &str) {
        ctx.mistake(self.line, &self.path(key), format!("missing: {what}"));
    }

    /// Takes a field that must be there; reports it missing (saying
    /// `what` it is) when it is not.
    pub(super) fn required(&mut self, ctx: &mut Ctx, key: &str, what: &str) -> Option<Field<'n>> {
        debug_assert!(
            self.shape.field(key).is_some_and(|f| f.required),
            "{key} is no required field of the shape"
        );
        let field = self.take(key);
        if field.is_none() {
            self.missing(ctx, key, what);
        }
        field
    }

    /// Reports the fields nobody took: typos, or fields of another version.
    pub(super) fn finish(self, ctx: &mut Ctx) {
        let known = self.shape.keys();
        for (i, (key, line, _)) in self.entries.iter().enumerate() {
            if self.taken.contains(&i) {
                continue;
            }
            let hint = match closest(key, known.iter().copied()) {
                Some(k) => format!(" (did you mean `{k}`?)"),
                None => format!(" (known: {})", known.join(", ")),
            };
            ctx.mistake(*line, &self.path(key), format!("unknown field{hint}"));
        }
    }
}
