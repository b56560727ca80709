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
        let probe =
            kube::Client::try_from(quick).context("building a client for the kubeconfig")?;
        let version = tokio::time::timeout(Duration::from_secs(15), probe.apiserver_version())
            .await
            .map_err(|_| anyhow::anyhow!("the API server at {server} did not answer within 15s"))?
            .with_context(|| format!("cannot reach the API server at {server}"))?;
        let groups = probe.list_api_group_resources("resource.k8s.io/v1").await;
        if groups.is_err() {
            bail!(
                "the cluster at {server} (Kubernetes {}) does not serve resource.k8s.io/v1; DRA scenarios need Kubernetes 1.34 or newer",
                version.git_version
            );
        }
        let client =
            kube::Client::try_from(config.clone()).context("building the cluster client")?;
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

/// How to run the agent in the proxy pods: upstream's hostpathplugin image,
/// or any image carrying `dra-e2e` (chosen by the image name).
fn proxy_image(image: &str) -> crate::proxy::ProxyImage {
    let agent = if image.contains("hostpathplugin") {
        crate::proxy::AgentKind::HostPathPlugin
    } else {
        crate::proxy::AgentKind::DraE2e
    };
    crate::proxy::ProxyImage {
        image: image.to_owned(),
        agent,
    }
}

impl RemoteEnv {
    /// Deploys the proxy pods of one driver instance on `nodes`.
    pub async fn host(
        &self,
        client: kube::Client,
        namespace: &str,
        driver: &str,
        instance: &str,
        nodes: &[String],
    ) -> anyhow::Result<RemoteHost> {
        let mut spec = crate::proxy::ProxyPodsSpec::new(namespace, driver, nodes.to_vec());
        spec.name_suffix = driver
            .strip_prefix(namespace)
            .and_then(|s| s.strip_suffix(".k8s.io"))
            .unwrap_or_default()
            .to_owned();
        spec.instance_suffix = instance.to_owned();
        spec.kubelet_root = self.kubelet_root.display().to_string();
        spec.image = proxy_image(&self.proxy_image);
        let pods = crate::proxy::ProxyPods::deploy(client.clone(), spec, Duration::from_secs(300))
            .await
            .with_context(|| format!("deploying the proxy pods of driver {driver}"))?;
        Ok(RemoteHost {
            client,
            kubelet_root: self.kubelet_root.clone(),
            pods: tokio::sync::Mutex::new(Some(pods)),
        })
    }
}

/// A driver's nodes on a real cluster, reached through its proxy pods.
pub struct RemoteHost {
    client: kube::Client,
    kubelet_root: PathBuf,
    pods: tokio::sync::Mutex<Option<crate::proxy::ProxyPods>>,
}

#[async_trait::async_trait]
impl crate::driver::sockets::NodeHost for RemoteHost {
    fn kubelet_root(&self, _node: &str) -> PathBuf {
        self.kubelet_root.clone()
    }

    fn cdi_files(&self, node: &str) -> std::sync::Arc<dyn crate::node_files::NodeFiles> {
        let pod = self
            .pods
            .try_lock()
            .ok()
            .and_then(|p| p.as_ref().and_then(|p| p.pod_on(node).cloned()));
        match pod {
            Some(pod) => std::sync::Arc::new(pod.cdi_files(self.client.clone())),
            // Without a proxy pod there is no way onto the node; writes fail
            // with a clear error from the empty local directory instead.
            None => std::sync::Arc::new(crate::node_files::LocalDir::new(format!(
                "/nonexistent/no-proxy-pod-on-{node}"
            ))),
        }
    }

    fn pod_of(&self, node: &str) -> Option<(String, String)> {
        let pods = self.pods.try_lock().ok()?;
        let pod = pods.as_ref()?.pod_on(node)?;
        Some((pod.name.clone(), pod.uid.clone()))
    }

    async fn serve(
        &self,
        node: &str,
        socket: &Path,
    ) -> Result<crate::driver::sockets::Served, crate::driver::sockets::SocketError> {
        use futures::FutureExt as _;
        let err = |message: String| crate::driver::sockets::SocketError {
            node: node.to_owned(),
            socket: socket.to_owned(),
            message,
        };
        let pod = {
            let pods = self.pods.lock().await;
            pods.as_ref()
                .and_then(|p| p.pod_on(node).cloned())
                .ok_or_else(|| err("no proxy pod runs on this node".to_owned()))?
        };
        let path = socket.display().to_string();
        let (proxied, incoming) = crate::proxy::ProxiedSocket::remote(
            self.client.clone(),
            &pod,
            &path,
            crate::proxy::PoolConfig::default(),
        )
        .await
        .map_err(|e| err(e.to_string()))?;
        let stop = async move {
            if let Err(e) = proxied.stop().await {
                tracing::warn!(socket = %path, error = %e, "stopping the proxied socket");
            }
        }
        .boxed();
        Ok(crate::driver::sockets::Served::new(incoming, stop))
    }

    async fn tear_down(&self) {
        if let Some(pods) = self.pods.lock().await.take()
            && let Err(e) = pods.teardown(Duration::from_secs(120)).await
        {
            tracing::warn!(error = %e, "removing proxy pods");
        }
    }
}
