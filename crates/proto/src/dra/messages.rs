//! The DRA node service's messages as every version means them.
use std::collections::HashMap;
use std::fmt;

/// A claim as the kubelet names it in prepare and unprepare requests; the
/// plugin reads the claim itself.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

impl fmt::Display for ClaimRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} ({})", self.namespace, self.name, self.uid)
    }
}

/// One device a plugin prepared for a claim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PreparedDevice {
    /// Requests this device serves (base names, subrequest stripped); empty
    /// means all of the claim's requests.
    pub request_names: Vec<String>,
    pub pool_name: String,
    pub device_name: String,
    pub cdi_device_ids: Vec<String>,
    /// Only the v1 API carries it; older versions drop it on the wire.
    pub share_id: Option<String>,
}

/// One claim's entry in a `NodePrepareResources` response, as on the wire:
/// a non-empty `error` means the claim failed, whatever `devices` says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PrepareResult {
    pub devices: Vec<PreparedDevice>,
    pub error: String,
}

/// A plugin's answer for one claim: its devices or why it failed.
impl From<Result<Vec<PreparedDevice>, String>> for PrepareResult {
    fn from(result: Result<Vec<PreparedDevice>, String>) -> Self {
        match result {
            Ok(devices) => PrepareResult {
                devices,
                error: String::new(),
            },
            Err(error) => PrepareResult {
                devices: Vec::new(),
                error,
            },
        }
    }
}

/// `NodePrepareResources` results by claim UID.
pub type PrepareResponse = HashMap<String, PrepareResult>;

/// `NodeUnprepareResources` errors by claim UID; empty for success, as on
/// the wire.
pub type UnprepareResponse = HashMap<String, String>;
