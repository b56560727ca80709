//! Updates (read, merge, write back whole) and the one policy for the
//! conflicts they meet.
use std::future::Future;
use std::time::Duration;

use kube::api::{Api, DynamicObject, PostParams};
use serde_json::Value;
use tokio::time::Instant;

use super::{Error, Part, api_error, contains, merge};

/// How a read-modify-write is tried again when another writer wrote the
/// object between its read and its write (409 Conflict): read again and
/// write again, pausing between tries, until a deadline.
///
/// A deadline rather than a number of tries: how many times a write
/// conflicts depends on the other writer (a controller writing a status
/// in bursts, the kubelet, the scheduler), not on this one. A count of
/// tries is used up in milliseconds while a controller is busy, and bounds
/// nothing when each try is slow; a deadline bounds the time as every
/// wait here is bounded, whatever the other writer does. The pauses start
/// short (most conflicts are one write that came first) and double up to
/// a limit, so that a busy writer is not met in lockstep and has time to
/// finish; each try reads afresh, so it never writes stale data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConflictRetry {
    /// No try starts after this much time.
    pub within: Duration,
    /// The pause after the first conflict; it doubles after each one.
    pub first_pause: Duration,
    /// The longest pause.
    pub longest_pause: Duration,
}

impl ConflictRetry {
    /// The policy of every update: 30 s (upstream's default `Eventually`,
    /// and well inside a step's timeout), pauses from 50 ms to 1 s.
    pub const DEFAULT: ConflictRetry = ConflictRetry {
        within: Duration::from_secs(30),
        first_pause: Duration::from_millis(50),
        longest_pause: Duration::from_secs(1),
    };

    /// Runs `attempt` until it returns anything but an error that
    /// `is_conflict` says is a conflict, or until no pause fits before the
    /// deadline; then returns the last conflict.
    pub async fn run<T, E, F, Fut>(
        &self,
        is_conflict: impl Fn(&E) -> bool,
        mut attempt: F,
    ) -> Result<T, E>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let deadline = Instant::now() + self.within;
        let mut pause = self.first_pause;
        loop {
            match attempt().await {
                Err(e) if is_conflict(&e) => {
                    if Instant::now() + pause > deadline {
                        return Err(e);
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(self.longest_pause);
                }
                other => return other,
            }
        }
    }
}

/// Whether the API refused a write as a conflict (409).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

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

/// Runs `u`, retried on conflicts as [`ConflictRetry::DEFAULT`] says.
/// Returns the resource version it read and what the write returned.
async fn write(u: &Update<'_>) -> Result<(Option<String>, DynamicObject), Error> {
    let retry = ConflictRetry::DEFAULT;
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
    use std::cell::Cell;

    fn api_error(code: u16) -> kube::Error {
        let status: kube::core::Status = serde_json::from_value(
            json!({"code": code, "message": "the object has been modified", "reason": "Conflict"}),
        )
        .unwrap();
        kube::Error::Api(Box::new(status))
    }

    fn conflict() -> kube::Error {
        api_error(409)
    }

    const POLICY: ConflictRetry = ConflictRetry {
        within: Duration::from_secs(1),
        first_pause: Duration::from_millis(50),
        longest_pause: Duration::from_millis(200),
    };

    #[tokio::test(start_paused = true)]
    async fn a_conflict_is_tried_again_after_a_pause() {
        let tries = Cell::new(0);
        let start = Instant::now();
        let r: Result<u32, kube::Error> = POLICY
            .run(is_conflict, || async {
                tries.set(tries.get() + 1);
                if tries.get() < 3 {
                    Err(conflict())
                } else {
                    Ok(7)
                }
            })
            .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(tries.get(), 3);
        // Paused 50 ms, then 100 ms (the clock is tokio's paused one).
        assert_eq!(start.elapsed(), Duration::from_millis(150));
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_that_go_on_end_at_the_deadline_with_the_last_one() {
        let tries = Cell::new(0);
        let start = Instant::now();
        let r: Result<(), kube::Error> = POLICY
            .run(is_conflict, || async {
                tries.set(tries.get() + 1);
                Err(conflict())
            })
            .await;
        assert!(is_conflict(&r.unwrap_err()));
        // Pauses of 50, 100, 200, 200, 200, 200 ms: the next would pass 1 s.
        assert_eq!(tries.get(), 7);
        assert_eq!(start.elapsed(), Duration::from_millis(950));
    }

    #[tokio::test(start_paused = true)]
    async fn other_errors_are_not_tried_again() {
        let tries = Cell::new(0);
        let r: Result<(), kube::Error> = POLICY
            .run(is_conflict, || async {
                tries.set(tries.get() + 1);
                Err(api_error(500))
            })
            .await;
        assert!(!is_conflict(&r.unwrap_err()));
        assert_eq!(tries.get(), 1);
    }

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
