//! Waits on the calls the kubelet made to a plugin, by name, beside the
//! waiting (as kube-runtime keeps its `conditions`): a method called at
//! all, called again since a count, one of its calls answered without
//! error, and not called again for a while. A method is given as its gRPC
//! paths, every served version of it counted together, and named for the
//! messages as the scenario names it.
use std::time::Duration;

use dra_e2e_kube::wait::{self, Check, WaitError};
use dra_e2e_plugin::Calls;

/// How often the counts are read.
const TICK: Duration = Duration::from_millis(100);

/// A method as the waits see it: its name for messages and the gRPC paths
/// of each version it is served in.
#[derive(Debug, Clone, Copy)]
pub struct Method<'a> {
    pub name: &'a str,
    pub paths: &'a [&'a str],
}

impl Method<'_> {
    /// The calls of the method on `node` so far, every version together.
    pub fn count(&self, calls: &Calls, node: &str) -> u64 {
        self.paths.iter().map(|p| calls.count(node, p)).sum()
    }
}

/// Waits until `method` was called on `node` more often than `mark`
/// (0: at all); returns the count then.
pub async fn called_more_than(
    calls: &Calls,
    node: &str,
    method: Method<'_>,
    mark: u64,
    timeout: Duration,
) -> Result<u64, WaitError> {
    let what = match mark {
        0 => format!("{} to be called on {node}", method.name),
        _ => format!(
            "{} on {node} to be called again since it was counted ({mark} calls)",
            method.name
        ),
    };
    wait::poll(&what, timeout, TICK, || {
        let c = method.count(calls, node);
        async move {
            if c > mark {
                Check::Done(c)
            } else {
                Check::Pending(format!("{c} calls"))
            }
        }
    })
    .await
}

/// Waits until a call of `method` on `node` was answered without error
/// (no per-claim error either); until then it reports each call's outcome.
pub async fn a_call_succeeded(
    calls: &Calls,
    node: &str,
    method: Method<'_>,
    timeout: Duration,
) -> Result<(), WaitError> {
    let what = format!("a call of {} on {node} to succeed", method.name);
    wait::poll(&what, timeout, TICK, || {
        let log = calls.log(node);
        async move {
            let mine: Vec<_> = log
                .iter()
                .filter(|r| method.paths.contains(&r.method.as_str()))
                .collect();
            if mine.iter().any(|r| r.succeeded()) {
                Check::Done(())
            } else {
                Check::Pending(format!(
                    "{} calls: {}",
                    mine.len(),
                    mine.iter()
                        .map(|r| format!("{:?}", r.outcome))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }
        }
    })
    .await
}

/// Holds for `duration` that `method` is not called on any of `nodes`
/// beyond the count each had when this began; fails at the first call.
pub async fn not_called_again(
    calls: &Calls,
    nodes: &[String],
    method: Method<'_>,
    duration: Duration,
) -> Result<(), WaitError> {
    let before: Vec<u64> = nodes.iter().map(|n| method.count(calls, n)).collect();
    let what = format!(
        "{} not to be called again on {}",
        method.name,
        nodes.join(", ")
    );
    wait::consistently(&what, duration, TICK, || async {
        for (n, was) in nodes.iter().zip(&before) {
            let c = method.count(calls, n);
            if c != *was {
                return Err(format!("{n}: {was} calls when the step began, now {c}"));
            }
        }
        Ok(())
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use dra_e2e_plugin::calls::CallOutcome;
    use tokio_util::sync::CancellationToken;
    use tower::{Layer as _, Service as _};

    const PREPARE: Method<'static> = Method {
        name: "NodePrepareResources",
        paths: &["/v1.Prepare", "/v1beta1.Prepare"],
    };

    /// A call of `path` on `node` through the plugin's own call-counting
    /// layer, failed by injection when `fail`.
    async fn call(calls: &Calls, node: &str, path: &str, fail: bool) {
        calls.set_fail(node, path, fail);
        let answer = tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, std::convert::Infallible>(http::Response::new(tonic::body::Body::default()))
        });
        let mut svc = calls.layer(node, CancellationToken::new()).layer(answer);
        let request = http::Request::builder().uri(path).body(()).unwrap();
        svc.call(request).await.unwrap();
        calls.set_fail(node, path, false);
    }

    /// Each wait ends as its name says, and fails, naming what it last
    /// saw, when the calls do not come (or come when they must not).
    #[tokio::test(start_paused = true)]
    async fn each_wait_ends_on_its_condition_and_says_what_it_saw() {
        let second = Duration::from_secs(1);
        let calls = Calls::new("d");
        let err = called_more_than(&calls, "n", PREPARE, 0, second)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("last seen: 0 calls"), "{err}");
        call(&calls, "n", "/v1beta1.Prepare", false).await;
        call(&calls, "n", "/v1.Prepare", false).await;
        call(&calls, "other", "/v1.Prepare", false).await;
        let c = called_more_than(&calls, "n", PREPARE, 0, second).await;
        assert_eq!(c.unwrap(), 2, "both versions count, on their node only");
        let again = called_more_than(&calls, "n", PREPARE, 2, second).await;
        let err = again.unwrap_err().to_string();
        assert!(
            err.contains("again since it was counted (2 calls)"),
            "{err}"
        );

        let failing = Calls::new("d");
        call(&failing, "n", "/v1.Prepare", true).await;
        let err = a_call_succeeded(&failing, "n", PREPARE, second)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("1 calls: Injected"), "{err}");
        assert_eq!(failing.log("n")[0].outcome, CallOutcome::Injected);
        a_call_succeeded(&calls, "n", PREPARE, second)
            .await
            .unwrap();

        let nodes = ["n".to_owned()];
        not_called_again(&calls, &nodes, PREPARE, second)
            .await
            .unwrap();
        let call_soon = async {
            tokio::time::sleep(Duration::from_millis(300)).await;
            call(&calls, "n", "/v1.Prepare", false).await;
        };
        let (held, ()) = tokio::join!(not_called_again(&calls, &nodes, PREPARE, second), call_soon);
        let err = held.unwrap_err().to_string();
        assert!(
            err.contains("n: 2 calls when the step began, now 3"),
            "{err}"
        );
    }
}
