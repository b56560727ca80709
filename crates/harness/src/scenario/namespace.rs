//! A scenario's namespace: made with a generated name and the run's label
//! (so that the run's leak check and a later run's cleanup find it), with
//! its default ServiceAccount made at once rather than waited for.
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ObjectMeta, PostParams};

/// A namespace that could not be made ready for pods.
#[derive(Debug, thiserror::Error)]
pub enum NamespaceError {
    #[error("creating the scenario's namespace: {0}")]
    Create(#[source] kube::Error),
    #[error("creating the default ServiceAccount of namespace {namespace}: {source}")]
    DefaultServiceAccount {
        namespace: String,
        #[source]
        source: kube::Error,
    },
}

/// The namespace object a scenario of run `run_id` asks for: a generated
/// `dra-e2e-` name, the run's label, privileged pods allowed (the
/// scenarios' pods mount host paths on real nodes).
pub fn object(run_label: &str, run_id: &str) -> Namespace {
    let labels = [
        (run_label, run_id),
        ("pod-security.kubernetes.io/enforce", "privileged"),
        ("pod-security.kubernetes.io/warn", "privileged"),
    ];
    Namespace {
        metadata: ObjectMeta {
            generate_name: Some("dra-e2e-".to_owned()),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// Creates the namespace `ns` asks for, and returns its name.
pub async fn create(client: &kube::Client, ns: &Namespace) -> Result<String, NamespaceError> {
    let created = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), ns)
        .await
        .map_err(NamespaceError::Create)?;
    Ok(created.metadata.name.unwrap_or_default())
}

/// Makes the default ServiceAccount of `namespace`. With the
/// ServiceAccount admission plugin on, pods are refused until it exists.
/// Creating it takes one request where waiting for the controller takes
/// its queue's pace; whichever comes second finds it there, as the
/// controller is built to.
pub async fn default_service_account(
    client: &kube::Client,
    namespace: &str,
) -> Result<(), NamespaceError> {
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("default".to_owned()),
            ..Default::default()
        },
        ..Default::default()
    };
    match Api::<ServiceAccount>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &account)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(source) => Err(NamespaceError::DefaultServiceAccount {
            namespace: namespace.to_owned(),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_namespace_carries_the_runs_label_and_a_generated_name() {
        let ns = object("dra-e2e.k8s.io/run", "abc123");
        assert_eq!(ns.metadata.generate_name.as_deref(), Some("dra-e2e-"));
        assert_eq!(ns.metadata.name, None);
        let labels = ns.metadata.labels.expect("labels");
        assert_eq!(labels["dra-e2e.k8s.io/run"], "abc123");
        assert_eq!(labels["pod-security.kubernetes.io/enforce"], "privileged");
    }
}
