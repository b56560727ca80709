//! Container Device Interface spec files, read the way a container runtime
//! resolves the CDI device IDs a kubelet passes for a container.
//!
//! Only environment edits matter to a simulated container; every other edit
//! (device nodes, mounts, hooks) is parsed over and ignored.
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;

#[derive(Debug, thiserror::Error)]
pub enum CdiError {
    #[error("read CDI spec directory {dir}: {source}")]
    ReadDir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid CDI device ID {0:?}: want <vendor>/<class>=<name>")]
    InvalidId(String),
    /// Worded as the CDI library of container runtimes words it;
    /// [`CdiError::detail`] adds where the node looked.
    #[error("unresolvable CDI devices {}", .ids.join(", "))]
    Unresolvable {
        /// Every requested ID no spec defines (malformed ones included, which
        /// a runtime cannot find either), in request order.
        ids: Vec<String>,
        dir: PathBuf,
        /// Spec files that could not be read or parsed, which may explain why.
        problems: Vec<String>,
    },
}

impl CdiError {
    /// The error with what a runtime would not say: where the node looked
    /// and which spec files it could not read.
    pub fn detail(&self) -> String {
        match self {
            CdiError::Unresolvable { dir, problems, .. } => format!(
                "{self}: no spec in {} defines them{}",
                dir.display(),
                problems_suffix(problems)
            ),
            other => other.to_string(),
        }
    }
}

fn problems_suffix(problems: &[String]) -> String {
    if problems.is_empty() {
        String::new()
    } else {
        format!(" (unreadable specs: {})", problems.join("; "))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Spec {
    kind: String,
    #[serde(default)]
    devices: Vec<SpecDevice>,
    #[serde(default)]
    container_edits: Option<ContainerEdits>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecDevice {
    name: String,
    #[serde(default)]
    container_edits: Option<ContainerEdits>,
}

#[derive(Debug, Clone, Default, Deserialize)]
struct ContainerEdits {
    #[serde(default)]
    env: Vec<String>,
}

/// The CDI specs found in one directory at one moment.
#[derive(Debug, Clone, Default)]
pub struct CdiSpecs {
    dir: PathBuf,
    /// `(file name, spec)`, in file-name order so lookups are deterministic.
    specs: Vec<(String, Spec)>,
    problems: Vec<String>,
}

impl CdiSpecs {
    /// Reads every `*.json`, `*.yaml` and `*.yml` file of `dir` (a missing
    /// directory holds no specs). Unparsable files are remembered, not fatal:
    /// a runtime also skips them and fails only the devices it cannot find.
    pub fn load(dir: &Path) -> Result<Self, CdiError> {
        let mut out = CdiSpecs {
            dir: dir.to_owned(),
            ..Default::default()
        };
        let entries = match std::fs::read_dir(dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(source) => {
                return Err(CdiError::ReadDir {
                    dir: dir.to_owned(),
                    source,
                });
            }
        };
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| n.ends_with(".json") || n.ends_with(".yaml") || n.ends_with(".yml"))
            .collect();
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let parsed = std::fs::read(&path)
                .map_err(|e| e.to_string())
                .and_then(|bytes| parse_spec(&name, &bytes));
            match parsed {
                Ok(spec) => out.specs.push((name, spec)),
                Err(e) => out.problems.push(format!("{name}: {e}")),
            }
        }
        Ok(out)
    }

    /// The environment a container gets from the given CDI device IDs, in
    /// injection order: for each device, its spec's global edits (once per
    /// spec) and then the device's own edits. Fails, naming every one of
    /// them, if some ID is not defined by any spec.
    pub fn env_for(&self, ids: &[String]) -> Result<Vec<(String, String)>, CdiError> {
        let mut env = Vec::new();
        let mut specs_applied = HashSet::new();
        let mut unresolved = Vec::new();
        for id in ids {
            let Ok((kind, name)) = parse_device_id(id) else {
                unresolved.push(id.clone());
                continue;
            };
            let found = self.specs.iter().enumerate().find_map(|(i, (_, spec))| {
                (spec.kind == kind)
                    .then(|| spec.devices.iter().find(|d| d.name == name))
                    .flatten()
                    .map(|d| (i, spec, d))
            });
            let Some((index, spec, device)) = found else {
                unresolved.push(id.clone());
                continue;
            };
            if specs_applied.insert(index)
                && let Some(edits) = &spec.container_edits
            {
                env.extend(edits.env.iter().map(|e| split_env(e)));
            }
            if let Some(edits) = &device.container_edits {
                env.extend(edits.env.iter().map(|e| split_env(e)));
            }
        }
        if !unresolved.is_empty() {
            return Err(CdiError::Unresolvable {
                ids: unresolved,
                dir: self.dir.clone(),
                problems: self.problems.clone(),
            });
        }
        Ok(env)
    }
}

fn parse_spec(name: &str, bytes: &[u8]) -> Result<Spec, String> {
    if name.ends_with(".json") {
        serde_json::from_slice(bytes).map_err(|e| e.to_string())
    } else {
        let text = std::str::from_utf8(bytes).map_err(|e| e.to_string())?;
        serde_saphyr::from_str(text).map_err(|e| e.to_string())
    }
}

/// Splits `<vendor>/<class>=<name>` into the spec kind and the device name.
pub fn parse_device_id(id: &str) -> Result<(&str, &str), CdiError> {
    let invalid = || CdiError::InvalidId(id.to_owned());
    let (kind, name) = id.split_once('=').ok_or_else(invalid)?;
    let (vendor, class) = kind.split_once('/').ok_or_else(invalid)?;
    if vendor.is_empty() || class.is_empty() || name.is_empty() {
        return Err(invalid());
    }
    Ok((kind, name))
}

/// `K=V` as a pair; an entry without `=` has an empty value.
fn split_env(entry: &str) -> (String, String) {
    match entry.split_once('=') {
        Some((k, v)) => (k.to_owned(), v.to_owned()),
        None => (entry.to_owned(), String::new()),
    }
}

/// Applies `edits` over `base` the way runtimes apply CDI env edits: a key
/// already present is replaced in place, a new key is appended.
pub fn merge_env(
    mut base: Vec<(String, String)>,
    edits: Vec<(String, String)>,
) -> Vec<(String, String)> {
    for (k, v) in edits {
        match base.iter_mut().find(|(bk, _)| *bk == k) {
            Some(slot) => slot.1 = v,
            None => base.push((k, v)),
        }
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, content: &str) {
        std::fs::write(dir.join(name), content).unwrap();
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn resolves_device_env_by_kind_and_name() {
        let tmp = tempfile::tempdir().unwrap();
        write(
            tmp.path(),
            "drv.k8s.io-uid1-req.json",
            r#"{"cdiVersion":"0.3.0","kind":"drv.k8s.io/test","devices":[
                {"name":"claim-uid1-req","containerEdits":{"env":["claim_c_req=true","user_a=b"]}}]}"#,
        );
        write(
            tmp.path(),
            "other.yaml",
            "cdiVersion: 0.3.0\nkind: other.io/gpu\ncontainerEdits:\n  env: [GLOBAL=1]\ndevices:\n- name: claim-uid1-req\n  containerEdits:\n    env: [\"gpu=0\"]\n",
        );
        write(tmp.path(), "ignored.txt", "not a spec");
        write(tmp.path(), "broken.json", "{");
        let specs = CdiSpecs::load(tmp.path()).unwrap();

        let env = specs
            .env_for(&["drv.k8s.io/test=claim-uid1-req".into()])
            .unwrap();
        assert_eq!(env, pairs(&[("claim_c_req", "true"), ("user_a", "b")]));

        let env = specs
            .env_for(&[
                "other.io/gpu=claim-uid1-req".into(),
                "other.io/gpu=claim-uid1-req".into(),
            ])
            .unwrap();
        assert_eq!(env, pairs(&[("GLOBAL", "1"), ("gpu", "0"), ("gpu", "0")]));

        let err = specs
            .env_for(&[
                "drv.k8s.io/test=claim-missing".into(),
                "drv.k8s.io/test=claim-uid1-req".into(),
                "no-equals".into(),
            ])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "unresolvable CDI devices drv.k8s.io/test=claim-missing, no-equals"
        );
        let detail = err.detail();
        assert!(detail.starts_with(&err.to_string()), "{detail}");
        assert!(detail.contains("broken.json"), "{detail}");
    }

    #[test]
    fn missing_directory_has_no_specs() {
        let tmp = tempfile::tempdir().unwrap();
        let specs = CdiSpecs::load(&tmp.path().join("nope")).unwrap();
        assert!(specs.env_for(&[]).unwrap().is_empty());
        assert!(specs.env_for(&["a/b=c".into()]).is_err());
    }

    #[test]
    fn merge_replaces_in_place_and_appends() {
        let merged = merge_env(
            pairs(&[("A", "1"), ("B", "2")]),
            pairs(&[("B", "3"), ("C", "4")]),
        );
        assert_eq!(merged, pairs(&[("A", "1"), ("B", "3"), ("C", "4")]));
    }

    #[test]
    fn device_id_parsing() {
        assert_eq!(
            parse_device_id("vendor.io/class=dev-1").unwrap(),
            ("vendor.io/class", "dev-1")
        );
        for bad in ["vendor.io/class", "vendorclass=x", "/c=x", "v/=x", "v/c="] {
            assert!(parse_device_id(bad).is_err(), "{bad}");
        }
    }
}
