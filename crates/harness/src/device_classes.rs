//! A scenario's DeviceClasses after they are created: their selector
//! changed, and a copy of one made under another name.
use k8s_openapi::api::resource::v1::DeviceClass;
use kube::Client;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use serde_json::{Value, json};

#[derive(Debug, thiserror::Error)]
pub enum ClassError {
    #[error("changing the selector of DeviceClass {name}")]
    Selector {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading DeviceClass {name}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// The merge patch that makes a class's selectors the one CEL `expression`.
fn selector_patch(expression: &str) -> Value {
    json!({ "spec": { "selectors": [ { "cel": { "expression": expression } } ] } })
}

/// Makes DeviceClass `name` select devices by the one CEL `expression`.
pub async fn set_selector(client: Client, name: &str, expression: &str) -> Result<(), ClassError> {
    let api: Api<DeviceClass> = Api::all(client);
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&selector_patch(expression)),
    )
    .await
    .map(|_| ())
    .map_err(|source| ClassError::Selector {
        name: name.to_owned(),
        source,
    })
}

/// `class` as a new class `name`: its spec without the server's metadata,
/// serving `extended_resource` (two classes serving one extended resource
/// would leave the scheduler to pick one, so a copy serves none unless
/// told).
fn copy_of(mut class: DeviceClass, name: &str, extended_resource: Option<String>) -> DeviceClass {
    class.metadata = ObjectMeta {
        name: Some(name.to_owned()),
        ..Default::default()
    };
    class
        .spec
        .get_or_insert_with(Default::default)
        .extended_resource_name = extended_resource;
    class
}

/// Reads DeviceClass `original` and returns it as a new class `name`
/// ([`copy_of`]), to be created.
pub async fn copy(
    client: Client,
    original: &str,
    name: &str,
    extended_resource: Option<String>,
) -> Result<DeviceClass, ClassError> {
    let api: Api<DeviceClass> = Api::all(client);
    let class = api.get(original).await.map_err(|source| ClassError::Read {
        name: original.to_owned(),
        source,
    })?;
    Ok(copy_of(class, name, extended_resource))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_selector_is_one_cel_expression() {
        assert_eq!(
            selector_patch("device.driver == \"d\"")["spec"]["selectors"],
            json!([{ "cel": { "expression": "device.driver == \"d\"" } }])
        );
    }

    #[test]
    fn a_copy_drops_the_servers_metadata_and_serves_only_what_it_is_told() {
        let class: DeviceClass = serde_json::from_value(json!({
            "metadata": {"name": "orig", "uid": "u", "resourceVersion": "7",
                "labels": {"a": "b"}},
            "spec": {"selectors": [{"cel": {"expression": "true"}}],
                "extendedResourceName": "example.com/gpu"},
        }))
        .unwrap();
        let copy = copy_of(class.clone(), "copy", None);
        assert_eq!(
            copy.metadata,
            ObjectMeta {
                name: Some("copy".into()),
                ..Default::default()
            }
        );
        let spec = copy.spec.unwrap();
        assert_eq!(spec.extended_resource_name, None);
        assert_eq!(spec.selectors, class.spec.as_ref().unwrap().selectors);
        let serving = copy_of(class, "copy", Some("example.com/other".into()));
        assert_eq!(
            serving.spec.unwrap().extended_resource_name.as_deref(),
            Some("example.com/other")
        );
    }
}
