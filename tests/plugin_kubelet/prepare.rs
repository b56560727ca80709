//! NodePrepareResources and NodeUnprepareResources on every API version:
//! CDI files written and removed, per-claim errors, and a restarted plugin
//! that unprepares what its predecessor prepared.

use dra_e2e::plugin::{CallOutcome, ClaimId, NodeApi};
use dra_e2e::proto::dra::PreparedDevice;
use serde_json::json;

use super::support::*;

#[tokio::test]
async fn prepare_and_unprepare_on_every_api_version() {
    for api in NodeApi::ALL {
        let node = Node::new("node-a");
        let env = Env::new();
        let plugin = node.start(env.config(&node).with_node_apis([api])).await;
        let refs = env.two_claims();
        let channel = dial_dra(&node).await;

        let prepared = prepare(api, channel.clone(), &refs).await.unwrap();
        let share_id = (api == NodeApi::V1).then(|| "share-7".to_owned());
        let expected: PrepareView = [
            (
                "uid-1".to_owned(),
                (
                    vec![PreparedDevice {
                        request_names: vec!["my-request".into()],
                        pool_name: "node-a".into(),
                        device_name: "device-00".into(),
                        cdi_device_ids: vec![format!("{DRIVER}/test=claim-uid-1-my-request")],
                        share_id,
                    }],
                    String::new(),
                ),
            ),
            (
                "uid-2".to_owned(),
                (
                    vec![PreparedDevice {
                        request_names: vec!["req".into()],
                        pool_name: "node-a".into(),
                        device_name: "device-01".into(),
                        cdi_device_ids: vec![format!("{DRIVER}/test=claim-uid-2-req")],
                        share_id: None,
                    }],
                    String::new(),
                ),
            ),
        ]
        .into();
        assert_eq!(prepared, expected, "{api}");
        assert_eq!(
            node.cdi_files(),
            [
                format!("{DRIVER}-uid-1-my-request.json"),
                format!("{DRIVER}-uid-2-req.json")
            ],
            "{api}"
        );
        let spec = std::fs::read_to_string(
            node.cdi_dir()
                .join(format!("{DRIVER}-uid-1-my-request.json")),
        )
        .unwrap();
        assert_eq!(
            spec,
            format!(
                r#"{{"cdiVersion":"0.3.0","kind":"{DRIVER}/test","devices":[{{"name":"claim-uid-1-my-request","containerEdits":{{"env":["claim_external_claim_my_request=true","user_a=b"]}}}}]}}"#
            )
        );
        assert_eq!(
            plugin.prepared_claims(),
            [
                ClaimId {
                    name: "external-claim".into(),
                    uid: "uid-1".into()
                },
                ClaimId {
                    name: "other".into(),
                    uid: "uid-2".into()
                },
            ]
        );

        // Idempotent: the same answer again, even if the claim changed since.
        env.claims.put(allocated_claim(
            "external-claim",
            "uid-1",
            vec![result("my-request", "device-99", None)],
            vec![],
        ));
        assert_eq!(
            prepare(api, channel.clone(), &refs).await.unwrap(),
            expected
        );

        // The log names the claims of each call.
        let log = env.calls.log("node-a");
        assert_eq!(log.len(), 2);
        assert!(
            log.iter()
                .all(|r| r.method == api.prepare_method() && r.succeeded())
        );
        assert_eq!(log[0].claims, refs);

        let unprepared = unprepare(api, channel.clone(), &refs[..1]).await.unwrap();
        assert_eq!(unprepared, [("uid-1".to_owned(), String::new())].into());
        assert_only_other_prepared(&node, &plugin);
        // Again, and together with the other claim: still one entry per claim.
        let unprepared = unprepare(api, channel.clone(), &refs).await.unwrap();
        assert_eq!(
            unprepared,
            [
                ("uid-1".to_owned(), String::new()),
                ("uid-2".to_owned(), String::new())
            ]
            .into()
        );
        assert!(node.cdi_files().is_empty(), "{api}: {:?}", node.cdi_files());
        plugin.prepared().wait_until_empty(WAIT).await.unwrap();
        plugin.stop().await.unwrap();
    }
}

#[tokio::test]
async fn prepare_fails_the_call_for_missing_replaced_or_unallocated_claims() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    let channel = dial_dra(&node).await;

    let missing = [refs[0].clone(), claim_ref("gone", "uid-9")];
    let err = prepare(NodeApi::V1, channel.clone(), &missing)
        .await
        .unwrap_err();
    assert_eq!(err.code(), tonic::Code::Unknown);
    assert!(
        err.message().contains("ns/gone") && err.message().contains("not found"),
        "{err:?}"
    );

    let replaced = [claim_ref("other", "uid-old")];
    let err = prepare(NodeApi::V1, channel.clone(), &replaced)
        .await
        .unwrap_err();
    assert!(err.message().contains("got replaced"), "{err:?}");

    let mut unallocated = allocated_claim("pending", "uid-3", vec![], vec![]);
    unallocated.status = None;
    env.claims.put(unallocated);
    let err = prepare(
        NodeApi::V1,
        channel.clone(),
        &[claim_ref("pending", "uid-3")],
    )
    .await
    .unwrap_err();
    assert!(err.message().contains("not allocated"), "{err:?}");

    // Nothing was prepared by the failed calls.
    assert!(plugin.prepared_claims().is_empty());
    assert!(node.cdi_files().is_empty());
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn bad_opaque_parameters_fail_only_that_claim() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    env.claims.put(allocated_claim(
        "bad",
        "uid-bad",
        vec![result("r", "device-02", None)],
        vec![claim_config(json!({"a": 1}))],
    ));
    let channel = dial_dra(&node).await;
    let request = [refs[1].clone(), claim_ref("bad", "uid-bad")];
    let prepared = prepare(NodeApi::V1, channel, &request).await.unwrap();
    assert_eq!(prepared.len(), 2);
    assert!(prepared["uid-2"].1.is_empty());
    let (devices, error) = &prepared["uid-bad"];
    assert!(devices.is_empty());
    assert!(error.contains("parameters in config"), "{error}");
    assert_only_other_prepared(&node, &plugin);
    let record = &env.calls.log("node-a")[0];
    assert_eq!(record.outcome, CallOutcome::Ok);
    assert!(record.failed() && record.claim_errors.contains_key("uid-bad"));
    plugin.stop().await.unwrap();
}

#[tokio::test]
async fn restarted_plugin_unprepares_what_its_predecessor_prepared() {
    let node = Node::new("node-a");
    let env = Env::new();
    let plugin = env.start(&node).await;
    let refs = env.two_claims();
    prepare(NodeApi::V1, dial_dra(&node).await, &refs)
        .await
        .unwrap();
    let prepared = plugin.prepared().clone();
    plugin.stop().await.unwrap();

    // Handing over the view keeps the claims known.
    let plugin = node.start(env.config(&node).with_prepared(prepared)).await;
    assert_eq!(plugin.prepared_claims().len(), 2);
    unprepare(NodeApi::V1, dial_dra(&node).await, &refs[..1])
        .await
        .unwrap();
    assert_eq!(node.cdi_files(), [format!("{DRIVER}-uid-2-req.json")]);
    plugin.stop().await.unwrap();

    // Without it the claim is unknown; its CDI files are still cleaned up
    // from the claim's allocation.
    let plugin = env.start(&node).await;
    assert!(plugin.prepared_claims().is_empty());
    let unprepared = unprepare(NodeApi::V1, dial_dra(&node).await, &refs[1..])
        .await
        .unwrap();
    assert_eq!(unprepared, [("uid-2".to_owned(), String::new())].into());
    assert!(node.cdi_files().is_empty());
    // A claim nobody knows of succeeds too.
    let unprepared = unprepare(
        NodeApi::V1,
        dial_dra(&node).await,
        &[claim_ref("never", "uid-never")],
    )
    .await
    .unwrap();
    assert_eq!(unprepared, [("uid-never".to_owned(), String::new())].into());
    plugin.stop().await.unwrap();
}
