//! Device metadata files (KEP-5304) as containers see them: read by exec at
//! the well-known path and checked by the harness ([`device_metadata`]) as
//! upstream's `testContainerMetadataFile` does.
use anyhow::{Context as _, bail};
use cucumber::then;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::resource::v1::ResourceClaim;

use super::World;
use super::claims::claim_name;
use super::params::{ClaimPhrase, DriverRef};
use super::pods::wait_pod;
use crate::cluster::proxy::exec::{ExecError, ExecTarget, exec_capture};
use crate::ground::wait::PodState;
use crate::harness::device_metadata::{self, Expected};
use crate::plugin::metadata::MetadataVersion;

sentences! {
    #[then(expr = "container {string} of pod {string} reads the {word} device metadata of request {string} of {claim}")]
    fn reads(container: String, pod: String, version: String, request: String, claim: ClaimPhrase)
        => reads_from(DriverRef::The);

    #[then(expr = "container {string} of pod {string} reads the {word} device metadata of request {string} of {claim} written by {driver}")]
    fn reads_from(container: String, pod: String, version: String, request: String, claim: ClaimPhrase, d: DriverRef);

    #[then(expr = "container {string} of pod {string} cannot read the device metadata of request {string} of {claim}")]
    fn cannot_read(container: String, pod: String, request: String, claim: ClaimPhrase);
}

/// The metadata file of `request` of `claim` in `container` of `pod`, once
/// the pod runs: where to read it, and what it must say in `version`.
async fn locate(
    w: &World,
    container: &str,
    pod: &str,
    request: &str,
    claim: &ClaimPhrase,
    d: &DriverRef,
    version: MetadataVersion,
) -> anyhow::Result<(ExecTarget, String, Expected)> {
    wait_pod(w, pod, PodState::Running).await?;
    let driver = w.driver(d)?.name.clone();
    let claim = claim_name(w, claim).await?;
    let (path, expected) = device_metadata::locate(
        &w.api::<ResourceClaim>()?,
        &w.api::<Pod>()?,
        &claim,
        pod,
        &driver,
        request,
        version,
    )
    .await?;
    let target = ExecTarget {
        namespace: w.namespace.clone(),
        pod: pod.to_owned(),
        container: container.to_owned(),
    };
    Ok((target, path, expected))
}

async fn read(
    client: &kube::Client,
    target: &ExecTarget,
    path: &str,
) -> Result<(String, String), ExecError> {
    exec_capture(client, target, vec!["cat".into(), path.into()])
        .await
        .map(|o| (o.stdout, o.stderr))
}

async fn reads_from(
    w: &World,
    container: String,
    pod: String,
    version: String,
    request: String,
    claim: ClaimPhrase,
    d: DriverRef,
) -> anyhow::Result<()> {
    let version: MetadataVersion = version.parse().map_err(anyhow::Error::msg)?;
    let (target, path, expected) =
        locate(w, &container, &pod, &request, &claim, &d, version).await?;
    let (stdout, stderr) = read(&w.client()?, &target, &path)
        .await
        .with_context(|| format!("container {container} of pod {pod} cannot read {path}"))?;
    if !stderr.is_empty() {
        bail!("reading {path} in container {container} of pod {pod} printed to stderr: {stderr}");
    }
    Ok(device_metadata::check(&path, &stdout, &expected)?)
}

async fn cannot_read(
    w: &World,
    container: String,
    pod: String,
    request: String,
    claim: ClaimPhrase,
) -> anyhow::Result<()> {
    // The version does not matter: nothing is to be read.
    let (target, path, _) = locate(
        w,
        &container,
        &pod,
        &request,
        &claim,
        &DriverRef::The,
        MetadataVersion::V1beta1,
    )
    .await?;
    match read(&w.client()?, &target, &path).await {
        // The command ran and failed: the file is not there.
        Err(ExecError::Failed { .. }) => Ok(()),
        Err(e) => Err(anyhow::Error::new(e).context(format!(
            "could not try to read {path} in container {container} of pod {pod}"
        ))),
        Ok((stdout, _)) => bail!(
            "container {container} of pod {pod} can read {path} ({} bytes): the file must not be \
             mounted there, only in containers that get the request's devices",
            stdout.len()
        ),
    }
}
