//! A real cluster from a kubeconfig: connecting with clear errors, checking
//! that it serves DRA, and reaching containers by exec.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams};
use tokio::io::AsyncReadExt as _;

use super::ConnectOptions;

/// Whether the user configured a kubeconfig cluster (flag, env or default file).
pub fn kubeconfig_configured(explicit: Option<&Path>) -> bool {
    if explicit.is_some() {
        return true;
    }
    if std::env::var_os("KUBECONFIG").is_some_and(|v| !v.is_empty()) {
        return true;
    }
    std::env::var_os("HOME")
        .map(|h| PathBuf::from(h).join(".kube/config"))
        .is_some_and(|p| p.exists())
}

pub struct RemoteEnv {
    pub client: kube::Client,
    pub config: kube::Config,
    pub server: String,
    pub kubelet_root: PathBuf,
    pub proxy_image: String,
}

impl RemoteEnv {
    pub async fn connect(opts: &ConnectOptions) -> anyhow::Result<RemoteEnv> {
        let config = match &opts.kubeconfig {
            Some(path) => {
                let kc = kube::config::Kubeconfig::read_from(path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                kube::Config::from_custom_kubeconfig(kc, &Default::default())
                    .await
                    .with_context(|| format!("using kubeconfig {}", path.display()))?
            }
            None => kube::Config::from_kubeconfig(&Default::default())
                .await
                .context("loading the kubeconfig from KUBECONFIG or ~/.kube/config")?,
        };
        let server = config.cluster_url.to_string();
        let mut quick = config.clone();
        quick.connect_timeout = Some(Duration::from_secs(5));
        quick.read_timeout = Some(Duration::from_secs(10));
        let probe = kube::Client::try_from(quick).context("building a client for the kubeconfig")?;
        let version = tokio::time::timeout(Duration::from_secs(15), probe.apiserver_version())
            .await
            .map_err(|_| anyhow::anyhow!("the API server at {server} did not answer within 15s"))?
            .with_context(|| format!("cannot reach the API server at {server}"))?;
        let groups = probe
            .list_api_group_resources("resource.k8s.io/v1")
            .await;
        if groups.is_err() {
            bail!(
                "the cluster at {server} (Kubernetes {}) does not serve resource.k8s.io/v1; DRA scenarios need Kubernetes 1.34 or newer",
                version.git_version
            );
        }
        let client = kube::Client::try_from(config.clone()).context("building the cluster client")?;
        Ok(RemoteEnv {
            client,
            config,
            server,
            kubelet_root: opts.kubelet_root.clone(),
            proxy_image: opts.proxy_image.clone(),
        })
    }
}

/// `env` in a running container, by exec.
pub async fn exec_env(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
) -> anyhow::Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut attached = pods
        .exec(
            pod,
            ["env"],
            &AttachParams::default()
                .container(container)
                .stdout(true)
                .stderr(false),
        )
        .await
        .with_context(|| format!("exec env in {namespace}/{pod} container {container}"))?;
    let mut out = String::new();
    if let Some(mut stdout) = attached.stdout() {
        stdout
            .read_to_string(&mut out)
            .await
            .context("reading the output of env")?;
    }
    let _ = attached.join().await;
    Ok(out.lines().map(str::to_owned).collect())
}
