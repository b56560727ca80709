//! A real cluster from a kubeconfig: connecting with clear errors, checking
//! that it serves DRA, and reaching containers by exec.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};

use crate::options::ConnectOptions;
use dra_e2e_conn::node_host::{Dialled, HostedDriver, NodeHost, Served, SocketError};

mod exec;
pub use exec::{exec_env, exec_status};

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

/// Whether this process runs in a pod: the kubelet sets the API server's
/// service address in every container's environment.
pub fn in_pod() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some_and(|v| !v.is_empty())
}

/// The client config of `kubeconfig`; without one, of `KUBECONFIG` or
/// `~/.kube/config`, or in a pod with neither, the in-cluster config (the
/// pod's ServiceAccount, as `dra-e2e job` runs the runner).
pub async fn load_config(kubeconfig: Option<&Path>) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            // Read here so that a missing file is said once, plainly.
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            let kc = kube::config::Kubeconfig::from_yaml(&text)
                .with_context(|| format!("reading kubeconfig {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .with_context(|| format!("using kubeconfig {}", path.display()))?
        }
        None if !kubeconfig_configured(None) && in_pod() => kube::Config::incluster().context(
            "loading the in-cluster config (no kubeconfig given, KUBECONFIG unset and no \
             ~/.kube/config, in a pod: KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT and \
             the ServiceAccount's token and ca.crt under \
             /var/run/secrets/kubernetes.io/serviceaccount)",
        )?,
        None => kube::Config::from_kubeconfig(&Default::default())
            .await
            .context("loading the kubeconfig from KUBECONFIG or ~/.kube/config")?,
    })
}

pub struct RemoteEnv {
    pub client: kube::Client,
    pub config: kube::Config,
    pub server: String,
    pub kubelet_root: PathBuf,
    pub proxy_image: String,
    /// The nodes' CDI spec directory, where proxy pods write spec files.
    pub cdi_dir: String,
    /// The run's node host pods, where every driver's agents run.
    pub node_pods: std::sync::Arc<crate::proxy::NodePods>,
    /// Where `client` reports an API server that stayed away past its
    /// deadline ([`dra_e2e_kube::client`]), when `connect` built it.
    pub outage: Option<dra_e2e_kube::client::Outage>,
}

impl RemoteEnv {
    pub async fn connect(opts: &ConnectOptions) -> anyhow::Result<RemoteEnv> {
        let config = load_config(opts.kubeconfig.as_deref()).await?;
        let server = config.cluster_url.to_string();
        let mut quick = config.clone();
        quick.connect_timeout = Some(Duration::from_secs(5));
        quick.read_timeout = Some(Duration::from_secs(10));
        let probe =
            kube::Client::try_from(quick).context("building a client for the kubeconfig")?;
        // The body is parsed here: the client's own parse logs a body that
        // is not JSON (an HTML page) in full.
        let request = http::Request::get("/version")
            .body(Vec::new())
            .context("building GET /version")?;
        let text = tokio::time::timeout(Duration::from_secs(15), probe.request_text(request))
            .await
            .map_err(|_| anyhow::anyhow!("the API server at {server} did not answer within 15s"))?
            .map_err(|e| probe_error(&server, e))?;
        let version: k8s_openapi::apimachinery::pkg::version::Info = serde_json::from_str(&text)
            .map_err(|e| probe_error(&server, kube::Error::SerdeError(e)))?;
        let groups = probe.list_api_group_resources("resource.k8s.io/v1").await;
        // /version is open to anonymous users; the API groups are not.
        if let Err(kube::Error::Api(status)) = &groups
            && (status.code == 401 || status.code == 403)
        {
            let who = if status.code == 401 {
                "401 Unauthorized: check the credentials (token, client certificate) of the \
                 kubeconfig's user"
            } else {
                "403 Forbidden: the kubeconfig's user may not read the API groups; check its \
                 permissions"
            };
            bail!("the API server at {server} answered {who}");
        }
        if groups.is_err() {
            bail!(
                "the cluster at {server} (Kubernetes {}) does not serve resource.k8s.io/v1; DRA scenarios need Kubernetes 1.34 or newer",
                version.git_version
            );
        }
        // Its requests ride out the API server restarting (an upgrade of
        // the control plane, flow control's 429).
        let outage = dra_e2e_kube::client::Outage::new();
        let client = dra_e2e_kube::client::build(config.clone(), Some(&outage))
            .context("building the cluster client")?;
        let layout = crate::proxy::NodeLayout {
            kubelet_root: opts.kubelet_root.display().to_string(),
            image: self::proxy_image(&opts.proxy_image),
            cdi_host_dir: opts.cdi_dir.clone(),
            // A kubeconfig's nodes may be anywhere: through the API server.
            route: crate::proxy::HostRoute::PortForward,
            fault: opts.node_host_fault,
        };
        check_fault(&layout)?;
        Ok(RemoteEnv {
            outage: Some(outage),
            ..RemoteEnv::new(client, config, server, layout)
        })
    }

    /// The nodes reached through node host pods laid out as `layout` says.
    pub fn new(
        client: kube::Client,
        config: kube::Config,
        server: String,
        layout: crate::proxy::NodeLayout,
    ) -> RemoteEnv {
        let kubelet_root = PathBuf::from(&layout.kubelet_root);
        let proxy_image = layout.image.image.clone();
        let cdi_dir = layout.cdi_host_dir.clone();
        // A client of their own: a port-forward or exec the API server
        // refuses (its kubelet restarting) can leave the connection it came
        // on closed yet pooled, and the next request that takes it fails
        // with "connection closed before message completed". The node host
        // pods' requests retry; a scenario's would fail its step. Building
        // a client from a config that built one already cannot fail.
        let hosts_client =
            kube::Client::try_from(config.clone()).unwrap_or_else(|_| client.clone());
        let node_pods = std::sync::Arc::new(crate::proxy::NodePods::new(hosts_client, layout));
        RemoteEnv {
            client,
            config,
            server,
            kubelet_root,
            proxy_image,
            cdi_dir,
            node_pods,
            outage: None,
        }
    }
}

/// One line for a failed `GET /version`: what the server answered and what
/// to do, not the client's Debug dump or an HTML page.
fn probe_error(server: &str, e: kube::Error) -> anyhow::Error {
    match e {
        kube::Error::Api(status) => {
            let code = status.code;
            let reason = http::StatusCode::from_u16(code)
                .ok()
                .and_then(|c| c.canonical_reason())
                .unwrap_or("");
            if code == 401 {
                anyhow::anyhow!(
                    "the API server at {server} answered 401 Unauthorized: check the credentials \
                     (token, client certificate) of the kubeconfig's user"
                )
            } else if code == 403 {
                anyhow::anyhow!(
                    "the API server at {server} answered 403 Forbidden: the kubeconfig's user may \
                     not read /version; check its permissions"
                )
            } else if status.reason == "Failed to parse error data" {
                // The body is not a Kubernetes Status: not an API server.
                anyhow::anyhow!(
                    "{server} is not a Kubernetes API server: GET /version answered {code} \
                     {reason} with a body that is not a Kubernetes Status"
                )
            } else {
                anyhow::anyhow!(
                    "the API server at {server} answered GET /version with {code} {reason}: {}",
                    status.message
                )
            }
        }
        kube::Error::SerdeError(_) => anyhow::anyhow!(
            "{server} is not a Kubernetes API server: its answer to GET /version is not \
             Kubernetes version JSON"
        ),
        other => {
            anyhow::Error::new(other).context(format!("cannot reach the API server at {server}"))
        }
    }
}

/// A node host fault needs node hosts: upstream's image has none.
pub fn check_fault(layout: &crate::proxy::NodeLayout) -> anyhow::Result<()> {
    if layout.fault != crate::proxy::NodeHostFault::None
        && layout.image.agent != crate::proxy::AgentKind::DraE2e
    {
        bail!(
            "--node-host-fault breaks the node host process, which the node host pods of image \
             {} (upstream's hostpathplugin) do not run: give --proxy-image an image carrying \
             dra-e2e-agent",
            layout.image.image
        );
    }
    Ok(())
}

/// How to run the agent in the proxy pods: upstream's hostpathplugin image,
/// or any image carrying `dra-e2e` (chosen by the image name).
pub fn proxy_image(image: &str) -> crate::proxy::ProxyImage {
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
    /// A driver instance's nodes, reached through the run's node host
    /// pods (started on the first driver that needs them).
    pub async fn host(&self, hosted: HostedDriver<'_>) -> anyhow::Result<RemoteHost> {
        let HostedDriver { driver, nodes, .. } = hosted;
        let pods = self
            .node_pods
            .on(nodes)
            .await
            .with_context(|| format!("reaching the nodes of driver {driver}"))?;
        // The node host pods' own client: its exec and port-forward
        // requests never share a connection pool with the scenarios'.
        Ok(RemoteHost {
            client: self.node_pods.client(),
            kubelet_root: self.kubelet_root.clone(),
            pool: self.node_pods.layout().pool(),
            pods,
        })
    }
}

/// A driver's nodes on a real cluster, reached through the node host pods.
pub struct RemoteHost {
    client: kube::Client,
    kubelet_root: PathBuf,
    /// How each socket's pool dials.
    pool: crate::proxy::PoolConfig,
    pods: std::collections::BTreeMap<String, std::sync::Arc<crate::proxy::ProxyPod>>,
}

impl RemoteHost {
    /// The host pod on `node`, the way onto it for `socket`.
    fn proxy_pod(
        &self,
        node: &str,
        socket: &Path,
    ) -> Result<std::sync::Arc<crate::proxy::ProxyPod>, SocketError> {
        self.pods
            .get(node)
            .cloned()
            .ok_or_else(|| SocketError::new(node, socket, "the driver does not run on this node"))
    }
}

#[async_trait::async_trait]
impl NodeHost for RemoteHost {
    fn kubelet_root(&self, _node: &str) -> PathBuf {
        self.kubelet_root.clone()
    }

    fn cdi_files(&self, node: &str) -> std::sync::Arc<dyn dra_e2e_conn::node_files::NodeFiles> {
        match self.pods.get(node) {
            Some(pod) => match pod.link() {
                Some(link) => std::sync::Arc::new(link.files(crate::proxy::pods::CDI_MOUNT)),
                None => std::sync::Arc::new(pod.cdi_files(self.client.clone())),
            },
            // Without a proxy pod there is no way onto the node; writes fail
            // with a clear error from the empty local directory instead.
            None => std::sync::Arc::new(dra_e2e_conn::node_files::LocalDir::new(format!(
                "/nonexistent/no-proxy-pod-on-{node}"
            ))),
        }
    }

    fn plugin_files(
        &self,
        node: &str,
        driver: &str,
    ) -> Option<std::sync::Arc<dyn dra_e2e_conn::node_files::NodeFiles>> {
        let pod = self.pods.get(node)?;
        // The host pod mounts the plugin directories at their host paths.
        let dir = self.kubelet_root.join("plugins").join(driver);
        if let Some(link) = pod.link() {
            return Some(std::sync::Arc::new(link.files(dir)));
        }
        Some(std::sync::Arc::new(crate::proxy::pod_files::PodFiles::new(
            self.client.clone(),
            pod.exec_target(),
            dir.display().to_string(),
        )))
    }

    fn pod_of(&self, node: &str) -> Option<(String, String)> {
        let pod = self.pods.get(node)?;
        Some((pod.name.clone(), pod.uid.clone()))
    }

    async fn serve(&self, node: &str, socket: &Path) -> Result<Served, SocketError> {
        use futures::FutureExt as _;
        let err = |message: String| SocketError::new(node, socket, message);
        let pod = self.proxy_pod(node, socket)?;
        let path = socket.display().to_string();
        let (proxied, incoming) = match pod.link() {
            Some(link) => {
                crate::proxy::ProxiedSocket::hosted(link.clone(), &path, self.pool.clone())
            }
            None => crate::proxy::ProxiedSocket::remote(
                self.client.clone(),
                &pod,
                &path,
                self.pool.clone(),
            )
            .await
            .map_err(|e| err(e.to_string()))?,
        };
        let stop = async move {
            if let Err(e) = proxied.stop().await {
                tracing::warn!(socket = %path, error = %e, "stopping the proxied socket");
            }
        }
        .boxed();
        Ok(Served::new(incoming, stop))
    }

    /// One exec of `dra-e2e-agent proxy-agent --connect <socket>` per connection
    /// in the node's proxy pod, which mounts the plugin and registration
    /// directories at their host paths: the exec's stdout and stdin are the
    /// connection. Needs the dra-e2e proxy image (hostpathplugin has no
    /// connect mode; the error says how to choose the image).
    async fn dial(&self, node: &str, socket: &Path) -> Result<Dialled, SocketError> {
        let err = |message: String| SocketError::new(node, socket, message);
        let pod = self.proxy_pod(node, socket)?;
        if let Some(link) = pod.link() {
            let request = dra_e2e_agent::host_wire::Request::Connect(socket.to_owned());
            return link
                .open(&request, b"")
                .await
                .map_err(|e| err(e.to_string()));
        }
        let path = socket
            .to_str()
            .ok_or_else(|| err("the socket path is not UTF-8".to_owned()))?;
        let conn = crate::proxy::connect::dial(self.client.clone(), &pod, path)
            .await
            .map_err(|e| err(e.to_string()))?;
        Ok(Box::new(conn))
    }

    /// `dra-e2e-agent sockets <dir>` by exec in the node's host pod, which
    /// mounts the plugin directories at their host paths.
    async fn sockets(
        &self,
        node: &str,
        dir: &Path,
    ) -> Result<Vec<dra_e2e_conn::node_host::SocketFile>, SocketError> {
        let err = |message: String| SocketError::new(node, dir, message);
        let pod = self.proxy_pod(node, dir)?;
        if let Some(link) = pod.link() {
            let request = dra_e2e_agent::host_wire::Request::Sockets(dir.to_owned());
            let out = link
                .call(&request, b"")
                .await
                .map_err(|e| err(format!("listing the directory: {e}")))?;
            return Ok(String::from_utf8_lossy(&out)
                .lines()
                .filter_map(dra_e2e_agent::sockets::parse_line)
                .map(|e| dra_e2e_conn::node_host::SocketFile {
                    name: e.name,
                    identity: e.identity,
                })
                .collect());
        }
        if pod.agent != crate::proxy::AgentKind::DraE2e {
            return Err(err(
                "the node host pod runs upstream's hostpathplugin, which cannot list a \
                 directory: choose an image carrying dra-e2e-agent with --proxy-image"
                    .to_owned(),
            ));
        }
        let path = dir
            .to_str()
            .ok_or_else(|| err("the directory's path is not UTF-8".to_owned()))?;
        let command = vec![
            dra_e2e_agent::PROGRAM.to_owned(),
            "sockets".to_owned(),
            path.to_owned(),
        ];
        let out = crate::proxy::exec::exec_capture(&self.client, &pod.exec_target(), command)
            .await
            .map_err(|e| err(format!("listing the directory: {e}")))?;
        Ok(out
            .stdout
            .lines()
            .filter_map(dra_e2e_agent::sockets::parse_line)
            .map(|e| dra_e2e_conn::node_host::SocketFile {
                name: e.name,
                identity: e.identity,
            })
            .collect())
    }
}
