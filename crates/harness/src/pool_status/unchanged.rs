//! "Stays unchanged": an object watched for a while, any change of it a
//! failure, riding out a watch whose start expired when an API server
//! restarted, since a restart alone must not fail the check nor hide a
//! change.
use std::time::Duration;

use futures::TryStreamExt as _;
use kube::api::{Api, DynamicObject, WatchEvent, WatchParams};
use tokio::time::Instant;

/// How an object that was to stay unchanged did not.
#[derive(Debug, thiserror::Error)]
pub enum ChangedError {
    #[error("{what} changed within {dur:?}: resourceVersion {from} became {to}")]
    Changed {
        what: String,
        dur: Duration,
        from: String,
        to: String,
    },
    #[error("{what} was deleted within {dur:?}")]
    Deleted { what: String, dur: Duration },
    #[error("{what}: watching it from resourceVersion {from} failed: {message}")]
    WatchFailed {
        what: String,
        from: String,
        message: String,
    },
    #[error("{doing} {what}: {source}")]
    Api {
        doing: &'static str,
        what: String,
        #[source]
        source: kube::Error,
    },
}

/// Watches object `seen` for `dur`: any change of it fails, and so does a
/// different resourceVersion when it is read again at the end. A watch
/// whose start has expired (410: an API server restarted meanwhile keeps
/// no history from before) is started again from a fresh list of the
/// object, once that list shows it still at the resourceVersion seen.
pub async fn unchanged_for(
    api: &Api<DynamicObject>,
    what: &str,
    seen: &DynamicObject,
    dur: Duration,
) -> Result<(), ChangedError> {
    let name = seen.metadata.name.clone().unwrap_or_default();
    let rv = seen.metadata.resource_version.clone().unwrap_or_default();
    let api_error = |doing, source| ChangedError::Api {
        doing,
        what: what.to_owned(),
        source,
    };
    let changed = |to: String| ChangedError::Changed {
        what: what.to_owned(),
        dur,
        from: rv.clone(),
        to,
    };
    let end = Instant::now() + dur;
    let wp = WatchParams::default().fields(&format!("metadata.name={name}"));
    let mut from = rv.clone();
    'watch: while Instant::now() < end {
        let mut events = std::pin::pin!(
            api.watch(&wp, &from)
                .await
                .map_err(|e| api_error("watching", e))?
        );
        loop {
            match tokio::time::timeout_at(end, events.try_next()).await {
                Err(_) => break 'watch,
                Ok(Ok(Some(WatchEvent::Added(o) | WatchEvent::Modified(o)))) => {
                    return Err(changed(o.metadata.resource_version.unwrap_or_default()));
                }
                Ok(Ok(Some(WatchEvent::Deleted(_)))) => {
                    return Err(ChangedError::Deleted {
                        what: what.to_owned(),
                        dur,
                    });
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) if e.code == 410 => {
                    let lp =
                        kube::api::ListParams::default().fields(&format!("metadata.name={name}"));
                    let list = api.list(&lp).await.map_err(|e| api_error("listing", e))?;
                    let Some(now) = list.items.first() else {
                        return Err(ChangedError::Deleted {
                            what: what.to_owned(),
                            dur,
                        });
                    };
                    let now = now.metadata.resource_version.clone().unwrap_or_default();
                    if now != rv {
                        return Err(changed(now));
                    }
                    from = list.metadata.resource_version.unwrap_or(now);
                    continue 'watch;
                }
                Ok(Ok(Some(WatchEvent::Error(e)))) => {
                    return Err(ChangedError::WatchFailed {
                        what: what.to_owned(),
                        from: from.clone(),
                        message: e.to_string(),
                    });
                }
                Ok(Ok(Some(WatchEvent::Bookmark(_)))) => {}
                Ok(Ok(None)) => continue 'watch,
                Ok(Err(e)) => return Err(api_error("watching", e)),
            }
        }
    }
    let after = api.get(&name).await.map_err(|e| api_error("reading", e))?;
    let now = after.metadata.resource_version.unwrap_or_default();
    if now != rv {
        return Err(changed(now));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_says_what_became_of_the_object() {
        let e = ChangedError::Changed {
            what: "Pod tester-1".into(),
            dur: Duration::from_secs(5),
            from: "1".into(),
            to: "2".into(),
        };
        assert_eq!(
            e.to_string(),
            "Pod tester-1 changed within 5s: resourceVersion 1 became 2"
        );
    }
}
