//! Counting, injected failures and stalls, per node and per method, as
//! scenarios use them to observe and break the kubelet's calls.

use dra_e2e::plugin::{CallOutcome, NodeApi};
use dra_e2e::proto::method;
use dra_e2e::proto::pluginregistration::{InfoRequest, registration_client::RegistrationClient};

use super::support::*;

#[tokio::test]
async fn counts_and_injected_failures_are_per_node_and_per_method() {
    let (a, b) = (Node::new("node-a"), Node::new("node-b"));
    let env = Env::new();
    let plugin_a = env.start(&a).await;
    let plugin_b = env.start(&b).await;
    let refs = env.two_claims();
    let (ch_a, ch_b) = (dial_dra(&a).await, dial_dra(&b).await);

    env.calls.set_fail("node-a", method::V1_PREPARE, true);
    let err = prepare(NodeApi::V1, ch_a.clone(), &refs).await.unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert_eq!(err.message(), "injected error");
    assert!(
        plugin_a.prepared_claims().is_empty(),
        "handler must not run"
    );
    assert!(a.cdi_files().is_empty());
    // Other node, other method, other version: unaffected.
    prepare(NodeApi::V1, ch_b.clone(), &refs).await.unwrap();
    prepare(NodeApi::V1beta1, ch_a.clone(), &refs)
        .await
        .unwrap();
    unprepare(NodeApi::V1, ch_a.clone(), &refs).await.unwrap();
    assert_eq!(env.calls.count("node-a", method::V1_PREPARE), 1);
    assert_eq!(env.calls.count("node-b", method::V1_PREPARE), 1);
    assert_eq!(env.calls.count("node-a", method::V1BETA1_PREPARE), 1);
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 1);
    assert_eq!(env.calls.count("node-b", method::V1_UNPREPARE), 0);

    let log = env.calls.log("node-a");
    assert_eq!(log[0].method, method::V1_PREPARE);
    assert_eq!(log[0].outcome, CallOutcome::Injected);
    assert!(log[0].failed());

    env.calls.set_fail("node-a", method::V1_PREPARE, false);
    prepare(NodeApi::V1, ch_a.clone(), &refs).await.unwrap();
    assert_eq!(env.calls.count("node-a", method::V1_PREPARE), 2);
    assert!(env.calls.log("node-a").last().unwrap().succeeded());

    // Registration goes through the same layer.
    env.calls.set_fail("node-b", method::GET_INFO, true);
    let mut reg = RegistrationClient::new(dial_registration(&b).await);
    let err = reg.get_info(InfoRequest {}).await.unwrap_err();
    assert_eq!(err.message(), "injected error");
    assert_eq!(env.calls.count("node-b", method::GET_INFO), 1);
    register(&a).await;
    assert_eq!(env.calls.count("node-a", method::GET_INFO), 1);

    plugin_a.stop().await.unwrap();
    plugin_b.stop().await.unwrap();
}

#[tokio::test]
async fn a_stalled_method_resumes_on_release_while_other_calls_proceed() {
    let (a, b) = (Node::new("node-a"), Node::new("node-b"));
    let env = Env::new();
    let plugin_a = env.start(&a).await;
    let plugin_b = env.start(&b).await;
    let refs = env.two_claims();

    let (channel, held) = (dial_dra_patient(&a).await, refs.clone());
    let stalled = env
        .stalled(&a, method::V1_PREPARE, async move {
            prepare(NodeApi::V1, channel, &held).await
        })
        .await;
    assert_eq!(
        env.calls.count("node-a", method::V1_PREPARE),
        1,
        "counted while stalled"
    );
    assert!(env.calls.log("node-a")[0].in_progress());

    // While it waits: the other method on the same node, the same method on
    // another node, and registration all complete. Upstream's single mutex
    // would deadlock here.
    unprepare(NodeApi::V1, dial_dra(&a).await, &[claim_ref("x", "uid-x")])
        .await
        .unwrap();
    prepare(NodeApi::V1, dial_dra(&b).await, &refs)
        .await
        .unwrap();
    register(&a).await;
    assert!(!stalled.is_finished());
    assert!(plugin_a.prepared_claims().is_empty());

    env.calls.release("node-a", method::V1_PREPARE);
    let prepared = stalled.await.unwrap().unwrap();
    assert_eq!(prepared.len(), 2);
    assert_eq!(plugin_a.prepared_claims().len(), 2);
    assert_eq!(env.calls.stalled("node-a", method::V1_PREPARE), 0);
    let record = env
        .calls
        .wait_for_call("node-a", "a successful prepare", WAIT, |r| {
            r.method == method::V1_PREPARE && r.succeeded()
        })
        .await
        .unwrap();
    assert_eq!(record.claims, refs);

    // Released means released: later calls go straight through.
    prepare(NodeApi::V1, dial_dra(&a).await, &refs)
        .await
        .unwrap();
    plugin_a.stop().await.unwrap();
    plugin_b.stop().await.unwrap();
}

#[tokio::test]
async fn a_stalled_call_the_client_gives_up_on_is_logged_as_abandoned() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    let channel = dial_dra_patient(&node).await;
    // The connection stays open, so that giving up resets only the call's stream.
    let held = channel.clone();
    let waiting = env
        .stalled(&node, method::V1_UNPREPARE, async move {
            unprepare(NodeApi::V1, held, &refs).await
        })
        .await;
    // Like the kubelet's deadline passing: the client resets the stream.
    waiting.abort();
    let record = env
        .calls
        .wait_for_call("node-a", "an abandoned unprepare", WAIT, |r| {
            r.outcome == CallOutcome::Abandoned
        })
        .await
        .unwrap();
    assert_eq!(record.method, method::V1_UNPREPARE);
    assert_eq!(env.calls.stalled("node-a", method::V1_UNPREPARE), 0);
    assert_eq!(env.calls.count("node-a", method::V1_UNPREPARE), 1);
    env.calls.release("node-a", method::V1_UNPREPARE);
    plugin.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_from_two_nodes_do_not_deadlock() {
    let (a, b) = (Node::new("node-a"), Node::new("node-b"));
    let env = Env::new();
    let plugin_a = env.start(&a).await;
    let plugin_b = env.start(&b).await;
    let refs = env.two_claims();
    let (ch_a, ch_b) = (dial_dra_patient(&a).await, dial_dra_patient(&b).await);

    // Both nodes hold a call inside the plugin at the same time; each is only
    // released once the other one has arrived.
    env.calls.stall("node-a", method::V1_PREPARE);
    env.calls.stall("node-b", method::V1_PREPARE);
    let mut tasks = Vec::new();
    for ch in [&ch_a, &ch_b] {
        for _ in 0..4 {
            let (ch, refs) = (ch.clone(), refs.clone());
            tasks.push(tokio::spawn(async move {
                prepare(NodeApi::V1, ch, &refs).await
            }));
        }
    }
    env.calls
        .wait_stalled("node-a", method::V1_PREPARE, 4, WAIT)
        .await
        .unwrap();
    env.calls
        .wait_stalled("node-b", method::V1_PREPARE, 4, WAIT)
        .await
        .unwrap();
    env.calls.release("node-a", method::V1_PREPARE);
    env.calls.release("node-b", method::V1_PREPARE);
    for t in tasks {
        assert_eq!(t.await.unwrap().unwrap().len(), 2);
    }
    assert_eq!(env.calls.count("node-a", method::V1_PREPARE), 4);
    assert_eq!(env.calls.count("node-b", method::V1_PREPARE), 4);
    plugin_a.stop().await.unwrap();
    plugin_b.stop().await.unwrap();
}
