//! `--proxy-image` takes effect on the local cluster's real nodes (issue 47):
//! given upstream's hostpathplugin name, the node host pods run the agent
//! with hostpathplugin's command line (`/hostpathplugin --v=5
//! --endpoint=… --proxy-endpoint=tcp://…`), and the kubelet-facing scenarios
//! pass through it; without it they run `dra-e2e-agent proxy-agent` with its
//! own flags. Needs root and the node binaries (`make node`).
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common;

/// The processes below `root` (by parent pid), with their command lines.
fn descendants(root: u32) -> Vec<(u32, String)> {
    let mut all = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        // The parent is the second field after the command in parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if let Some(ppid) = ppid {
            all.push((pid, ppid, cmdline));
        }
    }
    let mut found = vec![root];
    let mut out = Vec::new();
    let mut grew = true;
    while grew {
        grew = false;
        for (pid, ppid, cmd) in &all {
            if found.contains(ppid) && !found.contains(pid) {
                found.push(*pid);
                out.push((*pid, cmd.clone()));
                grew = true;
            }
        }
    }
    out
}

/// Runs the kubelet-facing scenarios on two real nodes with `extra`,
/// watching the runner's descendants for the node host pods' agents;
/// returns the agents' command lines seen and the run's output.
fn run_watching_agents(extra: &[&str]) -> (Vec<String>, String, Option<i32>) {
    let home = tempfile::tempdir().unwrap();
    let mut c = common::isolated(home.path());
    common::on_real_nodes(&mut c);
    c.env("DRA_E2E_AGENT", common::agent())
        .args(["--cluster", "local", "--node-kind", "real", "--nodes", "2"])
        .args(["--features", "features/kubelet_calls.feature"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().unwrap();
    let pid = child.id();
    let started = Instant::now();
    let mut agents = Vec::new();
    // Sample until the run ends (its output is read once it has).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = loop {
        for (_, cmd) in descendants(pid) {
            // The agents, by the flag both kinds have (kube-apiserver has
            // an --endpoint-… flag of its own).
            if cmd.contains("--proxy-endpoint") && !agents.contains(&cmd) {
                agents.push(cmd);
            }
        }
        if let Ok(o) = rx.recv_timeout(Duration::from_millis(300)) {
            break o.unwrap();
        }
        assert!(
            started.elapsed() < Duration::from_secs(900),
            "the run took over 15 minutes"
        );
    };
    (agents, common::text(&output), output.status.code())
}

#[test]
fn upstreams_proxy_image_given_on_real_local_nodes_is_the_agent() {
    let (agents, text, code) = run_watching_agents(&[
        "--proxy-image",
        "registry.k8s.io/sig-storage/hostpathplugin:v1.17.1",
    ]);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("0 failed"), "{text}");
    // Said once at the start: no archive of upstream's own image was given.
    assert_eq!(
        text.matches("no --image-archive holds upstream's image")
            .count(),
        1,
        "{text}"
    );
    assert!(!agents.is_empty(), "no agent seen\n{text}");
    // The image's `/hostpathplugin` is started as upstream's suite starts it
    // (a shell that makes the socket's directory execs it); in the
    // runner's image it execs the agent with the same flags, so the shell
    // is seen only now and then, the flags always.
    // hostpathplugin's command line: `--v=5 --endpoint=… --proxy-endpoint=tcp://…`.
    for a in &agents {
        assert!(
            a.contains("--v=5")
                && a.contains("--endpoint=/var/lib/kubelet/")
                && a.contains("--proxy-endpoint=tcp://"),
            "not hostpathplugin's command line: {a}\n{agents:?}"
        );
    }
}

/// Broken variant: without the option the nodes run the runner's own agent
/// with its own flags, which the check above would refuse.
#[test]
fn without_proxy_image_real_local_nodes_run_the_runners_agent() {
    let (agents, text, code) =
        run_watching_agents(&["--name", "must not run a pod if a claim is not ready"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(!agents.is_empty(), "no agent seen\n{text}");
    assert!(
        agents.iter().all(|a| a.contains("proxy-agent --endpoint /var/lib/kubelet/") && !a.contains("--v=5")),
        "{agents:?}"
    );
}
