//! The runner's own image archives under a real containerd: written with
//! `dra_e2e::cluster::images`, configured with `dra_e2e::cluster::real_node::containerd`,
//! imported with `ctr`, and run with `ctr run`.
//!
//! Needs root and the node binaries (`make node` / `hack/build-node.sh`);
//! without them it fails saying so. It leaves nothing behind: containers,
//! shims and containerd are stopped, mounts and cgroups below the test's own
//! paths removed, the temporary directory deleted, and that is checked.
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use dra_e2e::cluster::images::{self, builtin};
use dra_e2e::cluster::real_node::binaries::NodeBinaries;
use dra_e2e::cluster::real_node::containerd::{self, ContainerdConfig, K8S_NAMESPACE};

const PROXY_IMAGE: &str = "dra-e2e.local/proxy-agent:real-images-test";
/// Generous: the machine is shared with big builds.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the pause container may take to exit after SIGTERM. Its script
/// exits as soon as the signal arrives; the bound only catches a signal
/// that is ignored (a PID 1 without a handler never dies of SIGTERM).
/// containerd's default state dir, which nothing here should touch.
const HOST_RUN_DIR: &str = "/run/containerd";
const PAUSE_STOP_DEADLINE: Duration = Duration::from_secs(10);

/// A containerd started for this test, and everything it may leave behind.
struct TestContainerd {
    dir: Option<tempfile::TempDir>,
    ctr: PathBuf,
    address: PathBuf,
    fifo_dir: PathBuf,
    runc_root: PathBuf,
    /// Whether the host-wide `/run/containerd` existed before the test, so
    /// that the test can tell it did not create it.
    host_run_existed: bool,
    child: Option<std::process::Child>,
    /// Parent cgroup (in every v1 hierarchy) of the test's containers.
    cgroup_parent: String,
    containers: Vec<String>,
}

impl TestContainerd {
    fn dir(&self) -> &Path {
        self.dir.as_ref().expect("not torn down").path()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir().join("containerd.log")).unwrap_or_default()
    }

    /// `ctr --address … --namespace k8s.io <args>`, with a deadline.
    async fn ctr(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(&self.ctr);
        cmd.arg("--address")
            .arg(&self.address)
            .arg("--namespace")
            .arg(K8S_NAMESPACE)
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        match tokio::time::timeout(COMMAND_TIMEOUT, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => panic!("running ctr {args:?}: {e}"),
            Err(_) => panic!("ctr {args:?} did not finish within {COMMAND_TIMEOUT:?}"),
        }
    }

    async fn ctr_ok(&self, args: &[&str]) -> String {
        let out = self.ctr(args).await;
        assert!(
            out.status.success(),
            "ctr {args:?} failed ({}): {}{}\ncontainerd log:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `ctr run` arguments for container `id`: FIFOs and cgroup below the
    /// test's own paths.
    /// Runs `command` in a container `id` of `image` (removed after), and
    /// returns what it printed; it must exit 0.
    async fn run_in(&mut self, id: &str, image: &str, command: &[&str]) -> String {
        let mut args = self.run_args(id);
        args.extend(["--rm", image, id].map(String::from));
        args.extend(command.iter().map(|a| a.to_string()));
        self.ctr_ok(&args.iter().map(String::as_str).collect::<Vec<_>>())
            .await
    }

    fn run_args(&mut self, id: &str) -> Vec<String> {
        self.containers.push(id.to_owned());
        vec![
            "run".into(),
            "--fifo-dir".into(),
            self.fifo_dir.display().to_string(),
            "--cgroup".into(),
            format!("{}/{id}", self.cgroup_parent),
            // Else the shim keeps runc's state in /run/containerd/runc.
            "--runc-root".into(),
            self.runc_root.display().to_string(),
        ]
    }

    /// Stops everything and returns what could not be cleaned up.
    async fn teardown(&mut self) -> Vec<String> {
        let mut left = Vec::new();
        if self.dir.is_none() {
            return left;
        }
        let dir = self.dir().to_owned();
        if self.child.is_some() {
            for id in std::mem::take(&mut self.containers) {
                // Each may already be gone; only the end state matters.
                let _ = self
                    .ctr(&["task", "kill", "--signal", "SIGKILL", &id])
                    .await;
                let _ = self.ctr(&["task", "delete", "--force", &id]).await;
                let _ = self.ctr(&["containers", "delete", &id]).await;
            }
        }
        if let Some(mut child) = self.child.take() {
            let _ = dra_e2e::sys::kill(child.id(), dra_e2e::sys::Signal::Term);
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if std::time::Instant::now() < deadline => {
                        tokio::time::sleep(Duration::from_millis(50)).await
                    }
                    _ => {
                        left.push("containerd ignored SIGTERM for 20s".into());
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
        // Shims name the socket in their arguments; container processes
        // live in the test's cgroup.
        for pid in processes_of(&dir, &self.cgroup_parent) {
            left.push(format!("process {pid} was still running"));
            let _ = dra_e2e::sys::kill(pid, dra_e2e::sys::Signal::Kill);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
        for m in mounts_below(&dir).into_iter().rev() {
            left.push(format!("{} was still mounted", m.display()));
            let _ = dra_e2e::sys::unmount_detached(&m);
        }
        remove_cgroups(&self.cgroup_parent);
        if let Some(tmp) = self.dir.take()
            && let Err(e) = tmp.close()
        {
            left.push(format!("removing {}: {e}", dir.display()));
        }
        if dir.exists() {
            left.push(format!("{} still exists", dir.display()));
        }
        for pid in processes_of(&dir, &self.cgroup_parent) {
            left.push(format!("process {pid} survived SIGKILL"));
        }
        if !self.host_run_existed && Path::new(HOST_RUN_DIR).exists() {
            left.push(format!("{HOST_RUN_DIR} was created"));
        }
        left
    }
}

impl Drop for TestContainerd {
    fn drop(&mut self) {
        // A panicking test still cleans up, on a thread and runtime of its
        // own: this may run inside the test's runtime, which cannot block.
        if self.dir.is_none() {
            return;
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime for cleanup");
                for l in rt.block_on(self.teardown()) {
                    eprintln!("real_images cleanup: {l}");
                }
            });
        });
    }
}

/// Processes whose command line names `dir` or that sit in a cgroup below
/// `/<cgroup_parent>`.
fn processes_of(dir: &Path, cgroup_parent: &str) -> Vec<u32> {
    let needle = dir.to_string_lossy().into_owned();
    let cg = format!(":{cgroup_parent}/");
    let me = std::process::id();
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        let cgroups = std::fs::read_to_string(entry.path().join("cgroup")).unwrap_or_default();
        if cmdline.contains(&needle) || cgroups.lines().any(|l| l.contains(&cg)) {
            pids.push(pid);
        }
    }
    pids
}

/// Mount points at or below `dir`, in mount order.
fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(p.replace("\\040", " ")))
        .filter(|p| p.starts_with(dir))
        .collect()
}

/// Removes `/<parent>` and what is below it in every v1 hierarchy.
fn remove_cgroups(parent: &str) {
    fn rmdir_tree(p: &Path) {
        if let Ok(entries) = std::fs::read_dir(p) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    rmdir_tree(&e.path());
                }
            }
        }
        let _ = std::fs::remove_dir(p);
    }
    for h in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        rmdir_tree(&h.path().join(parent.trim_start_matches('/')));
    }
}

fn cgroups_left(parent: &str) -> Vec<PathBuf> {
    std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
        .map(|h| h.path().join(parent.trim_start_matches('/')))
        .filter(|p| p.exists())
        .collect()
}

fn node_binaries() -> NodeBinaries {
    match NodeBinaries::find(None) {
        Ok(b) => b,
        Err(e) => panic!("{e}\n(the Makefile's test target builds them first)"),
    }
}

async fn start_containerd(bins: &NodeBinaries) -> TestContainerd {
    assert!(
        dra_e2e::sys::is_root(),
        "real_images runs containerd and must run as root"
    );
    let tmp = tempfile::Builder::new()
        .prefix("dra-e2e-real-images-")
        .tempdir()
        .unwrap();
    let dir = tmp.path().to_owned();
    let config = ContainerdConfig {
        root: dir.join("root"),
        state: dir.join("state"),
        address: dir.join("state/containerd.sock"),
        sandbox_image: images::PAUSE_IMAGE.into(),
        cni_bin_dir: bins.cni_bin_dir.clone(),
        cni_conf_dir: dir.join("cni"),
        cdi_spec_dirs: vec![dir.join("cdi")],
    };
    for d in ["cni", "cdi", "fifo", "state", "root/tmp"] {
        std::fs::create_dir_all(dir.join(d)).unwrap();
    }
    let config_path = dir.join("containerd.toml");
    std::fs::write(&config_path, config.render()).unwrap();
    let mut tc = TestContainerd {
        dir: Some(tmp),
        ctr: bins.ctr.clone(),
        address: config.address.clone(),
        fifo_dir: dir.join("fifo"),
        runc_root: dir.join("state/runc"),
        host_run_existed: Path::new(HOST_RUN_DIR).exists(),
        child: None,
        cgroup_parent: format!("/dra-e2e-real-images-{}", std::process::id()),
        containers: Vec::new(),
    };

    // containerd reads every value where the file puts it.
    let dump = std::process::Command::new(&bins.containerd)
        .arg("--config")
        .arg(&config_path)
        .args(["config", "dump"])
        .output()
        .unwrap();
    assert!(
        dump.status.success(),
        "containerd config dump: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let dumped: toml::Table = String::from_utf8_lossy(&dump.stdout).parse().unwrap();
    let plugin = |name: &str| dumped["plugins"][name].as_table().unwrap().clone();
    let rt = plugin("io.containerd.cri.v1.runtime");
    assert_eq!(rt["restrict_oom_score_adj"].as_bool(), Some(true));
    assert_eq!(
        rt["tolerate_missing_hugetlb_controller"].as_bool(),
        Some(true)
    );
    assert_eq!(rt["disable_hugetlb_controller"].as_bool(), Some(true));
    assert_eq!(rt["netns_mounts_under_state_dir"].as_bool(), Some(true));
    assert_eq!(
        rt["cdi_spec_dirs"].as_array().unwrap(),
        &vec![toml::Value::from(dir.join("cdi").display().to_string())]
    );
    assert_eq!(
        rt["cni"]["conf_dir"].as_str(),
        Some(dir.join("cni").to_str().unwrap())
    );
    let runc = &rt["containerd"]["runtimes"]["runc"]["options"];
    assert_eq!(runc["SystemdCgroup"].as_bool(), Some(false));
    assert_eq!(
        runc["Root"].as_str(),
        Some(dir.join("state/runc").to_str().unwrap())
    );
    assert_eq!(
        plugin("io.containerd.cri.v1.images")["pinned_images"]["sandbox"].as_str(),
        Some(images::PAUSE_IMAGE)
    );
    assert_eq!(
        plugin("io.containerd.server.v1.grpc")["address"].as_str(),
        config.address.to_str()
    );
    assert_eq!(
        plugin("io.containerd.shim.v1.manager")["socket_dir"].as_str(),
        Some(dir.join("state/s").to_str().unwrap())
    );
    assert_eq!(
        plugin("io.containerd.nri.v1.nri")["disable"].as_bool(),
        Some(true)
    );
    // containerd warns about keys it does not know and about old schemas.
    // (`imports` is not checked: the dump shows the default pattern, but
    // containerd follows only the imports the file itself lists.)
    let dump_log = String::from_utf8_lossy(&dump.stderr);
    assert!(
        !dump_log.contains("unknown key") && !dump_log.contains("migrated"),
        "{dump_log}"
    );

    let log = std::fs::File::create(dir.join("containerd.log")).unwrap();
    // containerd finds runc and the shim on PATH.
    let path = std::env::join_paths(
        [bins.dir.clone(), bins.runc.parent().unwrap().to_owned()]
            .into_iter()
            .chain(std::env::split_paths(
                &std::env::var_os("PATH").unwrap_or_default(),
            )),
    )
    .unwrap();
    let child = std::process::Command::new(&bins.containerd)
        .arg("--config")
        .arg(&config_path)
        .env("PATH", path)
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    tc.child = Some(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if tc.address.exists() && tc.ctr(&["version"]).await.status.success() {
            break;
        }
        if let Some(status) = tc.child.as_mut().unwrap().try_wait().unwrap() {
            panic!(
                "containerd exited ({status}) during start-up:\n{}",
                tc.log()
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "containerd did not serve {} within 60s:\n{}",
            tc.address.display(),
            tc.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tc
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_images_import_and_run_under_real_containerd() {
    let bins = node_binaries();
    let mut tc = start_containerd(&bins).await;

    // Write and import the three archives.
    let image_dir = tc.dir().join("images");
    std::fs::create_dir_all(&image_dir).unwrap();
    let specs = [
        ("pause.tar", builtin::pause(&bins.busybox)),
        ("busybox.tar", builtin::busybox(&bins.busybox).unwrap()),
        (
            "proxy.tar",
            builtin::proxy(PROXY_IMAGE, &crate::common::agent(), &bins.busybox).unwrap(),
        ),
    ];
    for (file, spec) in &specs {
        let info = images::write_archive(spec, &image_dir.join(file)).unwrap();
        let out = containerd::import_archive(&bins.ctr, &tc.address, &info.path)
            .await
            .unwrap_or_else(|e| panic!("{e}\ncontainerd log:\n{}", tc.log()));
        eprintln!("imported {}: {}", info.reference, out.trim());
    }
    let listed = tc.ctr_ok(&["images", "list", "--quiet"]).await;
    // Each image also under the names upstream's e2e.test uses: an index
    // naming one manifest twice makes two images.
    for name in [
        images::PAUSE_IMAGE,
        images::BUSYBOX_IMAGE,
        PROXY_IMAGE,
        builtin::UPSTREAM_E2E_BUSYBOX_IMAGE,
        builtin::HOSTPATHPLUGIN_IMAGE,
    ] {
        assert!(
            listed.lines().any(|l| l.trim() == name),
            "{name} not among the imported images:\n{listed}"
        );
    }

    // busybox: a shell prints a marker.
    let out = tc
        .run_in(
            "busybox-marker",
            images::BUSYBOX_IMAGE,
            &["sh", "-c", "echo marker-$((6 * 7)) && ls /bin/base64"],
        )
        .await;
    assert!(out.contains("marker-42"), "busybox printed {out:?}");
    assert!(out.contains("/bin/base64"), "busybox printed {out:?}");

    // proxy: dra-e2e-agent and its shared libraries work inside.
    let out = tc
        .run_in(
            "proxy-help",
            PROXY_IMAGE,
            &["dra-e2e-agent", "proxy-agent", "--help"],
        )
        .await;
    assert!(
        out.contains("--proxy-endpoint"),
        "dra-e2e-agent proxy-agent --help printed {out:?}"
    );
    // hostpathplugin's name and program run the agent, taking upstream's
    // flags (--v=5 included) as they are.
    let out = tc
        .run_in(
            "hostpathplugin-help",
            builtin::HOSTPATHPLUGIN_IMAGE,
            &[builtin::HOSTPATHPLUGIN_PATH, "--v=5", "--help"],
        )
        .await;
    assert!(
        out.contains("--proxy-endpoint"),
        "/hostpathplugin --v=5 --help printed {out:?}"
    );
    let out = tc
        .run_in(
            "proxy-sh",
            PROXY_IMAGE,
            &[
                "/bin/sh",
                "-c",
                "echo aGkK | base64 -d; command -v dra-e2e-agent",
            ],
        )
        .await;
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        ["hi", builtin::PROXY_PROGRAM_PATH]
    );

    // pause: runs until SIGTERM, then exits 0 promptly. A foreground
    // `ctr run` exits with the container's status.
    let mut args = tc.run_args("pause");
    args.extend(["--rm", images::PAUSE_IMAGE, "pause"].map(String::from));
    let mut run = tokio::process::Command::new(&tc.ctr);
    run.arg("--address")
        .arg(&tc.address)
        .args(["--namespace", K8S_NAMESPACE])
        .args(&args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let mut pause = run.spawn().unwrap();
    // The trap is set once the script's sleep runs (two processes).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let ps = tc.ctr(&["tasks", "ps", "pause"]).await;
        let ps = String::from_utf8_lossy(&ps.stdout).into_owned();
        let pids = ps
            .lines()
            .filter(|l| {
                l.split_whitespace()
                    .next()
                    .is_some_and(|w| w.parse::<u32>().is_ok())
            })
            .count();
        if pids >= 2 {
            break;
        }
        if let Some(status) = pause.try_wait().unwrap() {
            panic!(
                "pause exited by itself ({status})\ncontainerd log:\n{}",
                tc.log()
            );
        }
        assert!(
            std::time::Instant::now() < deadline,
            "pause did not start its sleep: {ps}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tc.ctr_ok(&["tasks", "kill", "--signal", "SIGTERM", "pause"])
        .await;
    let status = tokio::time::timeout(PAUSE_STOP_DEADLINE, pause.wait())
        .await
        .unwrap_or_else(|_| panic!("pause still ran {PAUSE_STOP_DEADLINE:?} after SIGTERM"))
        .unwrap();
    assert!(status.success(), "pause after SIGTERM: {status}");

    let dir = tc.dir().to_owned();
    let cgroup_parent = tc.cgroup_parent.clone();
    let left = tc.teardown().await;
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(!dir.exists());
    assert!(mounts_below(&dir).is_empty());
    assert!(processes_of(&dir, &cgroup_parent).is_empty());
    assert_eq!(cgroups_left(&cgroup_parent), Vec::<PathBuf>::new());
}
