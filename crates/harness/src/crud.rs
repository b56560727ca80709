//! Objects of any kind a scenario addresses as `<Kind> "<name>"` (upstream's
//! CRUD tests without a step per resource type): their API in the
//! scenario's namespace or the cluster's, merge patches and updates of the
//! object or its status (once, until RBAC allows them, until they are
//! refused), listing, deleting and the waits until one is gone. The steps
//! find which object a sentence names; the API calls are here, over the
//! ground's toolkit for objects of any kind ([`dra_e2e_kube::dynamic`]).
use std::time::Duration;

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::discovery::Scope;
use serde_json::Value;

use dra_e2e_kube::dynamic::{self, Part, Update};
use dra_e2e_kube::objects::delete_if_present;
use dra_e2e_kube::wait::{self, Check, WaitError};

#[derive(Debug, thiserror::Error)]
pub enum CrudError {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// An update of the toolkit failed (read, write or its check).
    #[error(transparent)]
    Dynamic(#[from] dynamic::Error),
    #[error(transparent)]
    Wait(#[from] WaitError),
    /// The cluster does not serve the kind asked for.
    #[error("{0}")]
    NotServed(String),
}

fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> CrudError {
    let what = what.into();
    move |source| CrudError::Api { what, source }
}

/// How long RBAC and admission changes get to reach the API server's caches.
pub const RBAC_SETTLES: Duration = Duration::from_secs(60);

/// The API of objects of `ar`: in `namespace` when `namespaced`, else the
/// cluster's.
pub fn api(
    client: kube::Client,
    ar: &ApiResource,
    namespaced: bool,
    namespace: &str,
) -> Api<DynamicObject> {
    if namespaced {
        Api::namespaced_with(client, namespace, ar)
    } else {
        Api::all_with(client, ar)
    }
}

/// The kinds the step library creates itself, found by name without a
/// manifest ([`dra_kind`]).
pub const DRA_KINDS: [&str; 6] = [
    "Pod",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceClass",
    "ResourceSlice",
    "DeviceTaintRule",
];

/// The API resource of a kind of [`DRA_KINDS`], and whether it is
/// namespaced (then it is looked up in the scenario's namespace).
pub fn dra_kind(kind: &str) -> Option<(ApiResource, bool)> {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::resource::v1 as r;
    Some(match kind {
        "Pod" => (ApiResource::erase::<Pod>(&()), true),
        "ResourceClaim" => (ApiResource::erase::<r::ResourceClaim>(&()), true),
        "ResourceClaimTemplate" => (ApiResource::erase::<r::ResourceClaimTemplate>(&()), true),
        "DeviceClass" => (ApiResource::erase::<r::DeviceClass>(&()), false),
        "ResourceSlice" => (ApiResource::erase::<r::ResourceSlice>(&()), false),
        "DeviceTaintRule" => (ApiResource::erase::<r::DeviceTaintRule>(&()), false),
        _ => return None,
    })
}

/// `kind` as a kind of [`DRA_KINDS`], or in whatever version
/// resource.k8s.io prefers for it; and whether it is namespaced.
pub async fn resource_kind(
    client: &kube::Client,
    kind: &str,
) -> Result<(ApiResource, bool), CrudError> {
    if let Some(k) = dra_kind(kind) {
        return Ok(k);
    }
    let group = kube::discovery::group(client, "resource.k8s.io")
        .await
        .map_err(api_error("discovering the API group resource.k8s.io"))?;
    let (ar, caps) = group
        .resources_by_stability()
        .into_iter()
        .find(|(ar, _)| ar.kind == kind)
        .ok_or_else(|| {
            CrudError::NotServed(format!(
                "the cluster serves no kind {kind} in resource.k8s.io"
            ))
        })?;
    Ok((ar, caps.scope == Scope::Namespaced))
}

/// How a doc string gets into an object: a JSON merge patch, or merged into
/// what was read and written back whole (PUT).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    MergePatch,
    Update,
}

impl How {
    fn verb(self) -> &'static str {
        match self {
            How::MergePatch => "patch",
            How::Update => "update",
        }
    }
}

/// One write of `body` into `part` of object `name`: read through
/// `reader`, written through `writer` (which may act as someone else).
#[derive(Clone, Copy)]
pub struct Write<'a> {
    pub reader: &'a Api<DynamicObject>,
    pub writer: &'a Api<DynamicObject>,
    pub kind: &'a str,
    pub name: &'a str,
    pub part: Part,
    pub how: How,
    pub body: &'a Value,
}

impl Write<'_> {
    /// Writes once: a JSON merge patch through the writer, or an update
    /// read by the reader and written by the writer
    /// ([`dynamic::update_checked`]: what the write returns must hold the
    /// body as sent).
    pub async fn once(&self) -> Result<(), CrudError> {
        if self.how == How::Update {
            dynamic::update_checked(&Update {
                reader: self.reader,
                writer: self.writer,
                kind: self.kind,
                name: self.name,
                part: self.part,
                change: self.body,
            })
            .await?;
            return Ok(());
        }
        let pp = PatchParams::default();
        let patch = Patch::Merge(self.body);
        match self.part {
            Part::Object => self.writer.patch(self.name, &pp, &patch).await,
            Part::Status => self.writer.patch_status(self.name, &pp, &patch).await,
        }
        .map_err(api_error(format!(
            "patching {}",
            self.part.of(self.kind, self.name)
        )))?;
        Ok(())
    }

    /// Writes as `who` (as messages name them), tried again while RBAC
    /// forbids it, and on nothing else: a role granted a moment ago may
    /// not be in the authorizer's cache yet.
    pub async fn until_allowed(&self, who: &str) -> Result<(), WaitError> {
        let what = format!(
            "the {} of {} as {who} to be allowed",
            self.how.verb(),
            self.part.of(self.kind, self.name)
        );
        wait::poll(&what, RBAC_SETTLES, Duration::from_secs(1), || async {
            allowed(self.once().await)
        })
        .await
    }

    /// Writes as `who` until the write is refused with an error containing
    /// `text`; with `invalid_only`, refused as Invalid (422), as upstream's
    /// `IsInvalid` checks (RBAC and admission take a moment).
    pub async fn until_refused(
        &self,
        who: &str,
        text: &str,
        invalid_only: bool,
    ) -> Result<(), WaitError> {
        let verb = self.how.verb();
        let refused = if invalid_only {
            "be refused as invalid"
        } else {
            "fail"
        };
        let what = format!(
            "the status {verb} of {} {} as {who} to {refused} with {text:?}",
            self.kind, self.name
        );
        wait::poll(&what, RBAC_SETTLES, Duration::from_secs(1), || async {
            refusal(self.once().await, verb, text, invalid_only)
        })
        .await
    }
}

/// The named condition of [`Write::until_allowed`].
fn allowed(r: Result<(), CrudError>) -> Check<()> {
    match r {
        Ok(()) => Check::Done(()),
        Err(e) if forbidden(&e) => Check::Pending(e.to_string()),
        Err(e) => Check::Fail(e.to_string()),
    }
}

/// The named condition of [`Write::until_refused`].
fn refusal(r: Result<(), CrudError>, verb: &str, text: &str, invalid_only: bool) -> Check<()> {
    match r {
        Ok(()) => Check::Pending(format!("the {verb} succeeded")),
        Err(e) if (!invalid_only || invalid(&e)) && e.to_string().contains(text) => Check::Done(()),
        Err(e) => Check::Pending(e.to_string()),
    }
}

/// The API's answer somewhere in `e`'s chain.
fn status_of(e: &CrudError) -> Option<&kube::core::Status> {
    let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = next {
        if let Some(kube::Error::Api(s)) = c.downcast_ref::<kube::Error>() {
            return Some(s);
        }
        next = c.source();
    }
    None
}

/// An RBAC denial, as opposed to a rejection by validation: HTTP 403, or a
/// 422 whose only causes are `FieldValueForbidden` (the permission checks
/// validation makes, such as the one for writing `status.devices`).
pub fn forbidden(e: &CrudError) -> bool {
    status_of(e).is_some_and(|s| {
        s.code == 403
            || (s.code == 422
                && s.details.as_ref().is_some_and(|d| {
                    !d.causes.is_empty()
                        && d.causes.iter().all(|c| c.reason == "FieldValueForbidden")
                }))
    })
}

/// The API server refused the write as invalid (422).
pub fn invalid(e: &CrudError) -> bool {
    status_of(e).is_some_and(|s| s.code == 422)
}

/// The names of the objects of `api`, with `labels` those the selector
/// selects; `what` says which in a failure ("listing X objects").
pub async fn names(
    api: &Api<DynamicObject>,
    labels: Option<&str>,
    what: &str,
) -> Result<Vec<String>, CrudError> {
    let lp = match labels {
        Some(l) => ListParams::default().labels(l),
        None => ListParams::default(),
    };
    Ok(api
        .list(&lp)
        .await
        .map_err(api_error(what))?
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect())
}

/// One DELETE request for `kind` `name`, without waiting: a finalizer may
/// keep the object, terminating.
pub async fn mark_for_deletion(
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
) -> Result<(), CrudError> {
    api.delete(name, &DeleteParams::default())
        .await
        .map_err(api_error(format!("deleting {kind} {name}")))?;
    Ok(())
}

/// Deletes `kind` `name` (if it is there) and waits up to `timeout` until
/// it is gone (finalizers run first).
pub async fn delete(
    api: &Api<DynamicObject>,
    kind: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), CrudError> {
    delete_if_present(api, name, &DeleteParams::default())
        .await
        .map_err(api_error(format!("deleting {kind} {name}")))?;
    until_gone(api, name, &format!("{kind} {name} to be gone"), timeout).await?;
    Ok(())
}

/// Waits until reading object `name` finds nothing: "`what`". A dynamic
/// kind has no watch the wait helpers take (its type is not known at
/// compile time); reading it often is as good for one object.
pub async fn until_gone(
    api: &Api<DynamicObject>,
    name: &str,
    what: &str,
    timeout: Duration,
) -> Result<(), WaitError> {
    wait::poll(what, timeout, Duration::from_millis(200), || async {
        gone(api.get_opt(name).await.as_ref().map(Option::as_ref))
    })
    .await
}

/// The named condition of [`until_gone`], over what reading the object
/// found.
fn gone(read: Result<Option<&DynamicObject>, &kube::Error>) -> Check<()> {
    match read {
        Ok(None) => Check::Done(()),
        Ok(Some(o)) => Check::Pending(format!(
            "{}still there (finalizers: {:?})",
            if o.metadata.deletion_timestamp.is_some() {
                "marked for deletion, "
            } else {
                ""
            },
            o.metadata.finalizers.clone().unwrap_or_default()
        )),
        Err(e) => Check::Pending(format!("reading it failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn api_error(status: Value) -> CrudError {
        let status: kube::core::Status = serde_json::from_value(status).unwrap();
        CrudError::Api {
            what: "patching".into(),
            source: kube::Error::Api(Box::new(status)),
        }
    }

    fn denied(code: u16, causes: &[&str]) -> CrudError {
        let causes: Vec<_> = causes
            .iter()
            .map(|r| json!({"reason": r, "message": "m", "field": "status.devices"}))
            .collect();
        api_error(json!({
            "code": code, "message": "is forbidden", "reason": "Invalid",
            "details": {"name": "c", "group": "g", "kind": "k", "uid": "", "causes": causes},
        }))
    }

    #[test]
    fn only_permission_denials_count_as_forbidden() {
        assert!(forbidden(&denied(403, &[])));
        assert!(forbidden(&denied(422, &["FieldValueForbidden"])));
        assert!(!forbidden(&denied(422, &["FieldValueInvalid"])));
        assert!(!forbidden(&denied(
            422,
            &["FieldValueForbidden", "FieldValueRequired"]
        )));
        assert!(!forbidden(&denied(422, &[])));
        assert!(!forbidden(&CrudError::NotServed("not an API error".into())));
        // An update's error holds the API's answer one level down.
        let update = CrudError::Dynamic(dynamic::Error::Api {
            what: "updating".into(),
            source: kube::Error::Api(Box::new(
                serde_json::from_value(json!({"code": 403, "message": "m"})).unwrap(),
            )),
        });
        assert!(forbidden(&update));
    }

    #[test]
    fn writes_wait_for_rbac_and_for_their_refusal() {
        assert!(matches!(allowed(Ok(())), Check::Done(())));
        assert!(matches!(allowed(Err(denied(403, &[]))), Check::Pending(_)));
        assert!(matches!(allowed(Err(denied(422, &[]))), Check::Fail(_)));

        let r = |e| refusal(e, "update", "is forbidden", true);
        assert!(matches!(r(Ok(())), Check::Pending(s) if s == "the update succeeded"));
        assert!(matches!(r(Err(denied(422, &[]))), Check::Done(())));
        // Refused, but not as invalid.
        assert!(matches!(r(Err(denied(403, &[]))), Check::Pending(_)));
        assert!(matches!(
            refusal(Err(denied(403, &[])), "patch", "is forbidden", false),
            Check::Done(())
        ));
        assert!(matches!(
            refusal(Err(denied(403, &[])), "patch", "other text", false),
            Check::Pending(_)
        ));
    }

    #[test]
    fn an_object_is_gone_once_reading_finds_nothing() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "finalizers": ["f"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
        }))
        .unwrap();
        assert!(matches!(gone(Ok(None)), Check::Done(())));
        assert!(matches!(
            gone(Ok(Some(&obj))),
            Check::Pending(s) if s == "marked for deletion, still there (finalizers: [\"f\"])"
        ));
        let err = kube::Error::Api(Box::new(
            serde_json::from_value(json!({"code": 500, "message": "down"})).unwrap(),
        ));
        assert!(matches!(gone(Err(&err)), Check::Pending(s) if s.starts_with("reading it failed")));
    }

    #[test]
    fn every_listed_dra_kind_resolves() {
        for kind in DRA_KINDS {
            let (ar, _) = dra_kind(kind).unwrap();
            assert_eq!(ar.kind, kind);
        }
        assert!(dra_kind("ConfigMap").is_none());
    }
}
