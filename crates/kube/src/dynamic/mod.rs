//! One toolkit for objects of any kind, handled as `DynamicObject`s and
//! JSON: what the CRUD steps and upstream's CRUD conformance procedure
//! (`dra-e2e-harness`'s `api_conformance`) both need, written once.
//!
//! - [`contains`] and [`equals_at`]: the subset rule ("the object holds
//!   what was expected") and equality that names the first difference;
//! - [`merge`]: a JSON merge patch (RFC 7386) applied here, to what was read;
//! - [`PatchType`] and [`patch`]: the API's four patch types with their
//!   content types and the words sentences use, every patch naming its
//!   target as upstream's `createPatchObject` has it ([`fill_patch`]);
//! - [`update`]: read, merge, write back whole (PUT), retried on a conflict
//!   as the house's one policy says ([`Retry::CONFLICTS`]: a deadline with
//!   backoff);
//! - [`Recorder`]: a watch that records every event and the objects it
//!   holds, with [`Lifecycles`] for what any sequence of events must obey,
//!   [`ObjectWatch`] for a scenario's "the watch sees ..." checks and
//!   [`delete_collection`].
mod patch;
mod recorder;
mod subset;
mod update;

pub use crate::retry::{Retry, is_conflict};
pub use patch::{FIELD_MANAGER, PatchType, fill_patch, patch};
pub use recorder::{
    Event, EventKind, Lifecycles, ObjectWatch, Recorder, Recording, delete_collection,
};
pub use subset::{Mismatch, Problem, contains, contains_at, equals_at, value_at};
pub use update::{Update, update, update_checked};

use serde_json::Value;

use crate::wait::WaitError;

/// The part of an object a write or read goes to: the object through its
/// own endpoint, or its status subresource (which takes nothing but the
/// status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Object,
    Status,
}

impl Part {
    /// How messages name this part of `kind` `name`: `ResourceClaim a`,
    /// `the status of ResourceClaim a`.
    pub fn of(self, kind: &str, name: &str) -> String {
        match self {
            Part::Object => format!("{kind} {name}"),
            Part::Status => format!("the status of {kind} {name}"),
        }
    }

    /// What follows the object's URL: nothing, or `/status`.
    pub fn subresource(self) -> &'static str {
        match self {
            Part::Object => "",
            Part::Status => "/status",
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error("{what}: {source}")]
    Api {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// An update still conflicted with other writers when
    /// [`Retry::CONFLICTS`]'s deadline passed.
    #[error("{what}: other writers kept changing it for {after:?}: {source}")]
    Conflicts {
        what: String,
        after: std::time::Duration,
        #[source]
        source: kube::Error,
    },
    /// A check failed, or what was given cannot be sent; the message says
    /// all.
    #[error("{0}")]
    Check(String),
    #[error(transparent)]
    Wait(#[from] WaitError),
}

impl Error {
    /// The HTTP status code of the API's answer, when an API call failed.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            Error::Api {
                source: kube::Error::Api(s),
                ..
            }
            | Error::Conflicts {
                source: kube::Error::Api(s),
                ..
            } => Some(s.code),
            _ => None,
        }
    }
}

/// `Error::Api` for a failed call of `what`.
pub(crate) fn api_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Api { what, source }
}

/// Merges `patch` into `target` as a JSON merge patch (RFC 7386) does:
/// mappings merge key by key, `null` removes a key, anything else (lists
/// too) replaces what was there.
pub fn merge(target: &mut Value, patch: &Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    t.remove(k);
                } else {
                    merge(t.entry(k.clone()).or_insert(Value::Null), v);
                }
            }
        }
        (t, p) => *t = p.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_is_rfc_7386() {
        let mut v = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "gone": true});
        merge(
            &mut v,
            &json!({"a": {"c": 3, "d": 4}, "l": [3], "gone": null, "new": "x"}),
        );
        assert_eq!(
            v,
            json!({"a": {"b": 1, "c": 3, "d": 4}, "l": [3], "new": "x"})
        );
        // A patch that is not a mapping replaces the target whole.
        let mut v = json!({"a": 1});
        merge(&mut v, &json!([1]));
        assert_eq!(v, json!([1]));
    }

    #[test]
    fn parts_name_themselves_and_their_url() {
        assert_eq!(Part::Object.of("Pod", "p"), "Pod p");
        assert_eq!(Part::Status.of("Pod", "p"), "the status of Pod p");
        assert_eq!(Part::Object.subresource(), "");
        assert_eq!(Part::Status.subresource(), "/status");
    }

    #[test]
    fn an_error_says_its_status_code() {
        let status: kube::core::Status =
            serde_json::from_value(json!({"code": 409, "message": "conflict"})).unwrap();
        let e = api_error("updating Pod p")(kube::Error::Api(Box::new(status)));
        assert_eq!(e.status_code(), Some(409));
        assert!(e.to_string().starts_with("updating Pod p: "), "{e}");
        assert_eq!(Error::Check("x".into()).status_code(), None);
    }
}
