//! `dra-e2e job`: the pack run inside the cluster under test, as a Job,
//! its results handed back through the API server alone. The cluster is
//! `dra-e2e cluster up` with two real nodes that imported the runner's own
//! image (`dra-e2e image runner`) beside upstream's test driver's, which is
//! installed as a cluster admin would; KEP-5970's seven behaviours run in
//! the Job's pod. Two broken variants show the checks failing: an image the
//! nodes do not have, and a profile whose container check the driver cannot
//! meet; each leaves nothing behind either. A job killed outright leaves its
//! objects, which `--remove-leftovers` removes.
use std::path::Path;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, ListParams};

use super::installed::install_test_driver;
use super::kubeconfig::KubeconfigCluster;
use crate::common;

const DRIVER: &str = "test-driver.cdi.k8s.io";
/// KEP-5970's seven behaviours (hack/installed-check.sh's `seven`).
const SEVEN: &str = "^(the kubelet registers the driver's plugin|the driver publishes ResourceSlices \
     with devices|a claim for the driver's class is allocated|the driver prepares the claim of a \
     pod|the pod runs with access to its device|the driver unprepares when the pod is deleted|a \
     device is used again after its pod is gone)$";
const LABEL: &str = "dra-e2e.k8s.io/job";
/// The label of a run's scenario namespaces.
const RUN_LABEL: &str = "dra-e2e.k8s.io/run";

/// `dra-e2e job` against the cluster with `args`.
async fn job(cluster: &KubeconfigCluster, args: Vec<std::ffi::OsString>) -> std::process::Output {
    let home = cluster.home.path().to_owned();
    let kubeconfig = cluster.kubeconfig.clone();
    tokio::task::spawn_blocking(move || {
        common::isolated(&home)
            .args(["job", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(args)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// `dra-e2e job` with the whole pack against the installed test driver,
/// followed line by line (for the cases that stop it on the way).
fn whole_pack_job(cluster: &KubeconfigCluster, out: &Path) -> common::Watched {
    let mut c = common::isolated(cluster.home.path());
    c.args(["job", "--kubeconfig"])
        .arg(&cluster.kubeconfig)
        .args(args(
            &["--driver-name", DRIVER, "--device-class", DRIVER],
            out,
        ));
    common::Watched::spawn(c)
}

/// What a Job run made and left in the cluster: namespaces and
/// ClusterRoleBindings with its label.
async fn left_in_cluster(client: &kube::Client) -> Vec<String> {
    let lp = ListParams::default().labels(LABEL);
    let mut left: Vec<String> = Api::<Namespace>::all(client.clone())
        .list(&lp)
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| format!("namespace {}", n.metadata.name.unwrap_or_default()))
        .collect();
    left.extend(
        Api::<ClusterRoleBinding>::all(client.clone())
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|b| format!("ClusterRoleBinding {}", b.metadata.name.unwrap_or_default())),
    );
    left
}

fn testcases(junit: &Path) -> (usize, usize) {
    let xml = std::fs::read_to_string(junit).unwrap_or_else(|e| panic!("{}: {e}", junit.display()));
    (
        xml.matches("<testcase").count(),
        xml.matches("<failure").count(),
    )
}

fn args(list: &[&str], out: &Path) -> Vec<std::ffi::OsString> {
    let mut v: Vec<std::ffi::OsString> = list.iter().map(Into::into).collect();
    v.extend(["--out".into(), out.as_os_str().to_owned()]);
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pack_runs_inside_the_cluster_as_a_job_and_hands_its_results_back() {
    let images = tempfile::tempdir().unwrap();
    let runner = images.path().join("runner.oci.tar");
    let wrote = common::isolated(images.path())
        .args(["image", "runner", "--out"])
        .arg(&runner)
        .output()
        .unwrap();
    assert!(wrote.status.success(), "{}", common::text(&wrote));

    let cluster = KubeconfigCluster::up_with(&[runner]);
    let client = cluster.client().await;
    install_test_driver(&client).await;
    let home = cluster.home.path().to_owned();

    // KEP-5970's two flags, the seven behaviours.
    let green = home.join("green");
    let run = job(
        &cluster,
        args(
            &[
                "--driver-name",
                DRIVER,
                "--device-class",
                DRIVER,
                "--name",
                SEVEN,
            ],
            &green,
        ),
    )
    .await;
    let green_text = common::text(&run);
    let green_left = left_in_cluster(&client).await;

    // (a) An image the nodes do not have, never pulled: the pod's reason.
    let run_a = job(
        &cluster,
        args(
            &[
                "--image",
                "dra-e2e.local/runner:not-on-the-nodes",
                "--image-pull-policy",
                "Never",
                "--driver-name",
                DRIVER,
                "--device-class",
                DRIVER,
            ],
            &home.join("absent"),
        ),
    )
    .await;
    let a_text = common::text(&run_a);
    let a_left = left_in_cluster(&client).await;

    // (b) A profile (through the Job's ConfigMap) whose container check
    // the driver cannot meet: that behaviour fails in the pod, and the
    // fetched JUnit says so.
    let profile = home.join("unmet.yaml");
    std::fs::write(
        &profile,
        format!(
            "driverName: {DRIVER}\ndeviceClass:\n  name: {DRIVER}\ndeployment:\n  mode: Installed\n\
             containerCheck:\n  env:\n    - no_driver_sets_this=true\n"
        ),
    )
    .unwrap();
    let failing = home.join("failing");
    let run_b = job(
        &cluster,
        args(
            &["--profile", profile.to_str().unwrap(), "--name", SEVEN],
            &failing,
        ),
    )
    .await;
    let b_text = common::text(&run_b);
    let b_left = left_in_cluster(&client).await;

    // (c) Ctrl-C while a scenario of the whole pack runs in the pod (the
    // pack takes longer than the pod's grace period): the pod is stopped
    // first, its runner (sent SIGTERM by the kubelet through the wrapper)
    // tears its scenario down and stores what it has, which is fetched;
    // then the Job's namespace and binding go.
    let interrupted = whole_pack_job(&cluster, &home.join("interrupted"));
    let running = interrupted.wait_line("running on node", std::time::Duration::from_secs(120));
    let scenario_started = running && scenario_namespace_appears(&client).await;
    interrupted.sigint();
    let (c_code, c_text) = interrupted.finish();
    let c_left = left_in_cluster(&client).await;
    let c_scenarios_left = scenario_namespaces(&client).await;

    // (d) A `dra-e2e job` killed outright (SIGKILL: nothing of its own
    // ending runs) leaves its Job running and its namespace and binding;
    // `--remove-leftovers` stops and removes them, and says so.
    let killed = whole_pack_job(&cluster, &home.join("killed"));
    let killed_running = killed.wait_line("running on node", std::time::Duration::from_secs(120));
    let _ = dra_e2e::sys::kill(killed.child.id(), dra_e2e::sys::Signal::Kill);
    let (_, killed_text) = killed.finish();
    let d_left_by_kill = left_in_cluster(&client).await;
    let removal = job(&cluster, vec!["--remove-leftovers".into()]).await;
    let removal_text = common::text(&removal);
    let d_left = left_in_cluster(&client).await;
    let d_scenarios_left = scenario_namespaces(&client).await;
    let again = job(&cluster, vec!["--remove-leftovers".into()]).await;

    let (code, t, home) = cluster.stop();

    assert_eq!(run.status.code(), Some(0), "{green_text}");
    assert_eq!(testcases(&green.join("junit.xml")), (7, 0), "{green_text}");
    assert!(green.join("report.html").is_file(), "{green_text}");
    assert!(
        std::fs::read_to_string(green.join("run.log"))
            .unwrap()
            .contains("7 passed, 0 failed"),
        "{green_text}"
    );
    assert!(
        green_text.contains(&format!(
            "driver conformance of {DRIVER}: 7 behaviours: 7 passed, 0 skipped, 0 failed"
        )),
        "{green_text}"
    );
    assert!(
        green_text.contains("job: runner exited with status 0"),
        "{green_text}"
    );
    assert!(
        green_text.contains("job: removed namespace dra-e2e-job-"),
        "{green_text}"
    );
    assert!(green_left.is_empty(), "{green_left:?}\n{green_text}");

    assert_ne!(run_a.status.code(), Some(0), "{a_text}");
    assert!(
        a_text.contains("its container cannot start: ErrImageNeverPull"),
        "{a_text}"
    );
    assert!(
        a_text.contains("job: removed namespace dra-e2e-job-"),
        "{a_text}"
    );
    assert!(a_left.is_empty(), "{a_left:?}\n{a_text}");

    assert_eq!(run_b.status.code(), Some(1), "{b_text}");
    assert_eq!(testcases(&failing.join("junit.xml")), (7, 2), "{b_text}");
    let junit = std::fs::read_to_string(failing.join("junit.xml")).unwrap();
    assert!(junit.contains("no_driver_sets_this"), "{junit}");
    assert!(b_text.contains("5 passed, 2 failed"), "{b_text}");
    assert!(
        b_text.contains("job: runner exited with status 1"),
        "{b_text}"
    );
    assert!(b_left.is_empty(), "{b_left:?}\n{b_text}");

    assert!(scenario_started, "no scenario namespace appeared\n{c_text}");
    assert_ne!(c_code, Some(0), "{c_text}");
    assert!(c_text.contains("interrupted (SIGINT)"), "{c_text}");
    assert!(c_text.contains("job: stopping the Job's pod"), "{c_text}");
    assert!(
        c_text.contains("job: removed namespace dra-e2e-job-"),
        "{c_text}"
    );
    assert!(c_left.is_empty(), "{c_left:?}\n{c_text}");
    assert!(
        c_scenarios_left.is_empty(),
        "{c_scenarios_left:?}\n{c_text}"
    );

    assert!(killed_running, "the killed job never ran\n{killed_text}");
    assert_eq!(d_left_by_kill.len(), 2, "{d_left_by_kill:?}\n{killed_text}");
    assert_eq!(removal.status.code(), Some(0), "{removal_text}");
    assert!(
        removal_text.contains("job: removed namespace dra-e2e-job-"),
        "{removal_text}"
    );
    assert!(d_left.is_empty(), "{d_left:?}\n{removal_text}");
    assert!(
        d_scenarios_left.is_empty(),
        "{d_scenarios_left:?}\n{removal_text}"
    );
    assert!(
        common::text(&again).contains("job: nothing left by earlier jobs"),
        "{}",
        common::text(&again)
    );

    assert_eq!(code, Some(0), "{t}");
    common::assert_nothing_left(home.path(), &t);
}

/// The namespaces of runs' scenarios (the runner labels them with its run).
async fn scenario_namespaces(client: &kube::Client) -> Vec<String> {
    Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().labels(RUN_LABEL))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect()
}

/// Whether a scenario of the runner in the pod starts within a minute (a
/// short poll: the test has no watch helper of its own).
async fn scenario_namespace_appears(client: &kube::Client) -> bool {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while tokio::time::Instant::now() < deadline {
        if !scenario_namespaces(client).await.is_empty() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    false
}
