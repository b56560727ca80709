//! The API's four patch types, and sending one to an object of any kind.
use kube::api::{Api, DynamicObject};
use serde_json::Value;

use super::{Error, Part, api_error, merge};

/// A patch type: how the server reads the body. Test cases spell them in
/// kebab case (`json-merge`); sentences and messages use their words
/// ([`PatchType::words`]: `JSON merge`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PatchType {
    /// RFC 7386: mappings merge, lists are replaced.
    JsonMerge,
    /// Kubernetes' strategic merge: lists with a merge key merge by it.
    StrategicMerge,
    /// RFC 6902: a list of operations.
    Json,
    /// Server-side apply, with [`FIELD_MANAGER`], forced.
    Apply,
}

impl PatchType {
    /// Every patch type, in the order a sentence's regex tries their
    /// words: `JSON merge` before `JSON`.
    pub const ALL: [PatchType; 4] = [
        PatchType::JsonMerge,
        PatchType::StrategicMerge,
        PatchType::Json,
        PatchType::Apply,
    ];

    /// The words of [`PatchType::ALL`], in its order.
    pub const WORDS: [&'static str; 4] = {
        let mut words = [""; 4];
        let mut i = 0;
        while i < words.len() {
            words[i] = Self::ALL[i].words();
            i += 1;
        }
        words
    };

    /// How sentences and messages name it.
    pub const fn words(self) -> &'static str {
        match self {
            PatchType::JsonMerge => "JSON merge",
            PatchType::StrategicMerge => "strategic merge",
            PatchType::Json => "JSON",
            PatchType::Apply => "apply",
        }
    }

    /// The patch type these words name.
    pub fn from_words(words: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.words() == words)
    }

    /// The request's `Content-Type`, which tells the server the patch type.
    pub const fn content_type(self) -> &'static str {
        match self {
            PatchType::JsonMerge => "application/merge-patch+json",
            PatchType::StrategicMerge => "application/strategic-merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Apply => "application/apply-patch+yaml",
        }
    }
}

/// The field manager of apply patches.
pub const FIELD_MANAGER: &str = "dra-e2e";

/// Makes `body` a patch of `patch_type` for `target`, as upstream's
/// conformance helper (`createPatchObject`) does: every patch but a JSON
/// patch names what it patches (apiVersion, kind and metadata name,
/// namespace and UID, filled in from `target` over what the body says), so
/// that an apply patch is complete and the others patch that very object
/// (the UID is a precondition). A JSON patch must be a list of operations,
/// any other patch a mapping.
pub fn fill_patch(
    patch_type: PatchType,
    body: &mut Value,
    target: &DynamicObject,
) -> Result<(), Error> {
    check_shape(patch_type, body)?;
    let Some(object) = body.as_object_mut() else {
        // A JSON patch: a list, which names nothing.
        return Ok(());
    };
    let types = target.types.clone().unwrap_or_default();
    object.insert("apiVersion".into(), types.api_version.into());
    object.insert("kind".into(), types.kind.into());
    let meta = object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Default::default()));
    merge(
        meta,
        &serde_json::json!({
            "name": target.metadata.name,
            "namespace": target.metadata.namespace,
            "uid": target.metadata.uid,
        }),
    );
    Ok(())
}

/// A JSON patch must be a list of operations, any other patch a mapping.
fn check_shape(patch_type: PatchType, body: &Value) -> Result<(), Error> {
    match patch_type {
        PatchType::Json if !body.is_array() => Err(Error::Check(
            "a JSON patch is a list of operations (- { op: add, path: ..., value: ... })".into(),
        )),
        PatchType::Json => Ok(()),
        _ if !body.is_object() => Err(Error::Check(format!(
            "{} {} patch must be a mapping",
            if patch_type == PatchType::Apply {
                "an"
            } else {
                "a"
            },
            patch_type.words()
        ))),
        _ => Ok(()),
    }
}

/// Sends `body` as a `patch_type` patch of `part` of object `name` of
/// `api`, after [`fill_patch`] (with the object as read now), with strict
/// field validation; an apply patch as [`FIELD_MANAGER`], forced. Returns
/// what the server answered.
pub async fn patch(
    api: &Api<DynamicObject>,
    name: &str,
    part: Part,
    patch_type: PatchType,
    body: &Value,
) -> Result<DynamicObject, Error> {
    let mut body = body.clone();
    check_shape(patch_type, &body)?;
    if patch_type != PatchType::Json {
        let target = api
            .get(name)
            .await
            .map_err(api_error(format!("reading {name} to patch it")))?;
        fill_patch(patch_type, &mut body, &target)?;
    }
    let mut query = String::from("fieldValidation=Strict");
    if patch_type == PatchType::Apply {
        query.push_str(&format!("&fieldManager={FIELD_MANAGER}&force=true"));
    }
    let url = format!(
        "{}/{name}{}?{query}",
        api.resource_url(),
        part.subresource()
    );
    let what = format!("the {} patch (PATCH {url})", patch_type.words());
    // A raw request: the typed client has no JSON patch of a Value.
    let request = http::Request::patch(&url)
        .header(http::header::CONTENT_TYPE, patch_type.content_type())
        .body(serde_json::to_vec(&body).map_err(|e| Error::Check(format!("{what}: {e}")))?)
        .map_err(|e| Error::Check(format!("{what}: {e}")))?;
    api.clone()
        .into_client()
        .request::<DynamicObject>(request)
        .await
        .map_err(api_error(what))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn target() -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": { "name": "c", "namespace": "ns", "uid": "u1" },
        }))
        .unwrap()
    }

    #[test]
    fn each_type_has_its_content_type_and_words() {
        assert_eq!(
            PatchType::WORDS,
            ["JSON merge", "strategic merge", "JSON", "apply"]
        );
        for p in PatchType::ALL {
            assert_eq!(PatchType::from_words(p.words()), Some(p));
        }
        assert_eq!(PatchType::from_words("json merge"), None);
        assert_eq!(
            PatchType::JsonMerge.content_type(),
            "application/merge-patch+json"
        );
        assert_eq!(
            PatchType::StrategicMerge.content_type(),
            "application/strategic-merge-patch+json"
        );
        assert_eq!(
            PatchType::Json.content_type(),
            "application/json-patch+json"
        );
        assert_eq!(
            PatchType::Apply.content_type(),
            "application/apply-patch+yaml"
        );
        let spelled: Vec<PatchType> =
            serde_json::from_value(json!(["json-merge", "strategic-merge", "json", "apply"]))
                .unwrap();
        assert_eq!(spelled, PatchType::ALL);
    }

    #[test]
    fn a_patch_names_its_target() {
        let mut body = json!({ "metadata": { "labels": { "a": "b" }, "name": "other" } });
        fill_patch(PatchType::Apply, &mut body, &target()).unwrap();
        assert_eq!(
            body,
            json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": { "labels": { "a": "b" }, "name": "c", "namespace": "ns", "uid": "u1" },
            })
        );
        // A cluster-scoped object has no namespace to name.
        let mut cluster: DynamicObject = target();
        cluster.metadata.namespace = None;
        let mut body = json!({ "spec": {} });
        fill_patch(PatchType::StrategicMerge, &mut body, &cluster).unwrap();
        assert_eq!(body["metadata"], json!({ "name": "c", "uid": "u1" }));
    }

    #[test]
    fn a_patch_of_the_wrong_shape_is_refused() {
        let mut list = json!([{ "op": "add", "path": "/a", "value": 1 }]);
        fill_patch(PatchType::Json, &mut list, &target()).unwrap();
        assert_eq!(list, json!([{ "op": "add", "path": "/a", "value": 1 }]));
        let e = fill_patch(PatchType::Json, &mut json!({ "a": 1 }), &target()).unwrap_err();
        assert!(
            e.to_string()
                .contains("a JSON patch is a list of operations"),
            "{e}"
        );
        let e = fill_patch(PatchType::Apply, &mut json!([1]), &target()).unwrap_err();
        assert_eq!(e.to_string(), "an apply patch must be a mapping");
        let e = fill_patch(PatchType::JsonMerge, &mut json!("x"), &target()).unwrap_err();
        assert_eq!(e.to_string(), "a JSON merge patch must be a mapping");
    }
}
