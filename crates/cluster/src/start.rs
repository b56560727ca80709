//! Starting the cluster: the local control plane with simulated or real
//! nodes, or a connection to a kubeconfig cluster; the one place that
//! decides which of the cluster's kinds a run gets.
use std::sync::Mutex;
use std::time::Duration;

use crate::{Cluster, ConnectOptions, Kind, LocalEnv, NodeKind, RealLocal, local, remote};

impl Cluster {
    /// Picks and reaches the cluster; for the local one, starts it.
    pub async fn connect(opts: &ConnectOptions) -> anyhow::Result<Cluster> {
        if opts.is_local() {
            Self::start_local(opts).await
        } else {
            let env = remote::RemoteEnv::connect(opts).await?;
            Ok(Cluster {
                client: env.client.clone(),
                config: env.config.clone(),
                kind: Kind::Remote(Box::new(env)),
            })
        }
    }

    async fn start_local(opts: &ConnectOptions) -> anyhow::Result<Cluster> {
        let gates: local::FeatureGates = if opts.feature_gates.is_empty() {
            local::FeatureGates::new()
        } else {
            opts.feature_gates
                .join(",")
                .parse()
                .map_err(|e| anyhow::anyhow!("--feature-gates: {e}"))?
        };
        let options = local::LocalClusterOptions {
            binaries_dir: opts.binaries_dir.clone(),
            feature_gates: gates,
            keep_files: opts.keep_files,
            ..Default::default()
        };
        // Missing binaries are reported (with how to build them) before the
        // cluster starts; any other failure says what failed, once.
        let cluster = local::LocalCluster::start(options)
            .await
            .map_err(|e| anyhow::Error::new(e).context("starting the local cluster"))?;
        let client = cluster.client();
        let config = cluster.kube_config();
        if opts.node_kind == NodeKind::Real {
            return Self::start_real_nodes(opts, cluster, client, config).await;
        }
        let nodes = match cluster
            .start_nodes(opts.nodes, |c| {
                c.wipe_delay = opts.wipe_delay;
                c.delete_node_on_stop = true;
            })
            .await
        {
            Ok(nodes) => nodes.into_nodes(),
            Err(e) => {
                let _ = cluster.stop().await;
                return Err(anyhow::Error::new(e).context("starting the simulated nodes"));
            }
        };
        Ok(Cluster {
            client,
            config,
            kind: Kind::Local(Box::new(LocalEnv {
                cluster: Mutex::new(Some(cluster)),
                node_names: nodes.iter().map(|n| n.name().to_owned()).collect(),
                nodes: std::sync::RwLock::new(nodes),
                real: None,
                wipe_delay: opts.wipe_delay,
            })),
        })
    }

    async fn start_real_nodes(
        opts: &ConnectOptions,
        cluster: local::LocalCluster,
        client: kube::Client,
        config: kube::Config,
    ) -> anyhow::Result<Cluster> {
        let options = crate::real_node::RealNodesOptions {
            extra_archives: opts.image_archives.clone(),
            binaries_dir: opts.node_binaries_dir.clone(),
            ..crate::real_node::RealNodesOptions::new(opts.nodes)
        };
        let nodes = match crate::real_node::RealNodes::start(&cluster, &options).await {
            Ok(nodes) => nodes,
            Err(e) => {
                let _ = cluster.stop().await;
                return Err(e.context("starting the real nodes"));
            }
        };
        let node_names = nodes.names();
        let kubelet_logs = nodes
            .nodes()
            .iter()
            .map(|n| (n.name.clone(), n.kubelet_log()))
            .collect();
        let proxy_image =
            if opts.proxy_image == crate::proxy::pods::DEFAULT_IMAGE && !opts.proxy_image_given {
                // Not asked for: upstream's image cannot be built or pulled
                // here (the archives the nodes import are a driver's); the
                // runner's own image carries the same agent protocol, and
                // the interposer's `proxy-agent --connect`. Asked for, the
                // name is kept: the nodes' own image answers to it, or an
                // imported archive of upstream's.
                crate::real_node::proxy_image()
            } else {
                opts.proxy_image.clone()
            };
        let layout = crate::proxy::NodeLayout {
            kubelet_root: crate::real_node::kubelet::ROOT_DIR.to_owned(),
            image: remote::proxy_image(&proxy_image),
            cdi_host_dir: crate::real_node::CDI_DIR.to_owned(),
            // The nodes' addresses are on links of this machine's.
            route: crate::proxy::HostRoute::PodAddress,
            fault: opts.node_host_fault,
        };
        remote::check_fault(&layout)?;
        let remote = remote::RemoteEnv::new(
            client.clone(),
            config.clone(),
            cluster.server_url().to_owned(),
            layout,
        );
        Ok(Cluster {
            client,
            config,
            kind: Kind::Local(Box::new(LocalEnv {
                cluster: Mutex::new(Some(cluster)),
                nodes: std::sync::RwLock::new(Vec::new()),
                real: Some(RealLocal {
                    nodes: Mutex::new(Some(nodes)),
                    kubelet_logs,
                    remote,
                }),
                node_names,
                wipe_delay: Duration::from_secs(30),
            })),
        })
    }
}
