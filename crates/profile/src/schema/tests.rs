//! The schema against the checker: on the shipped profiles, the fixture
//! profiles, and every mutation of a field the shape describes.
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::{Mistake, Options, parse_str};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The YAML files of a directory of the repository, by name.
fn yaml_files(dir: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(repo().join(dir))
        .unwrap_or_else(|e| panic!("reading {dir}: {e}"))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{name}: {e}"));
            (name, text)
        })
        .collect();
    files.sort();
    files
}

/// A profile as the schema sees it: its YAML read into JSON.
fn as_json(yaml: &str) -> Result<Value, String> {
    serde_saphyr::from_str::<Value>(yaml).map_err(|e| e.to_string())
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("the schema is invalid: {e}"))
}

/// The schema's complaints about `profile`, one a line; empty when valid.
fn schema_errors(v: &jsonschema::Validator, profile: &Value) -> String {
    v.iter_errors(profile)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The checker on a profile given as JSON (JSON is YAML), files unchecked.
fn check(profile: &Value) -> Result<(), Vec<Mistake>> {
    let yaml = serde_json::to_string_pretty(profile).expect("a JSON value serializes");
    parse_str(
        &yaml,
        Path::new("/p/x.yaml"),
        Options { check_files: false },
    )
    .map(|_| ())
}

#[test]
fn the_schema_says_its_draft_and_is_a_valid_schema() {
    let s = schema();
    assert_eq!(s["$schema"], DRAFT);
    assert!(jsonschema::meta::is_valid(&s), "{s:#}");
    assert_eq!(s["additionalProperties"], false);
    // Every field of the shape, with its description.
    let props = s["properties"].as_object().expect("properties");
    for f in shape::PROFILE.fields {
        assert!(
            props[f.key]["description"]
                .as_str()
                .is_some_and(|d| !d.is_empty()),
            "{}",
            f.key
        );
    }
    assert_eq!(
        s["required"],
        json!(["driverName", "deviceClass", "deployment"])
    );
    assert_eq!(
        s["properties"]["deployment"]["properties"]["mode"]["enum"],
        json!([
            "Builtin",
            "Installed",
            "RealNodes",
            "Manifests",
            "SimulatedNodes"
        ])
    );
    assert!(text().ends_with("}\n"));
}

#[test]
fn every_shipped_profile_validates_and_has_the_schema_line() {
    let v = validator(&schema());
    let profiles = yaml_files("profiles");
    assert!(profiles.len() >= 5, "{profiles:?}");
    for (name, text) in profiles {
        let json = as_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let errors = schema_errors(&v, &json);
        assert!(errors.is_empty(), "profiles/{name}:\n{errors}");
        assert_eq!(
            text.lines().next(),
            Some(comment("../docs/profile.schema.json").as_str()),
            "profiles/{name}'s first line points editors at the schema"
        );
    }
}

/// Fixtures `profile check` rejects for a field's shape, an unknown key or
/// name, a missing field or two fields that exclude each other: the schema
/// rejects them too.
const SCHEMA_REJECTS: &[&str] = &[
    "builtin-unknown-fault.yaml",
    "class-name-and-selector.yaml",
    "empty-selector.yaml",
    "empty.yaml",
    "missing-field.yaml",
    "mode-conflict.yaml",
    "no-devices.yaml",
    "registration-flag-and-env.yaml",
    "three-mistakes.yaml",
    "unknown-capability.yaml",
    "unknown-field.yaml",
    "unknown-mode.yaml",
    "wrong-type.yaml",
];

/// Fixtures only the checker rejects: rules on values (name syntax,
/// placeholders, files that must exist, fields a mode needs or forbids
/// beside the deployment).
const ONLY_THE_CHECKER_REJECTS: &[&str] = &[
    "bad-driver-name.yaml",
    "missing-archive.yaml",
    "missing-manifest.yaml",
    "namespace-not-builtin.yaml",
    "registration-twice.yaml",
    "simulated-container-command.yaml",
    "simulated-no-registration.yaml",
    "unknown-placeholder.yaml",
];

/// Fixtures that are no YAML, so no schema applies.
const NOT_YAML: &[&str] = &["syntax.yaml"];

#[test]
fn the_fixtures_the_checker_rejects_for_their_shape_the_schema_rejects() {
    let v = validator(&schema());
    let dir = repo().join("tests/fixtures/profiles");
    for (name, text) in yaml_files("tests/fixtures/profiles") {
        let checked = parse_str(&text, &dir.join(&name), Options { check_files: true });
        let listed = |list: &[&str]| list.contains(&name.as_str());
        if listed(NOT_YAML) {
            assert!(as_json(&text).is_err(), "{name} is YAML");
            continue;
        }
        let json = as_json(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let errors = schema_errors(&v, &json);
        match checked {
            Ok(_) => assert!(errors.is_empty(), "{name} passes the check:\n{errors}"),
            Err(mistakes) if listed(SCHEMA_REJECTS) => assert!(
                !errors.is_empty(),
                "{name}: the checker says {mistakes:?}, the schema finds nothing"
            ),
            Err(mistakes) if listed(ONLY_THE_CHECKER_REJECTS) => assert!(
                errors.is_empty(),
                "{name}: the schema rejects it now ({errors}); move it to SCHEMA_REJECTS \
                 ({mistakes:?})"
            ),
            Err(mistakes) => panic!(
                "{name}: rejected by the checker ({mistakes:?}) and listed nowhere: add it to \
                 SCHEMA_REJECTS or ONLY_THE_CHECKER_REJECTS"
            ),
        }
    }
}

/// A change to a valid profile; `shape` when it breaks the profile's
/// shape, so that the checker and the schema must both reject it.
struct Mutation {
    what: String,
    profile: Value,
    shape: bool,
    /// For a value of the wrong kind: the field the checker must name.
    field: Option<String>,
}

struct Mutator<'r> {
    base: &'r Value,
    out: Vec<Mutation>,
    /// The field paths mutated, to see every field of the shape covered.
    covered: std::collections::BTreeSet<String>,
}

impl Mutator<'_> {
    fn push(&mut self, pointer: &str, value: Option<Value>, shape: bool, what: &str) {
        let mut profile = self.base.clone();
        let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
        let Some(Value::Object(o)) = profile.pointer_mut(parent) else {
            panic!("{parent} is no mapping of {:#}", self.base)
        };
        match value {
            Some(v) => o.insert(key.to_owned(), v),
            None => o.remove(key),
        };
        self.out.push(Mutation {
            what: format!("{}: {what}", dotted(pointer)),
            profile,
            shape,
            field: None,
        });
    }

    /// Every mutation of the mapping at `pointer` (of `shape`) and below.
    fn walk(&mut self, shape: &'static Shape, pointer: &str) {
        let here = self.base.pointer(pointer).cloned().unwrap_or(Value::Null);
        self.push(
            &format!("{pointer}/bogusKey"),
            Some(json!("x")),
            true,
            "an unknown key",
        );
        for f in shape.fields {
            let p = format!("{pointer}/{}", f.key);
            self.covered.insert(dotted(&p));
            let present = here.get(f.key).filter(|v| !v.is_null()).cloned();
            let wrong = match f.kind {
                Kind::Text { .. } | Kind::Name(_) => json!(12345),
                Kind::List { .. } => json!("x"),
                Kind::Count => json!("four"),
                Kind::Mapping(_) => json!("x"),
            };
            self.push(&p, Some(wrong), true, "a value of the wrong kind");
            if let Some(m) = self.out.last_mut() {
                m.field = Some(dotted(&p));
            }
            self.push(&p, Some(Value::Null), f.required, "null");
            self.push(&p, None, f.required, "left out");
            match &f.kind {
                Kind::Text { blank_ok } => {
                    self.push(&p, Some(json!("  ")), !blank_ok, "blank");
                }
                Kind::Name(names) => {
                    self.push(&p, Some(json!("NoSuchName")), true, "an unknown name");
                    for n in names() {
                        self.push(&p, Some(json!(n)), false, n);
                    }
                }
                Kind::List {
                    names,
                    min_items,
                    unique,
                } => {
                    self.push(&p, Some(json!([])), *min_items > 0, "an empty list");
                    self.push(&p, Some(json!([1])), true, "a number in the list");
                    if let Some(names) = names {
                        self.push(&p, Some(json!(["NoSuchName"])), true, "an unknown name");
                        for n in names() {
                            self.push(&p, Some(json!([n])), false, n);
                        }
                        if let Some(n) = names().first() {
                            self.push(&p, Some(json!([n, n])), *unique, "a name twice");
                        }
                    }
                }
                Kind::Count => {
                    self.push(&p, Some(json!(0)), true, "0");
                    self.push(&p, Some(json!(1)), false, "1");
                    self.push(&p, Some(json!(u64::from(u32::MAX) + 1)), true, "too large");
                }
                Kind::Mapping(inner) => {
                    self.push(&p, Some(json!({})), inner.choice.is_some(), "empty");
                    if present.as_ref().is_some_and(Value::is_object) {
                        self.walk(inner, &p);
                    }
                }
            }
            // With a mode it is not for, a field set is a mistake.
            if !f.modes.is_empty() {
                for mode in crate::Mode::ALL
                    .into_iter()
                    .filter(|m| !f.modes.contains(m))
                {
                    let mut m = self.base.clone();
                    m[&pointer[1..]][shape::MODE] = json!(mode.name());
                    m[&pointer[1..]][f.key] = present.clone().unwrap_or(json!(["x"]));
                    self.out.push(Mutation {
                        what: format!("{}: set with mode {mode}", dotted(&p)),
                        profile: m,
                        shape: true,
                        field: None,
                    });
                }
            }
        }
        if let Some(choice) = &shape.choice {
            let keys = match choice {
                Choice::OneOf(keys) | Choice::AnyOf(keys) => keys,
            };
            let mut m = self.base.clone();
            let Some(Value::Object(o)) = m.pointer_mut(pointer) else {
                return;
            };
            for k in *keys {
                o.remove(*k);
            }
            self.out.push(Mutation {
                what: format!("{}: none of {keys:?}", dotted(pointer)),
                profile: m.clone(),
                shape: true,
                field: None,
            });
            if let Choice::OneOf(_) = choice
                && let Some(Value::Object(o)) = m.pointer_mut(pointer)
            {
                for k in *keys {
                    o.insert((*k).to_owned(), json!("x"));
                }
                self.out.push(Mutation {
                    what: format!("{}: all of {keys:?}", dotted(pointer)),
                    profile: m,
                    shape: true,
                    field: None,
                });
            }
        }
    }
}

/// `/deployment/mode` as the checker names the field: `deployment.mode`.
fn dotted(pointer: &str) -> String {
    pointer.trim_start_matches('/').replace('/', ".")
}

/// Valid profiles to mutate: the shipped ones, and two fixtures that set
/// the fields none of those does.
fn bases() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for (name, text) in yaml_files("profiles") {
        out.push((format!("profiles/{name}"), as_json(&text).expect("YAML")));
    }
    for name in ["real-nodes-built.yaml", "simulated-nodes.yaml"] {
        let path = repo().join("tests/fixtures/profiles").join(name);
        let text = std::fs::read_to_string(&path).expect("the fixture");
        out.push((name.to_owned(), as_json(&text).expect("YAML")));
    }
    out
}

/// The schema is never stricter than the checker, and rejects whatever
/// breaks a field's shape, for every field of the shape: a key the checker
/// lacked, a kind it read otherwise or a choice it did not enforce shows
/// here as a disagreement.
#[test]
fn the_checker_and_the_schema_agree_on_every_field_mutated() {
    let v = validator(&schema());
    let mut covered = std::collections::BTreeSet::new();
    let mut disagreements = Vec::new();
    let mut tried = 0;
    for (name, base) in bases() {
        assert!(check(&base).is_ok(), "{name}: {:?}", check(&base));
        let mut m = Mutator {
            base: &base,
            out: Vec::new(),
            covered: Default::default(),
        };
        m.walk(&shape::PROFILE, "");
        covered.append(&mut m.covered);
        for mutation in m.out {
            tried += 1;
            let checked = check(&mutation.profile);
            let errors = schema_errors(&v, &mutation.profile);
            let say = |why: String| format!("{name}, {}: {why}", mutation.what);
            match &checked {
                Ok(()) if !errors.is_empty() => disagreements.push(say(format!(
                    "the checker accepts it, the schema says {errors}"
                ))),
                Ok(()) if mutation.shape => {
                    disagreements.push(say("the checker accepts it".into()))
                }
                Err(_) if mutation.shape && errors.is_empty() => disagreements.push(say(format!(
                    "the schema accepts it; the checker: {checked:?}"
                ))),
                Err(mistakes) => {
                    if let Some(field) = &mutation.field
                        && !mistakes.iter().any(|m| {
                            m.field.as_ref() == Some(field) && m.message.starts_with("expected ")
                        })
                    {
                        disagreements.push(say(format!("no `expected` at {field}: {mistakes:?}")));
                    }
                }
                Ok(()) => {}
            }
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
    assert!(tried > 200, "{tried} mutations");
    // Every field of the shape was mutated in some profile.
    fn paths(shape: &'static Shape, prefix: &str, out: &mut Vec<String>) {
        for f in shape.fields {
            let p = if prefix.is_empty() {
                f.key.to_owned()
            } else {
                format!("{prefix}.{}", f.key)
            };
            if let Kind::Mapping(inner) = f.kind {
                paths(inner, &p, out);
            }
            out.push(p);
        }
    }
    let mut all = Vec::new();
    paths(&shape::PROFILE, "", &mut all);
    let missed: Vec<&String> = all.iter().filter(|p| !covered.contains(*p)).collect();
    assert!(missed.is_empty(), "no base profile sets {missed:?}");
}

/// The broken variant: a schema that lost a property rejects a shipped
/// profile that sets it, and one that lost `additionalProperties: false`
/// passes a misspelt key. The tests above would see either.
#[test]
fn a_schema_missing_a_property_rejects_a_shipped_profile() {
    let builtin = as_json(include_str!("../../../../profiles/builtin.yaml")).expect("YAML");
    assert!(validator(&schema()).is_valid(&builtin));

    let mut broken = schema();
    let removed = broken["properties"]
        .as_object_mut()
        .and_then(|p| p.remove("capabilities"));
    assert!(removed.is_some());
    let errors = schema_errors(&validator(&broken), &builtin);
    assert!(errors.contains("capabilities"), "{errors}");

    let misspelt = as_json(include_str!(
        "../../../../tests/fixtures/profiles/unknown-field.yaml"
    ))
    .expect("YAML");
    assert!(!validator(&schema()).is_valid(&misspelt));
    let mut loose = schema();
    loose
        .as_object_mut()
        .map(|o| o.remove("additionalProperties"));
    assert!(validator(&loose).is_valid(&misspelt));
}
