//! `dra-e2e in-cluster-check` (hidden): run in a pod, it reaches the API
//! server exactly as a DaemonSet driver built on client-go does, and says
//! what it found.
//!
//! The tests of real nodes run it in the proxy image, which carries this
//! binary. kube's [`kube::Config::incluster`] is client-go's
//! `rest.InClusterConfig`: `https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT`,
//! the ServiceAccount token as bearer token and the mounted `ca.crt` as the
//! only trust root, with the server's certificate verified against the
//! address dialled.
use std::time::Duration;

use anyhow::Context as _;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use kube::api::{Api, PostParams};

/// Long enough for a loaded node, short enough that a test sees a broken
/// route as this program's error rather than its own timeout.
const TIMEOUT: Duration = Duration::from_secs(20);

/// Prints, one per line: `server: <url>`, `version: <gitVersion>`,
/// `user: <name the token authenticated as>`. Any failure is an error
/// (exit status 1) naming the step and the server.
pub fn cli_main(args: Vec<std::ffi::OsString>) -> anyhow::Result<i32> {
    if !args.is_empty() {
        anyhow::bail!(
            "usage: dra-e2e in-cluster-check (no arguments; run in a pod, it reads the \
             in-cluster config)"
        );
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    rt.block_on(check())?;
    Ok(0)
}

async fn check() -> anyhow::Result<()> {
    let mut config = kube::Config::incluster().context(
        "loading the in-cluster config (KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT, \
         /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace})",
    )?;
    config.connect_timeout = Some(TIMEOUT);
    config.read_timeout = Some(TIMEOUT);
    // One attempt: a failure is the answer, not something to wait out.
    config.default_retry = false;
    let server = config.cluster_url.to_string();
    println!("server: {server}");
    let client = kube::Client::try_from(config).context("building the client")?;

    // /version is readable by everyone; it shows the route and TLS work.
    let version = tokio::time::timeout(TIMEOUT, client.apiserver_version())
        .await
        .with_context(|| format!("GET {server}version: no answer within {TIMEOUT:?}"))?
        .with_context(|| format!("GET {server}version"))?;
    println!("version: {}", version.git_version);

    // A SelfSubjectReview says who the token authenticated as; anonymous
    // requests may not create one, so an answer proves the token counted.
    let reviews: Api<SelfSubjectReview> = Api::all(client);
    let review = tokio::time::timeout(
        TIMEOUT,
        reviews.create(&PostParams::default(), &SelfSubjectReview::default()),
    )
    .await
    .with_context(|| {
        format!("creating a SelfSubjectReview at {server}: no answer within {TIMEOUT:?}")
    })?
    .with_context(|| format!("creating a SelfSubjectReview at {server}"))?;
    let user = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default();
    println!("user: {user}");
    Ok(())
}
