//! Planning containers as the runtime would create them now: command, env
//! from the spec and from the CDI specs as they are at that moment, user
//! and mounts; planned again before every new creation, since the runtime
//! resolves CDI devices for every container it creates.
use k8s_openapi::api::core::v1::{Container, LinuxContainerUser, Pod, VolumeMountStatus};
use tokio::time::Instant;

use super::PodWorker;
use crate::cdi::{CdiError, CdiSpecs, merge_env};
use crate::command;
use crate::containers::{ContainerPlan, CreateError, PodRuntime, RestartPolicy};

/// The identity of a container's process: the security context's user and
/// group (container over pod), else root as in an image without a `USER`;
/// its groups are the primary one, the pod's `fsGroup` and
/// `supplementalGroups` (group memberships inside the image are unknown).
fn container_user(pod: &Pod, c: &Container) -> LinuxContainerUser {
    let pod_sc = pod.spec.as_ref().and_then(|s| s.security_context.as_ref());
    let sc = c.security_context.as_ref();
    let uid = sc
        .and_then(|s| s.run_as_user)
        .or_else(|| pod_sc.and_then(|s| s.run_as_user))
        .unwrap_or(0);
    let gid = sc
        .and_then(|s| s.run_as_group)
        .or_else(|| pod_sc.and_then(|s| s.run_as_group))
        .unwrap_or(0);
    let mut groups = vec![gid];
    let extra = pod_sc.and_then(|s| s.fs_group).into_iter().chain(
        pod_sc
            .and_then(|s| s.supplemental_groups.clone())
            .unwrap_or_default(),
    );
    for g in extra {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    LinuxContainerUser {
        uid,
        gid,
        supplemental_groups: Some(groups),
    }
}

/// `volumeMounts` of a container's status: its spec's mounts; a read-only
/// mount is not recursively read-only unless the spec asks for it.
pub(super) fn volume_mount_statuses(c: &Container) -> Vec<VolumeMountStatus> {
    c.volume_mounts
        .as_deref()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            let read_only = m.read_only.unwrap_or(false);
            VolumeMountStatus {
                name: m.name.clone(),
                mount_path: m.mount_path.clone(),
                read_only: read_only.then_some(true),
                recursive_read_only: read_only.then(|| {
                    match m.recursive_read_only.as_deref() {
                        Some("Enabled") => "Enabled",
                        _ => "Disabled",
                    }
                    .to_owned()
                }),
                ..Default::default()
            }
        })
        .collect()
}

impl PodWorker {
    /// Plans one container: command, spec env and CDI env, as the runtime
    /// would create it now. A CDI device the runtime cannot resolve makes a
    /// plan whose creation fails, worded as containerd words it.
    fn plan_container(
        &self,
        pod: &Pod,
        c: &Container,
        specs: &Result<CdiSpecs, CdiError>,
    ) -> ContainerPlan {
        let spec_env: Vec<(String, String)> = c
            .env
            .as_deref()
            .unwrap_or_default()
            .iter()
            // Only literal values: there is nothing to resolve references against.
            .filter(|e| e.value_from.is_none())
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect();
        let ids = self.ctx.dra.container_cdi_ids(pod, c);
        let cdi_env = match specs {
            Ok(specs) => specs.env_for(&ids),
            Err(e) => Err(CdiError::ReadDir {
                dir: self.ctx.cdi_dir.clone(),
                source: std::io::Error::other(e.to_string()),
            }),
        };
        let runtime_error = |e: String| {
            format!("failed to create containerd container: CDI device injection failed: {e}")
        };
        let (cdi_env, create_error) = match cdi_env {
            Ok(env) => (env, None),
            Err(e) => (
                Vec::new(),
                Some(CreateError {
                    message: runtime_error(e.to_string()),
                    detail: runtime_error(e.detail()),
                }),
            ),
        };
        let env = merge_env(spec_env, cdi_env);
        let mut plan = ContainerPlan::new(
            c.name.clone(),
            c.image.clone().unwrap_or_default(),
            // Scripts that check the env (`env | grep ...`) see this env.
            command::behaviour(
                c.command.as_deref().unwrap_or_default(),
                c.args.as_deref().unwrap_or_default(),
                &env,
            ),
        );
        plan.env = env;
        plan.sidecar = c.restart_policy.as_deref() == Some("Always");
        plan.create_error = create_error;
        plan.volume_mounts = volume_mount_statuses(c);
        plan.user = container_user(pod, c);
        plan.claims = c
            .resources
            .as_ref()
            .and_then(|r| r.claims.clone())
            .unwrap_or_default();
        plan
    }

    /// Plans every container and the pod's runtime.
    pub(super) fn build_runtime(&self, pod: &Pod) -> PodRuntime {
        let specs = CdiSpecs::load(&self.ctx.cdi_dir);
        let spec = pod.spec.clone().unwrap_or_default();
        let init = spec
            .init_containers
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|c| self.plan_container(pod, c, &specs))
            .collect();
        let main = spec
            .containers
            .iter()
            .map(|c| self.plan_container(pod, c, &specs))
            .collect();
        PodRuntime::new(
            &self.uid,
            &self.pod_ref(),
            init,
            main,
            RestartPolicy::parse(spec.restart_policy.as_deref()),
            self.ctx.restart_delay.initial,
            self.ctx.restart_delay.max,
        )
    }

    /// Plans anew the containers about to be created again, since the
    /// runtime resolves their CDI devices for every new container.
    pub(super) fn replan_due(&mut self, pod: &Pod, now: Instant) {
        let Some(names) = self.runtime.as_ref().map(|rt| rt.creations_due(now)) else {
            return;
        };
        if names.is_empty() {
            return;
        }
        let specs = CdiSpecs::load(&self.ctx.cdi_dir);
        let spec = pod.spec.clone().unwrap_or_default();
        let containers = spec
            .init_containers
            .iter()
            .flatten()
            .chain(&spec.containers);
        let plans: Vec<ContainerPlan> = containers
            .filter(|c| names.contains(&c.name))
            .map(|c| self.plan_container(pod, c, &specs))
            .collect();
        if let Some(rt) = self.runtime.as_mut() {
            for plan in plans {
                rt.replan(plan);
            }
        }
    }
}
