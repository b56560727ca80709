//! Generated profiles. A profile is the file a driver author writes, so
//! whatever it holds is read or refused with every mistake at a line and,
//! past YAML syntax, at the field's path; a profile the runner prints reads
//! back the same; the two flags of KEP-5970 are taken or refused naming
//! the flag. `PROPTEST_CASES` raises the bounded count (`make props-long`).
use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value as Json, json};

use super::*;

const NO_FILES: Options = Options { check_files: false };

/// The profiles the project ships, as parsed JSON (JSON is YAML, so a
/// mutated one is written back with `serde_json`).
fn shipped() -> Vec<(String, Json)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../profiles");
    let mut out: Vec<(String, Json)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .map(|p| {
            let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            let json: Json = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{p:?}: {e}"));
            (p.display().to_string(), json)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!out.is_empty(), "no profiles in {}", dir.display());
    out
}

/// Every value's path in a profile, as mistakes name fields
/// (`deployment.manifests[1]`), with the value.
fn paths(value: &Json, path: &str, out: &mut Vec<(String, Json)>) {
    match value {
        Json::Object(m) => {
            for (k, v) in m {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                out.push((p.clone(), v.clone()));
                paths(v, &p, out);
            }
        }
        Json::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                let p = format!("{path}[{i}]");
                out.push((p.clone(), v.clone()));
                paths(v, &p, out);
            }
        }
        _ => {}
    }
}

/// `value` with the value at `path` replaced.
fn replace(value: &mut Json, path: &str, new: Json) {
    let mut at = value;
    for part in path.split('.') {
        let (key, indexes) = match part.split_once('[') {
            Some((k, rest)) => (k, Some(rest)),
            None => (part, None),
        };
        at = &mut at[key];
        for i in indexes.into_iter().flat_map(|r| r.split('[')) {
            let i: usize = i
                .trim_end_matches(']')
                .parse()
                .unwrap_or_else(|e| panic!("{path}: {e}"));
            at = &mut at[i];
        }
    }
    *at = new;
}

/// A value of another kind than `old`: what a wrong type looks like.
fn other_kind(old: Json) -> impl Strategy<Value = Json> {
    let kinds = vec![
        json!(7),
        json!(-1),
        json!(true),
        json!(1.5),
        json!("text"),
        json!(["a", 1]),
        json!({ "x": 1 }),
    ];
    let same = move |v: &Json| {
        std::mem::discriminant(v) == std::mem::discriminant(&old)
            || (v.is_string()
                && !old.is_number()
                && !old.is_object()
                && !old.is_array()
                && !old.is_boolean())
    };
    let others: Vec<Json> = kinds.into_iter().filter(|v| !same(v)).collect();
    proptest::sample::select(others)
}

/// A shipped profile, one of its paths, and a value of another kind.
fn mutated() -> impl Strategy<Value = (String, String, Json, Json)> {
    let cases: Vec<(String, String, Json, Json)> = shipped()
        .into_iter()
        .flat_map(|(file, json)| {
            let mut ps = Vec::new();
            paths(&json, "", &mut ps);
            ps.into_iter()
                .map(move |(path, old)| (file.clone(), path, json.clone(), old))
        })
        .collect();
    proptest::sample::select(cases).prop_flat_map(|(file, path, json, old)| {
        (Just(file), Just(path), Just(json), other_kind(old))
    })
}

/// YAML-ish text: the profile's keys and values, indentation, list and
/// flow markers, quotes, placeholders, and any other character.
fn text() -> impl Strategy<Value = String> {
    let words = vec![
        "driverName: ",
        "deviceClass:",
        "\n  name: ",
        "\n  selector: ",
        "deployment:",
        "\n  mode: ",
        "Builtin",
        "Installed",
        "RealNodes",
        "Manifests",
        "SimulatedNodes",
        "\n  manifests:",
        "\n  command:",
        "\n  faults:",
        "\n    - ",
        "\n- ",
        "capabilities:",
        "containerCheck:",
        "\n  env:",
        "registrationDir:",
        "deviceCount:",
        "\n  flag: ",
        "\n  env: ",
        "devicesPerNode: ",
        "${namespace}",
        "${nodeName}",
        "${claim}",
        "${",
        "}",
        "gpu.example.com",
        "--flag",
        "X_Y",
        "4",
        "0",
        "-1",
        "99999999999",
        "1.5",
        "yes",
        "~",
        "[",
        "]",
        "{",
        "}",
        ",",
        ":",
        "\"",
        "'",
        "&a ",
        "*a",
        "---",
        "#",
        "\n",
        "  ",
        " ",
        "SharedDevices",
        "*",
        "=",
    ];
    let word = proptest::sample::select(words).prop_map(str::to_owned);
    let piece = prop_oneof![4 => word, 1 => any::<char>().prop_map(String::from)];
    proptest::collection::vec(piece, 0..30).prop_map(|p| p.concat())
}

/// The mistakes' fields are the profile's own; those without one are
/// about the whole document.
fn whole_document(m: &Mistake) -> bool {
    m.field.is_none()
        && [
            "not valid YAML: ",
            "the profile is empty",
            "expected a mapping of the profile's fields",
        ]
        .iter()
        .any(|p| m.message.starts_with(p))
}

/// A valid profile of generated names, settings and capabilities, as a
/// file would write it.
fn valid_profile() -> impl Strategy<Value = String> {
    let name = "[a-z]([a-z0-9-]{0,10}[a-z0-9])?(\\.[a-z]([a-z0-9-]{0,6}[a-z0-9])?){1,2}";
    let setting = prop_oneof![
        "--[a-z][a-z-]{0,12}".prop_map(|f| format!("\n  flag: \"{f}\"")),
        "[A-Z_][A-Z0-9_]{0,10}".prop_map(|e| format!("\n  env: \"{e}\"")),
    ];
    let capabilities =
        proptest::sample::subsequence(Capability::ALL.to_vec(), 0..=Capability::ALL.len());
    (
        name,
        name,
        proptest::bool::ANY,
        setting.clone(),
        proptest::option::of(setting),
        capabilities,
        1u32..1000,
        "[A-Za-z_][A-Za-z0-9_*]{0,8}(=[a-z0-9*]{0,6})?",
    )
        .prop_map(|(driver, class, selector, registration, count, caps, devices, env)| {
            let class = if selector {
                format!("  selector: device.driver == \"{driver}\"")
            } else {
                format!("  name: {class}")
            };
            let mut text = format!(
                "driverName: {driver}\ndeviceClass:\n{class}\ndeployment:\n  mode: SimulatedNodes\n  \
                 command: [\"my-plugin\", \"--node=${{nodeName}}\"]\nregistrationDir:{registration}\n\
                 devicesPerNode: {devices}\ncontainerCheck:\n  env: [\"{env}\"]\n"
            );
            if let Some(c) = count {
                text.push_str(&format!("deviceCount:{c}\n"));
            }
            if !caps.is_empty() {
                let names: Vec<&str> = caps.iter().map(|c| c.name()).collect();
                text.push_str(&format!("capabilities: [{}]\n", names.join(", ")));
            }
            text
        })
}

fn file() -> &'static Path {
    Path::new("/profiles/generated.yaml")
}

proptest! {
    // Failures are kept as plain tests beside these, not in files.
    #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]

    /// Any text: a profile, or mistakes each at a line and a field (past
    /// what is about the whole document).
    #[test]
    fn any_text_is_a_profile_or_mistakes_naming_fields(src in text()) {
        if let Err(mistakes) = parse_str(&src, file(), NO_FILES) {
            prop_assert!(!mistakes.is_empty());
            for m in &mistakes {
                let named = m.field.as_deref().is_some_and(|f| !f.is_empty()) || whole_document(m);
                prop_assert!(named, "{m} names no field, in {src:?}");
            }
        }
    }

    /// A shipped profile with one value of another kind: refused, naming
    /// that value's path.
    #[test]
    fn a_value_of_another_kind_is_refused_at_its_path(
        (file_name, path, mut json, new) in mutated(),
    ) {
        replace(&mut json, &path, new.clone());
        let src = serde_json::to_string_pretty(&json).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mistakes = match parse_str(&src, Path::new(&file_name), NO_FILES) {
            Ok(_) => return Err(TestCaseError::fail(format!("{path} = {new} accepted in {file_name}"))),
            Err(m) => m,
        };
        prop_assert!(
            mistakes.iter().any(|m| m.field.as_deref() == Some(path.as_str())),
            "{path} = {new} in {file_name}: {mistakes:#?}"
        );
    }

    /// A valid profile printed by the runner (`profile show`) reads back
    /// as the same profile.
    #[test]
    fn printed_profiles_read_back(src in valid_profile()) {
        let profile = parse_str(&src, file(), NO_FILES)
            .map_err(|m| TestCaseError::fail(format!("{src}\n{m:#?}")))?;
        let printed = profile.to_yaml();
        let again = parse_str(&printed, file(), NO_FILES)
            .map_err(|m| TestCaseError::fail(format!("{printed}\n{m:#?}")))?;
        prop_assert_eq!(again, profile);
    }

    /// `--driver-name` and `--device-class`: a profile, or a refusal that
    /// names the flag and quotes its value.
    #[test]
    fn flags_are_taken_or_refused_naming_the_flag(
        driver in "[a-z0-9.${}A-Z_ -]{0,70}",
        class in "[a-z0-9.${}A-Z_ -]{0,70}",
    ) {
        match Profile::from_flags(&driver, &class) {
            Ok(d) => prop_assert_eq!(d.profile.driver_name, driver),
            Err(e) => {
                let m = e.to_string();
                prop_assert!(
                    m.starts_with(&format!("--driver-name `{driver}`: "))
                        || m.starts_with(&format!("--device-class `{class}`: ")),
                    "{m}"
                );
            }
        }
    }

    /// Capability names and `@DriverCapability:` tags: known, or refused
    /// quoting the name.
    #[test]
    fn capabilities_are_known_or_quoted(name in "[A-Za-z:]{0,24}") {
        match name.parse::<Capability>() {
            Ok(c) => prop_assert_eq!(c.name(), name.as_str()),
            Err(e) => {
                let quoted = format!("unknown capability `{name}`");
                prop_assert!(e.to_string().starts_with(&quoted), "{e}");
            }
        }
        let _ = capability::tag_capability(&format!("{TAG_PREFIX}{name}"));
    }

    /// `containerCheck.env` patterns: matching and filling in never fail,
    /// `*` matches anything, a pattern without `*` only itself.
    #[test]
    fn env_patterns_match_as_globs(
        pattern in "[a-z*=${}]{0,12}",
        name in "[a-z_]{0,8}",
        value in "[a-z=*]{0,8}",
        claim in "[a-z.-]{0,8}",
    ) {
        let p = EnvPattern::new(pattern.clone());
        let _ = p.expand(&claim, &claim).matches(&name, &value);
        prop_assert!(EnvPattern::new("*").matches(&name, &value));
        if !pattern.contains('*') && !pattern.contains('=') {
            prop_assert_eq!(p.matches(&name, &value), pattern == name);
        }
    }
}

/// Inputs the properties found.
#[test]
fn regressions() {
    // A key of no text was reported as field ``.
    let mistakes = parse_str(":\n  manifests:capabilities:", file(), NO_FILES).unwrap_err();
    assert!(
        mistakes.iter().all(|m| m.field.as_deref() != Some("")),
        "{mistakes:#?}"
    );
    assert!(
        mistakes
            .iter()
            .any(|m| m.field.as_deref() == Some("<empty key \"\">")),
        "{mistakes:#?}"
    );
    let mistakes = parse_str("deviceClass:\n  '': x\n", file(), NO_FILES).unwrap_err();
    assert!(
        mistakes
            .iter()
            .any(|m| m.field.as_deref() == Some("deviceClass.<empty key \"\">")),
        "{mistakes:#?}"
    );
}
