//! Reading the checked-in manifests of a driver (deploy/<driver>/) as the
//! API server would: every document as JSON, each one as its k8s-openapi
//! type with nothing it did not understand, and the versions they are
//! built at. For the manifest checks of upstream's test driver and of the
//! project's rolling-update driver.
use std::path::Path;

use serde::de::DeserializeOwned;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A file of the checkout, by its path from the top.
pub fn read(file: &str) -> String {
    std::fs::read_to_string(root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

/// Every document of manifest file `file` of directory `dir`, as JSON.
pub fn documents(dir: &str, file: &str) -> Vec<serde_json::Value> {
    let text = read(&format!("{dir}/{file}"));
    serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{file}: not valid YAML: {e}"))
}

/// One document as its k8s-openapi type. Those types skip fields they do not
/// know, so the object is written back and compared: a misspelt or
/// misplaced field would be missing from the copy.
pub fn typed<K: DeserializeOwned + serde::Serialize + k8s_openapi::Resource>(
    file: &str,
    doc: &serde_json::Value,
) -> K {
    assert_eq!(
        (doc["apiVersion"].as_str(), doc["kind"].as_str()),
        (Some(K::API_VERSION), Some(K::KIND)),
        "{file}: {doc}"
    );
    let object: K = serde_json::from_value(doc.clone())
        .unwrap_or_else(|e| panic!("{file}: not a {}: {e}\n{doc}", K::KIND));
    let back = serde_json::to_value(&object).unwrap();
    assert_eq!(&back, doc, "{file}: a {} field was not understood", K::KIND);
    object
}

/// The kinds of `docs`, in order.
pub fn kinds(docs: &[serde_json::Value]) -> Vec<&str> {
    docs.iter()
        .map(|d| d["kind"].as_str().unwrap_or(""))
        .collect()
}

/// `KEY=value` from hack/versions.env.
pub fn version(key: &str) -> String {
    read("hack/versions.env")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("hack/versions.env has no {key}"))
        .trim()
        .to_owned()
}
