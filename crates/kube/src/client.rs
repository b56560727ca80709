//! The one way the runner makes a `kube::Client` for scenarios: [`build`].
//!
//! Its requests ride out an API server that goes away for a while (a
//! restart, on the local cluster with the scheduler and controller-manager;
//! an upgrade of a real cluster's control plane; flow control's 429): a
//! tower retry layer in front of the client's stack tries them again as
//! the house's one policy says ([`Retry::TRANSIENT`]: 60 s, pauses from
//! 250 ms doubling to 4 s with jitter, a `Retry-After` honoured), and
//! refuses to retry anything else (a 422 or a 403 is Kubernetes' answer,
//! final at once). kube-rs's own retry (`Config::default_retry`: 429, 503
//! and 504, fifteen tries from 5 ms) is turned off, so that there is one
//! policy, not two stacked.
//!
//! **Which request is tried again on which failure** ([`Failure`]): a
//! request that never reached the server (the connection was refused, or
//! not made) is tried again whatever it is, and so is one the server
//! answered 429 or 503 (flow control and an API server that is not serving
//! refuse before anything is done), and one whose connection closed
//! before any answer came (`connection closed before message completed`:
//! what a client meets when the API server, shutting down, closes the
//! connections it holds idle as a request goes out on one; the server
//! never read it). A request that may have been done — the connection
//! broke in the middle of the answer, or a 500, 502 or 504 came back — is
//! tried again only when doing it twice is doing it once: GET, HEAD, PUT,
//! DELETE, and PATCH but a JSON patch (whose operations, an `add` to a
//! list, may apply twice). A create (POST) is not: had the first reached
//! the server, the second would answer 409 AlreadyExists, and the step
//! would fail saying the object existed when the scenario made it; the
//! error of the first is the truer one. The one case where a create may
//! be done twice is a connection closed with no answer that a server
//! killed mid-request closed (its restart's SIGKILL): then the create
//! answers 409 AlreadyExists and the step fails, as it would have failed
//! without the retry, only with another message. (A retried PUT whose
//! first try was written answers 409 Conflict, which [`Retry::CONFLICTS`]
//! reads again where an update is meant; a retried DELETE, 404, which
//! "delete if present" takes as done.)
//!
//! **After the deadline** a request fails with what it last met, saying
//! the API server at `<url>` did not answer for 60 s; and, for a client
//! built with an [`Outage`], the outage is reported once, so that the run
//! can end naming it ([`Outage::reported`]) instead of failing every
//! scenario's every step a minute at a time. A 429 that lasts is no
//! outage: the server answers.
//!
//! Watches are requests too: a watch the server does not accept is tried
//! again here; one that breaks once started (its stream ends, or a 410
//! Gone says its resource version expired) is kube-runtime's watcher's to
//! start again, listing afresh, as every wait here watches
//! ([`crate::wait::list`]).
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request, Response, StatusCode, header};
use kube::client::Body;
use tokio::sync::watch;
use tower::BoxError;
use tower::retry::Policy;

use crate::retry::{Pauses, Retry};

/// A client of `config`'s API server whose requests ride out transient
/// failures ([module docs](self)); with `outage`, a failure that outlasts
/// the deadline is reported there.
pub fn build(
    mut config: kube::Config,
    outage: Option<&Outage>,
) -> Result<kube::Client, kube::Error> {
    let server = config.cluster_url.to_string();
    // One policy: ours.
    config.default_retry = false;
    let policy = Transient::new(
        Retry::TRANSIENT,
        server.trim_end_matches('/'),
        outage.cloned(),
    );
    let layer = tower::ServiceBuilder::new()
        .layer(tower::retry::RetryLayer::new(policy))
        // The retry layer calls the stack once per try: a buffer makes the
        // stack (one boxed service) shareable between the tries.
        .layer(tower::buffer::BufferLayer::new(1024))
        .into_inner();
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

/// What went wrong with one try of a request, when it may go away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No connection was made (refused, reset while connecting, no route):
    /// the request never reached the server.
    Unreached,
    /// The connection closed before any answer came: the server closed it
    /// as idle while the request went out, and never read it (or, rarely,
    /// died while it did).
    Dropped,
    /// The connection broke or timed out once the request was on its way:
    /// the server may have done it.
    Broken,
    /// The server answered 429, 500, 502, 503 or 504.
    Status(StatusCode),
}

impl Failure {
    /// The failure of an answer, if its status is one that may go away.
    pub fn of_status(status: StatusCode) -> Option<Failure> {
        matches!(status.as_u16(), 429 | 500 | 502 | 503 | 504).then_some(Failure::Status(status))
    }

    /// The failure of an error the client's stack returned, if it may go
    /// away: anything else (a TLS handshake refused, a certificate the
    /// client does not trust, a request it could not build) is final.
    pub fn of_error(error: &(dyn std::error::Error + 'static)) -> Option<Failure> {
        let mut connecting = false;
        let mut current = Some(error);
        while let Some(e) = current {
            if let Some(e) = e.downcast_ref::<hyper_util::client::legacy::Error>()
                && e.is_connect()
            {
                connecting = true;
            }
            if let Some(e) = e.downcast_ref::<std::io::Error>() {
                use std::io::ErrorKind::*;
                return match e.kind() {
                    ConnectionRefused | AddrNotAvailable | HostUnreachable | NetworkUnreachable
                    | NotConnected => Some(Failure::Unreached),
                    ConnectionReset | ConnectionAborted | TimedOut if connecting => {
                        Some(Failure::Unreached)
                    }
                    ConnectionReset | ConnectionAborted | BrokenPipe | UnexpectedEof | TimedOut => {
                        Some(Failure::Broken)
                    }
                    // TLS refusals come as InvalidData, and the like: final.
                    _ => None,
                };
            }
            if let Some(e) = e.downcast_ref::<hyper::Error>() {
                if e.is_incomplete_message() || e.is_canceled() {
                    return Some(Failure::Dropped);
                }
                if e.is_closed() || e.is_timeout() || e.is_body_write_aborted() {
                    return Some(Failure::Broken);
                }
            }
            current = e.source();
        }
        None
    }

    /// Whether a request of `method` (sent with `content_type`) is tried
    /// again after this failure ([module docs](self)).
    pub fn retried(self, method: &Method, content_type: Option<&str>) -> bool {
        match self {
            Failure::Unreached | Failure::Dropped => true,
            Failure::Status(s)
                if s == StatusCode::TOO_MANY_REQUESTS || s == StatusCode::SERVICE_UNAVAILABLE =>
            {
                true
            }
            Failure::Broken | Failure::Status(_) => match *method {
                Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE => true,
                Method::PATCH => content_type != Some("application/json-patch+json"),
                _ => false,
            },
        }
    }

    /// Whether it says the server is away, rather than busy.
    fn is_outage(self) -> bool {
        self != Failure::Status(StatusCode::TOO_MANY_REQUESTS)
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreached => f.write_str("no connection"),
            Failure::Dropped => f.write_str("a connection closed before any answer"),
            Failure::Broken => f.write_str("a broken connection"),
            Failure::Status(s) => write!(f, "{s}"),
        }
    }
}

/// An API server that did not answer within the policy's deadline.
#[derive(Debug, thiserror::Error)]
#[error("the API server at {server} did not answer for {}: {last}", humantime(*after))]
pub struct Unanswered {
    pub server: String,
    pub after: Duration,
    #[source]
    pub last: BoxError,
}

fn humantime(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

/// Where a client reports an API server that stayed away past the
/// deadline: the first report stays.
#[derive(Debug, Clone)]
pub struct Outage(Arc<watch::Sender<Option<String>>>);

impl Default for Outage {
    fn default() -> Self {
        Outage(Arc::new(watch::channel(None).0))
    }
}

impl Outage {
    pub fn new() -> Outage {
        Outage::default()
    }

    /// Resolves with what happened once an outage is reported; pending
    /// until then.
    pub async fn reported(&self) -> String {
        let mut rx = self.0.subscribe();
        match rx.wait_for(Option::is_some).await {
            Ok(what) => what.clone().unwrap_or_default(),
            // The sender lives as long as `self`.
            Err(_) => std::future::pending().await,
        }
    }

    /// What was reported, if anything.
    pub fn seen(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    fn report(&self, what: String) {
        self.0.send_if_modified(|seen| {
            if seen.is_some() {
                return false;
            }
            *seen = Some(what);
            true
        });
    }
}

/// The tower retry policy of [`build`]'s clients: one per request (tower
/// clones it for each), holding that request's pauses.
#[derive(Clone)]
pub struct Transient {
    policy: Retry,
    server: Arc<str>,
    outage: Option<Outage>,
    /// Set at the first failure of the request.
    pauses: Option<Pauses>,
    tries: u32,
}

impl Transient {
    pub fn new(policy: Retry, server: &str, outage: Option<Outage>) -> Transient {
        Transient {
            policy,
            server: server.into(),
            outage,
            pauses: None,
            tries: 0,
        }
    }

    fn give_up<Res>(&self, failure: Failure, result: &mut Result<Response<Res>, BoxError>) {
        let after = self.policy.within;
        let said = match std::mem::replace(result, Err("".into())) {
            Err(last) => {
                let e = Unanswered {
                    server: self.server.to_string(),
                    after,
                    last,
                };
                let said = e.to_string();
                *result = Err(Box::new(e));
                said
            }
            Ok(response) => {
                *result = Ok(response);
                format!(
                    "the API server at {} answered {failure} for {}",
                    self.server,
                    humantime(after)
                )
            }
        };
        tracing::debug!(server = %self.server, tries = self.tries, "{said}; giving up");
        if failure.is_outage()
            && let Some(outage) = &self.outage
        {
            outage.report(said);
        }
    }
}

fn retry_after<Res>(response: &Response<Res>) -> Option<Duration> {
    let secs: u64 = response
        .headers()
        .get(header::RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(secs))
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for Transient {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        req: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        let (failure, asked) = match result {
            Ok(response) => (
                Failure::of_status(response.status())?,
                retry_after(response),
            ),
            Err(e) => (Failure::of_error(e.as_ref())?, None),
        };
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok());
        if !failure.retried(req.method(), content_type) {
            return None;
        }
        self.tries += 1;
        let pauses = self.pauses.get_or_insert_with(|| self.policy.pauses());
        let Some(pause) = pauses.next(asked) else {
            self.give_up(failure, result);
            return None;
        };
        tracing::debug!(
            server = %self.server,
            method = %req.method(),
            uri = %req.uri(),
            %failure,
            try_ = self.tries,
            ?pause,
            "trying the request again"
        );
        Some(tokio::time::sleep(pause))
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        // Only a body held whole can be sent again (every request kube-rs
        // makes has one).
        let body = req.body().try_clone()?;
        let mut again = Request::builder()
            .method(req.method().clone())
            .uri(req.uri().clone())
            .version(req.version())
            .body(body)
            .ok()?;
        *again.headers_mut() = req.headers().clone();
        *again.extensions_mut() = req.extensions().clone();
        Some(again)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use tower::{Service as _, ServiceExt as _};

    const QUICK: Retry = Retry {
        within: Duration::from_secs(2),
        first_pause: Duration::from_millis(100),
        longest_pause: Duration::from_millis(400),
        jitter: 0.0,
    };

    fn refused() -> BoxError {
        Box::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
    }

    fn answer(status: u16) -> Result<Response<()>, BoxError> {
        Ok(Response::builder().status(status).body(()).unwrap())
    }

    /// A service failing its first `failing` calls with `fail`, then
    /// answering 200; and how many times it was called.
    fn server(
        failing: u32,
        fail: fn() -> Result<Response<()>, BoxError>,
    ) -> (
        impl tower::Service<
            Request<Body>,
            Response = Response<()>,
            Error = BoxError,
            Future = impl Send,
        > + Clone,
        Arc<AtomicU32>,
    ) {
        let calls = Arc::new(AtomicU32::new(0));
        let counted = calls.clone();
        let service = tower::service_fn(move |_req: Request<Body>| {
            let n = counted.fetch_add(1, Ordering::SeqCst);
            async move { if n < failing { fail() } else { answer(200) } }
        });
        (service, calls)
    }

    fn request(method: Method) -> Request<Body> {
        Request::builder()
            .method(method)
            .uri("/api/v1/namespaces/n/pods")
            .body(Body::from(b"{}".to_vec()))
            .unwrap()
    }

    async fn send(
        failing: u32,
        fail: fn() -> Result<Response<()>, BoxError>,
        method: Method,
        outage: Option<Outage>,
    ) -> (Result<Response<()>, BoxError>, u32) {
        let (service, calls) = server(failing, fail);
        let mut retrying = tower::retry::Retry::new(
            Transient::new(QUICK, "https://127.0.0.1:6443", outage),
            service,
        );
        let r = retrying.ready().await.unwrap().call(request(method)).await;
        (r, calls.load(Ordering::SeqCst))
    }

    #[tokio::test(start_paused = true)]
    async fn a_refused_connection_is_tried_again_for_any_request_until_it_answers() {
        let start = tokio::time::Instant::now();
        let (r, calls) = send(3, || Err(refused()), Method::POST, None).await;
        assert_eq!(r.unwrap().status(), 200);
        assert_eq!(calls, 4);
        // 100 + 200 + 400 ms.
        assert_eq!(start.elapsed(), Duration::from_millis(700));
    }

    #[tokio::test(start_paused = true)]
    async fn a_server_that_stays_away_fails_the_request_naming_it_and_is_reported() {
        let outage = Outage::new();
        let (r, calls) = send(
            u32::MAX,
            || Err(refused()),
            Method::GET,
            Some(outage.clone()),
        )
        .await;
        let e = r.unwrap_err();
        assert_eq!(
            e.to_string(),
            "the API server at https://127.0.0.1:6443 did not answer for 2s: connection refused"
        );
        // Pauses of 100, 200, 400, 400, 400, 400 ms; the next would pass 2 s.
        assert_eq!(calls, 7);
        assert_eq!(outage.seen().as_deref(), Some(e.to_string().as_str()));
    }

    #[tokio::test(start_paused = true)]
    async fn only_transient_answers_are_tried_again() {
        for status in [422, 403, 404, 409, 400] {
            let (r, calls) = match status {
                422 => send(1, || answer(422), Method::POST, None).await,
                403 => send(1, || answer(403), Method::GET, None).await,
                404 => send(1, || answer(404), Method::GET, None).await,
                409 => send(1, || answer(409), Method::PUT, None).await,
                _ => send(1, || answer(400), Method::PATCH, None).await,
            };
            assert_eq!(r.unwrap().status(), status);
            assert_eq!(calls, 1, "{status} was tried again");
        }
        for method in [Method::GET, Method::DELETE, Method::POST] {
            let (r, calls) = send(2, || answer(503), method, None).await;
            assert_eq!(r.unwrap().status(), 200);
            assert_eq!(calls, 3);
        }
        let (r, calls) = send(2, || answer(500), Method::GET, None).await;
        assert_eq!((r.unwrap().status().as_u16(), calls), (200, 3));
        let (r, calls) = send(2, || answer(429), Method::POST, None).await;
        assert_eq!((r.unwrap().status().as_u16(), calls), (200, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_create_that_may_have_been_done_is_not_tried_again() {
        let (r, calls) = send(1, || answer(500), Method::POST, None).await;
        assert_eq!((r.unwrap().status().as_u16(), calls), (500, 1));
        let broken = || -> Result<Response<()>, BoxError> {
            Err(Box::new(std::io::Error::from(
                std::io::ErrorKind::ConnectionReset,
            )))
        };
        let (r, calls) = send(1, broken, Method::POST, None).await;
        assert!(r.is_err());
        assert_eq!(calls, 1);
        let (r, calls) = send(1, broken, Method::GET, None).await;
        assert_eq!((r.unwrap().status().as_u16(), calls), (200, 2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lasting_429_is_no_outage() {
        let outage = Outage::new();
        let (r, _) = send(u32::MAX, || answer(429), Method::GET, Some(outage.clone())).await;
        assert_eq!(r.unwrap().status(), 429);
        assert_eq!(outage.seen(), None);
        let (r, _) = send(u32::MAX, || answer(503), Method::GET, Some(outage.clone())).await;
        assert_eq!(r.unwrap().status(), 503);
        assert_eq!(
            outage.seen().as_deref(),
            Some(
                "the API server at https://127.0.0.1:6443 answered 503 Service Unavailable for 2s"
            )
        );
    }

    #[tokio::test(start_paused = true)]
    async fn retry_after_is_honoured() {
        let start = tokio::time::Instant::now();
        let (r, calls) = send(
            1,
            || {
                Ok(Response::builder()
                    .status(429)
                    .header("Retry-After", "1")
                    .body(())
                    .unwrap())
            },
            Method::GET,
            None,
        )
        .await;
        assert_eq!((r.unwrap().status().as_u16(), calls), (200, 2));
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[test]
    fn a_json_patch_is_not_done_twice_a_merge_patch_may_be() {
        let broken = Failure::Broken;
        assert!(broken.retried(&Method::PATCH, Some("application/merge-patch+json")));
        assert!(broken.retried(&Method::PATCH, Some("application/apply-patch+yaml")));
        assert!(!broken.retried(&Method::PATCH, Some("application/json-patch+json")));
        assert!(Failure::Unreached.retried(&Method::PATCH, Some("application/json-patch+json")));
    }

    #[test]
    fn errors_are_told_apart() {
        let io = |k| std::io::Error::from(k);
        use std::io::ErrorKind::*;
        assert_eq!(
            Failure::of_error(&io(ConnectionRefused)),
            Some(Failure::Unreached)
        );
        assert_eq!(
            Failure::of_error(&io(ConnectionReset)),
            Some(Failure::Broken)
        );
        assert_eq!(Failure::of_error(&io(InvalidData)), None);
        let wrapped: BoxError = Box::new(Unanswered {
            server: "s".into(),
            after: Duration::ZERO,
            last: Box::new(io(UnexpectedEof)),
        });
        assert_eq!(Failure::of_error(wrapped.as_ref()), Some(Failure::Broken));
    }
}
