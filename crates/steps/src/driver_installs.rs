//! The driver under test uninstalled and installed again in a scenario, as
//! its user would with `helm uninstall` and `helm install`: what is left of
//! it afterwards (none of its ResourceSlices may be), and whether it comes
//! back as it was.
//!
//! The harness does the work ([`crate::harness::under_test::reinstall`]); the
//! scenario's teardown installs the driver again when a scenario ends
//! without doing so, so that the scenarios after it find it as deployed.
use anyhow::Context as _;
use cucumber::{then, when};

use super::World;
use super::params::DriverRef;
use crate::harness::under_test::reinstall;

sentences! {
    /// Deletes every object of the profile's manifests, most recent first
    /// (its DeviceClass too when they hold it), and waits until they and
    /// the driver's pods are gone; on simulated nodes, stops its
    /// processes (tag the scenario `@DriverUninstalls @serial`).
    #[when("the driver is uninstalled")]
    fn uninstalled();

    #[then("none of the driver's ResourceSlices remain")]
    fn no_slices_remain();

    #[when("the driver is installed again")]
    fn installed_again();
}

async fn uninstalled(w: &mut World) -> anyhow::Result<()> {
    let ctx = w.context()?.clone();
    // Noted before trying: an uninstallation that fails half-way leaves
    // the run without its driver too.
    w.scenario.driver_uninstalled();
    ctx.under_test
        .uninstall_driver(&ctx.cluster)
        .await
        .context("uninstalling the driver")?;
    Ok(())
}

async fn no_slices_remain(w: &World) -> anyhow::Result<()> {
    let driver = w.driver_name(&DriverRef::The)?;
    reinstall::wait_slices_gone(&w.client()?, &driver, reinstall::SLICES_GONE_TIMEOUT)
        .await
        .map_err(anyhow::Error::msg)
}

async fn installed_again(w: &mut World) -> anyhow::Result<()> {
    let ctx = w.context()?.clone();
    ctx.under_test
        .install_again(&ctx.cluster)
        .await
        .context("installing the driver again")?;
    w.scenario.driver_installed_again();
    Ok(())
}
