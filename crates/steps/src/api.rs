//! Objects written as manifests in feature files, and API checks: who may
//! create, update or delete what, quotas, the namespace.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Pod, ResourceQuota};
use kube::api::DynamicObject;

use super::World;
use super::params::{DriverRef, Identity, Verb};
use crate::ground::objects;
use crate::harness::driver::rbac;
use crate::harness::{api_requests, daemonsets, quota};

/// How long a quota's status may take to say what a step expects.
const QUOTA_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a creation may take to be let through or refused as a step
/// expects (RBAC and admission take a moment to apply).
const CREATE_SETTLES: Duration = Duration::from_secs(60);

sentences! {
    #[given("the following objects are created:")]
    #[when("the following objects are created:")]
    fn objects_created(step: Step<'_>);

    /// Tries until the creation fails with the message (admission and RBAC
    /// take a moment to apply); objects created in between are deleted again.
    #[then(expr = "creating the following objects as {identity} fails with {string}:")]
    fn create_fails(who: Identity, text: String, step: Step<'_>);

    /// Tries once: what a policy denies must be denied from the first
    /// request on (only requests that must succeed wait for RBAC to settle).
    #[then(expr = "creating the following objects as {identity} is denied with {string}:")]
    fn create_denied(who: Identity, text: String, step: Step<'_>);

    #[then(expr = "creating the following objects as {identity} succeeds:")]
    fn create_succeeds(who: Identity, step: Step<'_>);

    /// Tries once; updating is a PUT of the object as the admin reads it,
    /// with a label added.
    #[then(expr = "{verb} ResourceSlice {string} as {identity} fails with {string}")]
    fn slice_op_fails(verb: Verb, name: String, who: Identity, text: String);

    #[then(expr = "{verb} ResourceSlice {string} as {identity} succeeds")]
    fn slice_op_succeeds(verb: Verb, name: String, who: Identity);

    #[given(expr = "the namespace is labelled {string}")]
    #[when(expr = "the namespace is labelled {string}")]
    fn label_namespace(label: String);

    #[given(expr = "resource quota {string} reports {int} used for {string}")]
    #[then(expr = "resource quota {string} reports {int} used for {string}")]
    fn quota_used(name: String, used: i64, resource: String);

    /// Upstream compares the quota's whole status: exactly these resources,
    /// hard and used, and no others.
    #[then(expr = "resource quota {string} has status:")]
    fn quota_status(name: String, step: Step<'_>);

    #[given(expr = "daemonset {string} runs a pod on node {int}")]
    #[then(expr = "daemonset {string} runs a pod on node {int}")]
    fn daemonset_runs(name: String, node: usize);
}

/// A client acting as `who`. Acting as a plugin waits until the driver's
/// slice admission policy is in force, so what it denies is denied at once.
pub(crate) async fn client_for(w: &World, who: &Identity) -> anyhow::Result<kube::Client> {
    match who {
        Identity::Admin => w.client(),
        Identity::PluginOnIndex(i) => plugin_client(w, w.node(*i)?).await,
        Identity::PluginOnNamed(n) => plugin_client(w, n).await,
        Identity::ServiceAccount(name) => {
            let admin = w.context()?.cluster.kube_config();
            let config = rbac::impersonate_service_account(&admin, &w.namespace, name);
            kube::Client::try_from(config)
                .with_context(|| format!("building a client for service account {name}"))
        }
    }
}

async fn plugin_client(w: &World, node: &str) -> anyhow::Result<kube::Client> {
    let driver = w.driver(&DriverRef::The)?;
    driver.policy_enforced().await?;
    Ok(driver.plugin_client(node)?)
}

/// Parses a (multi-document) manifest with placeholders.
fn manifests(w: &World, step: &Step) -> anyhow::Result<Vec<DynamicObject>> {
    let doc = step
        .docstring
        .as_ref()
        .context("this step needs the objects as a YAML doc string (\"\"\" ... \"\"\")")?;
    let text = objects::expand(doc, &w.vars())?;
    let objs: Vec<DynamicObject> = serde_saphyr::from_multiple(&text)
        .map_err(|e| anyhow::anyhow!("the manifest is not valid YAML: {e}"))?;
    if objs.is_empty() {
        bail!("the manifest holds no objects");
    }
    Ok(objs)
}

/// Creates the objects in order, taking each off `objs` once it exists (so a
/// retry continues where a failure stopped) and remembering it for teardown.
async fn create_all(
    w: &mut World,
    who: &Identity,
    objs: &mut Vec<DynamicObject>,
) -> anyhow::Result<()> {
    let client = client_for(w, who).await?;
    let admin = w.client()?;
    while let Some(obj) = objs.first() {
        let (api, ar, namespaced) =
            api_requests::served_api(&client, &admin, &w.namespace, obj).await?;
        w.create_object(&api, ar, namespaced, obj).await?;
        objs.remove(0);
    }
    Ok(())
}

async fn objects_created(w: &mut World, step: &Step) -> anyhow::Result<()> {
    let mut objs = manifests(w, step)?;
    create_all(w, &Identity::Admin, &mut objs).await
}

/// The requests of a creation check made as `who`.
async fn creator(
    w: &World,
    who: &Identity,
) -> anyhow::Result<(kube::Client, kube::Client, String)> {
    Ok((client_for(w, who).await?, w.client()?, format!("{who:?}")))
}

async fn create_fails(w: &World, who: Identity, text: String, step: &Step) -> anyhow::Result<()> {
    let text = objects::expand(&text, &w.vars())?;
    let objs = manifests(w, step)?;
    let (client, admin, who) = creator(w, &who).await?;
    api_requests::Creator {
        client: &client,
        admin: &admin,
        who: &who,
        namespace: &w.namespace,
    }
    .until_all_fail(&objs, &text, CREATE_SETTLES)
    .await?;
    Ok(())
}

async fn create_denied(w: &World, who: Identity, text: String, step: &Step) -> anyhow::Result<()> {
    let text = objects::expand(&text, &w.vars())?;
    let objs = manifests(w, step)?;
    let (client, admin, who) = creator(w, &who).await?;
    api_requests::Creator {
        client: &client,
        admin: &admin,
        who: &who,
        namespace: &w.namespace,
    }
    .all_denied(&objs, &text)
    .await?;
    Ok(())
}

async fn create_succeeds(w: &mut World, who: Identity, step: &Step) -> anyhow::Result<()> {
    let mut objs = manifests(w, step)?;
    let tries = api_requests::Tries::new(CREATE_SETTLES, Duration::from_secs(1));
    loop {
        match create_all(w, &who, &mut objs).await {
            Ok(()) => return Ok(()),
            Err(e) => {
                if !tries.again().await {
                    return Err(e.context(format!("creating the objects as {who:?}")));
                }
            }
        }
    }
}

async fn slice_op(w: &World, who: &Identity, verb: Verb, name: &str) -> Result<(), kube::Error> {
    let client = client_for(w, who)
        .await
        .map_err(|e| kube::Error::Service(e.into()))?;
    match verb {
        Verb::Updating => {
            let admin = w.client().map_err(|e| kube::Error::Service(e.into()))?;
            api_requests::update_slice(client, admin, name).await
        }
        Verb::Deleting => api_requests::delete_slice(client, name).await,
    }
}

async fn slice_op_fails(
    w: &World,
    verb: Verb,
    name: String,
    who: Identity,
    text: String,
) -> anyhow::Result<()> {
    let text = objects::expand(&text, &w.vars())?;
    let name = objects::expand(&name, &w.vars())?;
    match slice_op(w, &who, verb, &name).await {
        Ok(()) => bail!(
            "expected {verb:?} ResourceSlice {name} as {who:?} to fail with {text:?}, but it succeeded"
        ),
        Err(e) if e.to_string().contains(&text) => Ok(()),
        Err(e) => bail!(
            "expected {verb:?} ResourceSlice {name} as {who:?} to fail with {text:?}, observed: {e}"
        ),
    }
}

async fn slice_op_succeeds(
    w: &mut World,
    verb: Verb,
    name: String,
    who: Identity,
) -> anyhow::Result<()> {
    let name = objects::expand(&name, &w.vars())?;
    slice_op(w, &who, verb, &name)
        .await
        .with_context(|| format!("{verb:?} ResourceSlice {name} as {who:?}"))?;
    if verb == Verb::Deleting {
        w.scenario.forget_object("ResourceSlice", &name);
    }
    Ok(())
}

async fn label_namespace(w: &World, label: String) -> anyhow::Result<()> {
    let (k, v) = label
        .split_once('=')
        .with_context(|| format!("label {label:?} must be key=value"))?;
    api_requests::label_namespace(w.client()?, &w.namespace, k, v).await?;
    Ok(())
}

async fn quota_used(w: &World, name: String, used: i64, resource: String) -> anyhow::Result<()> {
    let resource = objects::expand(&resource, &w.vars())?;
    let api = w.api::<ResourceQuota>()?;
    quota::reports_used(&api, &name, &resource, used, QUOTA_TIMEOUT).await?;
    Ok(())
}

async fn quota_status(w: &World, name: String, step: &Step) -> anyhow::Result<()> {
    let table = step
        .table
        .as_ref()
        .context("`has status:` needs a table | resource | hard | used |")?;
    let vars = w.vars();
    let (mut hard, mut used) = (quota::Amounts::new(), quota::Amounts::new());
    for row in table.rows.iter().skip(1) {
        let [resource, h, u] = row.as_slice() else {
            bail!("rows are | resource | hard | used |, got {row:?}");
        };
        let resource = objects::expand(resource.trim(), &vars)?;
        hard.insert(resource.clone(), crate::harness::quantity::milli(h.trim())?);
        used.insert(resource, crate::harness::quantity::milli(u.trim())?);
    }
    let api = w.api::<ResourceQuota>()?;
    quota::has_status(&api, &name, &hard, &used, QUOTA_TIMEOUT).await?;
    Ok(())
}

async fn daemonset_runs(w: &World, name: String, node: usize) -> anyhow::Result<()> {
    let node = w.node(node)?.to_owned();
    let pods = w.api::<Pod>()?;
    daemonsets::pod_running_on(&pods, &name, &node, Duration::from_secs(300)).await?;
    let ds = w.api::<DaemonSet>()?;
    daemonsets::status_consistent(&ds, &name, Duration::from_secs(60)).await?;
    Ok(())
}
