//! The subset rule: does an object (as JSON) hold what was expected of it?
//! One rule for every check that compares an object with a YAML
//! expectation or with what was sent: a scenario's `... has:` steps, what
//! an update returned, and upstream's conformance content check.
//!
//! `actual` holds `expected` when:
//!
//! - **mappings**: every key of `expected` is in `actual` and its value
//!   holds the expected one; `actual` may have more keys (the server
//!   defaults fields, controllers add theirs). An expected `null` holds for
//!   an absent key or a `null` (as `null` in a merge patch removes a key);
//! - **lists**: an ordered prefix. `actual` has at least as many entries,
//!   and its entry `i` holds the expected entry `i`; entries after the
//!   expected ones are allowed (a controller appends a condition after the
//!   one a test wrote). Order matters, so a failure names the entry by its
//!   index, and an expected entry with no counterpart is *missing*;
//! - **anything else**: equal as JSON.
//!
//! A failure names the path of the first difference (`.spec.devices[0].name`).
use std::fmt;

use serde_json::Value;

/// Where an object does not hold what was expected: the path of the first
/// difference, after the path the check started at, and what differs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} {problem}")]
pub struct Mismatch {
    pub path: String,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The expected field or list entry is not there.
    Missing { expected: Value },
    /// It is there with another value.
    Differs { actual: Value, expected: Value },
    /// It is there but not expected ([`equals_at`] only).
    Unexpected,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Missing { expected } => write!(f, "is missing (expected {expected})"),
            Problem::Differs { actual, expected } => write!(f, "is {actual}, expected {expected}"),
            Problem::Unexpected => f.write_str("is there, but not expected"),
        }
    }
}

/// Checks that `actual` holds `expected` (the rule above); the paths of a
/// failure start with `.`.
pub fn contains(actual: &Value, expected: &Value) -> Result<(), Mismatch> {
    contains_at("", actual, expected)
}

/// [`contains`] for values found at `path`, which starts the failure's path.
pub fn contains_at(path: &str, actual: &Value, expected: &Value) -> Result<(), Mismatch> {
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            for (k, ev) in e {
                let p = format!("{path}.{k}");
                match a.get(k) {
                    Some(av) => contains_at(&p, av, ev)?,
                    None if ev.is_null() => {}
                    None => return Err(missing(p, ev)),
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(e)) => {
            for (i, ev) in e.iter().enumerate() {
                let p = format!("{path}[{i}]");
                match a.get(i) {
                    Some(av) => contains_at(&p, av, ev)?,
                    None => return Err(missing(p, ev)),
                }
            }
            Ok(())
        }
        _ if actual == expected => Ok(()),
        _ => Err(Mismatch {
            path: path.to_owned(),
            problem: Problem::Differs {
                actual: actual.clone(),
                expected: expected.clone(),
            },
        }),
    }
}

fn missing(path: String, expected: &Value) -> Mismatch {
    Mismatch {
        path,
        problem: Problem::Missing {
            expected: expected.clone(),
        },
    }
}

/// Checks that `actual`, found at `path`, is `expected`: it holds it
/// ([`contains_at`]) and has nothing more, no other key (but `null` ones)
/// and no list entry after the expected ones. The failure names the first
/// difference.
pub fn equals_at(path: &str, actual: &Value, expected: &Value) -> Result<(), Mismatch> {
    contains_at(path, actual, expected)?;
    nothing_more(path, actual, expected)
}

/// The first part of `actual` that `expected` lacks.
fn nothing_more(path: &str, actual: &Value, expected: &Value) -> Result<(), Mismatch> {
    let unexpected = |path: String| {
        Err(Mismatch {
            path,
            problem: Problem::Unexpected,
        })
    };
    match (actual, expected) {
        (Value::Object(a), Value::Object(e)) => {
            for (k, av) in a {
                let p = format!("{path}.{k}");
                match e.get(k) {
                    Some(ev) => nothing_more(&p, av, ev)?,
                    None if av.is_null() => {}
                    None => return unexpected(p),
                }
            }
            Ok(())
        }
        (Value::Array(a), Value::Array(e)) => {
            for (i, av) in a.iter().enumerate() {
                let p = format!("{path}[{i}]");
                match e.get(i) {
                    Some(ev) => nothing_more(&p, av, ev)?,
                    None => return unexpected(p),
                }
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The value at a dotted path (`status.devices`), `null` where it is absent.
pub fn value_at<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .filter(|k| !k.is_empty())
        .try_fold(v, |v, k| v.get(k))
        .unwrap_or(&Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object() -> Value {
        json!({
            "spec": { "a": 1, "b": [ { "x": "y", "z": 2 } ] },
            "status": { "conditions": [ { "type": "Ours" }, { "type": "Controller's" } ] },
            "extra": true,
        })
    }

    #[test]
    fn more_keys_and_later_entries_are_allowed() {
        let got = object();
        assert_eq!(contains(&got, &json!({ "spec": { "a": 1 } })), Ok(()));
        assert_eq!(
            contains(&got, &json!({ "spec": { "b": [ { "x": "y" } ] } })),
            Ok(())
        );
        // A controller appended a condition after the one that was sent.
        assert_eq!(
            contains(
                &got,
                &json!({ "status": { "conditions": [ { "type": "Ours" } ] } })
            ),
            Ok(())
        );
        assert_eq!(contains(&got, &json!({ "spec": { "b": [] } })), Ok(()));
        // null in the expectation means "absent or null".
        assert_eq!(contains(&got, &json!({ "gone": null })), Ok(()));
    }

    #[test]
    fn a_missing_list_entry_is_refused_by_its_path() {
        let got = object();
        let want = json!({ "status": { "conditions": [ { "type": "Ours" }, { "type": "Controller's" }, { "type": "Third" } ] } });
        let e = contains(&got, &want).unwrap_err();
        assert_eq!(e.path, ".status.conditions[2]");
        assert_eq!(
            e.to_string(),
            ".status.conditions[2] is missing (expected {\"type\":\"Third\"})"
        );
    }

    #[test]
    fn order_matters_in_lists() {
        let got = object();
        let want = json!({ "status": { "conditions": [ { "type": "Controller's" } ] } });
        assert_eq!(
            contains(&got, &want).unwrap_err().to_string(),
            ".status.conditions[0].type is \"Ours\", expected \"Controller's\""
        );
    }

    #[test]
    fn the_first_difference_is_named() {
        let got = object();
        let e = contains(&got, &json!({ "spec": { "b": [ { "x": "q" } ] } })).unwrap_err();
        assert_eq!(e.to_string(), ".spec.b[0].x is \"y\", expected \"q\"");
        let e = contains(&got, &json!({ "spec": { "c": 1 } })).unwrap_err();
        assert_eq!(e.to_string(), ".spec.c is missing (expected 1)");
        let e = contains(&got, &json!({ "extra": null })).unwrap_err();
        assert_eq!(e.to_string(), ".extra is true, expected null");
        let e = contains_at("status.x", &json!(1), &json!("1")).unwrap_err();
        assert_eq!(e.to_string(), "status.x is 1, expected \"1\"");
    }

    #[test]
    fn equality_also_refuses_what_is_not_expected() {
        let got = json!({ "a": [ { "x": 1, "y": 2 } ] });
        let e = equals_at("", &got, &json!({ "a": [ { "x": 1 } ] })).unwrap_err();
        assert_eq!(e.to_string(), ".a[0].y is there, but not expected");
        let e = equals_at("d", &json!([1, 2]), &json!([1])).unwrap_err();
        assert_eq!(e.to_string(), "d[1] is there, but not expected");
        let e = equals_at("d", &json!([1]), &json!([1, 2])).unwrap_err();
        assert_eq!(e.to_string(), "d[1] is missing (expected 2)");
        assert_eq!(equals_at("", &got, &got), Ok(()));
        assert_eq!(equals_at("", &json!({ "a": null }), &json!({})), Ok(()));
    }

    #[test]
    fn value_at_finds_nested_fields_or_null() {
        let v = json!({ "status": { "devices": [1] } });
        assert_eq!(value_at(&v, "status.devices"), &json!([1]));
        assert_eq!(value_at(&v, "status.missing"), &Value::Null);
        assert_eq!(value_at(&v, ""), &v);
    }
}
