//! Where the plugin reads ResourceClaims from: the API server, with the driver's
//! own (impersonated, node-scoped) identity.
use async_trait::async_trait;
use k8s_openapi::api::resource::v1::ResourceClaim;

#[derive(Debug, thiserror::Error)]
pub enum ClaimSourceError {
    #[error("get ResourceClaim {namespace}/{name}: {source}")]
    Api {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("get ResourceClaim {namespace}/{name}: {message}")]
    Other {
        namespace: String,
        name: String,
        message: String,
    },
}

/// Reads ResourceClaims. `Ok(None)` means the claim does not exist.
#[async_trait]
pub trait ClaimSource: Send + Sync {
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceClaim>, ClaimSourceError>;
}

/// The driver's client; RBAC and the admission policy apply as to a real plugin.
#[async_trait]
impl ClaimSource for kube::Client {
    async fn get_claim(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<ResourceClaim>, ClaimSourceError> {
        kube::Api::<ResourceClaim>::namespaced(self.clone(), namespace)
            .get_opt(name)
            .await
            .map_err(|source| ClaimSourceError::Api {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
                source,
            })
    }
}
