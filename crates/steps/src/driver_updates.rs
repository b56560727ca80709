//! Updates of the driver under test while a scenario runs: a rollout of its
//! DaemonSet that the scenario starts, acts during, and waits for, and a
//! background watch of its ResourceSlices that tells afterwards whether any
//! node was ever left without its devices meanwhile, and whether any of its
//! pools was ever inconsistent (its newest generation's slices disagreeing
//! on their count, more than it, or a device in two of them).
//!
//! The sentences compose ("rollout starts" returns at once, "rollout
//! completes" waits), so that a scenario can create pods while the old and
//! the new driver pods overlap; the waiting is the harness's
//! ([`crate::harness::under_test::UnderTest::start_roll_out`],
//! [`crate::harness::under_test::slice_watch`]).
use anyhow::{Context as _, bail};
use cucumber::{given, then, when};

use super::World;
use super::params::DriverRef;
use crate::harness::under_test::slice_watch::SliceWatch;

/// What the driver update steps remember between steps: the watch of the
/// driver's slices, which records from its start to the end of the scenario
/// so that later steps can tell what happened meanwhile, and the rollout
/// that one step starts and another waits for, so that the scenario can act
/// while it runs.
#[derive(Debug, Default)]
pub struct DriverUpdateMemory {
    /// The watch "the driver's slices are watched" started; it stops with
    /// the World, at the end of the scenario.
    pub slice_watch: Option<SliceWatch>,
    /// The rollout "the driver's DaemonSet rollout starts" started and
    /// "completes" waits for.
    pub rollout: Option<crate::harness::under_test::RollOut>,
}

sentences! {
    /// From here to the end of the scenario, every moment a node has no
    /// device of the driver is recorded (the scenario's nodes and every
    /// node the driver publishes on now), and every moment one of the
    /// driver's pools is inconsistent.
    #[given("the driver's slices are watched")]
    fn slices_watched();

    /// Starts a rollout of the driver's DaemonSet with nothing changed
    /// and goes on at once (tag the scenario `@DriverSurges`, or
    /// `@DriverPods` where a node may go without the driver meanwhile).
    #[when("the driver's DaemonSet rollout starts")]
    fn rollout_starts();

    #[then("the driver's DaemonSet rollout completes")]
    fn rollout_completes();

    #[then("the driver's slices never vanished")]
    fn slices_never_vanished();

    /// Since the watch started, the slices of each pool's highest
    /// generation always agreed on resourceSliceCount, were no more than
    /// it, and held each device once (a pool with fewer slices than its
    /// count, while a driver writes them, is fine).
    #[then("the driver's pools were consistent throughout")]
    fn pools_consistent();
}

async fn slices_watched(w: &mut World) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    let watch = SliceWatch::start(w.client()?, &driver, w.nodes.clone())
        .await
        .map_err(anyhow::Error::msg)?;
    w.driver_update.slice_watch = Some(watch);
    Ok(())
}

async fn rollout_starts(w: &mut World) -> anyhow::Result<()> {
    if w.driver_update.rollout.is_some() {
        bail!("a rollout of the driver's DaemonSet is under way already; wait for it to complete");
    }
    let ctx = w.context()?.clone();
    let started = ctx
        .under_test
        .start_roll_out(&ctx.cluster)
        .await
        .context("starting a rollout of the driver's DaemonSet")?;
    w.driver_update.rollout = Some(started);
    Ok(())
}

async fn rollout_completes(w: &mut World) -> anyhow::Result<()> {
    let started = w.driver_update.rollout.take().context(
        "no rollout of the driver's DaemonSet was started (\"When the driver's DaemonSet \
         rollout starts\")",
    )?;
    let ctx = w.context()?;
    ctx.under_test
        .wait_rolled_out(&ctx.cluster, started)
        .await
        .context("waiting for the rollout of the driver's DaemonSet to complete")?;
    Ok(())
}

async fn slices_never_vanished(w: &World) -> anyhow::Result<()> {
    slice_watch(w)?.check().map_err(anyhow::Error::msg)
}

async fn pools_consistent(w: &World) -> anyhow::Result<()> {
    slice_watch(w)?
        .check_consistent()
        .map_err(anyhow::Error::msg)
}

fn slice_watch(w: &World) -> anyhow::Result<&SliceWatch> {
    w.driver_update.slice_watch.as_ref().context(
        "the driver's slices are not watched (\"Given the driver's slices are watched\" first)",
    )
}
