//! Devices that carry `nodeAllocatableResources` (gate
//! DRANodeAllocatableResources): a device that models node CPU or memory
//! itself (a mapping, per allocated device) or that costs the node some on
//! top (an overhead, per pod and per container referencing the claim).
//!
//! Feature files describe them in one line, so that a case of upstream's
//! table fits one row of an Examples table:
//!
//! ```text
//! device-01: memory 1000Mi per device, cpu 1 per device; device-02: cpu 100m per pod + 100m per container
//! ```
use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    Device, NodeAllocatableMapping, NodeAllocatableOverhead, NodeAllocatableResource,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocatableError {
    #[error(
        "device {0:?} must be `<name>: <resource> <quantity> per device|pod|container [+ ...], ...`"
    )]
    Device(String),
    #[error(
        "{0:?} must be `<resource> <quantity> per device|pod|container`, terms joined by ` + `"
    )]
    Term(String),
    #[error("{resource} of device {device} says `per {per}` twice")]
    Twice {
        device: String,
        resource: String,
        per: String,
    },
    #[error("no devices given")]
    Empty,
    #[error(transparent)]
    Quantity(#[from] crate::quantity::QuantityError),
}

/// The devices of a `;`-separated list (see the module docs).
pub fn parse_devices(spec: &str) -> Result<Vec<Device>, AllocatableError> {
    let devices: Vec<Device> = spec
        .split(';')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(parse_device)
        .collect::<Result<_, _>>()?;
    if devices.is_empty() {
        return Err(AllocatableError::Empty);
    }
    Ok(devices)
}

fn parse_device(spec: &str) -> Result<Device, AllocatableError> {
    let (name, resources) = spec
        .split_once(':')
        .ok_or_else(|| AllocatableError::Device(spec.to_owned()))?;
    let name = name.trim();
    if name.is_empty() || name.contains(char::is_whitespace) {
        return Err(AllocatableError::Device(spec.to_owned()));
    }
    let mut map: BTreeMap<String, NodeAllocatableResource> = BTreeMap::new();
    for entry in resources.split(',').map(str::trim) {
        let (resource, terms) = entry
            .split_once(char::is_whitespace)
            .ok_or_else(|| AllocatableError::Term(entry.to_owned()))?;
        let slot = map.entry(resource.to_owned()).or_default();
        for term in terms.split('+').map(str::trim) {
            let words: Vec<&str> = term.split_whitespace().collect();
            let [quantity, "per", per] = words[..] else {
                return Err(AllocatableError::Term(term.to_owned()));
            };
            let field = match per {
                "device" => {
                    &mut slot
                        .mapping
                        .get_or_insert_with(NodeAllocatableMapping::default)
                        .device_multiplier
                }
                "pod" => {
                    &mut slot
                        .overhead
                        .get_or_insert_with(NodeAllocatableOverhead::default)
                        .per_pod
                }
                "container" => {
                    &mut slot
                        .overhead
                        .get_or_insert_with(NodeAllocatableOverhead::default)
                        .per_container
                }
                _ => return Err(AllocatableError::Term(term.to_owned())),
            };
            if field.is_some() {
                return Err(AllocatableError::Twice {
                    device: name.to_owned(),
                    resource: resource.to_owned(),
                    per: per.to_owned(),
                });
            }
            crate::quantity::Quantity::parse(quantity)?;
            *field = Some(Quantity(quantity.to_owned()));
        }
    }
    Ok(Device {
        name: name.to_owned(),
        node_allocatable_resources: Some(map),
        ..Device::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mappings_and_overheads_become_the_api_fields() {
        let devices = parse_devices(
            "device-01: memory 1000Mi per device + 100Mi per pod + 100Mi per container, cpu 1 per device; \
             device-02: hugepages-2Mi 100Mi per pod + 50Mi per container",
        )
        .expect("valid");
        let v = serde_json::to_value(&devices).expect("serializes");
        assert_eq!(
            v,
            json!([
                { "name": "device-01", "nodeAllocatableResources": {
                    "cpu": { "mapping": { "deviceMultiplier": "1" } },
                    "memory": {
                        "mapping": { "deviceMultiplier": "1000Mi" },
                        "overhead": { "perPod": "100Mi", "perContainer": "100Mi" },
                    },
                }},
                { "name": "device-02", "nodeAllocatableResources": {
                    "hugepages-2Mi": { "overhead": { "perPod": "100Mi", "perContainer": "50Mi" } },
                }},
            ])
        );
    }

    #[test]
    fn a_malformed_spec_says_what_is_expected() {
        assert_eq!(
            parse_devices("device-01 memory 1Gi per device"),
            Err(AllocatableError::Device(
                "device-01 memory 1Gi per device".into()
            ))
        );
        assert_eq!(
            parse_devices("d: memory 1Gi per node"),
            Err(AllocatableError::Term("1Gi per node".into()))
        );
        assert_eq!(
            parse_devices("d: memory 1Gi"),
            Err(AllocatableError::Term("1Gi".into()))
        );
        assert!(matches!(
            parse_devices("d: cpu 1 per pod + 2 per pod"),
            Err(AllocatableError::Twice { .. })
        ));
        assert_eq!(parse_devices(" ; "), Err(AllocatableError::Empty));
        assert!(matches!(
            parse_devices("d: memory 1GB per device"),
            Err(AllocatableError::Quantity(e)) if e.input == "1GB"
        ));
    }
}

/// Generated device lines: each parses or is refused naming the device,
/// term or quantity that is wrong. `PROPTEST_CASES` raises the bounded
/// count (`make props-long`).
#[cfg(test)]
mod props {
    use super::*;
    use crate::props::text;
    use proptest::prelude::*;

    const PIECES: &[&str] = &[
        "device-01",
        ": ",
        "memory ",
        "cpu ",
        "1Gi",
        "100m",
        "x",
        " per ",
        "device",
        "pod",
        "container",
        " + ",
        ", ",
        "; ",
        " ",
    ];

    proptest! {
        #![proptest_config(ProptestConfig::default())]

        /// Any line: devices, or a refusal that quotes the part at fault.
        #[test]
        fn any_line_parses_or_names_the_part(s in text(PIECES, 24)) {
            match parse_devices(&s) {
                Ok(devices) => prop_assert!(!devices.is_empty()),
                Err(e) => {
                    let m = e.to_string();
                    let named = match &e {
                        AllocatableError::Device(d) | AllocatableError::Term(d) => {
                            s.contains(d.as_str()) && m.contains(&format!("{d:?}"))
                        }
                        AllocatableError::Twice { device, resource, per } => {
                            s.contains(device.as_str()) && s.contains(resource.as_str())
                                && m.contains(&format!("per {per}"))
                        }
                        AllocatableError::Empty => s.split(';').all(|d| d.trim().is_empty()),
                        AllocatableError::Quantity(q) => s.contains(q.input.as_str()),
                    };
                    prop_assert!(named, "{m}");
                }
            }
        }

        /// Well-formed devices parse to their names, in order.
        #[test]
        fn well_formed_lines_parse(
            devices in proptest::collection::vec(
                ("[a-z][a-z0-9-]{0,8}", 1u32..5000, proptest::sample::select(vec!["device", "pod", "container"])),
                1..4,
            ),
        ) {
            let line = devices
                .iter()
                .map(|(n, q, per)| format!("{n}: memory {q}Mi per {per}"))
                .collect::<Vec<_>>()
                .join("; ");
            let parsed = parse_devices(&line).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let names: Vec<&str> = parsed.iter().map(|d| d.name.as_str()).collect();
            let want: Vec<&str> = devices.iter().map(|(n, _, _)| n.as_str()).collect();
            prop_assert_eq!(names, want);
        }
    }
}
