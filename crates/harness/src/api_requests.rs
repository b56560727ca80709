//! Requests a scenario makes as someone (the admin, a plugin, a service
//! account) to see what the API server lets through: objects of manifests
//! created through the API that serves their kind, creations that must
//! fail or be denied, a ResourceSlice updated or deleted, the namespace
//! labelled. The steps parse the sentence and pick the clients; the
//! requests and their retries are here.
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use kube::discovery::Scope;
use serde_json::json;
use tokio::time::Instant;

use dra_e2e_kube::objects::delete_if_present;
use dra_e2e_kube::wait::{self, Check, WaitError};

#[derive(Debug, thiserror::Error)]
pub enum ApiRequestError {
    #[error("every object needs apiVersion and kind")]
    NoKind,
    /// The object's apiVersion does not parse.
    #[error("{0}")]
    ApiVersion(String),
    #[error("the cluster does not serve {api_version}/{kind}: {source}")]
    NotServed {
        api_version: String,
        kind: String,
        #[source]
        source: kube::Error,
    },
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer as expected; the message says how.
    #[error("{0}")]
    Unexpected(String),
}

/// The API that serves `obj`'s kind (found by the admin's discovery), for
/// requests made with `client`, in `namespace` when the kind is
/// namespaced; with the kind's resource and whether it is namespaced.
pub async fn served_api(
    client: &kube::Client,
    admin: &kube::Client,
    namespace: &str,
    obj: &DynamicObject,
) -> Result<(Api<DynamicObject>, ApiResource, bool), ApiRequestError> {
    let types = obj.types.as_ref().ok_or(ApiRequestError::NoKind)?;
    let gvk = GroupVersionKind::try_from(types)
        .map_err(|e| ApiRequestError::ApiVersion(e.to_string()))?;
    let (ar, caps) = kube::discovery::pinned_kind(admin, &gvk)
        .await
        .map_err(|source| ApiRequestError::NotServed {
            api_version: types.api_version.clone(),
            kind: types.kind.clone(),
            source,
        })?;
    let namespaced = caps.scope == Scope::Namespaced;
    let api = if namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    Ok((api, ar, namespaced))
}

/// Who makes the requests of a creation check: `client`, acting as `who`
/// (as messages name them), with `admin` reading the API and deleting what
/// was created after all.
pub struct Creator<'a> {
    pub client: &'a kube::Client,
    pub admin: &'a kube::Client,
    pub who: &'a str,
    pub namespace: &'a str,
}

impl Creator<'_> {
    /// Tries to create every object until each creation fails with an
    /// error containing `text`, for up to `timeout` (admission and RBAC
    /// take a moment to apply); an object created in between is deleted
    /// again at once.
    pub async fn until_all_fail(
        &self,
        objs: &[DynamicObject],
        text: &str,
        timeout: Duration,
    ) -> Result<(), ApiRequestError> {
        let what = format!("creating the objects as {} to fail with {text:?}", self.who);
        let tried = wait::poll(&what, timeout, Duration::from_secs(1), || async {
            match self.try_all(objs, text).await {
                Ok(None) => Check::Done(()),
                Ok(Some(last)) => Check::Pending(last),
                // Discovery or the object itself is wrong: no retry helps.
                Err(e) => Check::Fail(e.to_string()),
            }
        })
        .await;
        tried.map_err(|e| match e {
            WaitError::Timeout { last_seen, .. } => ApiRequestError::Unexpected(format!(
                "expected creating the objects as {} to fail with {text:?}; last observed: {last_seen}",
                self.who
            )),
            WaitError::Failed { message, .. } => ApiRequestError::Unexpected(message),
            other => ApiRequestError::Unexpected(other.to_string()),
        })
    }

    /// One try of [`Creator::until_all_fail`]: `None` when every creation
    /// failed with `text`, else what the last one that did not did.
    async fn try_all(
        &self,
        objs: &[DynamicObject],
        text: &str,
    ) -> Result<Option<String>, ApiRequestError> {
        let mut last = None;
        for obj in objs {
            let (api, ar, _) = served_api(self.client, self.admin, self.namespace, obj).await?;
            match api.create(&PostParams::default(), obj).await {
                Ok(created) => {
                    last = Some(format!(
                        "{} {} was created",
                        ar.kind,
                        created.metadata.name.clone().unwrap_or_default()
                    ));
                    let (admin_api, _, _) =
                        served_api(self.admin, self.admin, self.namespace, obj).await?;
                    if let Some(n) = created.metadata.name {
                        let _ = admin_api
                            .delete(&n, &DeleteParams::default().grace_period(0))
                            .await;
                    }
                }
                Err(e) if e.to_string().contains(text) => {}
                Err(e) => last = Some(e.to_string()),
            }
        }
        Ok(last)
    }

    /// Tries once to create every object, each of which must be denied
    /// with an error containing `text`: what a policy denies is denied from
    /// the first request on. One created after all is deleted again.
    pub async fn all_denied(
        &self,
        objs: &[DynamicObject],
        text: &str,
    ) -> Result<(), ApiRequestError> {
        let who = self.who;
        for obj in objs {
            let (api, ar, _) = served_api(self.client, self.admin, self.namespace, obj).await?;
            match api.create(&PostParams::default(), obj).await {
                Ok(created) => {
                    let name = created.metadata.name.unwrap_or_default();
                    let (admin_api, _, _) =
                        served_api(self.admin, self.admin, self.namespace, obj).await?;
                    let removed = delete_if_present(&admin_api, &name, &DeleteParams::default())
                        .await
                        .map_or_else(
                            |e| format!(" (deleting it again failed: {e})"),
                            |_| String::new(),
                        );
                    return Err(ApiRequestError::Unexpected(format!(
                        "expected creating {} {name} as {who} to be denied with {text:?}, but it was created{removed}",
                        ar.kind
                    )));
                }
                Err(e) if e.to_string().contains(text) => {}
                Err(e) => {
                    return Err(ApiRequestError::Unexpected(format!(
                        "expected creating {} as {who} to be denied with {text:?}, observed: {e}",
                        ar.kind
                    )));
                }
            }
        }
        Ok(())
    }
}

/// Tries of something that may fail for a while (RBAC settling): up to a
/// deadline, with a pause between them.
pub struct Tries {
    deadline: Instant,
    pause: Duration,
}

impl Tries {
    /// Tries for `within`, `pause` apart.
    pub fn new(within: Duration, pause: Duration) -> Self {
        Tries {
            deadline: Instant::now() + within,
            pause,
        }
    }

    /// After a failed try: false once the deadline has passed (give up),
    /// else true after the pause (try again).
    pub async fn again(&self) -> bool {
        if Instant::now() > self.deadline {
            return false;
        }
        tokio::time::sleep(self.pause).await;
        true
    }
}

/// The label updating a slice adds to it (or lengthens), so that the
/// update is a real write.
pub const TOUCHED: &str = "dra-e2e.k8s.io/touched";

/// Changes `slice` for an update: [`TOUCHED`] one character longer.
fn touch(slice: &mut ResourceSlice) {
    slice
        .metadata
        .labels
        .get_or_insert_default()
        .entry(TOUCHED.to_owned())
        .or_default()
        .push('x');
}

/// Updates (PUT) ResourceSlice `name` as `client`, with a label touched;
/// the admin reads it, so that a denial is the write's and not the read's.
pub async fn update_slice(
    client: kube::Client,
    admin: kube::Client,
    name: &str,
) -> Result<(), kube::Error> {
    let mut slice = Api::<ResourceSlice>::all(admin).get(name).await?;
    touch(&mut slice);
    Api::<ResourceSlice>::all(client)
        .replace(name, &PostParams::default(), &slice)
        .await
        .map(drop)
}

/// Deletes ResourceSlice `name` as `client`.
pub async fn delete_slice(client: kube::Client, name: &str) -> Result<(), kube::Error> {
    Api::<ResourceSlice>::all(client)
        .delete(name, &DeleteParams::default())
        .await
        .map(drop)
}

/// Labels namespace `namespace` `key`=`value` (a merge patch).
pub async fn label_namespace(
    client: kube::Client,
    namespace: &str,
    key: &str,
    value: &str,
) -> Result<(), ApiRequestError> {
    let patch = json!({ "metadata": { "labels": { key: value } } });
    Api::<Namespace>::all(client)
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(|source| ApiRequestError::Api {
            what: format!("labelling namespace {namespace}"),
            source,
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_update_touches_the_slice() {
        let mut slice: ResourceSlice = serde_json::from_value(json!({
            "metadata": {"name": "s", "labels": {"a": "b"}},
            "spec": {"driver": "d", "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1}},
        }))
        .unwrap();
        touch(&mut slice);
        touch(&mut slice);
        let labels = slice.metadata.labels.unwrap();
        assert_eq!(labels[TOUCHED], "xx");
        assert_eq!(labels["a"], "b");
    }

    #[tokio::test(start_paused = true)]
    async fn tries_pause_until_the_deadline() {
        let tries = Tries::new(Duration::from_secs(3), Duration::from_secs(1));
        let start = Instant::now();
        let mut n = 0;
        while tries.again().await {
            n += 1;
        }
        assert_eq!(n, 4);
        assert!(Instant::now() - start >= Duration::from_secs(3));
    }
}
