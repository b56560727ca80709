//! Teardown: the scenario's stack run phase by phase in upstream's order,
//! last in first out within a phase, every cleanup run even when an
//! earlier one failed. What a step left broken on the run's driver under
//! test or on a node (a stopped daemon, a cut node, another device count)
//! is healed here first, so that the next scenario finds the cluster as
//! deployed.
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::watcher;

use super::{Created, Phase, Scenario};
use crate::ground::objects::delete_if_present;
use crate::ground::wait::{self, Check};
use crate::report::Timings;
use crate::steps::Context;

/// How long each teardown wait may take.
const TEARDOWN_WAIT: Duration = Duration::from_secs(60);

/// Proxy pods of drivers are torn down with their driver, not with the
/// scenario's pods.
const NOT_A_DRIVER_POD: &str = "app.kubernetes.io/part-of!=dra-test-driver";

impl Scenario {
    /// Runs every cleanup, phase by phase, and records each phase's time.
    /// The drivers' waits (proxy pods gone, slices wiped) are not run here
    /// but left to [`Scenario::take_unfinished`]. `ctx` is the run's: its
    /// driver under test is healed and restored.
    pub async fn tear_down(
        &mut self,
        client: &kube::Client,
        ctx: &Context,
        timings: &mut Timings,
    ) -> anyhow::Result<()> {
        let mut first: Option<anyhow::Error> = None;
        // Failures, stalls and blocked sockets the scenario injected would
        // keep its pods and claims from going.
        for (_, d) in self.drivers() {
            d.calls().heal_all();
            d.options.faults.lift();
            d.unblock_sockets();
        }
        if self.external_drivers().next().is_some()
            && let Some(i) = &ctx.under_test.interposed
        {
            i.calls.heal_all();
            i.faults.lift();
        }
        for phase in Phase::ORDER {
            let started = Instant::now();
            for i in (0..self.stack.len()).rev() {
                if self.stack[i].phase() != phase {
                    continue;
                }
                if let Err(e) = self.clean(i, client, ctx, timings).await {
                    first.get_or_insert(e);
                }
            }
            if let Some(name) = phase.timing() {
                timings.push((name, started.elapsed()));
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// Starts a daemon a scenario left stopped. A kubelet is back once it
    /// registered the scenario's plugins again: a plugin it never knew again
    /// would never be unregistered, and its slices never wiped.
    async fn start_daemon(
        &self,
        ctx: &Context,
        node: String,
        daemon: &'static str,
    ) -> anyhow::Result<()> {
        let notify = crate::proto::method::NOTIFY_REGISTRATION_STATUS;
        let plugins: Vec<(String, crate::plugin::Calls, u64)> = self
            .drivers()
            .filter(|(_, d)| {
                d.is_running() && d.options.with_kubelet && d.nodenames().contains(&node)
            })
            .map(|(_, d)| {
                (
                    d.name.clone(),
                    d.calls().clone(),
                    d.calls().count(&node, notify),
                )
            })
            .collect();
        let cluster = ctx.cluster.clone();
        let n = node.clone();
        let start = crate::cluster::real_node::init::DaemonOp::Start;
        tokio::task::spawn_blocking(move || cluster.node_daemon(&n, start, daemon))
            .await
            .context("the node operation's thread")??;
        if daemon != "kubelet" {
            return Ok(());
        }
        for (driver, calls, before) in plugins {
            let what = format!(
                "the kubelet of node {node}, started by teardown, to register {driver} again"
            );
            wait::poll(
                &what,
                Duration::from_secs(60),
                Duration::from_millis(100),
                || {
                    let now = calls.count(&node, notify);
                    async move {
                        if now > before {
                            Check::Done(())
                        } else {
                            Check::Pending(format!("{now} registrations"))
                        }
                    }
                },
            )
            .await?;
        }
        Ok(())
    }

    async fn clean(
        &mut self,
        i: usize,
        client: &kube::Client,
        ctx: &Context,
        timings: &mut Timings,
    ) -> anyhow::Result<()> {
        let ns = self.namespace.clone();
        if matches!(self.stack[i], Created::AllClaims) {
            return self.delete_claims(client).await;
        }
        match &mut self.stack[i] {
            Created::Namespace(name) => {
                let api: Api<Namespace> = Api::all(client.clone());
                delete_if_present(&api, name, &DeleteParams::default())
                    .await
                    .with_context(|| format!("deleting namespace {name}"))
            }
            Created::AllPods => delete_pods(client, &ns).await,
            Created::PodFinalizer { pod, finalizer } => {
                crate::steps::workloads::remove_pod_finalizer(client, &ns, pod, finalizer).await
            }
            Created::Driver { driver, .. } => {
                let r = driver.release().await;
                timings.append(&mut driver.teardown_timings);
                self.unfinished.extend(driver.take_unfinished());
                Ok(r?)
            }
            Created::DeviceClass { name, .. } => {
                let api: Api<DeviceClass> = Api::all(client.clone());
                delete_if_present(&api, name, &DeleteParams::default())
                    .await
                    .with_context(|| format!("deleting DeviceClass {name}"))
            }
            Created::StoppedDaemon { node, daemon } => {
                let (node, daemon) = (node.clone(), *daemon);
                self.start_daemon(ctx, node, daemon).await
            }
            Created::CutNode(node) => {
                let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
                Ok(crate::harness::node_loss::reconnect(&ctx.cluster, &nodes, node).await?)
            }
            Created::DriverUninstalled => {
                Ok(ctx.under_test.restore_after_uninstall(&ctx.cluster).await?)
            }
            Created::DeviceCount => {
                ctx.under_test.restore_devices(&ctx.cluster).await?;
                Ok(ctx.under_test.wait_devices_as_deployed(client).await?)
            }
            Created::SlicesOf(driver) => {
                let api: Api<ResourceSlice> = Api::all(client.clone());
                let lp = ListParams::default().fields(&format!("spec.driver={driver}"));
                api.delete_collection(&DeleteParams::default(), &lp)
                    .await
                    .map(|_| ())
                    .with_context(|| format!("deleting the ResourceSlices of driver {driver}"))
            }
            Created::Object {
                resource,
                name,
                namespaced,
            } => {
                let (api, dp): (Api<DynamicObject>, _) = if *namespaced {
                    (
                        Api::namespaced_with(client.clone(), &ns, resource),
                        DeleteParams::background(),
                    )
                } else {
                    (
                        Api::all_with(client.clone(), resource),
                        DeleteParams::default(),
                    )
                };
                delete_if_present(&api, name, &dp)
                    .await
                    .with_context(|| format!("deleting {} {name}", resource.kind))
            }
            Created::OwnNode(node) => crate::harness::node_lease::set_taint(client, node, None)
                .await
                .with_context(|| format!("taking the own-node taint off node {node}")),
            Created::AllClaims
            | Created::Claim { .. }
            | Created::Template(_)
            | Created::Pod(_)
            | Created::UnderTest { .. } => Ok(()),
        }
    }

    /// Deletes every claim, then waits until each plugin unprepared its
    /// claims and the claims are gone. Every wait runs even if one failed.
    async fn delete_claims(&self, client: &kube::Client) -> anyhow::Result<()> {
        let mut first: Option<anyhow::Error> = None;
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &self.namespace);
        if let Err(e) = claims
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
        {
            first.get_or_insert(anyhow::anyhow!("deleting claims: {e}"));
        }
        for (_, d) in self.drivers() {
            for n in d.nodenames() {
                if let Some(p) = d.prepared(n)
                    && let Err(e) = p.wait_until_empty(TEARDOWN_WAIT).await
                {
                    first.get_or_insert(anyhow::anyhow!(
                        "the plugin of {} on {n} still has claims prepared: {e}",
                        d.name
                    ));
                }
            }
        }
        let gone = wait::list(
            &claims,
            Default::default(),
            "the scenario's claims to be gone",
            TEARDOWN_WAIT,
            wait::none_left(describe_leftover_claim),
        )
        .await;
        if let Err(e) = gone {
            first.get_or_insert(e.into());
        }
        first.map_or(Ok(()), Err)
    }
}

fn describe_leftover_claim(c: &ResourceClaim) -> String {
    format!(
        "{} (reservedFor {:?}, finalizers {:?}, deleting {})",
        c.metadata.name.clone().unwrap_or_default(),
        c.status
            .as_ref()
            .and_then(|s| s.reserved_for.as_ref())
            .map(|r| r.iter().map(|r| r.name.clone()).collect::<Vec<_>>()),
        c.metadata.finalizers,
        c.metadata.deletion_timestamp.is_some()
    )
}

/// Deletes every pod of the namespace but the drivers' and waits until they
/// are gone.
async fn delete_pods(client: &kube::Client, namespace: &str) -> anyhow::Result<()> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(NOT_A_DRIVER_POD);
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .context("deleting the scenario's pods")?;
    let config = watcher::Config::default().labels(NOT_A_DRIVER_POD);
    wait::list(
        &api,
        config,
        "the scenario's pods to be gone",
        TEARDOWN_WAIT,
        |pods| {
            if pods.is_empty() {
                Check::Done(())
            } else {
                Check::Pending(
                    pods.iter()
                        .map(|p| {
                            format!(
                                "{}: {}",
                                p.metadata.name.clone().unwrap_or_default(),
                                wait::describe_pod(Some(p))
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                )
            }
        },
    )
    .await?;
    Ok(())
}
