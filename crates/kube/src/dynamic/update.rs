//! Updates (read, merge, write back whole), retried on the conflicts they
//! meet by the house's one policy ([`Retry::CONFLICTS`]).
use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;

use super::{Error, Part, api_error, contains, merge};
use crate::retry::{Retry, is_conflict};

/// One update: `part` of object `name` (a `kind`, as messages name it)
/// read through `reader`, `change` merged in as a JSON merge patch, the
/// result written back whole (PUT) through `writer`.
#[derive(Clone, Copy)]
pub struct Update<'a> {
    /// Reads the object: the admin, who may read what the writer may not.
    pub reader: &'a Api<DynamicObject>,
    /// Writes it: the identity under test.
    pub writer: &'a Api<DynamicObject>,
    pub kind: &'a str,
    pub name: &'a str,
    pub part: Part,
    pub change: &'a Value,
}

impl Update<'_> {
    fn what(&self) -> String {
        self.part.of(self.kind, self.name)
    }

    /// One try: read, merge, write. Returns the resource version read and
    /// the object written.
    async fn once(&self) -> Result<(Option<String>, DynamicObject), Error> {
        let what = self.what();
        let current = match self.part {
            Part::Object => self.reader.get(self.name).await,
            Part::Status => self.reader.get_status(self.name).await,
        }
        .map_err(api_error(format!("reading {what}")))?;
        let before = current.metadata.resource_version.clone();
        let encoding = |e: serde_json::Error| Error::Check(format!("updating {what}: {e}"));
        let mut object = serde_json::to_value(&current).map_err(encoding)?;
        merge(&mut object, self.change);
        let object: DynamicObject = serde_json::from_value(object).map_err(encoding)?;
        let pp = PostParams::default();
        let written = match self.part {
            Part::Object => self.writer.replace(self.name, &pp, &object).await,
            Part::Status => self.writer.replace_status(self.name, &pp, &object).await,
        }
        .map_err(api_error(format!("updating {what}")))?;
        Ok((before, written))
    }
}

/// Runs `u`, retried on conflicts as [`Retry::CONFLICTS`] says.
/// Returns the resource version it read and what the write returned.
async fn write(u: &Update<'_>) -> Result<(Option<String>, DynamicObject), Error> {
    let retry = Retry::CONFLICTS;
    match retry
        .run(|e: &Error| e.status_code() == Some(409), || u.once())
        .await
    {
        Err(Error::Api { what, source }) if is_conflict(&source) => Err(Error::Conflicts {
            what,
            after: retry.within,
            source,
        }),
        other => other,
    }
}

/// Runs the update; returns what the write returned.
pub async fn update(u: &Update<'_>) -> Result<DynamicObject, Error> {
    Ok(write(u).await?.1)
}

/// [`update`], checked as a write: the object got a new resource version,
/// and what the write returned holds `change` ([`contains`]).
pub async fn update_checked(u: &Update<'_>) -> Result<DynamicObject, Error> {
    let (before, after) = write(u).await?;
    check_written(&u.what(), before.as_deref(), &after, u.change)?;
    Ok(after)
}

fn check_written(
    what: &str,
    before: Option<&str>,
    after: &DynamicObject,
    change: &Value,
) -> Result<(), Error> {
    if after.metadata.resource_version.as_deref() == before {
        return Err(Error::Check(format!(
            "updating {what} left its resourceVersion at {before:?}"
        )));
    }
    let returned = serde_json::to_value(after)
        .map_err(|e| Error::Check(format!("updating {what}: encoding the answer: {e}")))?;
    contains(&returned, change)
        .map_err(|m| Error::Check(format!("updating {what} returned otherwise: {m}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn written(version: &str, status: Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": { "name": "c", "resourceVersion": version },
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn a_write_must_change_the_version_and_return_what_was_sent() {
        let change = json!({ "status": { "allocation": {} } });
        let what = "the status of ResourceClaim c";
        check_written(
            what,
            Some("5"),
            &written("6", json!({ "allocation": {} })),
            &change,
        )
        .unwrap();
        let e = check_written(
            what,
            Some("5"),
            &written("5", json!({ "allocation": {} })),
            &change,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "updating the status of ResourceClaim c left its resourceVersion at Some(\"5\")"
        );
        let e = check_written(what, Some("5"), &written("6", json!({})), &change).unwrap_err();
        assert_eq!(
            e.to_string(),
            "updating the status of ResourceClaim c returned otherwise: .status.allocation is missing (expected {})"
        );
    }
}
