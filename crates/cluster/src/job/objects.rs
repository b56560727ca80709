//! The objects of one in-cluster run: built here, created and deleted by
//! the runner's `job` command.
use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use serde_json::{Value, json};

use super::JOB_LABEL;

/// The Job's name, and its container's.
pub const JOB_NAME: &str = "dra-e2e";
/// The ServiceAccount the runner's pod runs as.
pub const SERVICE_ACCOUNT: &str = "dra-e2e-runner";
/// The ConfigMap holding the profile and the files it names.
pub const INPUTS: &str = "dra-e2e-inputs";
/// Where the pod sees [`INPUTS`].
pub const INPUTS_DIR: &str = "/etc/dra-e2e";
/// The label the Job controller puts on the Job's pods.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";
/// The role the runner needs: the pack creates namespaces, DeviceClasses,
/// claims, pods and RBAC of its own, and reads nodes and slices.
pub const CLUSTER_ROLE: &str = "cluster-admin";

/// How long the runner in the pod has to tear its scenarios down when the
/// pod is stopped (the Job's deadline, or the command interrupted).
pub const STOP_GRACE: Duration = Duration::from_secs(90);

#[derive(Debug, thiserror::Error)]
#[error("building the {kind} of the in-cluster run: {source}")]
pub struct ObjectError {
    kind: &'static str,
    #[source]
    source: serde_json::Error,
}

/// One in-cluster run: what its objects are made from.
#[derive(Debug, Clone)]
pub struct JobPlan {
    /// The run's own namespace; the ClusterRoleBinding is named after it
    /// too (it is cluster-scoped, so the name must be unique).
    pub namespace: String,
    /// The runner image, as the nodes know it.
    pub image: String,
    /// `IfNotPresent`, `Never` or `Always`.
    pub pull_policy: String,
    /// The runner's command line inside the pod, after the program.
    pub args: Vec<String>,
    /// The files of [`INPUTS`], by key (a file name under [`INPUTS_DIR`]).
    pub inputs: BTreeMap<String, String>,
    /// The Job's activeDeadlineSeconds.
    pub deadline: Duration,
}

fn labels(namespace: &str) -> Value {
    json!({ JOB_LABEL: namespace })
}

fn build<K: serde::de::DeserializeOwned>(kind: &'static str, v: Value) -> Result<K, ObjectError> {
    serde_json::from_value(v).map_err(|source| ObjectError { kind, source })
}

impl JobPlan {
    /// The run's namespace. The runner's pod itself needs no privilege, but
    /// what the pack starts in namespaces of its own may, so pod security
    /// gets no say here either.
    pub fn namespace_object(&self) -> Result<Namespace, ObjectError> {
        let mut labels = labels(&self.namespace);
        labels["pod-security.kubernetes.io/enforce"] = json!("privileged");
        build(
            "Namespace",
            json!({ "metadata": { "name": self.namespace, "labels": labels } }),
        )
    }

    pub fn service_account(&self) -> Result<ServiceAccount, ObjectError> {
        build(
            "ServiceAccount",
            json!({ "metadata": { "name": SERVICE_ACCOUNT, "namespace": self.namespace,
                                  "labels": labels(&self.namespace) } }),
        )
    }

    /// The ServiceAccount bound to [`CLUSTER_ROLE`]; named after the
    /// namespace, as it outlives it unless deleted.
    pub fn binding(&self) -> Result<ClusterRoleBinding, ObjectError> {
        build(
            "ClusterRoleBinding",
            json!({
                "metadata": { "name": self.namespace, "labels": labels(&self.namespace) },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": CLUSTER_ROLE },
                "subjects": [ { "kind": "ServiceAccount", "name": SERVICE_ACCOUNT,
                                "namespace": self.namespace } ],
            }),
        )
    }

    pub fn inputs(&self) -> Result<ConfigMap, ObjectError> {
        build(
            "ConfigMap",
            json!({ "metadata": { "name": INPUTS, "namespace": self.namespace,
                                  "labels": labels(&self.namespace) },
                    "data": self.inputs }),
        )
    }

    /// One pod, never retried (a second run would only hide the first's
    /// failure), ended by the Job controller at the deadline.
    pub fn job(&self) -> Result<Job, ObjectError> {
        build(
            "Job",
            json!({
                "metadata": { "name": JOB_NAME, "namespace": self.namespace,
                              "labels": labels(&self.namespace) },
                "spec": {
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": self.deadline.as_secs().max(1),
                    "template": {
                        "metadata": { "labels": labels(&self.namespace) },
                        "spec": {
                            "serviceAccountName": SERVICE_ACCOUNT,
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": STOP_GRACE.as_secs(),
                            "containers": [ {
                                "name": JOB_NAME,
                                "image": self.image,
                                "imagePullPolicy": self.pull_policy,
                                "command": [crate::images::builtin::RUNNER_PROGRAM_PATH],
                                "args": self.args,
                                "workingDir": "/tmp",
                                "env": [
                                    { "name": "HOME", "value": "/tmp" },
                                    // The runner's record of what it made on the host
                                    // (for `dra-e2e clean`) is the container's own.
                                    { "name": "DRA_E2E_RUN_RECORDS", "value": "/tmp/dra-e2e-runs" },
                                ],
                                "volumeMounts": [ { "name": "inputs", "mountPath": INPUTS_DIR,
                                                    "readOnly": true } ],
                            } ],
                            "volumes": [ { "name": "inputs", "configMap": { "name": INPUTS } } ],
                        },
                    },
                },
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> JobPlan {
        JobPlan {
            namespace: "dra-e2e-job-abcde".into(),
            image: "dra-e2e.local/runner:0.1.0".into(),
            pull_policy: "IfNotPresent".into(),
            args: vec!["job-pod".into(), "--".into(), "--tags".into(), "@x".into()],
            inputs: BTreeMap::from([("profile.yaml".into(), "driverName: d\n".into())]),
            deadline: Duration::from_secs(600),
        }
    }

    #[test]
    fn the_job_runs_once_as_the_bound_service_account_with_the_inputs_mounted() {
        let p = plan();
        let job = p.job().unwrap();
        let spec = job.spec.unwrap();
        assert_eq!(spec.backoff_limit, Some(0));
        assert_eq!(spec.active_deadline_seconds, Some(600));
        let pod = spec.template.spec.unwrap();
        assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
        assert_eq!(pod.service_account_name.as_deref(), Some(SERVICE_ACCOUNT));
        let c = &pod.containers[0];
        assert_eq!(c.image.as_deref(), Some("dra-e2e.local/runner:0.1.0"));
        assert_eq!(c.args.as_ref().unwrap(), &p.args);
        assert_eq!(
            c.volume_mounts.as_ref().unwrap()[0].mount_path,
            INPUTS_DIR.to_owned()
        );
        let binding = p.binding().unwrap();
        assert_eq!(binding.metadata.name.as_deref(), Some("dra-e2e-job-abcde"));
        assert_eq!(binding.role_ref.name, CLUSTER_ROLE);
        let subject = &binding.subjects.unwrap()[0];
        assert_eq!(subject.namespace.as_deref(), Some("dra-e2e-job-abcde"));
        assert_eq!(subject.name, SERVICE_ACCOUNT);
        let cm = p.inputs().unwrap();
        assert_eq!(cm.data.unwrap()["profile.yaml"], "driverName: d\n");
        let ns = p.namespace_object().unwrap();
        assert_eq!(
            ns.metadata.labels.unwrap()[JOB_LABEL],
            "dra-e2e-job-abcde".to_owned()
        );
    }
}
