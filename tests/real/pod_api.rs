//! Pods on real nodes, as the tests reach them through the API server:
//! namespaces to run them in, and exec (which crosses the kubelet's
//! webhook authorizer and containerd's streaming server).
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{Api, AttachParams, PostParams};
use serde_json::json;
use tokio::io::AsyncReadExt as _;

/// Creates namespace `ns`: the pods API in it.
pub async fn namespace(client: &kube::Client, ns: &str) -> Api<Pod> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns}})).unwrap(),
        )
        .await
        .unwrap();
    Api::namespaced(client.clone(), ns)
}

/// Runs `cmd` in `pod`'s first container: its stdout, and its stderr when
/// `stderr` asks for it (empty otherwise).
pub async fn exec(pods: &Api<Pod>, pod: &str, cmd: &[&str], stderr: bool) -> (String, String) {
    let mut attached = pods
        .exec(pod, cmd.to_vec(), &AttachParams::default().stderr(stderr))
        .await
        .expect("exec through the API server and the kubelet");
    let (mut out, mut err) = (String::new(), String::new());
    attached
        .stdout()
        .unwrap()
        .read_to_string(&mut out)
        .await
        .unwrap();
    if stderr {
        attached
            .stderr()
            .unwrap()
            .read_to_string(&mut err)
            .await
            .unwrap();
    }
    attached.join().await.unwrap();
    (out, err)
}
