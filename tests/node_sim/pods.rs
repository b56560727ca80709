//! Simulated nodes on the local control plane, driving the plugin harness over
//! its real unix sockets: pods with claims, prepare/unprepare, failures and
//! retries, deletion, force deletion, shared claims, container commands.
//!
//! One cluster serves all scenarios (starting one costs far more than a
//! scenario); each scenario uses its own namespace and driver.

use std::time::Duration;

use super::support::*;
use dra_e2e::ground::objects::{self, PodClaims, PodShape};
use dra_e2e::node_sim::NodeEventKind;
use dra_e2e::plugin::NodeApi;
use dra_e2e::proto::method;
use k8s_openapi::api::core::v1::{ContainerStateTerminated, ContainerStatus, Pod};
use k8s_openapi::api::resource::v1::ResourceClaim;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use kube::runtime::wait::conditions;

const NODE: &str = "sim-0";

fn pod_with(name: &str, claims: PodClaims) -> Pod {
    let mut shape = PodShape::new(name);
    shape.claims = claims;
    shape.build().unwrap()
}

/// `claim_<name>_<request>=true` with every non-alphanumeric character as `_`.
fn marker(claim: &str) -> (String, String) {
    let key: String = format!("claim_{claim}_my-request")
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    (key, "true".into())
}

fn expected_env(claim: &str) -> Vec<(String, String)> {
    let mut v = pairs(&[("admin_x", "y"), ("user_a", "b")]);
    v.push(marker(claim));
    v.sort();
    v
}

fn generated_claim(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref())
        .and_then(|s| s.first())
        .and_then(|s| s.resource_claim_name.clone())
        .expect("generated claim name in pod status")
}

/// What ended the container of `status`; any other state fails the test.
fn terminated(status: &ContainerStatus) -> ContainerStateTerminated {
    status
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("a terminated container")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_with_claims_on_a_simulated_node() {
    let env = Env::start(1, |c| c.wipe_delay = Duration::from_secs(2)).await;
    let ns = env.namespace("sim-pods").await;
    let driver = Driver::start(&env, &ns, &[NodeApi::V1, NodeApi::V1beta1], 8).await;

    template_and_external_claims(&env, &driver).await;
    prepare_failures_are_reported_and_retried(&env, &driver).await;
    deletion_unprepares_and_releases(&env, &driver).await;
    force_deletion_still_unprepares(&env, &driver).await;
    stale_claim_blocks_its_successor(&env, &driver).await;
    shared_claim_prepared_once(&env, &driver).await;
    completing_and_restarting_containers(&env, &driver).await;
    v1beta1_only_plugin(&env).await;

    driver.stop().await;
    env.stop().await;
}

async fn template_and_external_claims(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let before = driver.prepare_count(NODE);

    driver.create_template("tester-1").await;
    let mut inline = PodShape::new("tester-1");
    inline.claims = PodClaims::Inline {
        template: "tester-1".into(),
    };
    inline.containers = 2;
    create_pod(&env.client, ns, &inline.build().unwrap()).await;

    driver.create_claim("external-claim").await;
    create_pod(
        &env.client,
        ns,
        &pod_with(
            "tester-2",
            PodClaims::External(vec!["external-claim".into()]),
        ),
    )
    .await;

    // Two claims of one driver in one pod: one call with both.
    driver.create_claim("multi-a").await;
    driver.create_claim("multi-b").await;
    create_pod(
        &env.client,
        ns,
        &pod_with(
            "tester-multi",
            PodClaims::External(vec!["multi-a".into(), "multi-b".into()]),
        ),
    )
    .await;

    let p1 = wait_for(&pods, "tester-1", "inline pod running", is_running)
        .await
        .unwrap();
    wait_for(&pods, "tester-2", "external pod running", is_running).await;
    wait_for(&pods, "tester-multi", "two-claim pod running", is_running).await;

    let node = env.node(0);
    let generated = generated_claim(&p1);
    for c in ["with-resource", "with-resource-1"] {
        assert_eq!(
            dra_env(node, ns, "tester-1", c),
            expected_env(&generated),
            "container {c}"
        );
    }
    assert_eq!(
        dra_env(node, ns, "tester-2", "with-resource"),
        expected_env("external-claim")
    );
    let mut both = expected_env("multi-a");
    both.push(marker("multi-b"));
    both.sort();
    assert_eq!(dra_env(node, ns, "tester-multi", "with-resource"), both);

    // One call per driver per pod, on the first API the plugin offers.
    assert_eq!(driver.prepare_count(NODE) - before, 3);
    assert_eq!(driver.calls.count(NODE, method::V1BETA1_PREPARE), 0);
    let multi_call = driver
        .calls
        .log(NODE)
        .into_iter()
        .find(|r| r.method == method::V1_PREPARE && r.claims.len() == 2)
        .expect("one prepare call with both claims");
    let mut names: Vec<_> = multi_call.claims.iter().map(|c| c.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["multi-a", "multi-b"]);

    let prepared: Vec<String> = node.prepared_claims().into_iter().map(|c| c.name).collect();
    for c in [generated.as_str(), "external-claim", "multi-a", "multi-b"] {
        assert!(prepared.iter().any(|p| p == c), "{c} not in {prepared:?}");
    }

    // Status as a kubelet writes it.
    let p2 = pods.get("tester-2").await.unwrap();
    let st = p2.status.unwrap();
    assert_eq!(st.host_ip.as_deref(), Some("127.0.0.1"));
    assert!(st.pod_ip.is_some());
    let conditions = st.conditions.unwrap();
    assert!(
        conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "tester-2 not Ready: {conditions:?}"
    );
    let cs = &st.container_statuses.unwrap()[0];
    assert!(cs.ready && cs.state.as_ref().unwrap().running.is_some());

    for p in ["tester-1", "tester-multi"] {
        pods.delete(p, &DeleteParams::default()).await.unwrap();
    }
    for p in ["tester-1", "tester-multi"] {
        wait_for(&pods, p, "pod deleted", |o: Option<&Pod>| o.is_none()).await;
    }
}

async fn prepare_failures_are_reported_and_retried(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    for m in [method::V1_PREPARE, method::V1BETA1_PREPARE] {
        driver.calls.set_fail(NODE, m, true);
    }
    let before = driver.prepare_count(NODE);
    driver.create_claim("external-claim-2").await;
    create_pod(
        &env.client,
        ns,
        &pod_with(
            "tester-3",
            PodClaims::External(vec!["external-claim-2".into()]),
        ),
    )
    .await;
    let event = eventually("FailedPrepareDynamicResources event", || async {
        pod_events(&env.client, ns, "tester-3", "FailedPrepareDynamicResources")
            .await
            .into_iter()
            .next()
    })
    .await;
    let msg = event.message.unwrap_or_default();
    assert!(
        msg.starts_with("Failed to prepare dynamic resources: "),
        "{msg}"
    );
    assert!(msg.contains("injected error"), "{msg}");
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    let phase = pods.get("tester-3").await.unwrap().status.unwrap().phase;
    assert_eq!(phase.as_deref(), Some("Pending"));

    let failed = driver.prepare_count(NODE);
    assert!(failed > before);
    for m in [method::V1_PREPARE, method::V1BETA1_PREPARE] {
        driver.calls.set_fail(NODE, m, false);
    }
    wait_for(
        &pods,
        "tester-3",
        "pod running after failures cleared",
        is_running,
    )
    .await;
    assert!(
        driver.prepare_count(NODE) > failed,
        "no retry after the failure was cleared"
    );
}

async fn deletion_unprepares_and_releases(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), ns);
    let node = env.node(0);
    let before = driver.unprepare_count(NODE);
    let uid = pods.get("tester-2").await.unwrap().metadata.uid.unwrap();
    pods.delete("tester-2", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &pods,
        "tester-2",
        "pod deleted",
        conditions::is_deleted(&uid),
    )
    .await;

    assert_eq!(driver.unprepare_count(NODE) - before, 1);
    let call = driver
        .calls
        .log(NODE)
        .into_iter()
        .rev()
        .find(|r| r.method == method::V1_UNPREPARE)
        .unwrap();
    assert_eq!(call.claims[0].name, "external-claim");
    assert!(
        !node
            .prepared_claims()
            .iter()
            .any(|c| c.name == "external-claim")
    );
    // Unprepare came before the deletion was finished. The API server may
    // report the pod gone before the node journals its own deletion call.
    node.wait_for_event(
        DEADLINE,
        |k| matches!(k, NodeEventKind::PodDeleted { pod } if pod.ends_with("/tester-2")),
    )
    .await
    .expect("deletion journaled");
    let events = node.events();
    let unprepared = events
        .iter()
        .position(|e| {
            matches!(&e.kind, NodeEventKind::Unprepared { claims, .. }
            if claims.iter().any(|c| c.contains("/external-claim ")))
        })
        .expect("unprepare journaled");
    let deleted = events
        .iter()
        .position(
            |e| matches!(&e.kind, NodeEventKind::PodDeleted { pod } if pod.ends_with("/tester-2")),
        )
        .expect("deletion journaled");
    assert!(unprepared < deleted);

    wait_for(
        &claims,
        "external-claim",
        "claim released",
        |c: Option<&ResourceClaim>| {
            c.and_then(|c| c.status.as_ref())
                .map(|s| s.reserved_for.as_deref().unwrap_or_default().is_empty())
                .unwrap_or(false)
        },
    )
    .await;
}

async fn force_deletion_still_unprepares(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let node = env.node(0);
    let before = driver.unprepare_count(NODE);
    assert!(
        node.prepared_claims()
            .iter()
            .any(|c| c.name == "external-claim-2")
    );
    // Grace period 0 removes the object at once: the node only sees it vanish.
    pods.delete("tester-3", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    eventually("force-deleted pod's claim unprepared", || async {
        (!node
            .prepared_claims()
            .iter()
            .any(|c| c.name == "external-claim-2"))
        .then_some(())
    })
    .await;
    assert_eq!(driver.unprepare_count(NODE) - before, 1);
}

/// A force-deleted pod whose unprepare keeps failing leaves its claim in the
/// node's cache; a new claim of the same name must wait for it.
async fn stale_claim_blocks_its_successor(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let claims: Api<ResourceClaim> = Api::namespaced(env.client.clone(), ns);
    let node = env.node(0);
    let old_uid = driver.create_claim("stale-claim").await.uid().unwrap();
    create_pod(
        &env.client,
        ns,
        &pod_with("stale-1", PodClaims::External(vec!["stale-claim".into()])),
    )
    .await;
    wait_for(&pods, "stale-1", "first pod running", is_running).await;
    for m in [method::V1_UNPREPARE, method::V1BETA1_UNPREPARE] {
        driver.calls.set_fail(NODE, m, true);
    }
    pods.delete("stale-1", &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    claims
        .delete("stale-claim", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &claims,
        "stale-claim",
        "old claim deleted",
        conditions::is_deleted(&old_uid),
    )
    .await;
    assert!(node.prepared_claims().iter().any(|c| c.uid == old_uid));

    let new_uid = driver.create_claim("stale-claim").await.uid().unwrap();
    create_pod(
        &env.client,
        ns,
        &pod_with("stale-2", PodClaims::External(vec!["stale-claim".into()])),
    )
    .await;
    let event = eventually("event about the old claim", || async {
        pod_events(&env.client, ns, "stale-2", "FailedPrepareDynamicResources")
            .await
            .into_iter()
            .find(|e| {
                e.message
                    .as_deref()
                    .is_some_and(|m| m.contains("old ResourceClaim with same name"))
            })
    })
    .await;
    assert!(event.message.unwrap().contains(&old_uid));

    for m in [method::V1_UNPREPARE, method::V1BETA1_UNPREPARE] {
        driver.calls.set_fail(NODE, m, false);
    }
    wait_for(&pods, "stale-2", "second pod running", is_running).await;
    let uids: Vec<String> = node
        .prepared_claims()
        .into_iter()
        .filter(|c| c.name == "stale-claim")
        .map(|c| c.uid)
        .collect();
    assert_eq!(uids, vec![new_uid]);
    let uid = pods.get("stale-2").await.unwrap().uid().unwrap();
    pods.delete("stale-2", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &pods,
        "stale-2",
        "second pod deleted",
        conditions::is_deleted(&uid),
    )
    .await;
}

async fn shared_claim_prepared_once(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
    let node = env.node(0);
    driver.create_claim("shared-claim").await;
    let (prep, unprep) = (driver.prepare_count(NODE), driver.unprepare_count(NODE));
    // Created together: the node must still prepare the claim only once.
    for p in ["shared-1", "shared-2"] {
        create_pod(
            &env.client,
            ns,
            &pod_with(p, PodClaims::External(vec!["shared-claim".into()])),
        )
        .await;
    }
    for p in ["shared-1", "shared-2"] {
        wait_for(&pods, p, "sharing pod running", is_running).await;
    }
    assert_eq!(driver.prepare_count(NODE) - prep, 1);
    for p in ["shared-1", "shared-2"] {
        assert_eq!(
            dra_env(node, ns, p, "with-resource"),
            expected_env("shared-claim")
        );
    }

    let uid = pods.get("shared-1").await.unwrap().metadata.uid.unwrap();
    pods.delete("shared-1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &pods,
        "shared-1",
        "first sharing pod deleted",
        conditions::is_deleted(&uid),
    )
    .await;
    assert_eq!(
        driver.unprepare_count(NODE),
        unprep,
        "unprepared while still in use"
    );
    assert!(
        node.prepared_claims()
            .iter()
            .any(|c| c.name == "shared-claim")
    );

    let uid = pods.get("shared-2").await.unwrap().metadata.uid.unwrap();
    pods.delete("shared-2", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &pods,
        "shared-2",
        "last sharing pod deleted",
        conditions::is_deleted(&uid),
    )
    .await;
    assert_eq!(driver.unprepare_count(NODE) - unprep, 1);
    assert!(
        !node
            .prepared_claims()
            .iter()
            .any(|c| c.name == "shared-claim")
    );
}

async fn completing_and_restarting_containers(env: &Env, driver: &Driver) {
    let ns = &driver.ns;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);

    // Never: the pod succeeds, and its claim is unprepared before that
    // final status is written.
    driver.create_claim("done-claim").await;
    let before = driver.unprepare_count(NODE);
    let mut shape = PodShape::new("completes");
    shape.claims = PodClaims::External(vec!["done-claim".into()]);
    shape.command = Some("sleep 0.5; exit 0".into());
    shape.init_container = Some(vec![objects::DEFAULT_USER_ENV.into()]);
    create_pod(&env.client, ns, &shape.build().unwrap()).await;
    let done = wait_for(&pods, "completes", "pod succeeded", phase_is("Succeeded"))
        .await
        .unwrap();
    assert_eq!(
        driver.unprepare_count(NODE) - before,
        1,
        "unprepare must precede the final status"
    );
    let st = done.status.unwrap();
    let init = terminated(&st.init_container_statuses.unwrap()[0]);
    assert_eq!(init.exit_code, 0);
    let term = terminated(&st.container_statuses.unwrap()[0]);
    assert_eq!(
        (term.exit_code, term.reason.as_deref()),
        (0, Some("Completed"))
    );

    // An init container whose env check fails (the claim config gives
    // `user_a=b`, not `user_a=c`) exits 1, like busybox's grep, and under
    // Never the pod fails without starting its regular containers.
    driver.create_claim("check-claim").await;
    let mut shape = PodShape::new("init-check");
    shape.claims = PodClaims::External(vec!["check-claim".into()]);
    shape.init_container = Some(vec!["user_a=c".into()]);
    create_pod(&env.client, ns, &shape.build().unwrap()).await;
    let failed = wait_for(&pods, "init-check", "pod failed", phase_is("Failed"))
        .await
        .unwrap();
    let st = failed.status.unwrap();
    let init = terminated(&st.init_container_statuses.unwrap()[0]);
    assert_eq!(init.exit_code, 1);
    let main = st.container_statuses.unwrap()[0].state.clone().unwrap();
    assert!(
        main.running.is_none() && main.terminated.is_none(),
        "{main:?}"
    );

    // Failing command under Never: Failed with the exit code.
    driver.create_claim("fail-claim").await;
    let mut shape = PodShape::new("fails");
    shape.claims = PodClaims::External(vec!["fail-claim".into()]);
    shape.command = Some("exit 3".into());
    create_pod(&env.client, ns, &shape.build().unwrap()).await;
    let failed = wait_for(&pods, "fails", "pod failed", phase_is("Failed"))
        .await
        .unwrap();
    let term = terminated(&failed.status.unwrap().container_statuses.unwrap()[0]);
    assert_eq!(term.exit_code, 3);

    // Always: restarted with restartCount going up; the pod keeps running
    // and keeps its claim.
    let mut shape = PodShape::new("restarts");
    driver.create_template("restarts").await;
    shape.claims = PodClaims::Inline {
        template: "restarts".into(),
    };
    shape.command = Some("sleep 0.2; exit 1".into());
    shape.restart_policy = "Always".into();
    create_pod(&env.client, ns, &shape.build().unwrap()).await;
    let restarted = wait_for(
        &pods,
        "restarts",
        "container restarted twice",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .is_some_and(|c| c.restart_count >= 2)
        },
    )
    .await
    .unwrap();
    assert_eq!(restarted.status.unwrap().phase.as_deref(), Some("Running"));
    let claim = generated_claim(&pods.get("restarts").await.unwrap());
    assert!(
        env.node(0)
            .prepared_claims()
            .iter()
            .any(|c| c.name == claim)
    );

    // A container ended on request (as `kill -TERM 1` would end the
    // default command) restarts from the CDI specs as they are then: with
    // its claim's spec gone, it cannot be created.
    driver.create_claim("ended-claim").await;
    let mut shape = PodShape::new("ended");
    shape.claims = PodClaims::External(vec!["ended-claim".into()]);
    shape.restart_policy = "Always".into();
    create_pod(&env.client, ns, &shape.build().unwrap()).await;
    wait_for(&pods, "ended", "pod running", is_running).await;
    let node = env.node(0);
    node.end_container(ns, "ended", "with-resource")
        .expect("the node runs pod ended")
        .await
        .unwrap()
        .unwrap();
    wait_for(
        &pods,
        "ended",
        "container restarted once",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .is_some_and(|c| c.restart_count == 1 && c.ready)
        },
    )
    .await;
    let claim_uid = Api::<ResourceClaim>::namespaced(env.client.clone(), ns)
        .get("ended-claim")
        .await
        .unwrap()
        .uid()
        .unwrap();
    for entry in std::fs::read_dir(node.cdi_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.to_string_lossy().contains(&claim_uid) {
            std::fs::remove_file(&path).unwrap();
        }
    }
    node.end_container(ns, "ended", "with-resource")
        .expect("the node runs pod ended")
        .await
        .unwrap()
        .unwrap();
    wait_for(
        &pods,
        "ended",
        "container not created",
        |p: Option<&Pod>| {
            p.and_then(|p| p.status.as_ref())
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|c| c.first())
                .and_then(|c| c.state.as_ref()?.waiting.as_ref()?.message.clone())
                .is_some_and(|m| m.contains("unresolvable CDI devices"))
        },
    )
    .await;
    // Only a running container can be ended.
    let refused = node
        .end_container(ns, "ended", "with-resource")
        .expect("the node runs pod ended")
        .await
        .unwrap()
        .unwrap_err();
    assert!(refused.contains("is not running"), "{refused}");

    for p in ["completes", "init-check", "fails", "restarts", "ended"] {
        pods.delete(p, &DeleteParams::default()).await.unwrap();
    }
    for p in ["completes", "init-check", "fails", "restarts", "ended"] {
        wait_for(&pods, p, "pod deleted", |o: Option<&Pod>| o.is_none()).await;
    }
}

async fn v1beta1_only_plugin(env: &Env) {
    let ns = env.namespace("sim-beta").await;
    let driver = Driver::start(env, &ns, &[NodeApi::V1beta1], 2).await;
    let pods: Api<Pod> = Api::namespaced(env.client.clone(), &ns);
    driver.create_claim("beta-claim").await;
    create_pod(
        &env.client,
        &ns,
        &pod_with(
            "tester-beta",
            PodClaims::External(vec!["beta-claim".into()]),
        ),
    )
    .await;
    wait_for(&pods, "tester-beta", "pod running via v1beta1", is_running).await;
    assert_eq!(driver.calls.count(NODE, method::V1BETA1_PREPARE), 1);
    assert_eq!(driver.calls.count(NODE, method::V1_PREPARE), 0);
    assert_eq!(
        dra_env(env.node(0), &ns, "tester-beta", "with-resource"),
        expected_env("beta-claim")
    );
    let uid = pods.get("tester-beta").await.unwrap().metadata.uid.unwrap();
    pods.delete("tester-beta", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(
        &pods,
        "tester-beta",
        "pod deleted",
        conditions::is_deleted(&uid),
    )
    .await;
    assert_eq!(driver.calls.count(NODE, method::V1BETA1_UNPREPARE), 1);
    driver.stop().await;
}
