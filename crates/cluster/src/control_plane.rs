//! The run's control plane as scenarios and the runner act on it: a
//! component restarted on purpose (the local cluster only), and the API
//! server that stays away past the client's deadline, which ends the run.
use crate::local::ControlPlaneComponent;
use crate::{Cluster, Kind};

impl Cluster {
    /// Restarts control-plane component `name` (`kube-apiserver`,
    /// `kube-scheduler`, `kube-controller-manager`) of the local cluster on
    /// the same address and certificates, and returns once it answers its
    /// readiness probe again ([`crate::local::Restart`]). Scenarios in
    /// flight ride it out; the run is not ended by it.
    pub async fn restart_component(&self, name: &str) -> anyhow::Result<()> {
        let component = ControlPlaneComponent::named(name).ok_or_else(|| {
            anyhow::anyhow!(
                "no control-plane component {name}: the runner restarts {}",
                ControlPlaneComponent::ALL.map(|c| c.name()).join(", ")
            )
        })?;
        let Kind::Local(l) = &self.kind else {
            anyhow::bail!(
                "cannot restart the {component}: the runner restarts control-plane components \
                 only of the local cluster it starts (--cluster local), not of a kubeconfig's"
            );
        };
        let gone = || anyhow::anyhow!("the local cluster is stopping");
        let restart = {
            let cluster = l.cluster.lock().map_err(|_| gone())?;
            cluster
                .as_ref()
                .ok_or_else(gone)?
                .begin_restart(component)?
        };
        restart.stopped().await;
        let new = restart.start()?;
        let placed = {
            let mut cluster = l.cluster.lock().map_err(|_| gone())?;
            cluster
                .as_mut()
                .is_some_and(|c| c.put_back(&restart, new.clone()))
        };
        if !placed {
            // Dropping the only handle stops it.
            drop(new);
            return Err(gone());
        }
        restart.ready(&new).await?;
        Ok(())
    }

    /// Resolves, with what happened, when the run's client has found the
    /// API server away past its deadline ([`dra_e2e_kube::client`]);
    /// pending while it answers.
    pub fn api_outage(&self) -> impl std::future::Future<Output = String> + use<> {
        let outage = match &self.kind {
            Kind::Local(l) => l
                .cluster
                .lock()
                .ok()
                .and_then(|c| c.as_ref().map(|c| c.outage())),
            Kind::Remote(r) => r.outage.clone(),
        };
        async move {
            match outage {
                Some(o) => o.reported().await,
                None => std::future::pending().await,
            }
        }
    }
}
