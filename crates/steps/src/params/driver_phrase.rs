//! The grammar of driver sentences: `2 devices per node, serving the v1beta1
//! API`, `a network pool of 10 tainted devices`, `these devices:` ...
use super::NodeList;
use crate::harness::driver::slices::{self, Taint};
use crate::plugin::metadata::MetadataVersion;
use crate::plugin::{HealthApi, NodeApi};

/// What `a driver with <resources>[, <setting>]...` asks for.
#[derive(Debug, Clone, PartialEq, cucumber::Parameter)]
#[param(name = "driverphrase", regex = ".+")]
pub struct DriverPhrase {
    pub resources: ResourcesPhrase,
    pub with_kubelet: bool,
    pub apis: Option<Vec<NodeApi>>,
    /// Health service versions; `None` for the default (all).
    pub health_apis: Option<Vec<HealthApi>>,
    pub rolling_update: bool,
    /// `with its DRA service started after registration`.
    pub dra_service_later: bool,
    /// `with its DRA socket in the plugin registry`.
    pub dra_socket_in_registry: bool,
    pub start_later: bool,
    /// `writing device metadata v1beta1 [and v1alpha1]`.
    pub device_metadata: Vec<MetadataVersion>,
    /// `spec.skipNodeOperations` of the driver's slices.
    pub skip_node_operations: Vec<String>,
    /// `on node 0`, `on nodes 0 and 2`: the scenario's nodes the driver runs
    /// on (indexes); `None` for all of them.
    pub on_nodes: Option<NodeList>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ResourcesPhrase {
    PerNode(usize),
    Network(usize, Vec<Taint>),
    AllNodes(String, usize),
    FromTable,
    /// `these slices per node:` with the slices as a YAML doc string.
    SlicesFromDoc,
    /// `a shared pool "p" of these slices:` with the slices as a YAML doc
    /// string.
    SharedPool(String),
    /// `node-allocatable devices "<devices>"`: one slice per node of devices
    /// carrying nodeAllocatableResources, in the one-line form of
    /// `driver::allocatable`.
    NodeAllocatable(String),
    None,
}

fn count_of(s: &str, unit: &str) -> Option<usize> {
    let s = s.strip_suffix(unit)?.trim_end();
    s.parse().ok()
}

impl std::str::FromStr for DriverPhrase {
    type Err = String;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        // A part's error quotes the part, which may be empty (`, in
        // rolling-update mode`): the whole phrase is said too.
        let whole = |e: String| format!("{e}, in {input:?}");
        // A colon may introduce the table of `these devices` or the doc
        // string of `these slices per node`.
        let s = input.strip_suffix(':').unwrap_or(input);
        let mut parts = settings(s).into_iter();
        let mut phrase = DriverPhrase {
            resources: parts
                .next()
                .unwrap_or_default()
                .trim()
                .parse()
                .map_err(whole)?,
            with_kubelet: true,
            apis: None,
            health_apis: None,
            rolling_update: false,
            dra_service_later: false,
            dra_socket_in_registry: false,
            start_later: false,
            device_metadata: Vec::new(),
            skip_node_operations: Vec::new(),
            on_nodes: None,
        };
        let mut parts = parts.peekable();
        while let Some(setting) = parts.next() {
            let mut setting = setting.trim().to_owned();
            // `on nodes 0, 1 and 3` holds the separator of settings itself.
            if setting.starts_with("on node") {
                while let Some(more) =
                    parts.next_if(|p| p.starts_with(|c: char| c.is_ascii_digit()))
                {
                    setting = format!("{setting}, {more}");
                }
            }
            phrase.apply(&setting).map_err(whole)?;
        }
        Ok(phrase)
    }
}

impl DriverPhrase {
    /// One `, <setting>` of the phrase.
    fn apply(&mut self, setting: &str) -> Result<(), String> {
        match setting {
            "not registered with the kubelet" => self.with_kubelet = false,
            "in rolling-update mode" => self.rolling_update = true,
            "not started yet" => self.start_later = true,
            "with its DRA service started after registration" => self.dra_service_later = true,
            "with its DRA socket in the plugin registry" => self.dra_socket_in_registry = true,
            "without device health" => self.health_apis = Some(Vec::new()),
            _ if setting.starts_with("on node") => {
                self.on_nodes = Some(setting["on ".len()..].parse()?);
            }
            _ if setting.starts_with("writing device metadata ") => {
                let list = &setting["writing device metadata ".len()..];
                self.device_metadata = list
                    .split(" and ")
                    .map(|v| v.trim().parse())
                    .collect::<Result<_, _>>()?;
            }
            _ if setting.starts_with("skipping node operations ") => {
                self.skip_node_operations = quoted_list(setting)?;
            }
            _ => {
                // `serving the <versions> [health ]API[s]`
                let versions = setting
                    .strip_prefix("serving the ")
                    .and_then(|r| r.strip_suffix(" APIs").or(r.strip_suffix(" API")))
                    .ok_or_else(|| {
                        format!(
                            "unknown driver setting {setting:?}; known: `not registered with the kubelet`, \
                             `serving the v1beta1 API`, `serving the v1 and v1beta1 APIs`, \
                             `serving the v1alpha1 health API`, `without device health`, \
                             `writing device metadata v1beta1 and v1alpha1`, \
                             `in rolling-update mode`, `not started yet`, \
                             `with its DRA service started after registration`, \
                             `with its DRA socket in the plugin registry`, \
                             `skipping node operations \"*\"`, `on node 0`, `on nodes 0 and 1`"
                        )
                    })?;
                match versions.strip_suffix(" health") {
                    Some(health) => self.health_apis = Some(version_list(health)?),
                    None => self.apis = Some(version_list(versions)?),
                }
            }
        }
        Ok(())
    }
}

impl std::str::FromStr for ResourcesPhrase {
    type Err = String;

    fn from_str(res: &str) -> Result<Self, Self::Err> {
        if res == "no devices" {
            return Ok(ResourcesPhrase::None);
        }
        if res == "these devices" {
            return Ok(ResourcesPhrase::FromTable);
        }
        if res == "these slices per node" {
            return Ok(ResourcesPhrase::SlicesFromDoc);
        }
        if let Some(rest) = res.strip_prefix("a shared pool \"") {
            let pool = rest.strip_suffix("\" of these slices").ok_or_else(|| {
                format!("expected `a shared pool \"name\" of these slices`, got {res:?}")
            })?;
            return Ok(ResourcesPhrase::SharedPool(pool.to_owned()));
        }
        if let Some(rest) = res.strip_prefix("node-allocatable devices ") {
            let devices = rest
                .strip_prefix('"')
                .and_then(|r| r.strip_suffix('"'))
                .ok_or_else(|| {
                    format!("expected `node-allocatable devices \"<devices>\"`, got {res:?}")
                })?;
            return Ok(ResourcesPhrase::NodeAllocatable(devices.to_owned()));
        }
        if let Some(n) = count_of(res, "devices per node").or(count_of(res, "device per node")) {
            return Ok(ResourcesPhrase::PerNode(n));
        }
        if let Some(rest) = res.strip_prefix("a network pool of ") {
            return network_pool(res, rest);
        }
        if let Some(rest) = res.strip_prefix("an all-nodes pool \"") {
            let (pool, rest) = rest.split_once("\" of ").ok_or_else(|| {
                format!("expected `an all-nodes pool \"name\" of N devices`, got {res:?}")
            })?;
            let n = count_of(rest, "devices")
                .or(count_of(rest, "device"))
                .ok_or_else(|| format!("cannot read the device count in {res:?}"))?;
            return Ok(ResourcesPhrase::AllNodes(pool.to_owned(), n));
        }
        Err(format!(
            "unknown resources {res:?}; use `N devices per node`, `a network pool of N devices`, \
             `an all-nodes pool \"name\" of N devices`, `these devices` (with a table), \
             `these slices per node` or `a shared pool \"name\" of these slices` (with a \
             YAML doc string), \
             `node-allocatable devices \"<devices>\"` or `no devices`"
        ))
    }
}

/// The parts of a phrase between `, `, except inside double quotes (the
/// one-line devices of `node-allocatable devices "..."` hold commas).
fn settings(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut start, mut quoted) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted && s[i..].starts_with(", ") => {
                parts.push(&s[start..i]);
                start = i + 2;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

/// `N devices`, `N tainted devices` or `N devices tainted k=v:Effect`, after
/// `a network pool of ` in `res`.
fn network_pool(res: &str, rest: &str) -> Result<ResourcesPhrase, String> {
    let (main, explicit) = match rest.split_once(" tainted ") {
        Some((m, t)) if t.contains(':') => (m, Some(t)),
        _ => (rest, None),
    };
    let (count, default_tainted) = match main.split_once(" tainted ") {
        Some((c, _)) => (c, true),
        None => (main.split(' ').next().unwrap_or_default(), false),
    };
    let n: usize = count
        .trim()
        .parse()
        .map_err(|_| format!("cannot read the device count in {res:?}"))?;
    let mut taints = Vec::new();
    if default_tainted {
        taints.push(slices::default_taint());
    }
    if let Some(t) = explicit {
        taints.push(t.parse()?);
    }
    Ok(ResourcesPhrase::Network(n, taints))
}

/// `skipping node operations "A" and "B"`: the quoted words, as written.
fn quoted_list(setting: &str) -> Result<Vec<String>, String> {
    let rest = setting.trim_start_matches("skipping node operations ");
    let words: Vec<String> = rest
        .split(" and ")
        .map(|w| {
            w.trim()
                .strip_prefix('"')
                .and_then(|w| w.strip_suffix('"'))
                .map(str::to_owned)
                .ok_or_else(|| {
                    format!(
                        "expected `skipping node operations \"<operation>\"[ and \"<operation>\"]`, got {setting:?}"
                    )
                })
        })
        .collect::<Result<_, _>>()?;
    Ok(words)
}

/// `v1 and v1beta1`, `v1, v1beta1`, `v1alpha1 only`: API versions.
fn version_list<T: std::str::FromStr<Err: std::fmt::Display>>(
    words: &str,
) -> Result<Vec<T>, String> {
    words
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "and" && *w != "only")
        .map(|w| w.parse::<T>().map_err(|e| e.to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_phrases() {
        let p: DriverPhrase = "1 device per node".parse().unwrap();
        assert_eq!(p.resources, ResourcesPhrase::PerNode(1));
        assert!(p.with_kubelet);
        let p: DriverPhrase = "a network pool of 10 devices, not registered with the kubelet"
            .parse()
            .unwrap();
        assert_eq!(p.resources, ResourcesPhrase::Network(10, vec![]));
        assert!(!p.with_kubelet);
        let p: DriverPhrase = "these devices:".parse().unwrap();
        assert!(matches!(p.resources, ResourcesPhrase::FromTable));
        let p: DriverPhrase =
            "a shared pool \"partitioned\" of these slices, not registered with the kubelet:"
                .parse()
                .unwrap();
        assert_eq!(
            p.resources,
            ResourcesPhrase::SharedPool("partitioned".into())
        );
        assert!(!p.with_kubelet);
        // The commas inside the quotes belong to the devices, not settings.
        let p: DriverPhrase =
            "node-allocatable devices \"d: memory 1Gi per device, cpu 1 per device\", on node 0"
                .parse()
                .unwrap();
        assert_eq!(
            p.resources,
            ResourcesPhrase::NodeAllocatable("d: memory 1Gi per device, cpu 1 per device".into())
        );
        assert_eq!(p.on_nodes, Some(NodeList(vec![0])));
        let e = "node-allocatable devices d: cpu 1 per device"
            .parse::<DriverPhrase>()
            .unwrap_err();
        assert!(
            e.contains("expected `node-allocatable devices \"<devices>\"`"),
            "{e}"
        );
        let p: DriverPhrase = "a network pool of 10 tainted devices".parse().unwrap();
        assert_eq!(
            p.resources,
            ResourcesPhrase::Network(10, vec![slices::default_taint()])
        );
        let p: DriverPhrase = "a network pool of 4 devices tainted a=b:NoExecute"
            .parse()
            .unwrap();
        let ResourcesPhrase::Network(4, t) = p.resources else {
            panic!()
        };
        assert_eq!(t[0].effect, "NoExecute");
        let p: DriverPhrase = "2 devices per node, serving the v1beta1 API"
            .parse()
            .unwrap();
        assert_eq!(p.apis, Some(vec![NodeApi::V1beta1]));
        let p: DriverPhrase =
            "2 devices per node, serving the v1 and v1beta1 APIs, in rolling-update mode"
                .parse()
                .unwrap();
        assert_eq!(p.apis, Some(vec![NodeApi::V1, NodeApi::V1beta1]));
        assert!(p.rolling_update);
        assert_eq!(p.health_apis, None);
        let p: DriverPhrase = "1 device per node, serving the v1alpha1 health API"
            .parse()
            .unwrap();
        assert_eq!(p.health_apis, Some(vec![HealthApi::V1alpha1]));
        assert_eq!(p.apis, None);
        let p: DriverPhrase = "1 device per node, without device health".parse().unwrap();
        assert_eq!(p.health_apis, Some(vec![]));
        assert!(
            "1 device per node, serving the v2 health API"
                .parse::<DriverPhrase>()
                .is_err()
        );
        let p: DriverPhrase = "an all-nodes pool \"all-nodes-pool\" of 1 device"
            .parse()
            .unwrap();
        assert_eq!(
            p.resources,
            ResourcesPhrase::AllNodes("all-nodes-pool".into(), 1)
        );
        assert!("3 gadgets".parse::<DriverPhrase>().is_err());
        let p: DriverPhrase =
            "1 device per node, not registered with the kubelet, skipping node operations \"*\""
                .parse()
                .unwrap();
        assert_eq!(p.skip_node_operations, vec!["*".to_string()]);
        let p: DriverPhrase = "1 device per node, skipping node operations \"NodePrepareResources\" and \"NodeUnprepareResources\""
            .parse()
            .unwrap();
        assert_eq!(p.skip_node_operations.len(), 2);
        assert!(
            "1 device per node, skipping node operations all"
                .parse::<DriverPhrase>()
                .is_err()
        );
        let p: DriverPhrase = "a network pool of 2 devices, on node 1".parse().unwrap();
        assert_eq!(p.on_nodes, Some(NodeList(vec![1])));
        let p: DriverPhrase = "1 device per node, on nodes 0, 2 and 3, serving the v1beta1 API"
            .parse()
            .unwrap();
        assert_eq!(p.on_nodes, Some(NodeList(vec![0, 2, 3])));
        assert_eq!(p.apis, Some(vec![NodeApi::V1beta1]));
        assert!(
            "1 device per node, on nodes 1"
                .parse::<DriverPhrase>()
                .is_err()
        );
        let err = "1 device per node, blue"
            .parse::<DriverPhrase>()
            .unwrap_err();
        assert!(err.contains("unknown driver setting"), "{err}");
    }
}
