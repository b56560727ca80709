//! A real node's network: a network namespace of its own, joined to the host
//! by a veth pair with a /30 between them.
//!
//! The kubelet refuses a loopback node IP, and the API server may only reach
//! addresses the project made itself, so every node gets an address inside a
//! namespace the runner created. The kubelet, containerd, the CNI bridge and
//! every pod live in that namespace; its `ip_forward` and iptables rules are
//! its own, so the host's stay as they were.
//!
//! There is no kube-proxy. The one Service pods need, `kubernetes` (what
//! client-go's in-cluster config dials), is served by NAT rules in the
//! namespace that send its ClusterIP to the node's relay of the API server.
use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;

use super::binaries::IPTABLES;

/// The addresses of one node's link to the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeNet {
    /// Named network namespace (`ip netns`), `/run/netns/<name>`.
    pub netns: String,
    /// The host's end of the veth pair.
    pub host_link: String,
    /// The host's address on the link: where the node reaches the API server.
    pub host_ip: Ipv4Addr,
    /// The node's address (its InternalIP, where the kubelet serves).
    pub node_ip: Ipv4Addr,
    /// The pods' subnet on this node (inside its namespace).
    pub pod_cidr: String,
}

#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("`ip {args}` failed: {message}")]
    Ip { args: String, message: String },
    #[error("no free 10.x.y.0/24 for the nodes' links: every candidate is routed on this host")]
    NoFreeRange,
    #[error("`{command}` in network namespace {netns} failed: {message}")]
    Iptables {
        netns: String,
        command: String,
        message: String,
    },
}

/// Runs `ip` with `args`, turning a failure into an error quoting its stderr.
pub(crate) fn ip(args: &[&str]) -> Result<String, NetError> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| NetError::Ip {
            args: args.join(" "),
            message: format!("cannot run ip (iproute2): {e}"),
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(NetError::Ip {
            args: args.join(" "),
            message: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        })
    }
}

/// A /24 for the run's node links, unused by any route on the host, chosen
/// from 10.200.0.0 – 10.249.255.0 so parallel runs rarely collide; the
/// caller retries when creating the links still finds one taken.
pub fn pick_range(seed: u32) -> Result<Ipv4Addr, NetError> {
    let routes = ip(&["-4", "route", "show", "table", "all"]).unwrap_or_default();
    let addrs = ip(&["-4", "-o", "addr", "show"]).unwrap_or_default();
    for i in 0..512u32 {
        let n = seed.wrapping_add(i.wrapping_mul(7919)) % (50 * 256);
        let (a, b) = (200 + n / 256, n % 256);
        let prefix = format!("10.{a}.{b}.");
        if !routes.contains(&prefix) && !addrs.contains(&prefix) {
            return Ok(Ipv4Addr::new(10, a as u8, b as u8, 0));
        }
    }
    Err(NetError::NoFreeRange)
}

impl NodeNet {
    /// The plan for node `index` of a run: names from `run_id`, addresses
    /// from `range` (a /24, 64 nodes at most).
    pub fn plan(run_id: &str, index: usize, range: Ipv4Addr) -> Self {
        let [a, b, c, _] = range.octets();
        let base = (index as u8) * 4;
        Self {
            netns: format!("dra-e2e-{run_id}-{index}"),
            // Link names are limited to 15 bytes.
            host_link: format!("dre{run_id}h{index}"),
            host_ip: Ipv4Addr::new(a, b, c, base + 1),
            node_ip: Ipv4Addr::new(a, b, c, base + 2),
            pod_cidr: format!("10.244.{index}.0/24"),
        }
    }

    /// Creates the namespace and the link, addresses and routes.
    pub fn create(&self) -> Result<(), NetError> {
        let host_ip = format!("{}/30", self.host_ip);
        let node_ip = format!("{}/30", self.node_ip);
        let gw = self.host_ip.to_string();
        ip(&["netns", "add", &self.netns])?;
        let steps: Vec<Vec<&str>> = vec![
            vec![
                "link",
                "add",
                &self.host_link,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &self.netns,
            ],
            vec!["addr", "add", &host_ip, "dev", &self.host_link],
            vec!["link", "set", &self.host_link, "up"],
            vec!["-n", &self.netns, "link", "set", "lo", "up"],
            vec!["-n", &self.netns, "addr", "add", &node_ip, "dev", "eth0"],
            vec!["-n", &self.netns, "link", "set", "eth0", "up"],
            vec!["-n", &self.netns, "route", "add", "default", "via", &gw],
        ];
        for args in steps {
            if let Err(e) = ip(&args) {
                self.remove();
                return Err(e);
            }
        }
        Ok(())
    }

    /// The iptables commands (arguments after `iptables`) that do for the
    /// `kubernetes` Service at `service` what kube-proxy does on a standard
    /// node: connections to it go to `api`, the node's relay of the API
    /// server on the host end of its link.
    pub fn api_service_rules(&self, service: SocketAddrV4, api: SocketAddrV4) -> Vec<Vec<String>> {
        let (ip, port) = (service.ip(), service.port());
        // Each rule names what it is for, as kube-proxy's do, for whoever
        // lists the namespace's rules.
        let comment = format!("dra-e2e: the kubernetes Service {service}");
        let rule = |matches: String, target: &str| -> Vec<String> {
            let words = |s: &str| s.split_whitespace().map(str::to_owned).collect::<Vec<_>>();
            let mut rule = words(&matches);
            rule.extend(words("-m comment --comment"));
            rule.push(comment.clone());
            rule.extend(words(target));
            rule
        };
        let dnat = |chain: &str| {
            rule(
                format!("-w -t nat -A {chain} -d {ip} -p tcp --dport {port}"),
                &format!("-j DNAT --to-destination {api}"),
            )
        };
        vec![
            // Pods on the CNI bridge: their packets are routed by the
            // namespace, so the nat table sees them on the way in.
            dnat("PREROUTING"),
            // The namespace's own processes: hostNetwork pods, the kubelet.
            dnat("OUTPUT"),
            // The pod's address would reach the host as the source, and the
            // host has no route back to the pods' subnet (the bridge does not
            // masquerade): the node's address goes out instead. Only
            // connections to the Service are rewritten, so pods are seen with
            // their own addresses everywhere else.
            rule(
                format!(
                    "-w -t nat -A POSTROUTING -s {} -p tcp -m conntrack --ctstate DNAT \
                     --ctorigdst {ip} --ctorigdstport {port}",
                    self.pod_cidr
                ),
                "-j MASQUERADE",
            ),
        ]
    }

    /// Installs [`Self::api_service_rules`] in the namespace. They go with
    /// it: nothing of them is left on the host to remove.
    pub fn route_api_service(
        &self,
        service: SocketAddrV4,
        api: SocketAddrV4,
    ) -> Result<(), NetError> {
        self.iptables(self.api_service_rules(service, api))
    }

    /// The iptables commands that cut the node off the control plane, its
    /// relay of the API server at `api` (`-I`), or lift the cut (`-D`):
    /// every packet to or from it is dropped, from the node's own
    /// processes and from its pods (which reach it through the `kubernetes`
    /// Service), in both directions, as a partition does. Connections stall
    /// rather than break, as TCP keeps them through a short cut. What the
    /// node reaches otherwise (the runner's node host connections, which
    /// stand for a driver's process on the node) is not cut.
    /// `op` is iptables' `-C` (check), `-I` (insert) or `-D` (delete).
    pub fn cut_rules(&self, api: SocketAddrV4, op: &str) -> Vec<Vec<String>> {
        let (ip, port) = (api.ip(), api.port());
        let comment = "dra-e2e: node cut off from the control plane";
        let rule = |chain: &str, matches: String| -> Vec<String> {
            let mut rule: Vec<String> = format!("-w {op} {chain} {matches} -m comment --comment")
                .split_whitespace()
                .map(str::to_owned)
                .collect();
            rule.push(comment.to_owned());
            rule.extend(["-j", "DROP"].map(str::to_owned));
            rule
        };
        let to = format!("-d {ip} -p tcp --dport {port}");
        let from = format!("-s {ip} -p tcp --sport {port}");
        vec![
            rule("OUTPUT", to.clone()),
            rule("INPUT", from.clone()),
            rule("FORWARD", to),
            rule("FORWARD", from),
        ]
    }

    /// Cuts the node off the control plane at `api` or connects it again
    /// ([`Self::cut_rules`]). Each rule is added or removed only when it is
    /// not already so: cutting twice, or connecting a node that a cut left
    /// half done, does what is asked.
    pub fn set_cut(&self, api: SocketAddrV4, cut: bool) -> Result<(), NetError> {
        let apply = self.cut_rules(api, if cut { "-I" } else { "-D" });
        for (check, apply) in self.cut_rules(api, "-C").into_iter().zip(apply) {
            let present = self.run_iptables(&check)?.status.success();
            if present != cut {
                self.iptables(vec![apply])?;
            }
        }
        Ok(())
    }

    /// Runs each iptables command in the namespace, stopping at the first
    /// that fails.
    fn iptables(&self, rules: Vec<Vec<String>>) -> Result<(), NetError> {
        for rule in rules {
            let out = self.run_iptables(&rule)?;
            if !out.status.success() {
                return Err(NetError::Iptables {
                    netns: self.netns.clone(),
                    command: format!("{IPTABLES} {}", shell_words(&rule)),
                    message: format!(
                        "{} ({})",
                        String::from_utf8_lossy(&out.stderr).trim(),
                        out.status
                    ),
                });
            }
        }
        Ok(())
    }

    /// One iptables command in the namespace, whatever its exit status.
    fn run_iptables(&self, rule: &[String]) -> Result<std::process::Output, NetError> {
        Command::new("ip")
            .args(["netns", "exec", &self.netns, IPTABLES])
            .args(rule)
            .output()
            .map_err(|e| NetError::Iptables {
                netns: self.netns.clone(),
                command: format!("{IPTABLES} {}", shell_words(rule)),
                message: format!("cannot run ip netns exec (iproute2): {e}"),
            })
    }

    /// Removes the namespace (which takes the veth pair, the CNI bridge and
    /// the pods' links with it). Idempotent; returns what could not be removed.
    pub fn remove(&self) -> Vec<String> {
        let mut left = Vec::new();
        if self.netns_exists()
            && let Err(e) = ip(&["netns", "delete", &self.netns])
        {
            left.push(e.to_string());
        }
        // The host end goes with its peer, a moment after the namespace;
        // delete it explicitly only when it stays (the namespace never got
        // the peer).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while self.link_exists() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        if self.link_exists()
            && let Err(e) = ip(&["link", "delete", &self.host_link])
            && self.link_exists()
        {
            left.push(e.to_string());
        }
        left
    }

    pub fn netns_exists(&self) -> bool {
        std::path::Path::new("/run/netns")
            .join(&self.netns)
            .exists()
    }

    pub fn link_exists(&self) -> bool {
        std::path::Path::new("/sys/class/net")
            .join(&self.host_link)
            .exists()
    }
}

/// `args` as a shell would need them typed, for messages.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() || a.contains(|c: char| c.is_whitespace() || c == '\'') {
                format!("'{}'", a.replace('\'', r"'\''"))
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The host's `net.ipv4.ip_forward`, to check that the run left it as it was.
pub fn ip_forward() -> Option<String> {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward")
        .ok()
        .map(|s| s.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_drops_the_api_relay_both_ways_for_the_node_and_its_pods() {
        let net = NodeNet::plan("a1b2", 0, Ipv4Addr::new(10, 201, 7, 0));
        let api = SocketAddrV4::new(net.host_ip, 6443);
        let rules: Vec<String> = net
            .cut_rules(api, "-I")
            .iter()
            .map(|r| r.join(" "))
            .collect();
        let to = format!("-d {} -p tcp --dport 6443", net.host_ip);
        let from = format!("-s {} -p tcp --sport 6443", net.host_ip);
        for (chain, matches) in [
            ("OUTPUT", &to),
            ("INPUT", &from),
            ("FORWARD", &to),
            ("FORWARD", &from),
        ] {
            assert!(
                rules
                    .iter()
                    .any(|r| r.starts_with(&format!("-w -I {chain} {matches} "))
                        && r.ends_with("-j DROP")),
                "no {chain} {matches} in {rules:#?}"
            );
        }
        assert_eq!(rules.len(), 4);
        // The check and the removal name the same rules.
        let check: Vec<String> = net
            .cut_rules(api, "-C")
            .iter()
            .map(|r| r.join(" "))
            .collect();
        assert_eq!(
            check,
            rules
                .iter()
                .map(|r| r.replacen("-I", "-C", 1))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn node_links_are_disjoint_slash_30s_with_short_names() {
        let range = Ipv4Addr::new(10, 201, 7, 0);
        let n0 = NodeNet::plan("a1b2", 0, range);
        let n1 = NodeNet::plan("a1b2", 1, range);
        assert_eq!(n0.host_ip, Ipv4Addr::new(10, 201, 7, 1));
        assert_eq!(n0.node_ip, Ipv4Addr::new(10, 201, 7, 2));
        assert_eq!(n1.host_ip, Ipv4Addr::new(10, 201, 7, 5));
        assert_eq!(n1.node_ip, Ipv4Addr::new(10, 201, 7, 6));
        assert_ne!(n0.pod_cidr, n1.pod_cidr);
        assert!(n1.host_link.len() <= 15, "{}", n1.host_link);
        assert_ne!(n0.netns, n1.netns);
        // The widest: a run id of 8 hex digits, the last of 64 nodes.
        let last = NodeNet::plan("1a2b3c4d", 63, range);
        assert!(last.host_link.len() <= 15, "{}", last.host_link);
    }

    #[test]
    fn the_kubernetes_service_is_sent_to_the_relay_and_pods_masqueraded() {
        let net = NodeNet::plan("a1b2", 1, Ipv4Addr::new(10, 201, 7, 0));
        let service = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 443);
        let api = SocketAddrV4::new(net.host_ip, 6443);
        let rules: Vec<String> = net
            .api_service_rules(service, api)
            .iter()
            .map(|r| shell_words(r))
            .collect();
        let comment = "-m comment --comment 'dra-e2e: the kubernetes Service 10.0.0.1:443'";
        for chain in ["PREROUTING", "OUTPUT"] {
            let want = format!(
                "-w -t nat -A {chain} -d 10.0.0.1 -p tcp --dport 443 {comment} \
                 -j DNAT --to-destination 10.201.7.5:6443"
            );
            assert!(rules.contains(&want), "{want}\nnot in {rules:#?}");
        }
        let masquerade = format!(
            "-w -t nat -A POSTROUTING -s 10.244.1.0/24 -p tcp -m conntrack --ctstate DNAT \
             --ctorigdst 10.0.0.1 --ctorigdstport 443 {comment} -j MASQUERADE"
        );
        assert!(rules.contains(&masquerade), "{rules:#?}");
        assert_eq!(rules.len(), 3);
    }
}
