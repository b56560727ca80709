//! Conversions between the neutral messages and each version's generated
//! ones. The versions declare the same messages; only v1's devices carry a
//! `share_id`, so devices are converted per version and everything else by
//! one macro.
use super::messages::{
    ClaimRef, PrepareResponse, PrepareResult, PreparedDevice, UnprepareResponse,
};
use super::{v1, v1alpha4, v1beta1};

/// Both requests of every version are just the list of claims.
macro_rules! claims_request {
    ($pb:ident :: $request:ident) => {
        impl From<&[ClaimRef]> for $pb::$request {
            fn from(claims: &[ClaimRef]) -> Self {
                Self {
                    claims: claims.iter().map(Into::into).collect(),
                }
            }
        }

        impl From<$pb::$request> for Vec<ClaimRef> {
            fn from(request: $pb::$request) -> Self {
                request.claims.into_iter().map(Into::into).collect()
            }
        }
    };
}

macro_rules! same_in_every_version {
    ($pb:ident) => {
        impl From<&ClaimRef> for $pb::Claim {
            fn from(c: &ClaimRef) -> Self {
                $pb::Claim {
                    namespace: c.namespace.clone(),
                    uid: c.uid.clone(),
                    name: c.name.clone(),
                }
            }
        }

        impl From<$pb::Claim> for ClaimRef {
            fn from(c: $pb::Claim) -> Self {
                ClaimRef {
                    namespace: c.namespace,
                    name: c.name,
                    uid: c.uid,
                }
            }
        }

        claims_request!($pb::NodePrepareResourcesRequest);
        claims_request!($pb::NodeUnprepareResourcesRequest);

        impl From<PrepareResponse> for $pb::NodePrepareResourcesResponse {
            fn from(response: PrepareResponse) -> Self {
                let claims = response
                    .into_iter()
                    .map(|(uid, r)| {
                        let entry = $pb::NodePrepareResourceResponse {
                            devices: r.devices.into_iter().map(Into::into).collect(),
                            error: r.error,
                        };
                        (uid, entry)
                    })
                    .collect();
                Self { claims }
            }
        }

        impl From<$pb::NodePrepareResourcesResponse> for PrepareResponse {
            fn from(response: $pb::NodePrepareResourcesResponse) -> Self {
                response
                    .claims
                    .into_iter()
                    .map(|(uid, r)| {
                        let entry = PrepareResult {
                            devices: r.devices.into_iter().map(Into::into).collect(),
                            error: r.error,
                        };
                        (uid, entry)
                    })
                    .collect()
            }
        }

        impl From<UnprepareResponse> for $pb::NodeUnprepareResourcesResponse {
            fn from(response: UnprepareResponse) -> Self {
                let claims = response
                    .into_iter()
                    .map(|(uid, error)| (uid, $pb::NodeUnprepareResourceResponse { error }))
                    .collect();
                Self { claims }
            }
        }

        impl From<$pb::NodeUnprepareResourcesResponse> for UnprepareResponse {
            fn from(response: $pb::NodeUnprepareResourcesResponse) -> Self {
                response
                    .claims
                    .into_iter()
                    .map(|(uid, r)| (uid, r.error))
                    .collect()
            }
        }
    };
}

same_in_every_version!(v1);
same_in_every_version!(v1beta1);
same_in_every_version!(v1alpha4);

impl From<PreparedDevice> for v1::Device {
    fn from(d: PreparedDevice) -> Self {
        v1::Device {
            request_names: d.request_names,
            pool_name: d.pool_name,
            device_name: d.device_name,
            cdi_device_ids: d.cdi_device_ids,
            share_id: d.share_id,
        }
    }
}

impl From<v1::Device> for PreparedDevice {
    fn from(d: v1::Device) -> Self {
        PreparedDevice {
            request_names: d.request_names,
            pool_name: d.pool_name,
            device_name: d.device_name,
            cdi_device_ids: d.cdi_device_ids,
            share_id: d.share_id,
        }
    }
}

/// v1beta1 has no `share_id`: a kubelet of that version never learns it.
impl From<PreparedDevice> for v1beta1::Device {
    fn from(d: PreparedDevice) -> Self {
        v1beta1::Device {
            request_names: d.request_names,
            pool_name: d.pool_name,
            device_name: d.device_name,
            cdi_device_ids: d.cdi_device_ids,
        }
    }
}

impl From<v1beta1::Device> for PreparedDevice {
    fn from(d: v1beta1::Device) -> Self {
        PreparedDevice {
            request_names: d.request_names,
            pool_name: d.pool_name,
            device_name: d.device_name,
            cdi_device_ids: d.cdi_device_ids,
            share_id: None,
        }
    }
}

/// v1alpha4 has no `share_id` either.
impl From<PreparedDevice> for v1alpha4::Device {
    fn from(d: PreparedDevice) -> Self {
        v1alpha4::Device {
            request_names: d.request_names,
            pool_name: d.pool_name,
            device_name: d.device_name,
            cdi_device_ids: d.cdi_device_ids,
        }
    }
}

impl From<v1alpha4::Device> for PreparedDevice {
    fn from(d: v1alpha4::Device) -> Self {
        PreparedDevice {
            request_names: d.request_names,
            pool_name: d.pool_name,
            device_name: d.device_name,
            cdi_device_ids: d.cdi_device_ids,
            share_id: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device(share_id: Option<&str>) -> PreparedDevice {
        PreparedDevice {
            request_names: vec!["req".into()],
            pool_name: "pool".into(),
            device_name: "dev".into(),
            cdi_device_ids: vec!["d/test=dev".into()],
            share_id: share_id.map(Into::into),
        }
    }

    fn response(share_id: Option<&str>) -> PrepareResponse {
        [
            ("a".to_owned(), Ok(vec![device(share_id)]).into()),
            ("b".to_owned(), Err("boom".to_owned()).into()),
        ]
        .into_iter()
        .collect()
    }

    #[test]
    fn v1_carries_every_field_both_ways() {
        let wire = v1::NodePrepareResourcesResponse::from(response(Some("share-7")));
        assert_eq!(PrepareResponse::from(wire), response(Some("share-7")));
    }

    #[test]
    fn older_versions_drop_only_the_share_id() {
        let wire = v1beta1::NodePrepareResourcesResponse::from(response(Some("share-7")));
        assert_eq!(PrepareResponse::from(wire), response(None));
        let wire = v1alpha4::NodePrepareResourcesResponse::from(response(Some("share-7")));
        assert_eq!(PrepareResponse::from(wire), response(None));
    }

    #[test]
    fn claims_and_unprepare_errors_round_trip() {
        let claims = vec![ClaimRef {
            namespace: "ns".into(),
            name: "claim".into(),
            uid: "uid-1".into(),
        }];
        let request = v1alpha4::NodeUnprepareResourcesRequest::from(claims.as_slice());
        assert_eq!(Vec::<ClaimRef>::from(request), claims);
        let errors: UnprepareResponse = [("uid-1".to_owned(), "no".to_owned())].into();
        let wire = v1beta1::NodeUnprepareResourcesResponse::from(errors.clone());
        assert_eq!(UnprepareResponse::from(wire), errors);
    }
}
