//! What a scenario expects of a request's status, and the check of one
//! status against it: the fields a table may name, how a cell matches a
//! value, and a failure that names the field and what it was instead, since
//! the retry loop reports the last of these when it gives up.
use serde_json::{Value, json};

/// One check of a request's status: a table row or a partition table.
#[derive(Debug, Clone, PartialEq)]
pub enum Expectation {
    Status {
        field: String,
        want: String,
    },
    /// `pool: None` is every pool.
    Pool {
        pool: Option<String>,
        field: String,
        want: String,
    },
    Partitions {
        pool: String,
        want: Vec<Partition>,
    },
}

/// One entry of a pool's partitionSummary.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Partition {
    pub attribute: String,
    pub kind: String,
    pub total: i64,
    pub allocatable: i64,
}

/// The status-level fields a table may name.
pub const STATUS_FIELDS: &str = "`pool count`, `pools`, `pools listed`, `condition <Type>`";

/// Pool fields as the table names them, and where they are in a pool's
/// status. `shareable capacity` is the list of capacities, each as
/// `<name> total=<q> consumed=<q> available=<q>`.
pub const POOL_FIELDS: &[(&str, &str)] = &[
    ("driver", "driver"),
    ("generation", "generation"),
    ("resource slice count", "resourceSliceCount"),
    ("total devices", "totalDevices"),
    ("allocated devices", "allocatedDevices"),
    ("available devices", "availableDevices"),
    ("unavailable devices", "unavailableDevices"),
    ("node name", "nodeName"),
    ("validation error", "validationError"),
    ("partition summary", "partitionSummary"),
    ("shareable summary", "shareableSummary"),
    (
        "fully available devices",
        "shareableSummary.fullyAvailableDevices",
    ),
    (
        "partially available devices",
        "shareableSummary.partiallyAvailableDevices",
    ),
    ("shareable capacity", "shareableSummary.capacity"),
];

/// Whether a table may name `field` among the status-level fields.
pub fn is_status_field(field: &str) -> bool {
    status_field(&Value::Null, field).is_some()
}

/// Whether a table may name `field` among a pool's fields.
pub fn is_pool_field(field: &str) -> bool {
    POOL_FIELDS.iter().any(|(f, _)| *f == field)
}

/// A status-level field as a value: `pools` is the list of pool names.
fn status_field(status: &Value, field: &str) -> Option<Value> {
    let pools = status.get("pools").and_then(Value::as_array);
    Some(match field {
        "pool count" => status.get("poolCount").cloned().unwrap_or(Value::Null),
        "pools" => Value::Array(
            pools
                .into_iter()
                .flatten()
                .map(|p| p.get("poolName").cloned().unwrap_or(Value::Null))
                .collect(),
        ),
        "pools listed" => json!(pools.map_or(0, Vec::len)),
        _ => {
            let kind = field.strip_prefix("condition ")?;
            status
                .get("conditions")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .find(|c| c.get("type").and_then(Value::as_str) == Some(kind))
                .and_then(|c| c.get("status").cloned())
                .unwrap_or(Value::Null)
        }
    })
}

fn pool_field(pool: &Value, field: &str) -> Option<Value> {
    let (_, path) = POOL_FIELDS.iter().find(|(f, _)| *f == field)?;
    let v = path
        .split('.')
        .try_fold(pool, |v, k| v.get(k))
        .cloned()
        .unwrap_or(Value::Null);
    Some(if field == "shareable capacity" {
        Value::Array(
            v.as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    let text = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("absent");
                    Value::String(format!(
                        "{} total={} consumed={} available={}",
                        text("name"),
                        text("total"),
                        text("consumed"),
                        text("available")
                    ))
                })
                .collect(),
        )
    } else {
        v
    })
}

pub(super) fn is_none(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Whether `got` is what a table cell asks for: `none` (absent, null or
/// empty), `set` (present; a list: not empty), `more than N`, a
/// comma-separated list of names in any order (for list fields), or the
/// value itself.
pub fn matches(got: &Value, want: &str) -> Result<(), String> {
    let shown = || match got {
        Value::Null => "absent".to_owned(),
        v => v.to_string(),
    };
    let ok = match want {
        "none" => is_none(got),
        // A list is set when it holds something; a count of 0 is set.
        "set" => match got {
            Value::Array(a) => !a.is_empty(),
            v => !v.is_null(),
        },
        _ => {
            if let Some(n) = want.strip_prefix("more than ") {
                let n: f64 = n
                    .parse()
                    .map_err(|_| format!("`more than {n}`: {n:?} is not a number"))?;
                got.as_f64().is_some_and(|g| g > n)
            } else if let Value::Array(items) = got {
                let mut have: Vec<String> = items
                    .iter()
                    .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_owned))
                    .collect();
                let mut expected: Vec<String> =
                    want.split(',').map(|w| w.trim().to_owned()).collect();
                have.sort();
                expected.sort();
                if have != expected {
                    return Err(format!("are {have:?}, expected {expected:?}"));
                }
                true
            } else {
                match got {
                    Value::String(s) => s == want,
                    Value::Number(n) => want.parse::<f64>().ok() == n.as_f64(),
                    Value::Bool(b) => want == b.to_string(),
                    _ => false,
                }
            }
        }
    };
    if ok {
        Ok(())
    } else {
        Err(format!("is {}, expected {want}", shown()))
    }
}

fn pools(status: &Value) -> &[Value] {
    status
        .get("pools")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn pool_name(p: &Value) -> &str {
    p.get("poolName").and_then(Value::as_str).unwrap_or("")
}

fn find_pool<'a>(status: &'a Value, name: &str) -> Result<&'a Value, String> {
    pools(status)
        .iter()
        .find(|p| pool_name(p) == name)
        .ok_or_else(|| {
            let names: Vec<&str> = pools(status).iter().map(pool_name).collect();
            format!("no pool {name:?} is listed (pools: {names:?})")
        })
}

/// The first expectation `status` does not meet, described.
pub fn evaluate(checks: &[Expectation], status: &Value) -> Result<(), String> {
    for check in checks {
        match check {
            Expectation::Status { field, want } => {
                let got = status_field(status, field).unwrap_or(Value::Null);
                matches(&got, want).map_err(|e| format!("{field} {e}"))?;
            }
            Expectation::Pool {
                pool: Some(name),
                field,
                want,
            } => {
                let pool = find_pool(status, name)?;
                let got = pool_field(pool, field).unwrap_or(Value::Null);
                matches(&got, want).map_err(|e| format!("pool {name:?}: {field} {e}"))?;
            }
            Expectation::Pool {
                pool: None,
                field,
                want,
            } => {
                if pools(status).is_empty() {
                    return Err("no pool is listed".to_owned());
                }
                for pool in pools(status) {
                    let got = pool_field(pool, field).unwrap_or(Value::Null);
                    matches(&got, want)
                        .map_err(|e| format!("pool {:?}: {field} {e}", pool_name(pool)))?;
                }
            }
            Expectation::Partitions { pool: name, want } => {
                let pool = find_pool(status, name)?;
                let mut got: Vec<Partition> = pool
                    .get("partitionSummary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|p| Partition {
                        attribute: p["attribute"].as_str().unwrap_or_default().to_owned(),
                        kind: p["type"].as_str().unwrap_or_default().to_owned(),
                        total: p["total"].as_i64().unwrap_or(-1),
                        allocatable: p["allocatable"].as_i64().unwrap_or(-1),
                    })
                    .collect();
                got.sort();
                let mut want = want.clone();
                want.sort();
                if got != want {
                    return Err(format!(
                        "pool {name:?}: the partition summary is {}, expected {}",
                        show_partitions(&got),
                        show_partitions(&want)
                    ));
                }
            }
        }
    }
    Ok(())
}

fn show_partitions(p: &[Partition]) -> String {
    if p.is_empty() {
        return "empty".to_owned();
    }
    p.iter()
        .map(|p| {
            format!(
                "{}={} (total {}, allocatable {})",
                p.attribute, p.kind, p.total, p.allocatable
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_known_by_name() {
        assert!(is_status_field("pool count"));
        assert!(is_status_field("condition Complete"));
        assert!(!is_status_field("colour"));
        assert!(is_pool_field("shareable capacity"));
        assert!(!is_pool_field("pool count"));
    }

    #[test]
    fn cells_match_values() {
        assert!(matches(&Value::Null, "none").is_ok());
        assert!(matches(&json!([]), "none").is_ok());
        assert!(matches(&json!(""), "none").is_err());
        assert!(matches(&json!("n"), "set").is_ok());
        assert!(matches(&Value::Null, "set").is_err());
        assert!(matches(&json!(0), "set").is_ok());
        assert!(matches(&json!([]), "set").is_err());
        assert!(matches(&json!(3), "more than 0").is_ok());
        assert!(matches(&json!(0), "more than 0").is_err());
        assert!(matches(&Value::Null, "more than 0").is_err());
        assert!(matches(&json!(1), "more than x").is_err());
        assert!(matches(&json!(10), "10").is_ok());
        assert_eq!(
            matches(&json!(10), "9").unwrap_err(),
            "is 10, expected 9".to_owned()
        );
        assert!(matches(&json!(["b", "a"]), "a, b").is_ok());
        assert_eq!(
            matches(&json!(["a"]), "a, b").unwrap_err(),
            "are [\"a\"], expected [\"a\", \"b\"]"
        );
        assert!(matches(&json!("True"), "True").is_ok());
        assert!(matches(&json!(true), "true").is_ok());
    }

    #[test]
    fn expectations_name_what_differs() {
        let status = json!({
            "poolCount": 2,
            "pools": [
                { "poolName": "a", "totalDevices": 1, "nodeName": "n",
                  "shareableSummary": { "capacity": [ { "name": "memory", "total": "32", "consumed": "8", "available": "24" } ] },
                  "partitionSummary": [
                      { "attribute": "x", "type": "int", "total": 2, "allocatable": 1 },
                  ] },
                { "poolName": "b", "totalDevices": 1 },
            ],
            "conditions": [ { "type": "Complete", "status": "True" } ],
        });
        let ok = [
            Expectation::Status {
                field: "pool count".into(),
                want: "2".into(),
            },
            Expectation::Status {
                field: "pools".into(),
                want: "a, b".into(),
            },
            Expectation::Status {
                field: "pools listed".into(),
                want: "2".into(),
            },
            Expectation::Status {
                field: "condition Complete".into(),
                want: "True".into(),
            },
            Expectation::Pool {
                pool: Some("a".into()),
                field: "node name".into(),
                want: "n".into(),
            },
            Expectation::Pool {
                pool: Some("a".into()),
                field: "shareable capacity".into(),
                want: "memory total=32 consumed=8 available=24".into(),
            },
            Expectation::Pool {
                pool: None,
                field: "total devices".into(),
                want: "1".into(),
            },
            Expectation::Partitions {
                pool: "a".into(),
                want: vec![Partition {
                    attribute: "x".into(),
                    kind: "int".into(),
                    total: 2,
                    allocatable: 1,
                }],
            },
        ];
        assert_eq!(evaluate(&ok, &status), Ok(()));
        // The amounts count, not only the capacity's name.
        for want in ["memory", "memory total=32 consumed=0 available=32"] {
            let amounts = [Expectation::Pool {
                pool: Some("a".into()),
                field: "shareable capacity".into(),
                want: want.into(),
            }];
            assert!(evaluate(&amounts, &status).is_err(), "{want}");
        }
        let every = [Expectation::Pool {
            pool: None,
            field: "node name".into(),
            want: "set".into(),
        }];
        assert_eq!(
            evaluate(&every, &status).unwrap_err(),
            "pool \"b\": node name is absent, expected set"
        );
        let missing = [Expectation::Pool {
            pool: Some("c".into()),
            field: "driver".into(),
            want: "d".into(),
        }];
        assert_eq!(
            evaluate(&missing, &status).unwrap_err(),
            "no pool \"c\" is listed (pools: [\"a\", \"b\"])"
        );
        let partitions = [Expectation::Partitions {
            pool: "b".into(),
            want: vec![Partition {
                attribute: "x".into(),
                kind: "int".into(),
                total: 2,
                allocatable: 2,
            }],
        }];
        assert_eq!(
            evaluate(&partitions, &status).unwrap_err(),
            "pool \"b\": the partition summary is empty, expected x=int (total 2, allocatable 2)"
        );
        assert_eq!(
            evaluate(&every, &json!({})).unwrap_err(),
            "no pool is listed"
        );
    }
}
