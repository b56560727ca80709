//! Teardown: the scenario's stack run phase by phase in upstream's order,
//! last in first out within a phase, every cleanup run even when an
//! earlier one failed. What a step left broken on the run's driver under
//! test or on a node (a stopped daemon, a cut node, another device count)
//! is healed here first, so that the next scenario finds the cluster as
//! deployed.
use std::sync::Arc;
use std::time::{Duration, Instant};

use dra_e2e_cluster::Cluster;
use dra_e2e_cluster::real_node::init::DaemonOp;
use dra_e2e_kube::objects::delete_if_present;
use dra_e2e_kube::wait::{self, Check, WaitError};
use dra_e2e_plugin::WaitTimeout;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceSlice};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::runtime::watcher;

use super::{Created, DriverLabel, Phase, Scenario};
use crate::driver::DriverError;
use crate::node_loss::NodeLossError;
use crate::timing::Timings;
use crate::under_test::{UnderTest, UnderTestError};

/// How long each teardown wait may take.
const TEARDOWN_WAIT: Duration = Duration::from_secs(60);

/// Proxy pods of drivers are torn down with their driver, not with the
/// scenario's pods.
const NOT_A_DRIVER_POD: &str = "app.kubernetes.io/part-of!=dra-test-driver";

/// What a cleanup of teardown found wrong; teardown reports the first.
/// Each says what it was cleaning and carries the error it met as its
/// source; those whose own message names what failed pass it on as it is.
#[derive(Debug, thiserror::Error)]
pub enum TeardownError {
    #[error("deleting namespace {name}")]
    Namespace {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting DeviceClass {name}")]
    DeviceClass {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting the scenario's pods")]
    Pods(#[source] kube::Error),
    #[error("deleting claims")]
    Claims(#[source] kube::Error),
    #[error("the plugin of {driver} on {node} still has claims prepared")]
    StillPrepared {
        driver: String,
        node: String,
        #[source]
        source: WaitTimeout,
    },
    #[error("deleting the ResourceSlices of driver {driver}")]
    Slices {
        driver: String,
        #[source]
        source: kube::Error,
    },
    /// A manifest object.
    #[error("deleting {kind} {name}")]
    Object {
        kind: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("taking the own-node taint off node {node}")]
    OwnNodeTaint {
        node: String,
        #[source]
        source: kube::Error,
    },
    /// A driver's release (the error names the driver).
    #[error(transparent)]
    Release(#[from] DriverError),
    /// Starting a daemon of a node: the thread that ran it.
    #[error("the node operation's thread")]
    NodeThread(#[source] tokio::task::JoinError),
    /// Starting a daemon of a node: what the cluster said.
    #[error("{0}")]
    NodeOperation(String),
    /// Connecting a cut node again, and its wait until Ready.
    #[error(transparent)]
    Reconnect(#[from] NodeLossError),
    /// Installing the run's driver under test again after a step
    /// uninstalled it.
    #[error(transparent)]
    Reinstall(UnderTestError),
    /// Restarting the run's driver under test with the profile's device
    /// count, and the wait for its devices.
    #[error(transparent)]
    DeviceCount(UnderTestError),
    /// A wait (pods gone, claims gone, a kubelet back, a finalizer
    /// removed), which says what it waited for.
    #[error(transparent)]
    Wait(#[from] WaitError),
}

impl<L: DriverLabel> Scenario<L> {
    /// Runs every cleanup, phase by phase, and records each phase's time.
    /// The drivers' waits (proxy pods gone, slices wiped) are not run here
    /// but left to [`Scenario::take_unfinished`]. `cluster` and
    /// `under_test` are the run's: its driver under test is healed and
    /// restored.
    pub async fn tear_down(
        &mut self,
        client: &kube::Client,
        cluster: &Arc<Cluster>,
        under_test: &UnderTest,
        timings: &mut Timings,
    ) -> Result<(), TeardownError> {
        let mut first: Option<TeardownError> = None;
        // Failures, stalls and blocked sockets the scenario injected would
        // keep its pods and claims from going.
        for (_, d) in self.drivers() {
            d.calls().heal_all();
            d.options.faults.lift();
            d.unblock_sockets();
        }
        if self.external_drivers().next().is_some()
            && let Some(i) = &under_test.interposed
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
                if let Err(e) = self.clean(i, client, cluster, under_test, timings).await {
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
        cluster: &Arc<Cluster>,
        node: String,
        daemon: &'static str,
    ) -> Result<(), TeardownError> {
        let notify = dra_e2e_proto::method::NOTIFY_REGISTRATION_STATUS;
        let plugins: Vec<(String, dra_e2e_plugin::Calls, u64)> = self
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
        let cluster = cluster.clone();
        let n = node.clone();
        tokio::task::spawn_blocking(move || cluster.node_daemon(&n, DaemonOp::Start, daemon))
            .await
            .map_err(TeardownError::NodeThread)?
            .map_err(|e| TeardownError::NodeOperation(format!("{e:#}")))?;
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
        cluster: &Arc<Cluster>,
        under_test: &UnderTest,
        timings: &mut Timings,
    ) -> Result<(), TeardownError> {
        let ns = self.namespace.clone();
        if matches!(self.stack[i], Created::AllClaims) {
            return self.delete_claims(client).await;
        }
        match &mut self.stack[i] {
            Created::Namespace(name) => {
                let api: Api<Namespace> = Api::all(client.clone());
                delete_if_present(&api, name, &DeleteParams::default())
                    .await
                    .map_err(|source| TeardownError::Namespace {
                        name: name.clone(),
                        source,
                    })
            }
            Created::AllPods => delete_pods(client, &ns).await,
            Created::PodFinalizer { pod, finalizer } => {
                Ok(crate::pod_finalizer::remove(client, &ns, pod, finalizer).await?)
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
                    .map_err(|source| TeardownError::DeviceClass {
                        name: name.clone(),
                        source,
                    })
            }
            Created::StoppedDaemon { node, daemon } => {
                let (node, daemon) = (node.clone(), *daemon);
                self.start_daemon(cluster, node, daemon).await
            }
            Created::CutNode(node) => Ok(crate::node_loss::reconnect(cluster, node).await?),
            Created::DriverUninstalled => under_test
                .restore_after_uninstall(cluster)
                .await
                .map_err(TeardownError::Reinstall),
            Created::DeviceCount => {
                under_test
                    .restore_devices(cluster)
                    .await
                    .map_err(TeardownError::DeviceCount)?;
                under_test
                    .wait_devices_as_deployed(client)
                    .await
                    .map_err(TeardownError::DeviceCount)
            }
            Created::SlicesOf(driver) => {
                let api: Api<ResourceSlice> = Api::all(client.clone());
                let lp = ListParams::default().fields(&format!("spec.driver={driver}"));
                api.delete_collection(&DeleteParams::default(), &lp)
                    .await
                    .map(|_| ())
                    .map_err(|source| TeardownError::Slices {
                        driver: driver.clone(),
                        source,
                    })
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
                    .map_err(|source| TeardownError::Object {
                        kind: resource.kind.clone(),
                        name: name.clone(),
                        source,
                    })
            }
            Created::OwnNode(node) => crate::node_lease::set_taint(client, node, None)
                .await
                .map_err(|source| TeardownError::OwnNodeTaint {
                    node: node.clone(),
                    source,
                }),
            Created::AllClaims
            | Created::Claim { .. }
            | Created::Template(_)
            | Created::Pod(_)
            | Created::UnderTest { .. } => Ok(()),
        }
    }

    /// Deletes every claim, then waits until each plugin unprepared its
    /// claims and the claims are gone. Every wait runs even if one failed.
    async fn delete_claims(&self, client: &kube::Client) -> Result<(), TeardownError> {
        let mut first: Option<TeardownError> = None;
        let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), &self.namespace);
        if let Err(e) = claims
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await
        {
            first.get_or_insert(TeardownError::Claims(e));
        }
        for (_, d) in self.drivers() {
            for n in d.nodenames() {
                if let Some(p) = d.prepared(n)
                    && let Err(source) = p.wait_until_empty(TEARDOWN_WAIT).await
                {
                    first.get_or_insert(TeardownError::StillPrepared {
                        driver: d.name.clone(),
                        node: n.clone(),
                        source,
                    });
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
async fn delete_pods(client: &kube::Client, namespace: &str) -> Result<(), TeardownError> {
    let api: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let lp = ListParams::default().labels(NOT_A_DRIVER_POD);
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .map_err(TeardownError::Pods)?;
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
