//! The container statuses as the kubelet reports them: state, last state,
//! ready and started, the IDs and the user, claims and mounts a created
//! container shows, and nothing of these before it exists.
use k8s_openapi::api::core::v1::{
    ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStateWaiting,
    ContainerStatus, ContainerUser, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::PodRuntime;
use super::lifecycle::{Ctr, State, Terminated};

impl PodRuntime {
    /// `(initContainerStatuses, containerStatuses)`.
    pub fn statuses(&self) -> (Vec<ContainerStatus>, Vec<ContainerStatus>) {
        (
            self.init.iter().map(|c| self.status_of(c, true)).collect(),
            self.main.iter().map(|c| self.status_of(c, false)).collect(),
        )
    }

    fn status_of(&self, c: &Ctr, init: bool) -> ContainerStatus {
        let terminated = |t: &Terminated| ContainerState {
            terminated: Some(ContainerStateTerminated {
                container_id: Some(t.id.clone()),
                exit_code: t.exit_code,
                reason: Some(
                    if t.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    }
                    .into(),
                ),
                started_at: Some(Time(t.started)),
                finished_at: Some(Time(t.finished)),
                ..Default::default()
            }),
            ..Default::default()
        };
        let (state, id) = match &c.state {
            State::Waiting { reason, message } => (
                ContainerState {
                    waiting: Some(ContainerStateWaiting {
                        reason: Some((*reason).into()),
                        message: message.clone(),
                    }),
                    ..Default::default()
                },
                // A container waiting to restart is still known by its last
                // instance.
                c.last.as_ref().map(|t| t.id.clone()),
            ),
            State::Running { started, id } => (
                ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(*started)),
                    }),
                    ..Default::default()
                },
                Some(id.clone()),
            ),
            State::Terminated(t) => (terminated(t), Some(t.id.clone())),
        };
        let running = c.running();
        let ready = if init && !c.plan.sidecar {
            c.initialized()
        } else {
            running
        };
        let created = c.instances > 0;
        ContainerStatus {
            name: c.plan.name.clone(),
            image: c.plan.image.clone(),
            image_id: if created {
                format!("sim-image://{}", c.plan.image)
            } else {
                String::new()
            },
            container_id: id.filter(|id| !id.is_empty()),
            ready,
            started: Some(running),
            restart_count: c.restart_count(),
            state: Some(state),
            last_state: c.last.as_ref().map(terminated),
            // The runtime reports who runs the process once it created one.
            user: created.then(|| ContainerUser {
                linux: Some(c.plan.user.clone()),
            }),
            resources: (created && !c.plan.claims.is_empty()).then(|| ResourceRequirements {
                claims: Some(c.plan.claims.clone()),
                ..Default::default()
            }),
            volume_mounts: Some(c.plan.volume_mounts.clone()).filter(|m| !m.is_empty()),
            ..Default::default()
        }
    }
}
