//! Which APIs a cluster serves, for scenarios that need one an older or
//! differently configured cluster may lack (`@API:` tags): asked of the
//! cluster itself, so it holds for a local control plane at any
//! `--kube-version` and for any kubeconfig cluster alike.

/// An API a scenario needs: `<group>/<version>/<resource>`, or
/// `<version>/<resource>` in the core group (`resource.k8s.io/v1/devicetaintrules`,
/// `v1/pods`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct NeededApi {
    pub group_version: String,
    pub resource: String,
}

impl NeededApi {
    /// `None` for anything else than two or three non-empty `/`-separated words.
    pub fn parse(text: &str) -> Option<Self> {
        let (group_version, resource) = text.rsplit_once('/')?;
        let words = group_version.split('/').count();
        let ok = !resource.is_empty()
            && group_version.split('/').all(|w| !w.is_empty())
            && (1..=2).contains(&words);
        ok.then(|| Self {
            group_version: group_version.to_owned(),
            resource: resource.to_owned(),
        })
    }
}

impl std::fmt::Display for NeededApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.group_version, self.resource)
    }
}

/// Whether the cluster serves `api`. A group version it does not serve at
/// all is "no", not an error; any other failure is.
pub async fn serves(client: &kube::Client, api: &NeededApi) -> Result<bool, kube::Error> {
    let list = if api.group_version.contains('/') {
        client.list_api_group_resources(&api.group_version).await
    } else {
        client.list_core_api_resources(&api.group_version).await
    };
    match list {
        Ok(list) => Ok(list.resources.iter().any(|r| r.name == api.resource)),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needed_apis_are_group_version_and_resource() {
        let a = NeededApi::parse("resource.k8s.io/v1/devicetaintrules").unwrap();
        assert_eq!(a.group_version, "resource.k8s.io/v1");
        assert_eq!(a.resource, "devicetaintrules");
        assert_eq!(a.to_string(), "resource.k8s.io/v1 devicetaintrules");
        let core = NeededApi::parse("v1/pods").unwrap();
        assert_eq!(
            (core.group_version.as_str(), core.resource.as_str()),
            ("v1", "pods")
        );
        for bad in [
            "devicetaintrules",
            "resource.k8s.io/v1/",
            "a/b/c/d",
            "/v1/pods",
            "a//b",
        ] {
            assert_eq!(NeededApi::parse(bad), None, "{bad}");
        }
    }
}
