//! The local cluster's Service network, as far as the runner relies on it:
//! the range the API server allocates ClusterIPs from and the address it
//! gives the `kubernetes` Service.
//!
//! Three places must agree on them: the API server's command line, its
//! serving certificate (clients verify the address they dial, and in-cluster
//! clients dial the Service's address), and each real node's NAT rules that
//! stand in for kube-proxy. So they are derived here, from one network.
use std::net::Ipv4Addr;

/// The network of `--service-cluster-ip-range`.
pub const SERVICE_NETWORK: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 0);
/// Its prefix length.
pub const SERVICE_PREFIX_LEN: u8 = 24;

/// The `kubernetes` Service's ClusterIP: the API server always takes the
/// first address of the range for it (what pods find in
/// `KUBERNETES_SERVICE_HOST`).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::from_bits(SERVICE_NETWORK.to_bits() + 1);

/// The `kubernetes` Service's port (`KUBERNETES_SERVICE_PORT`): fixed at
/// 443 by the API server, whatever its own secure port is.
pub const KUBERNETES_SERVICE_PORT: u16 = 443;

/// `--service-cluster-ip-range` as the API server takes it.
pub fn service_cluster_ip_range() -> String {
    format!("{SERVICE_NETWORK}/{SERVICE_PREFIX_LEN}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kubernetes_service_has_the_first_address_of_the_range() {
        assert_eq!(service_cluster_ip_range(), "10.0.0.0/24");
        assert_eq!(KUBERNETES_SERVICE_IP, Ipv4Addr::new(10, 0, 0, 1));
        // The network is aligned to its prefix, or the API server refuses it.
        let host_bits = 32 - u32::from(SERVICE_PREFIX_LEN);
        assert_eq!(SERVICE_NETWORK.to_bits() & ((1 << host_bits) - 1), 0);
    }
}
