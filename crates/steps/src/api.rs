//! Objects written as manifests in feature files, and API checks: who may
//! create, update or delete what, quotas, the namespace.
use std::time::Duration;

use anyhow::{Context as _, bail};
use cucumber::gherkin::Step;
use cucumber::{given, then, when};
use k8s_openapi::api::apps::v1::DaemonSet;
use k8s_openapi::api::core::v1::{Namespace, Pod, ResourceQuota};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::Scope;
use serde_json::json;

use super::World;
use super::params::{DriverRef, Identity, Verb};
use crate::ground::objects::{self, delete_if_present};
use crate::harness::driver::rbac;
use crate::harness::{daemonsets, quota};

/// How long a quota's status may take to say what a step expects.
const QUOTA_TIMEOUT: Duration = Duration::from_secs(60);

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

async fn api_for(
    client: &kube::Client,
    admin: &kube::Client,
    ns: &str,
    obj: &DynamicObject,
) -> anyhow::Result<(Api<DynamicObject>, ApiResource, bool)> {
    let types = obj
        .types
        .as_ref()
        .context("every object needs apiVersion and kind")?;
    let gvk = kube::api::GroupVersionKind::try_from(types).map_err(|e| anyhow::anyhow!("{e}"))?;
    let (ar, caps) = kube::discovery::pinned_kind(admin, &gvk)
        .await
        .with_context(|| {
            format!(
                "the cluster does not serve {}/{}",
                types.api_version, types.kind
            )
        })?;
    let namespaced = caps.scope == Scope::Namespaced;
    let api = if namespaced {
        Api::namespaced_with(client.clone(), ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    Ok((api, ar, namespaced))
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
        let (api, ar, namespaced) = api_for(&client, &admin, &w.namespace, obj).await?;
        w.create_object(&api, ar, namespaced, obj).await?;
        objs.remove(0);
    }
    Ok(())
}

async fn objects_created(w: &mut World, step: &Step) -> anyhow::Result<()> {
    let mut objs = manifests(w, step)?;
    create_all(w, &Identity::Admin, &mut objs).await
}

async fn create_fails(w: &World, who: Identity, text: String, step: &Step) -> anyhow::Result<()> {
    let text = objects::expand(&text, &w.vars())?;
    let objs = manifests(w, step)?;
    let client = client_for(w, &who).await?;
    let admin = w.client()?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut last = String::new();
        let mut all_failed = true;
        for obj in &objs {
            let (api, ar, _) = api_for(&client, &admin, &w.namespace, obj).await?;
            match api.create(&PostParams::default(), obj).await {
                Ok(created) => {
                    all_failed = false;
                    last = format!(
                        "{} {} was created",
                        ar.kind,
                        created.metadata.name.clone().unwrap_or_default()
                    );
                    let (admin_api, _, _) = api_for(&admin, &admin, &w.namespace, obj).await?;
                    if let Some(n) = created.metadata.name {
                        let _ = admin_api
                            .delete(&n, &DeleteParams::default().grace_period(0))
                            .await;
                    }
                }
                Err(e) if e.to_string().contains(&text) => {}
                Err(e) => {
                    all_failed = false;
                    last = e.to_string();
                }
            }
        }
        if all_failed {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "expected creating the objects as {who:?} to fail with {text:?}; last observed: {last}"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn create_denied(w: &World, who: Identity, text: String, step: &Step) -> anyhow::Result<()> {
    let text = objects::expand(&text, &w.vars())?;
    let objs = manifests(w, step)?;
    let client = client_for(w, &who).await?;
    let admin = w.client()?;
    for obj in &objs {
        let (api, ar, _) = api_for(&client, &admin, &w.namespace, obj).await?;
        match api.create(&PostParams::default(), obj).await {
            Ok(created) => {
                let name = created.metadata.name.unwrap_or_default();
                let (admin_api, _, _) = api_for(&admin, &admin, &w.namespace, obj).await?;
                let removed = delete_if_present(&admin_api, &name, &DeleteParams::default())
                    .await
                    .map_or_else(
                        |e| format!(" (deleting it again failed: {e})"),
                        |_| String::new(),
                    );
                bail!(
                    "expected creating {} {name} as {who:?} to be denied with {text:?}, but it was created{removed}",
                    ar.kind
                );
            }
            Err(e) if e.to_string().contains(&text) => {}
            Err(e) => bail!(
                "expected creating {} as {who:?} to be denied with {text:?}, observed: {e}",
                ar.kind
            ),
        }
    }
    Ok(())
}

async fn create_succeeds(w: &mut World, who: Identity, step: &Step) -> anyhow::Result<()> {
    let mut objs = manifests(w, step)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match create_all(w, &who, &mut objs).await {
            Ok(()) => return Ok(()),
            Err(e) if tokio::time::Instant::now() > deadline => {
                return Err(e.context(format!("creating the objects as {who:?}")));
            }
            Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

async fn slice_op(w: &World, who: &Identity, verb: Verb, name: &str) -> Result<(), kube::Error> {
    let client = client_for(w, who)
        .await
        .map_err(|e| kube::Error::Service(e.into()))?;
    let api: Api<k8s_openapi::api::resource::v1::ResourceSlice> = Api::all(client);
    match verb {
        Verb::Updating => {
            // The admin reads, so that a denial is the write's and not the read's.
            let admin = w.client().map_err(|e| kube::Error::Service(e.into()))?;
            let mut slice = Api::<k8s_openapi::api::resource::v1::ResourceSlice>::all(admin)
                .get(name)
                .await?;
            let touched = slice
                .metadata
                .labels
                .get_or_insert_default()
                .entry("dra-e2e.k8s.io/touched".to_owned())
                .or_default();
            touched.push('x');
            api.replace(name, &PostParams::default(), &slice)
                .await
                .map(|_| ())
        }
        Verb::Deleting => api.delete(name, &DeleteParams::default()).await.map(|_| ()),
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
    let api: Api<Namespace> = Api::all(w.client()?);
    let patch = json!({ "metadata": { "labels": { k: v } } });
    api.patch(&w.namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("labelling namespace {}", w.namespace))?;
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
