//! The plugin's API identity, as upstream's `plugin-permissions.yaml` defines
//! it: a service account, a cluster role limited to what a kubelet plugin needs,
//! and an admission policy that lets it write ResourceSlices of its own node only.
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use serde_json::json;

use dra_e2e_kube::objects::delete_if_present;

/// Names of the identity objects of one driver instance (`<driver><instance>`).
#[derive(Debug, Clone)]
pub struct Identity {
    pub namespace: String,
    /// The driver whose claims' device status the plugin may write.
    pub driver: String,
    /// `dra-kubelet-plugin-<driver><instance>`.
    pub base: String,
}

impl Identity {
    pub fn new(namespace: &str, driver: &str, instance: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            driver: driver.to_owned(),
            base: format!("dra-kubelet-plugin-{driver}{instance}"),
        }
    }

    pub fn service_account(&self) -> String {
        format!("{}-service-account", self.base)
    }

    pub fn role(&self) -> String {
        format!("{}-role", self.base)
    }

    pub fn binding(&self) -> String {
        format!("{}-role-binding", self.base)
    }

    pub fn policy(&self) -> String {
        format!("resourceslices-policy-{}", self.base)
    }

    /// The user name the API server sees for the plugin.
    pub fn user(&self) -> String {
        service_account_user(&self.namespace, &self.service_account())
    }

    pub fn groups(&self) -> Vec<String> {
        service_account_groups(&self.namespace)
    }
}

/// The user name of a service account's token.
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The groups of a service account's token (the API server adds
/// `system:authenticated` to impersonated users itself).
pub fn service_account_groups(namespace: &str) -> Vec<String> {
    vec![
        "system:serviceaccounts".to_owned(),
        format!("system:serviceaccounts:{namespace}"),
    ]
}

/// A kube config that acts as service account `namespace/name` running
/// outside any node, like a control-plane controller.
pub fn impersonate_service_account(
    admin: &kube::Config,
    namespace: &str,
    name: &str,
) -> kube::Config {
    let mut config = admin.clone();
    config.auth_info.impersonate = Some(service_account_user(namespace, name));
    config.auth_info.impersonate_groups = Some(service_account_groups(namespace));
    config
}

/// Waits until the API server authorizes the plugin to list and watch
/// ResourceSlices. The RBAC authorizer reads bindings from a cache that
/// follows a watch, so a plugin acting the moment its binding was created
/// may be refused once (kube's watcher then warns with a 403 and retries).
/// A real plugin's pod starts long after its chart's RBAC; the harness
/// creates both at once, so it waits here rather than letting a green run
/// print that warning. Asked as the admin with a SubjectAccessReview, which
/// goes through the same authorizer and its cache.
pub async fn wait_authorized(
    admin: &kube::Client,
    id: &Identity,
    timeout: std::time::Duration,
) -> Result<(), dra_e2e_kube::wait::WaitError> {
    use dra_e2e_kube::wait::{self, Check};
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = |verb: &str| SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(id.user()),
            groups: Some(id.groups()),
            resource_attributes: Some(ResourceAttributes {
                group: Some("resource.k8s.io".to_owned()),
                resource: Some("resourceslices".to_owned()),
                verb: Some(verb.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SubjectAccessReview> = Api::all(admin.clone());
    wait::poll(
        &format!("the RBAC of {} to be in force", id.user()),
        timeout,
        std::time::Duration::from_millis(50),
        || async {
            for verb in ["list", "watch"] {
                match api.create(&PostParams::default(), &review(verb)).await {
                    Ok(r) if r.status.as_ref().is_some_and(|s| s.allowed) => {}
                    Ok(r) => {
                        let reason = r.status.and_then(|s| s.reason).unwrap_or_default();
                        return Check::Pending(format!("{verb} not allowed yet: {reason}"));
                    }
                    Err(e) => return Check::Pending(format!("asking the API server: {e}")),
                }
            }
            Check::Done(())
        },
    )
    .await
}

/// The identity objects, in creation order.
pub struct Objects {
    pub service_account: ServiceAccount,
    pub role: ClusterRole,
    pub binding: ClusterRoleBinding,
    pub policy: ValidatingAdmissionPolicy,
    pub policy_binding: ValidatingAdmissionPolicyBinding,
}

pub fn objects(id: &Identity) -> Result<Objects, serde_json::Error> {
    let sa = id.service_account();
    let service_account = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": { "name": sa, "namespace": id.namespace },
    }))?;
    let role = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": { "name": id.role() },
        "rules": [
            { "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"] },
            // The device status of claims allocated on the plugin's own node,
            // as upstream's plugin-permissions.yaml grants it.
            { "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/status"],
              "verbs": ["patch", "update"] },
            { "apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims/driver"],
              "verbs": ["associated-node:patch", "associated-node:update"],
              "resourceNames": [id.driver] },
            { "apiGroups": [""], "resources": ["nodes"], "verbs": ["get"] },
            { "apiGroups": ["resource.k8s.io"], "resources": ["resourceslices"],
              "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"] },
        ],
    }))?;
    let binding = serde_json::from_value(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": { "name": id.binding() },
        "subjects": [ { "kind": "ServiceAccount", "name": sa, "namespace": id.namespace } ],
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": id.role() },
    }))?;
    let node_message = "this user running on node '\"+variables.userNodeName+\"' may not modify \" + \
        (variables.objectNodeName == \"\" ? \"cluster resourceslices\" : \"resourceslices on node '\"+variables.objectNodeName+\"'\")";
    let policy = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": id.policy() },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [ {
                "apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
                "operations": ["CREATE", "UPDATE", "DELETE"], "resources": ["resourceslices"],
            } ] },
            "matchConditions": [ {
                "name": "isRestrictedUser",
                "expression": format!("request.userInfo.username == \"{}\"", id.user()),
            } ],
            "variables": [
                { "name": "userNodeName",
                  "expression": "request.userInfo.extra[?'authentication.kubernetes.io/node-name'][0].orValue('')" },
                { "name": "objectNodeName",
                  "expression": "(request.operation == \"DELETE\" ? oldObject : object).spec.?nodeName.orValue(\"\")" },
            ],
            "validations": [
                { "expression": "variables.userNodeName != \"\"",
                  "message": "no node association found for user, this user must run in a pod on a node and ServiceAccountTokenPodNodeInfo must be enabled" },
                { "expression": "variables.userNodeName == variables.objectNodeName",
                  "messageExpression": format!("\"{node_message}") },
            ],
        },
    }))?;
    let policy_binding = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": id.policy() },
        "spec": { "policyName": id.policy(), "validationActions": ["Deny"] },
    }))?;
    Ok(Objects {
        service_account,
        role,
        binding,
        policy,
        policy_binding,
    })
}

/// One of the identity objects, so a driver remembers what it created by
/// type and deletes exactly that, in reverse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdentityObject {
    ServiceAccount,
    ClusterRole,
    ClusterRoleBinding,
    AdmissionPolicy,
    AdmissionPolicyBinding,
}

impl IdentityObject {
    /// Creation order: the binding after what it binds.
    pub const ALL: [IdentityObject; 5] = [
        IdentityObject::ServiceAccount,
        IdentityObject::ClusterRole,
        IdentityObject::ClusterRoleBinding,
        IdentityObject::AdmissionPolicy,
        IdentityObject::AdmissionPolicyBinding,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            IdentityObject::ServiceAccount => "ServiceAccount",
            IdentityObject::ClusterRole => "ClusterRole",
            IdentityObject::ClusterRoleBinding => "ClusterRoleBinding",
            IdentityObject::AdmissionPolicy => "ValidatingAdmissionPolicy",
            IdentityObject::AdmissionPolicyBinding => "ValidatingAdmissionPolicyBinding",
        }
    }

    /// What creating it is for, as an error names the action.
    pub fn purpose(self) -> &'static str {
        match self {
            IdentityObject::ServiceAccount => "creating the plugin's ServiceAccount",
            IdentityObject::ClusterRole => "creating the plugin's ClusterRole",
            IdentityObject::ClusterRoleBinding => "creating the plugin's ClusterRoleBinding",
            IdentityObject::AdmissionPolicy => "creating the ResourceSlice admission policy",
            IdentityObject::AdmissionPolicyBinding => "creating the admission policy binding",
        }
    }

    pub fn name(self, id: &Identity) -> String {
        match self {
            IdentityObject::ServiceAccount => id.service_account(),
            IdentityObject::ClusterRole => id.role(),
            IdentityObject::ClusterRoleBinding => id.binding(),
            // The binding is named after the policy it binds.
            IdentityObject::AdmissionPolicy | IdentityObject::AdmissionPolicyBinding => id.policy(),
        }
    }

    pub async fn create(
        self,
        admin: &kube::Client,
        id: &Identity,
        objects: &Objects,
    ) -> Result<(), kube::Error> {
        let pp = PostParams::default();
        let c = admin.clone();
        match self {
            IdentityObject::ServiceAccount => Api::namespaced(c, &id.namespace)
                .create(&pp, &objects.service_account)
                .await
                .map(drop),
            IdentityObject::ClusterRole => Api::all(c).create(&pp, &objects.role).await.map(drop),
            IdentityObject::ClusterRoleBinding => {
                Api::all(c).create(&pp, &objects.binding).await.map(drop)
            }
            IdentityObject::AdmissionPolicy => {
                Api::all(c).create(&pp, &objects.policy).await.map(drop)
            }
            IdentityObject::AdmissionPolicyBinding => Api::all(c)
                .create(&pp, &objects.policy_binding)
                .await
                .map(drop),
        }
    }

    /// Deletes it; one already gone counts as deleted.
    pub async fn delete(self, admin: &kube::Client, id: &Identity) -> Result<(), kube::Error> {
        let name = self.name(id);
        let dp = DeleteParams::default();
        let c = admin.clone();
        match self {
            IdentityObject::ServiceAccount => {
                let api = Api::<ServiceAccount>::namespaced(c, &id.namespace);
                delete_if_present(&api, &name, &dp).await
            }
            IdentityObject::ClusterRole => {
                delete_if_present(&Api::<ClusterRole>::all(c), &name, &dp).await
            }
            IdentityObject::ClusterRoleBinding => {
                delete_if_present(&Api::<ClusterRoleBinding>::all(c), &name, &dp).await
            }
            IdentityObject::AdmissionPolicy => {
                delete_if_present(&Api::<ValidatingAdmissionPolicy>::all(c), &name, &dp).await
            }
            IdentityObject::AdmissionPolicyBinding => {
                let api = Api::<ValidatingAdmissionPolicyBinding>::all(c);
                delete_if_present(&api, &name, &dp).await
            }
        }
    }
}

/// A kube config that acts as the plugin on `node`, as the pod's projected
/// service-account token would: user, groups and the node/pod extras.
pub fn impersonate(
    admin: &kube::Config,
    id: &Identity,
    node: &str,
    pod: Option<(&str, &str)>,
) -> kube::Config {
    let mut config = admin.clone();
    config.auth_info.impersonate = Some(id.user());
    config.auth_info.impersonate_groups = Some(id.groups());
    let mut extra = std::collections::HashMap::new();
    extra.insert(
        "authentication.kubernetes.io/node-name".to_owned(),
        vec![node.to_owned()],
    );
    if let Some((name, uid)) = pod {
        extra.insert(
            "authentication.kubernetes.io/pod-name".to_owned(),
            vec![name.to_owned()],
        );
        extra.insert(
            "authentication.kubernetes.io/pod-uid".to_owned(),
            vec![uid.to_owned()],
        );
    }
    config.auth_info.impersonate_user_extra = Some(extra);
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_upstream() {
        let id = Identity::new("dra-1", "dra-1.k8s.io", "");
        assert_eq!(
            id.service_account(),
            "dra-kubelet-plugin-dra-1.k8s.io-service-account"
        );
        assert_eq!(
            id.policy(),
            "resourceslices-policy-dra-kubelet-plugin-dra-1.k8s.io"
        );
        assert_eq!(
            id.user(),
            "system:serviceaccount:dra-1:dra-kubelet-plugin-dra-1.k8s.io-service-account"
        );
        let o = objects(&id).unwrap();
        let p = serde_json::to_value(&o.policy).unwrap();
        let msg = p["spec"]["validations"][1]["messageExpression"]
            .as_str()
            .unwrap();
        assert!(msg.starts_with("\"this user running on node '\"+"), "{msg}");
        assert!(msg.contains("cluster resourceslices"), "{msg}");
    }

    #[test]
    fn impersonation_carries_node_extra() {
        let admin = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
        let id = Identity::new("ns", "d", "");
        let c = impersonate(&admin, &id, "node-1", None);
        assert_eq!(c.auth_info.impersonate.as_deref(), Some(id.user().as_str()));
        let extra = c.auth_info.impersonate_user_extra.unwrap();
        assert_eq!(
            extra["authentication.kubernetes.io/node-name"],
            vec!["node-1"]
        );
    }
}
