//! A driver's TearDown and IsGone: its plugins stopped, its slices and
//! identity removed, and the wait until the kubelets wiped its slices,
//! which may be left to run on its own task ([`Unfinished`]) so that
//! scenarios need not wait for it one by one.
//!
//! The kubelet wipes a gone plugin's slices 30 s after it went (in case it
//! comes back), and that wait is worth making only while scenarios run
//! beside it: once nothing is left to run, whoever holds the last waits may
//! cut them short ([`Unfinished::wait_or_cut_short`]), the runner deleting
//! the slices itself as an uninstalled driver would, so that a run does not
//! end on half a minute of nothing.
use std::time::{Duration, Instant};

use k8s_openapi::api::resource::v1::ResourceSlice;
use kube::api::{Api, DeleteParams, ListParams};
use kube::runtime::watcher;

use super::{Driver, DriverError};
use crate::timing::{Laps, Phase};
use dra_e2e_kube::wait;

/// How long the kubelets may take to wipe a stopped driver's slices
/// (upstream's `IsGone`).
const IS_GONE_TIMEOUT: Duration = Duration::from_secs(120);

/// A wait that ends a driver's teardown, detached from the driver so it can
/// run on its own task: until the kubelets wiped the driver's slices
/// (upstream's `IsGone`). Whatever tore the
/// driver down still fails if the wait does, even when it ends later.
pub struct Unfinished {
    phase: Phase,
    wait: dra_e2e_conn::later::Later<Result<(), DriverError>>,
    /// Ends the wait at once (the driver's slices deleted); the wait then
    /// sees them go.
    cut_short: dra_e2e_conn::later::Later<Result<(), DriverError>>,
}

/// How an [`Unfinished`] wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// What it waited for happened by itself (the kubelets wiped the slices).
    Waited,
    /// Nothing was left to run beside it: the runner did it (deleted the
    /// slices) and saw it done.
    CutShort,
}

impl std::fmt::Debug for Unfinished {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unfinished")
            .field("phase", &self.phase.name)
            .finish_non_exhaustive()
    }
}

impl Unfinished {
    /// The wait until no slice of the driver is left, as `--timings` shows it.
    pub const SLICES_WIPED: Phase = Phase::wait("wait for slices to be wiped");
    /// The same wait cut short at the run's end, as `--timings` shows it.
    pub const SLICES_DELETED: Phase =
        Phase::harness("delete the slices left at the run's end and see them go");

    pub fn phase(&self) -> Phase {
        self.phase
    }

    pub async fn wait(self) -> Result<(), DriverError> {
        self.wait.run().await
    }

    /// Waits as [`Unfinished::wait`] does until `nothing_left_to_run`
    /// resolves; a wait still going then is cut short (the slices deleted),
    /// and still ends only when what it waits for is seen: a slice held by
    /// a finalizer fails it as before.
    pub async fn wait_or_cut_short(
        self,
        nothing_left_to_run: impl std::future::Future<Output = ()>,
    ) -> Result<Ended, DriverError> {
        let wait = self.wait.run();
        tokio::pin!(wait);
        tokio::select! {
            r = &mut wait => r.map(|()| Ended::Waited),
            () = nothing_left_to_run => {
                self.cut_short.run().await?;
                wait.await.map(|()| Ended::CutShort)
            }
        }
    }
}

/// Watches until `driver` has no ResourceSlice left.
async fn slices_removed(
    admin: &kube::Client,
    driver: &str,
    timeout: Duration,
) -> Result<(), DriverError> {
    let api: Api<ResourceSlice> = Api::all(admin.clone());
    let config = watcher::Config::default().fields(&format!("spec.driver={driver}"));
    let what = format!("the ResourceSlices of driver {driver} to be removed");
    let name = |s: &ResourceSlice| s.metadata.name.clone().unwrap_or_default();
    wait::list(&api, config, &what, timeout, wait::none_left(name))
        .await
        .map_err(|e| DriverError::Wait(e, driver.to_owned()))
}

/// Deletes every ResourceSlice of `driver`.
async fn delete_all_slices(admin: &kube::Client, driver: &str) -> Result<(), DriverError> {
    let api: Api<ResourceSlice> = Api::all(admin.clone());
    let lp = ListParams::default().fields(&format!("spec.driver={driver}"));
    api.delete_collection(&DeleteParams::default(), &lp)
        .await
        .map(drop)
        .map_err(|source| DriverError::Kube {
            driver: driver.to_owned(),
            action: "deleting the driver's ResourceSlices".to_owned(),
            source,
        })
}

impl Driver {
    /// Stops the plugins (sockets removed, agents ended) without deleting
    /// anything else, as when a driver pod goes away.
    pub async fn stop_plugins(&mut self) {
        let instances = std::mem::take(&mut self.instances);
        for (node, inst) in &instances {
            if inst.plugin.registration_status() != dra_e2e_plugin::RegistrationStatus::Registered
                && !self.unregistered.contains(node)
            {
                self.unregistered.push(node.clone());
            }
        }
        let driver = &self.name;
        futures::future::join_all(instances.into_iter().map(|(node, inst)| async move {
            for p in inst.publishers {
                p.stop().await;
            }
            if let Err(e) = inst.plugin.stop().await {
                tracing::warn!(%driver, %node, error = %e, "stopping plugin");
            }
            for s in inst.stoppers.into_iter().chain(inst.dra_socket) {
                s.stop().await;
            }
        }))
        .await;
        if let Some(p) = self.admin_publisher.take() {
            p.stop().await;
        }
    }

    /// `TearDown` in upstream's order: plugins, proxy pods, identity objects,
    /// shared slices, then `IsGone` when expected. Safe to call twice.
    pub async fn tear_down(&mut self) -> Result<(), DriverError> {
        let released = self.release().await;
        let waits = self.take_unfinished().into_iter().map(|u| async move {
            let (phase, started) = (u.phase(), Instant::now());
            (phase, u.wait().await, started.elapsed())
        });
        let mut result = released;
        for (phase, r, took) in futures::future::join_all(waits).await {
            self.teardown_timings.push((phase, took));
            result = result.and(r);
        }
        result
    }

    /// Everything of [`Driver::tear_down`] but its waits (until the proxy
    /// pods are gone, until the kubelets wiped the driver's slices), which
    /// [`Driver::take_unfinished`] hands to a caller that may let them run
    /// beside whatever comes next.
    pub async fn release(&mut self) -> Result<(), DriverError> {
        if self.torn_down {
            return Ok(());
        }
        self.torn_down = true;
        let mut laps = Laps::start();
        self.stop_plugins().await;
        self.host = None;
        laps.lap(&mut self.teardown_timings, Phase::harness("stop plugins"));
        let created = std::mem::take(&mut self.identity_created);
        // A kubelet wipes only the slices of plugins it registered: a wait
        // for the rest could never end, so they are deleted here.
        // Only when no other instance of the driver keeps publishing.
        let unregistered = if self.options.with_kubelet && self.options.expect_slice_removal {
            std::mem::take(&mut self.unregistered)
        } else {
            Vec::new()
        };
        // The identity objects and the slices do not depend on each other.
        let (deleted, slices) = futures::future::join(
            futures::future::join_all(created.into_iter().map(|object| {
                let (admin, identity) = (&self.ctx.admin, &self.identity);
                async move { (object, object.delete(admin, identity).await) }
            })),
            self.delete_slices(&unregistered),
        )
        .await;
        let mut first_error = None;
        for (object, result) in deleted {
            if let Err(e) = result {
                let action = format!("deleting {} {}", object.kind(), object.name(&self.identity));
                first_error.get_or_insert(self.kube_err(action)(e));
            }
        }
        if let Err(e) = slices {
            first_error.get_or_insert(e);
        }
        laps.lap(
            &mut self.teardown_timings,
            Phase::harness("delete RBAC and shared slices"),
        );
        if self.options.expect_slice_removal {
            let (admin, driver) = (self.ctx.admin.clone(), self.name.clone());
            let wait = dra_e2e_conn::later::Later::new(async move {
                slices_removed(&admin, &driver, IS_GONE_TIMEOUT).await
            });
            let (admin, driver) = (self.ctx.admin.clone(), self.name.clone());
            let cut_short =
                dra_e2e_conn::later::Later::new(
                    async move { delete_all_slices(&admin, &driver).await },
                );
            self.unfinished.push(Unfinished {
                phase: Unfinished::SLICES_WIPED,
                wait,
                cut_short,
            });
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// The waits [`Driver::release`] left. The wait until no slice of the
    /// driver is left is among them unless the driver expects its slices to
    /// stay (another instance keeps publishing them).
    pub fn take_unfinished(&mut self) -> Vec<Unfinished> {
        std::mem::take(&mut self.unfinished)
    }

    /// Deletes the slices no kubelet will wipe: those of `unregistered`
    /// nodes, and every slice of the driver when the harness published them
    /// or no kubelet runs.
    pub(super) async fn delete_slices(&self, unregistered: &[String]) -> Result<(), DriverError> {
        self.delete_node_slices(unregistered).await?;
        if self.network_slices || !self.options.with_kubelet {
            delete_all_slices(&self.ctx.admin, &self.name).await?;
        }
        Ok(())
    }

    /// Deletes the driver's slices of `nodes`, whose kubelets never
    /// registered the plugin and so will never wipe them.
    pub(super) async fn delete_node_slices(&self, nodes: &[String]) -> Result<(), DriverError> {
        let api: Api<ResourceSlice> = Api::all(self.ctx.admin.clone());
        for node in nodes {
            tracing::warn!(driver = %self.name, %node, "the kubelet never registered the plugin; deleting its slices instead of waiting for a wipe");
            let lp = ListParams::default()
                .fields(&format!("spec.driver={},spec.nodeName={node}", self.name));
            api.delete_collection(&DeleteParams::default(), &lp)
                .await
                .map_err(self.kube_err(format!("deleting the ResourceSlices of node {node}")))?;
        }
        Ok(())
    }

    /// `IsGone`: waits until no ResourceSlice of the driver is left (the
    /// kubelet wipes node-local ones a delay after the plugin went away).
    pub async fn is_gone(&self, timeout: Duration) -> Result<(), DriverError> {
        slices_removed(&self.ctx.admin, &self.name, timeout).await
    }
}
