//! The driver on simulated nodes: its command started once per node on the
//! host, its placeholders filled in with that node's directories, and its
//! processes stopped, since simulated nodes run no pods to start it in.
use std::collections::BTreeMap;
use std::time::Duration;

use dra_e2e_cluster::Cluster;

use super::{UnderTest, UnderTestError, interposed};

impl UnderTest {
    /// Starts `command` once per simulated node, its placeholders filled in
    /// with that node's directories (and told `devices` through the
    /// profile's deviceCount, when given).
    pub(super) fn start_on_simulated_nodes(
        &self,
        cluster: &Cluster,
        command: &[String],
        devices: Option<u32>,
    ) -> Result<(), UnderTestError> {
        let driver = self.profile.driver_name.clone();
        let dirs =
            cluster
                .simulated_node_dirs()
                .ok_or_else(|| UnderTestError::NeedsSimulatedNodes {
                    profile: self.profile_name(),
                    driver: driver.clone(),
                })?;
        let logs = dirs.dir.join("driver-under-test");
        for (node, root, cdi) in &dirs.nodes {
            let start = |message: String| UnderTestError::Start {
                driver: driver.clone(),
                node: node.clone(),
                program: command.first().cloned().unwrap_or_default(),
                message,
            };
            // Behind the interposer, the driver registers where only the
            // interposer looks.
            let registration = if self.interpose.is_some() {
                interposed::private_registry(root, &driver)
            } else {
                root.join("plugins_registry")
            };
            let plugin = root.join("plugins").join(&driver);
            for d in [&registration, &plugin, cdi, &logs] {
                std::fs::create_dir_all(d)
                    .map_err(|e| start(format!("creating {}: {e}", d.display())))?;
            }
            let values: BTreeMap<&str, String> = [
                ("nodeName", node.clone()),
                ("kubeletDir", root.display().to_string()),
                ("registrationDir", registration.display().to_string()),
                ("pluginDir", plugin.display().to_string()),
                ("cdiDir", cdi.display().to_string()),
                ("kubeconfig", dirs.kubeconfig.display().to_string()),
                ("driverName", driver.clone()),
            ]
            .into_iter()
            .collect();
            let mut argv: Vec<String> = command.iter().map(|a| fill(a, &values)).collect();
            // A program given by path is the profile's, relative to its file.
            if let (Some(program), Some(file)) = (argv.first_mut(), &self.profile.file)
                && program.contains('/')
                && std::path::Path::new(program.as_str()).is_relative()
            {
                let dir = file.parent().unwrap_or(std::path::Path::new("."));
                let resolved = dir.join(program.as_str());
                *program = std::path::absolute(&resolved)
                    .unwrap_or(resolved)
                    .display()
                    .to_string();
            }
            // The kubelet's registration directory, where the profile says
            // how to pass it.
            let mut env: Vec<(String, String)> = Vec::new();
            if let Some(setting) = &self.profile.registration_dir {
                setting.apply(&mut argv, &mut env, &registration.display().to_string());
            }
            if let (Some(setting), Some(n)) = (&self.profile.device_count, devices) {
                setting.apply(&mut argv, &mut env, &n.to_string());
            }
            // `env` sets the variables and runs the program, so the process
            // is the driver's own (its signals reach the driver).
            let (program, args): (std::path::PathBuf, Vec<std::ffi::OsString>) = if env.is_empty() {
                let mut it = argv.into_iter();
                let program = it
                    .next()
                    .ok_or_else(|| start("the command is empty".to_owned()))?;
                (program.into(), it.map(Into::into).collect())
            } else {
                (
                    "env".into(),
                    env.into_iter()
                        .map(|(k, v)| format!("{k}={v}"))
                        .chain(argv)
                        .map(Into::into)
                        .collect(),
                )
            };
            let log = logs.join(format!("{node}.log"));
            let p = dra_e2e_cluster::host::process::ManagedProcess::spawn(
                &format!("driver {driver} on {node}"),
                &program,
                args,
                &log,
            )
            .map_err(|e| start(e.to_string()))?;
            self.processes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(p);
        }
        Ok(())
    }

    /// Stops the driver's processes on simulated nodes (SIGTERM, then
    /// SIGKILL after a grace period); returns those that needed SIGKILL.
    pub(super) fn stop_processes(&self) -> Vec<String> {
        let processes: Vec<_> =
            std::mem::take(&mut *self.processes.lock().unwrap_or_else(|e| e.into_inner()));
        let refs: Vec<&dra_e2e_cluster::host::process::ManagedProcess> = processes.iter().collect();
        dra_e2e_cluster::host::process::stop_all(&refs, Duration::from_secs(10))
    }
}

/// `arg` with every `${name}` of `values` replaced.
fn fill(arg: &str, values: &BTreeMap<&str, String>) -> String {
    values.iter().fold(arg.to_owned(), |a, (k, v)| {
        a.replace(&format!("${{{k}}}"), v)
    })
}
