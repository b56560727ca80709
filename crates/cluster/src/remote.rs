//! A real cluster from a kubeconfig: connecting with clear errors, checking
//! that it serves DRA, and reaching containers by exec.
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams, LogParams};
use tokio::io::AsyncReadExt as _;

use crate::options::ConnectOptions;
use dra_e2e_conn::node_host::{Dialled, HostedDriver, NodeHost, Served, SocketError};
use dra_e2e_kube::retry::{Retry, is_pod_unknown_to_kubelet};

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

/// The env of a container on a node with a container runtime, as `env` in it
/// prints it: a running container is asked by exec (`env` must exist in its
/// image and exit 0). An init container that already exited cannot be
/// exec'd; its env is what its script printed to its log (the pod builder's
/// init script starts with `env`). Every failure names the pod and container
/// and says what went wrong, never an empty env.
pub async fn exec_env(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
) -> anyhow::Result<Vec<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let target = format!("container {container} of pod {namespace}/{pod}");
    let current = pods
        .get_opt(pod)
        .await
        .with_context(|| format!("reading pod {namespace}/{pod}"))?
        .with_context(|| format!("{target}: the pod does not exist"))?;
    match exited(&current, container) {
        Some(Exited::Init(code)) => {
            let lp = LogParams {
                container: Some(container.to_owned()),
                ..Default::default()
            };
            let log = pods
                .logs(pod, &lp)
                .await
                .with_context(|| format!("reading the log of init {target}"))?;
            return env_from_init_log(&target, code, &log);
        }
        Some(Exited::Regular(code)) => {
            bail!("{target} is not running (it exited with code {code}), so `env` cannot run in it")
        }
        None => {}
    }
    let out = exec_output(&pods, pod, container, &["env".to_owned()], &target).await?;
    env_from_exec(&target, out)
}

/// Runs `command` in a running container: `None` when it exited 0, else
/// what it reported (exit status, stderr).
pub async fn exec_status(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: &str,
    command: &[String],
) -> anyhow::Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let target = format!("container {container} of pod {namespace}/{pod}");
    let out = exec_output(&pods, pod, container, command, &target).await?;
    let stderr = out.stderr.trim();
    Ok(match &out.status {
        Some(st) if st.status.as_deref() == Some("Success") => None,
        Some(st) => Some(format!(
            "{}{}",
            describe_status(st),
            if stderr.is_empty() {
                String::new()
            } else {
                format!("; stderr: {stderr}")
            }
        )),
        None => Some(format!(
            "no exit status{}",
            out.stream_error
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        )),
    })
}

/// Runs `command` in `container` by exec and collects what it wrote and
/// its status, within [`EXEC_TIMEOUT`] after the tries to start it.
async fn exec_output(
    pods: &Api<Pod>,
    pod: &str,
    container: &str,
    command: &[String],
    target: &str,
) -> anyhow::Result<ExecOutput> {
    let shown = command.join(" ");
    let exec = async {
        let params = AttachParams::default()
            .container(container)
            .stdout(true)
            .stderr(true);
        // A kubelet just restarted does not know the pod for a moment.
        let mut attached = Retry::TRANSIENT
            .run(is_pod_unknown_to_kubelet, || {
                pods.exec(pod, command.to_vec(), &params)
            })
            .await
            .with_context(|| format!("exec `{shown}` in {target}"))?;
        let status = attached.take_status();
        let (mut stdout, mut stderr) = (String::new(), String::new());
        let out_stream = attached.stdout();
        let err_stream = attached.stderr();
        let read_out = async {
            match out_stream {
                Some(mut s) => s.read_to_string(&mut stdout).await.map(drop),
                None => Ok(()),
            }
        };
        let read_err = async {
            match err_stream {
                Some(mut s) => s.read_to_string(&mut stderr).await.map(drop),
                None => Ok(()),
            }
        };
        let (read_out, read_err) = tokio::join!(read_out, read_err);
        let status = match status {
            Some(s) => s.await,
            None => None,
        };
        let joined = attached.join().await;
        let stream_error = read_out
            .err()
            .map(|e| format!("reading stdout: {e}"))
            .or_else(|| read_err.err().map(|e| format!("reading stderr: {e}")))
            .or_else(|| joined.err().map(|e| e.to_string()));
        anyhow::Ok(ExecOutput {
            stdout,
            stderr,
            status,
            stream_error,
        })
    };
    // The command's own time comes after the tries to start it, so that a
    // kubelet that never learns the pod ends with its own answer.
    let within = EXEC_TIMEOUT + Retry::TRANSIENT.within;
    tokio::time::timeout(within, exec).await.map_err(|_| {
        anyhow::anyhow!("exec `{shown}` in {target} did not finish within {within:?}")
    })?
}

/// How long reading a container's env by exec may take once started.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// A container that is not running any more, with its exit code.
#[derive(Debug, PartialEq, Eq)]
enum Exited {
    Init(i32),
    Regular(i32),
}

/// Whether `container` of the pod has terminated (its current state, not a
/// previous run of a restarting container).
fn exited(pod: &Pod, container: &str) -> Option<Exited> {
    let status = pod.status.as_ref()?;
    let terminated = |list: Option<&Vec<k8s_openapi::api::core::v1::ContainerStatus>>| {
        list?
            .iter()
            .find(|c| c.name == container)?
            .state
            .as_ref()?
            .terminated
            .as_ref()
            .map(|t| t.exit_code)
    };
    terminated(status.init_container_statuses.as_ref())
        .map(Exited::Init)
        .or_else(|| terminated(status.container_statuses.as_ref()).map(Exited::Regular))
}

/// The env lines an exited init container printed to its log.
fn env_from_init_log(target: &str, code: i32, log: &str) -> anyhow::Result<Vec<String>> {
    let lines: Vec<String> = log.lines().map(str::to_owned).collect();
    if lines.iter().all(|l| !l.contains('=')) {
        bail!(
            "init {target} exited (code {code}) and its log holds no env to read: an exited \
             container cannot be exec'd, so only init containers whose script prints `env` \
             (as the pod builder's does) can be checked; log: {:?}",
            log.trim()
        );
    }
    Ok(lines)
}

/// What an exec of `env` produced.
#[derive(Debug, Default)]
struct ExecOutput {
    stdout: String,
    stderr: String,
    /// The status the API server reported on the exec's error channel.
    status: Option<Status>,
    /// A failure of the stream itself.
    stream_error: Option<String>,
}

/// The env lines, if the exec succeeded: status `Success`, nothing on
/// stderr (as upstream requires) and some output.
fn env_from_exec(target: &str, out: ExecOutput) -> anyhow::Result<Vec<String>> {
    let stderr = out.stderr.trim();
    let stderr_note = if stderr.is_empty() {
        String::new()
    } else {
        format!("; stderr: {stderr}")
    };
    match &out.status {
        None => bail!(
            "exec `env` in {target} ended without reporting an exit status{}{stderr_note}",
            out.stream_error
                .as_ref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default()
        ),
        Some(st) if st.status.as_deref() != Some("Success") => bail!(
            "exec `env` in {target} failed: {}{stderr_note}",
            describe_status(st)
        ),
        Some(_) => {}
    }
    if !stderr.is_empty() {
        bail!("exec `env` in {target} succeeded but wrote to stderr: {stderr}");
    }
    if out.stdout.trim().is_empty() {
        bail!("exec `env` in {target} succeeded but printed no env at all");
    }
    Ok(out.stdout.lines().map(str::to_owned).collect())
}

/// `status Failure, reason NonZeroExitCode, exit code 127: <message>`.
fn describe_status(st: &Status) -> String {
    let mut parts = vec![format!(
        "status {}",
        st.status.as_deref().unwrap_or("<none>")
    )];
    if let Some(r) = st.reason.as_deref().filter(|r| !r.is_empty()) {
        parts.push(format!("reason {r}"));
    }
    let exit_code = st
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.reason.as_deref() == Some("ExitCode")))
        .and_then(|c| c.message.as_deref());
    if let Some(code) = exit_code {
        parts.push(format!("exit code {code}"));
    }
    let mut text = parts.join(", ");
    if let Some(m) = st.message.as_deref().filter(|m| !m.is_empty()) {
        text.push_str(": ");
        text.push_str(m);
    }
    text
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

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};

    const TARGET: &str = "container with-resource of pod ns/tester-1";

    fn status(status: &str, reason: &str, exit_code: Option<&str>, message: &str) -> Status {
        Status {
            status: Some(status.to_owned()),
            reason: (!reason.is_empty()).then(|| reason.to_owned()),
            message: (!message.is_empty()).then(|| message.to_owned()),
            details: exit_code.map(|c| StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".to_owned()),
                    message: Some(c.to_owned()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn output(stdout: &str, stderr: &str, status: Option<Status>) -> ExecOutput {
        ExecOutput {
            stdout: stdout.to_owned(),
            stderr: stderr.to_owned(),
            status,
            stream_error: None,
        }
    }

    #[test]
    fn successful_exec_yields_the_lines() {
        let env = env_from_exec(
            TARGET,
            output(
                "PATH=/bin\nuser_a=b\n",
                "",
                Some(status("Success", "", None, "")),
            ),
        )
        .unwrap();
        assert_eq!(env, ["PATH=/bin", "user_a=b"]);
    }

    #[test]
    fn failed_exec_names_container_status_and_stderr() {
        let err = env_from_exec(
            TARGET,
            output(
                "",
                "exec: \"env\": executable file not found in $PATH\n",
                Some(status(
                    "Failure",
                    "NonZeroExitCode",
                    Some("127"),
                    "command terminated with non-zero exit code",
                )),
            ),
        )
        .unwrap_err()
        .to_string();
        for part in [
            "exec `env` in container with-resource of pod ns/tester-1 failed",
            "status Failure",
            "reason NonZeroExitCode",
            "exit code 127",
            "command terminated with non-zero exit code",
            "stderr: exec: \"env\": executable file not found",
        ] {
            assert!(err.contains(part), "{part:?} missing in {err}");
        }
    }

    #[test]
    fn exec_without_status_or_with_odd_output_fails() {
        let mut out = output("user_a=b\n", "", None);
        out.stream_error = Some("connection reset".into());
        let err = env_from_exec(TARGET, out).unwrap_err().to_string();
        assert!(
            err.contains("ended without reporting an exit status (connection reset)"),
            "{err}"
        );

        let ok = || Some(status("Success", "", None, ""));
        let err = env_from_exec(TARGET, output("a=b\n", "warning\n", ok()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("wrote to stderr: warning"), "{err}");

        let err = env_from_exec(TARGET, output("\n", "", ok()))
            .unwrap_err()
            .to_string();
        assert!(err.contains("printed no env"), "{err}");
        assert!(err.contains("with-resource"), "{err}");
    }

    #[test]
    fn status_descriptions() {
        assert_eq!(
            describe_status(&status(
                "Failure",
                "InternalError",
                None,
                "container not running"
            )),
            "status Failure, reason InternalError: container not running"
        );
        assert_eq!(describe_status(&Status::default()), "status <none>");
    }

    #[test]
    fn exited_containers_are_found_by_state() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": { "name": "p" },
            "status": {
                "initContainerStatuses": [
                    { "name": "init", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                      "state": { "terminated": { "exitCode": 0 } } }
                ],
                "containerStatuses": [
                    { "name": "with-resource", "image": "i", "imageID": "", "ready": true, "restartCount": 0,
                      "state": { "running": {} },
                      "lastState": { "terminated": { "exitCode": 1 } } },
                    { "name": "done", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                      "state": { "terminated": { "exitCode": 3 } } }
                ]
            }
        }))
        .unwrap();
        assert_eq!(exited(&pod, "init"), Some(Exited::Init(0)));
        assert_eq!(exited(&pod, "with-resource"), None);
        assert_eq!(exited(&pod, "done"), Some(Exited::Regular(3)));
        assert_eq!(exited(&pod, "missing"), None);
    }

    #[test]
    fn init_logs_need_env_output() {
        let env = env_from_init_log(TARGET, 0, "HOME=/\nuser_a=b\n").unwrap();
        assert_eq!(env, ["HOME=/", "user_a=b"]);
        let err = env_from_init_log(TARGET, 0, "").unwrap_err().to_string();
        assert!(err.contains("its log holds no env"), "{err}");
        assert!(err.contains("exited (code 0)"), "{err}");
    }
}
