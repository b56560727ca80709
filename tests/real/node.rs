//! Real kubelet nodes (kubelet + containerd + runc) on the local cluster:
//! start, pods, the kubelet API's authentication, stop, and nothing left on
//! the host afterwards, also when a run on real nodes is interrupted.
//!
//! Needs root and the node components (`make node`); the control plane is
//! found as for the other tests (DRA_E2E_BINARIES_DIR, else the cache).
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::pod_api;
use crate::common::{self, Watched};

use dra_e2e::cluster::local::{LocalCluster, LocalClusterOptions};
use dra_e2e::cluster::real_node::{RealNodes, RealNodesOptions};
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

const DEADLINE: Duration = Duration::from_secs(120);

fn bin() -> PathBuf {
    PathBuf::from(common::bin())
}

/// What a node made on the host, named from its cgroup root
/// (`/dra-e2e-<run>-<i>`, also the network namespace's name).
fn host_traces(stem: &str) -> Vec<String> {
    let mut found = Vec::new();
    if Path::new("/run/netns").join(stem).exists() {
        found.push(format!("network namespace {stem}"));
    }
    for h in ["cpu", "memory", "pids", "cpuset", "systemd", "freezer"] {
        let d = Path::new("/sys/fs/cgroup").join(h).join(stem);
        if d.exists() {
            found.push(format!("cgroup {}", d.display()));
        }
    }
    for dir in [
        "/var/lib/kubelet",
        "/var/lib/cni",
        "/run/containerd",
        "/etc/cni",
        "/var/log/pods",
    ] {
        if Path::new(dir).exists() {
            found.push(format!("host path {dir}"));
        }
    }
    found
}

fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) && !cmd.contains("cargo") {
                found.push(cmd);
            }
        }
    }
    found
}

/// The runner on its own local cluster with one real node, on a fixture
/// directory, in a private HOME and TMPDIR.
fn real_run(home: &Path, fixture: &str) -> Command {
    let mut c = Command::new(bin());
    c.current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .env("TMPDIR", home)
        // HOME is the test's; the node components stay where the build put them.
        .env(
            "DRA_E2E_NODE_BINARIES_DIR",
            dra_e2e::cluster::real_node::binaries::locate(None).dir,
        )
        .args([
            "--cluster",
            "local",
            "--node-kind",
            "real",
            "--nodes",
            "1",
            "--features",
        ])
        .arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures")
                .join(fixture),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

fn assert_no_temp_dirs(home: &Path) {
    let dirs: Vec<_> = std::fs::read_dir(home)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("dra-e2e-"))
        .map(|e| e.path())
        .collect();
    assert!(dirs.is_empty(), "temp dirs left: {dirs:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_real_node_runs_pods_behind_an_authenticated_kubelet_and_leaves_nothing() {
    let cluster = LocalCluster::start(LocalClusterOptions::default())
        .await
        .expect("local control plane");
    let options = RealNodesOptions {
        ..RealNodesOptions::new(1)
    };
    let mut nodes = RealNodes::start(&cluster, &options)
        .await
        .expect("one real node");
    let node = &nodes.nodes()[0];
    let (name, node_ip, stem) = (
        node.name.clone(),
        node.net.node_ip,
        node.cgroup_root.clone(),
    );
    let stem = stem.trim_start_matches('/').to_owned();
    let dir = cluster.dir().to_owned();
    let client = cluster.client();

    // The Node registered itself with the address the kubelet serves on.
    let n = Api::<Node>::all(client.clone()).get(&name).await.unwrap();
    let addresses = n.status.unwrap().addresses.unwrap();
    assert!(
        addresses
            .iter()
            .any(|a| a.type_ == "InternalIP" && a.address == node_ip.to_string()),
        "{addresses:?}"
    );

    // No anonymous kubelet API: the CA-verified TLS handshake works, the
    // request without credentials is refused.
    let mut anonymous = kube::Config::new(format!("https://{node_ip}:10250").parse().unwrap());
    anonymous.root_cert = Some(vec![cluster.pki().ca_der.clone()]);
    let anonymous = kube::Client::try_from(anonymous).unwrap();
    let refused = anonymous
        .request_text(http::Request::get("/pods").body(Vec::new()).unwrap())
        .await
        .expect_err("the kubelet answered an anonymous request");
    assert!(
        refused.to_string().contains("401") || refused.to_string().contains("Unauthorized"),
        "{refused}"
    );

    // A pod runs the imported busybox image; exec and logs go through the
    // API server's client certificate and the kubelet's webhook authorizer.
    let pods = pod_api::namespace(&client, "real-node-test").await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": "busy" },
        "spec": {
            "containers": [{
                "name": "c",
                "image": dra_e2e::cluster::images::BUSYBOX_IMAGE,
                "command": ["sh", "-c", "echo started; trap exit TERM; while true; do sleep 1; done"],
                "env": [{ "name": "MARKER", "value": "from-the-pod-spec" }],
            }],
            "terminationGracePeriodSeconds": 5,
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.unwrap();
    tokio::time::timeout(
        DEADLINE,
        await_condition(pods.clone(), "busy", conditions::is_pod_running()),
    )
    .await
    .expect("pod busy running in time")
    .unwrap();
    assert_eq!(
        pod_api::exec(&pods, "busy", &["sh", "-c", "echo $MARKER"], false)
            .await
            .0
            .trim(),
        "from-the-pod-spec"
    );
    let logs = pods.logs("busy", &Default::default()).await.unwrap();
    assert!(logs.contains("started"), "{logs}");
    pods.delete("busy", &DeleteParams::default()).await.unwrap();
    tokio::time::timeout(
        DEADLINE,
        await_condition(pods.clone(), "busy", conditions::is_deleted("")),
    )
    .await
    .expect("pod busy gone in time")
    .unwrap();

    // The checks below can see what a node leaves: while it runs, they do.
    let running = host_traces(&stem);
    assert!(
        running.iter().any(|t| t.starts_with("network")),
        "{running:?}"
    );
    assert!(
        running.iter().any(|t| t.starts_with("cgroup")),
        "{running:?}"
    );
    let left = tokio::task::spawn_blocking(move || nodes.stop())
        .await
        .unwrap();
    assert_eq!(left, Vec::<String>::new());
    assert_eq!(host_traces(&stem), Vec::<String>::new());
    assert_eq!(
        processes_mentioning(&dir.join("real").to_string_lossy()),
        Vec::<String>::new()
    );
    cluster.stop().await.unwrap();
}

/// The runner on one real node, interrupted while its scenario's pod runs
/// with a prepared claim.
#[test]
fn interrupted_run_on_a_real_node_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut child = real_run(home.path(), "interrupt").spawn().unwrap();
    let stem = wait_until_pod_runs(home.path(), &mut child);
    let (code, t) = interrupt(child);
    let stem = stem.unwrap_or_else(|| panic!("the scenario's pod never ran on the real node\n{t}"));
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("interrupted"), "{t}");
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    assert!(!t.contains("left behind on the host"), "{t}");
    assert_host_clean(&stem, home.path(), &t);
}

/// Interrupts the runner as Ctrl-C would: its exit code and transcript.
fn interrupt(child: std::process::Child) -> (Option<i32>, String) {
    let _ = dra_e2e::sys::kill(child.id(), dra_e2e::sys::Signal::Int);
    let o = child.wait_with_output().unwrap();
    (o.status.code(), common::text(&o))
}

/// Nothing of a run in `home` whose real node had the cgroup root `stem`
/// is left on the host: no cgroup, mount or netns, no process, no temp dir.
fn assert_host_clean(stem: &str, home: &Path, t: &str) {
    assert_eq!(host_traces(stem), Vec::<String>::new(), "{t}");
    assert_eq!(
        processes_mentioning(&home.to_string_lossy()),
        Vec::<String>::new()
    );
    assert_no_temp_dirs(home);
}

/// Waits until pod tester-1 of the run runs on its real node; returns the
/// node's cgroup root stem. None if the run ended first.
fn wait_until_pod_runs(home: &Path, child: &mut std::process::Child) -> Option<String> {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        let cluster_dir = std::fs::read_dir(home)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("dra-e2e-"))
            });
        let kubelet_config = cluster_dir.as_ref().and_then(|d| {
            std::fs::read_dir(d.join("real"))
                .ok()?
                .flatten()
                .map(|e| e.path().join("kubelet.yaml"))
                .find(|p| p.exists())
        });
        if let Some(dir) = cluster_dir
            && let Some(Ok(kubelet)) = kubelet_config.map(std::fs::read_to_string)
            && dir.join("kubeconfig").exists()
        {
            let running = rt.block_on(async {
                let Ok(kc) = kube::config::Kubeconfig::read_from(dir.join("kubeconfig")) else {
                    return false;
                };
                let Ok(config) =
                    kube::Config::from_custom_kubeconfig(kc, &Default::default()).await
                else {
                    return false;
                };
                let Ok(client) = kube::Client::try_from(config) else {
                    return false;
                };
                let Ok(list) = Api::<Pod>::all(client).list(&Default::default()).await else {
                    return false;
                };
                list.items.iter().any(|p| {
                    p.metadata.name.as_deref() == Some("tester-1")
                        && p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
            });
            if running {
                let config: serde_json::Value = serde_json::from_str(&kubelet).unwrap();
                return config["cgroupRoot"]
                    .as_str()
                    .map(|s| s.trim_start_matches('/').to_owned());
            }
        }
        // No event tells a test process that another process's pod started.
        std::thread::sleep(Duration::from_millis(500));
    }
    None
}

/// Ctrl-C while the real nodes start: the half-made node's namespaces,
/// link and cgroups go with the rest.
#[test]
fn interrupt_while_real_nodes_start_leaves_nothing() {
    let home = tempfile::tempdir().unwrap();
    let mut child = real_run(home.path(), "interrupt").spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut stem = None;
    while stem.is_none() && Instant::now() < deadline && child.try_wait().unwrap().is_none() {
        stem = std::fs::read_dir(home.path())
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_dir(e.path().join("real")).ok())
            .flatten()
            .flatten()
            .find_map(|e| std::fs::read_to_string(e.path().join("kubelet.yaml")).ok())
            .and_then(|k| {
                let v: serde_json::Value = serde_json::from_str(&k).ok()?;
                Some(v["cgroupRoot"].as_str()?.trim_start_matches('/').to_owned())
            });
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, t) = interrupt(child);
    let stem = stem.unwrap_or_else(|| panic!("no real node started\n{t}"));
    assert_eq!(code, Some(130), "{t}");
    assert_host_clean(&stem, home.path(), &t);
}

/// The parent of a process, as the host sees it.
fn parent_of(pid: i32) -> Option<i32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

/// Whether `pid` descends from `ancestor` (a real node's processes descend
/// from the runner through its `node-init`).
fn descends_from(mut pid: i32, ancestor: i32) -> bool {
    while let Some(parent) = parent_of(pid) {
        if parent == ancestor {
            return true;
        }
        if parent <= 1 {
            return false;
        }
        pid = parent;
    }
    false
}

/// SIGKILL of the agent that an exec runs in the proxy pod for the plugin's
/// DRA socket, while the scenario waits for its pod: as with local agents,
/// the scenario fails within seconds naming the agent's socket, pod and node
/// (not after the pod wait's 300 s), and teardown still cleans up through the
/// agent the exec loop starts again.
///
/// Exec agents serve the sockets when the proxy pods run upstream's
/// hostpathplugin image (the runner's own image runs one node host per node
/// instead, see node_hosts.rs), so the run names that image; without its
/// archive the nodes run the runner's stand-in under that name.
#[test]
fn a_killed_exec_agent_on_a_real_node_fails_its_scenario_at_once() {
    let home = tempfile::tempdir().unwrap();
    let mut command = real_run(home.path(), "agent-killed");
    command.args([
        "--proxy-image",
        "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
    ]);
    let mut run = Watched::spawn(command);
    let runner = run.child.id() as i32;
    // The scenario reports each step as it finishes: once the pod is created,
    // the next step waits for it (its claim can never be prepared).
    let waiting = run.wait_line(
        "pod \"tester-1\" with an inline claim is created",
        Duration::from_secs(300),
    );
    let deadline = Instant::now() + Duration::from_secs(120);
    let agent = loop {
        let found = std::fs::read_dir("/proc").unwrap().flatten().find_map(|e| {
            let pid: i32 = e.file_name().to_string_lossy().parse().ok()?;
            let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            (cmd.contains("proxy-agent") && cmd.contains("/dra.sock") && descends_from(pid, runner))
                .then_some((pid, cmd))
        });
        if found.is_some() || Instant::now() > deadline || run.child.try_wait().unwrap().is_some() {
            break found;
        }
        // No event tells a test process that another process started.
        std::thread::sleep(Duration::from_millis(100));
    };
    let killed = Instant::now();
    if let Some((pid, _)) = &agent {
        // A pid just read from /proc, a descendant of the runner this test
        // started.
        let _ = dra_e2e::sys::kill(pid.unsigned_abs(), dra_e2e::sys::Signal::Kill);
    }
    let (code, t) = run.finish();
    let after_kill = killed.elapsed();
    assert!(waiting, "the scenario never reached its pod wait\n{t}");
    let (_, cmd) = agent.unwrap_or_else(|| panic!("no exec agent of the run showed up\n{t}"));
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("0 passed, 1 failed"), "{t}");
    assert!(t.contains("\nkubelet: real kubelet\n"), "{t}");
    let (failure, socket) = common::agent_failure(&t, &cmd);
    for part in [
        "the proxy agent for socket ",
        socket,
        " in pod ",
        " on node ",
    ] {
        assert!(
            failure.contains(part),
            "{part:?} missing in {failure:?}\n{t}"
        );
    }
    // The step that failed is the pod wait (line 13 of the fixture).
    assert!(
        t.contains("Defined: tests/fixtures/agent-killed/killed.feature:13:5"),
        "the failure did not end the pod wait\n{t}"
    );
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    // Loose, not a benchmark: the pod wait alone would take 300 s.
    assert!(
        after_kill < Duration::from_secs(150),
        "{after_kill:?} from the kill to the end of the run\n{t}"
    );
    assert_no_temp_dirs(home.path());
}

/// The checks that depend on a node operation can fail: each scenario of
/// tests/fixtures/node-daemons leaves one operation out (a kubelet restart,
/// a stop, a start, a containerd stop and start, a reboot) and fails at the
/// check that needs it with what it saw. The kubelet and the containerd
/// scenarios left stopped are started again by teardown, so their pods go
/// and nothing is left behind.
#[test]
fn checks_that_need_a_node_operation_fail_without_it() {
    let home = tempfile::tempdir().unwrap();
    let mut cmd = real_run(home.path(), "node-daemons");
    cmd.args(["--step-timeout", "20s"]);
    let (code, t) = Watched::spawn(cmd).finish();
    assert_eq!(code, Some(1), "{t}");
    assert!(t.contains("0 passed, 6 failed"), "{t}");
    // (the failing step's line in the fixture, what its message says)
    for (line, says) in [
        (
            23,
            "to be called again since it was counted (1 calls); last seen: 1 calls",
        ),
        (30, "expected pod tester-1 to stay Pending, observed"),
        (39, "waiting for pod tester-1 to be running"),
        (47, "waiting for pod tester-1 to run again after the reboot"),
        (54, "expected pod tester-1 to stay Pending, observed"),
        (63, "waiting for pod tester-1 to be running"),
    ] {
        assert!(
            t.contains(&format!(
                "Defined: tests/fixtures/node-daemons/restart.feature:{line}:5"
            )),
            "no failure at line {line}\n{t}"
        );
        assert!(t.contains(says), "{says:?} missing\n{t}");
    }
    assert!(t.contains("leak check: nothing left behind"), "{t}");
    assert_no_temp_dirs(home.path());
}

/// A node's reboot as `node-init` does it, in a PID and mount namespace of
/// its own with a plan made for the test: every boot's first step records
/// what it finds and leaves a marker in the volatile and the kept tmpfs and
/// a process behind. After SIGUSR1 the second boot finds the volatile one
/// empty (but for what the plan makes in it), the kept one with the first
/// boot's marker, the first boot's process gone and a new boot ID, and the
/// daemon started again.
#[test]
fn a_reboot_empties_run_keeps_var_lib_ends_every_process_and_changes_the_boot_id() {
    use dra_e2e::cluster::real_node::init::{InitPlan, Step};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let (run, lib, out) = (root.join("run"), root.join("lib"), root.join("out"));
    std::fs::create_dir_all(&out).unwrap();
    let script = format!(
        r#"set -e
n=$(( $(ls {out} | grep -c '^boot-' || true) + 1 ))
{{
  echo "run: $(ls {run} | tr '\n' ' ')"
  echo "lib: $(ls {lib} | tr '\n' ' ')"
  echo "id: $(cat /proc/sys/kernel/random/boot_id)"
  if [ -f {out}/sleeper-1 ] && kill -0 "$(cat {out}/sleeper-1)" 2>/dev/null; then echo "sleeper: alive"; else echo "sleeper: gone"; fi
}} > {out}/record.tmp
touch {run}/marker-$n {lib}/marker-$n
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! > {out}/sleeper-$n
mv {out}/record.tmp {out}/boot-$n"#,
        out = out.display(),
        run = run.display(),
        lib = lib.display(),
    );
    let plan = InitPlan {
        overlays: vec![],
        tmpfs: vec![run.clone(), lib.clone()],
        make_dirs: vec![run.join("made")],
        volatile: vec![run.clone()],
        boot_id: Some(root.join("boot_id")),
        shared_mounts: false,
        steps: vec![
            Step::Run {
                name: "record".into(),
                argv: vec!["/bin/sh".into(), "-c".into(), script],
                log: root.join("record.log"),
            },
            Step::Daemon {
                name: "daemon".into(),
                argv: vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    format!("echo up >> {}/daemon; exec sleep 1000", out.display()),
                ],
                log: root.join("daemon.log"),
                ready_socket: None,
                ready_timeout_secs: 0,
            },
        ],
        stop_grace_secs: 2,
        control: None,
        path_prepend: vec![],
    };
    let plan_path = root.join("plan.json");
    std::fs::write(&plan_path, serde_json::to_string(&plan).unwrap()).unwrap();
    let log = std::fs::File::create(root.join("node-init.log")).unwrap();
    let mut unshare = Command::new("unshare")
        .args([
            "--pid",
            "--fork",
            "--kill-child",
            "--mount",
            "--propagation",
            "private",
            "--mount-proc",
            "--",
        ])
        .arg(common::agent())
        .arg("node-init")
        .arg(&plan_path)
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let wait_file = |p: &Path| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !p.exists() {
            assert!(
                Instant::now() < deadline,
                "{} not written within 30 s; node-init said: {}",
                p.display(),
                std::fs::read_to_string(root.join("node-init.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::read_to_string(p).unwrap()
    };
    // The daemon lines of the boots so far, once there are `n` (or what
    // there is at the deadline, for the assertion below to report).
    let daemon_lines = |n: usize| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let d = std::fs::read_to_string(out.join("daemon")).unwrap_or_default();
            if d.lines().count() >= n || Instant::now() > deadline {
                break d;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let first = wait_file(&out.join("boot-1"));
    // The first boot ends with the daemon's start: a reboot asked for
    // before it would end that boot early, and the daemon would rightly
    // start once.
    let started = daemon_lines(1);
    assert_eq!(
        started.lines().count(),
        1,
        "the daemon starts at the first boot"
    );
    let init = std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", unshare.id()))
        .unwrap()
        .split_whitespace()
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .expect("node-init runs as the child of unshare");
    dra_e2e::sys::kill(init, dra_e2e::sys::Signal::Usr1).unwrap();
    let second = wait_file(&out.join("boot-2"));
    let daemon_starts = daemon_lines(2);
    let _ = dra_e2e::sys::kill(init, dra_e2e::sys::Signal::Term);
    let status = unshare.wait().unwrap();

    let field = |rec: &str, key: &str| {
        rec.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}: ")))
            .unwrap_or_else(|| panic!("no {key} in {rec}"))
            .trim()
            .to_owned()
    };
    assert_eq!(field(&first, "run"), "made", "{first}");
    assert_eq!(field(&first, "lib"), "", "{first}");
    assert_eq!(
        field(&second, "run"),
        "made",
        "/run must start empty: {second}"
    );
    assert_eq!(
        field(&second, "lib"),
        "marker-1",
        "/var/lib must be kept: {second}"
    );
    assert_eq!(field(&second, "sleeper"), "gone", "{second}");
    let host_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let (id1, id2) = (field(&first, "id"), field(&second, "id"));
    assert_ne!(id1, id2, "the boot ID must change");
    assert_ne!(id1, host_id.trim(), "the node has a boot ID of its own");
    assert_eq!(
        daemon_starts.lines().count(),
        2,
        "the daemon starts at each boot"
    );
    assert!(status.success(), "node-init ended with {status}");
}
