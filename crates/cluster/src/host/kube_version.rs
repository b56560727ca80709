//! Which Kubernetes the local cluster is built at: the control plane
//! (`--kube-version`) and the real nodes' kubelet (`--kubelet-version`).
//!
//! Upstream builds its node suite's kubelet from the same branch as the
//! control plane, so skew between them is tested only by occasional canaries;
//! the local cluster builds each from the Go module proxy into its own cache
//! directory, so any CI can run a kubelet older than its control plane. A
//! version is given whole (`v1.36.3`) or by its minor (`1.36`), which
//! `hack/versions.env` resolves to the patch release it pins, so a run names
//! exactly what it built.
use std::fmt;
use std::str::FromStr;

use crate::host::binaries::pinned_versions;

/// How many minor versions a kubelet may lag its control plane (the
/// Kubernetes version skew policy since 1.28).
pub const KUBELET_MAX_SKEW: u32 = 3;

/// A Kubernetes release `v1.MINOR.PATCH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KubeVersion {
    pub minor: u32,
    pub patch: u32,
}

/// A version a user asked for that cannot be used, named after what they gave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error(
        "{given:?} is not a Kubernetes version: expected 1.MINOR (a release pinned in \
         hack/versions.env) or v1.MINOR.PATCH, e.g. 1.36 or v1.36.3"
    )]
    Malformed { given: String },
    #[error(
        "no release of Kubernetes 1.{minor} is pinned in hack/versions.env (pinned: {pinned}); \
         give a whole version such as v1.{minor}.0 that the Go module proxy serves"
    )]
    NotPinned { minor: u32, pinned: String },
    #[error(
        "kubelet {kubelet} is newer than the control plane {control_plane}: the version skew \
         policy allows a kubelet older than its control plane, never newer"
    )]
    KubeletNewer {
        kubelet: KubeVersion,
        control_plane: KubeVersion,
    },
    #[error(
        "kubelet {kubelet} is {behind} minor versions older than the control plane \
         {control_plane}: the version skew policy allows at most {KUBELET_MAX_SKEW}, so the \
         oldest kubelet for it is 1.{oldest}"
    )]
    KubeletTooOld {
        kubelet: KubeVersion,
        control_plane: KubeVersion,
        behind: u32,
        oldest: u32,
    },
}

impl KubeVersion {
    /// `v1.MINOR.PATCH` (the `v` optional).
    pub fn parse_whole(text: &str) -> Option<Self> {
        let rest = text.trim().trim_start_matches('v').strip_prefix("1.")?;
        let (minor, patch) = rest.split_once('.')?;
        Some(Self {
            minor: minor.parse().ok()?,
            patch: patch.parse().ok()?,
        })
    }

    /// The version the suite is built and tested at (`KUBE_VERSION`).
    pub fn pinned() -> Self {
        // The file is part of the source tree; the unit tests catch a bad line.
        pinned_versions()
            .get("KUBE_VERSION")
            .and_then(|v| Self::parse_whole(v))
            .unwrap_or(Self { minor: 0, patch: 0 })
    }

    /// Every release `hack/versions.env` pins: `KUBE_VERSION` and the older
    /// ones of `SKEW_KUBE_VERSIONS`, newest first.
    pub fn pinned_releases() -> Vec<Self> {
        let map = pinned_versions();
        let mut all: Vec<Self> = std::iter::once(Self::pinned())
            .chain(
                map.get("SKEW_KUBE_VERSIONS")
                    .into_iter()
                    .flat_map(|v| v.split_whitespace())
                    .filter_map(Self::parse_whole),
            )
            .collect();
        all.sort_by(|a, b| b.cmp(a));
        all.dedup();
        all
    }

    /// What a user gave: a whole version as it is, a minor as the release
    /// pinned for it.
    pub fn resolve(given: &str) -> Result<Self, VersionError> {
        Self::resolve_among(given, &Self::pinned_releases())
    }

    fn resolve_among(given: &str, pinned: &[Self]) -> Result<Self, VersionError> {
        if let Some(v) = Self::parse_whole(given) {
            return Ok(v);
        }
        let malformed = || VersionError::Malformed {
            given: given.to_owned(),
        };
        let minor: u32 = given
            .trim()
            .trim_start_matches('v')
            .strip_prefix("1.")
            .ok_or_else(malformed)?
            .parse()
            .map_err(|_| malformed())?;
        pinned
            .iter()
            .find(|v| v.minor == minor)
            .copied()
            .ok_or_else(|| VersionError::NotPinned {
                minor,
                pinned: pinned
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Whether a kubelet at `kubelet` may run against `control_plane`.
    pub fn check_kubelet_skew(
        control_plane: KubeVersion,
        kubelet: KubeVersion,
    ) -> Result<(), VersionError> {
        if kubelet.minor > control_plane.minor {
            return Err(VersionError::KubeletNewer {
                kubelet,
                control_plane,
            });
        }
        let behind = control_plane.minor - kubelet.minor;
        if behind > KUBELET_MAX_SKEW {
            return Err(VersionError::KubeletTooOld {
                kubelet,
                control_plane,
                behind,
                oldest: control_plane.minor.saturating_sub(KUBELET_MAX_SKEW),
            });
        }
        Ok(())
    }

    /// `1.MINOR`, as tags (`@KubeletMinVersion:1.36`) write it.
    pub fn minor_text(&self) -> String {
        format!("1.{}", self.minor)
    }
}

impl fmt::Display for KubeVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v1.{}.{}", self.minor, self.patch)
    }
}

impl FromStr for KubeVersion {
    type Err = VersionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::resolve(s)
    }
}

/// The version a built Kubernetes program reports (`--version` prints
/// `Kubernetes v1.37.2`), `None` when it cannot say.
pub fn program_version(program: &std::path::Path) -> Option<KubeVersion> {
    let out = std::process::Command::new(program)
        .arg("--version")
        .stdin(std::process::Stdio::null())
        .output()
        .ok()?;
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .find_map(KubeVersion::parse_whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(minor: u32, patch: u32) -> KubeVersion {
        KubeVersion { minor, patch }
    }

    #[test]
    fn whole_versions_parse_with_or_without_v() {
        assert_eq!(KubeVersion::parse_whole("v1.36.3"), Some(v(36, 3)));
        assert_eq!(KubeVersion::parse_whole("1.34.10"), Some(v(34, 10)));
        assert_eq!(KubeVersion::parse_whole("v1.36"), None);
        assert_eq!(KubeVersion::parse_whole("v2.1.0"), None);
        assert_eq!(v(36, 3).to_string(), "v1.36.3");
        assert_eq!(v(36, 3).minor_text(), "1.36");
    }

    #[test]
    fn a_minor_resolves_to_its_pinned_release() {
        let pinned = [v(37, 2), v(36, 3), v(34, 4)];
        assert_eq!(KubeVersion::resolve_among("1.36", &pinned), Ok(v(36, 3)));
        assert_eq!(KubeVersion::resolve_among("v1.37", &pinned), Ok(v(37, 2)));
        assert_eq!(
            KubeVersion::resolve_among("v1.35.1", &pinned),
            Ok(v(35, 1)),
            "a whole version needs no pin"
        );
        let err = KubeVersion::resolve_among("1.35", &pinned).unwrap_err();
        assert!(
            err.to_string()
                .contains("no release of Kubernetes 1.35 is pinned"),
            "{err}"
        );
        assert!(err.to_string().contains("v1.36.3"), "{err}");
        for bad in ["", "latest", "1", "1.x", "2.3"] {
            assert!(
                matches!(
                    KubeVersion::resolve_among(bad, &pinned),
                    Err(VersionError::Malformed { .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn the_pinned_releases_come_from_versions_env() {
        let all = KubeVersion::pinned_releases();
        assert_eq!(all.first(), Some(&KubeVersion::pinned()));
        assert!(KubeVersion::pinned().minor >= 35, "{all:?}");
        // n-1 and n-3 are pinned for the skew runs.
        for back in [1, 3] {
            let minor = KubeVersion::pinned().minor - back;
            assert!(all.iter().any(|v| v.minor == minor), "1.{minor}: {all:?}");
        }
    }

    #[test]
    fn the_skew_policy_allows_three_minors_older_and_none_newer() {
        let cp = v(37, 2);
        for ok in [v(37, 0), v(36, 3), v(34, 4)] {
            assert_eq!(KubeVersion::check_kubelet_skew(cp, ok), Ok(()), "{ok}");
        }
        let err = KubeVersion::check_kubelet_skew(cp, v(33, 9)).unwrap_err();
        assert!(err.to_string().contains("4 minor versions older"), "{err}");
        assert!(err.to_string().contains("1.34"), "{err}");
        let err = KubeVersion::check_kubelet_skew(v(35, 4), v(36, 3)).unwrap_err();
        assert!(matches!(err, VersionError::KubeletNewer { .. }), "{err}");
    }
}
