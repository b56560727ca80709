//! The cluster's certificates and keys, generated fresh for every cluster.
//!
//! ECDSA P-256 throughout: it is what rcgen generates by default, Go's TLS
//! stack and rustls both accept it, and the API server signs service-account
//! tokens with it (ES256).
use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use super::services::KUBERNETES_SERVICE_IP;

/// Where a step of the PKI set-up failed.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("generating {what}: {source}")]
    Generate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A certificate with its private key, both PEM.
#[derive(Clone)]
pub struct CertPair {
    pub cert_pem: String,
    pub key_pem: String,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
}

impl std::fmt::Debug for CertPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys stay out of logs and panic messages.
        f.debug_struct("CertPair")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

/// Every credential the control plane needs, written below one directory.
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca: CertPair,
    /// The CA certificate in DER, for clients that take a trust root.
    pub ca_der: Vec<u8>,
    /// Trust root for requests proxied by an aggregating front proxy. Nothing
    /// uses it yet, but without it every component that delegates
    /// authentication logs an error about the missing bundle, over and over.
    pub front_proxy_ca: CertPair,
    /// kube-apiserver's serving certificate.
    pub apiserver: CertPair,
    /// Serving certificates of kube-scheduler and kube-controller-manager, so
    /// their `/healthz` can be checked against the cluster CA.
    pub scheduler_serving: CertPair,
    pub controller_manager_serving: CertPair,
    /// Client certificate CN=admin, O=system:masters.
    pub admin: CertPair,
    /// The API server's client certificate towards kubelets (logs, exec,
    /// port-forward), as a real cluster's `apiserver-kubelet-client`.
    pub apiserver_kubelet_client: CertPair,
    /// etcd's own PKI, apart from the cluster CA (as kubeadm sets it up).
    pub etcd: EtcdPki,
    /// Service-account token signing key (private, PKCS#8 PEM).
    pub sa_key_path: PathBuf,
    /// Its public half, which the API server verifies tokens with.
    pub sa_pub_path: PathBuf,
}

/// Names the API server answers to from the host and from inside the
/// cluster; with [`KUBERNETES_SERVICE_IP`] they make its serving
/// certificate's SANs (see [`apiserver_names`]).
const APISERVER_NAMES: [&str; 6] = [
    "127.0.0.1",
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

/// Every SAN of the API server's serving certificate: [`APISERVER_NAMES`]
/// and the `kubernetes` Service's ClusterIP, which in-cluster clients
/// (client-go's `InClusterConfig`) dial and verify. Each string that parses
/// as an IP address becomes an IP SAN, the rest DNS SANs (rcgen's rule).
fn apiserver_names() -> Vec<String> {
    APISERVER_NAMES
        .iter()
        .map(|n| (*n).to_owned())
        .chain([KUBERNETES_SERVICE_IP.to_string()])
        .collect()
}
const LOOPBACK_NAMES: [&str; 2] = ["127.0.0.1", "localhost"];

/// etcd's credentials. etcd admits every client whose certificate chains to
/// the CA it trusts, with no further authorization, so that CA is one of its
/// own: a certificate from the cluster CA (an admin's, a kubelet's) opens the
/// API server, never etcd.
#[derive(Debug, Clone)]
pub struct EtcdPki {
    pub ca: CertPair,
    /// The CA certificate in DER, for clients that take a trust root.
    pub ca_der: Vec<u8>,
    /// Serving certificate of the client listener (127.0.0.1, localhost).
    pub server: CertPair,
    /// The peer listener's certificate, both serving and client, as members
    /// present it to each other.
    pub peer: CertPair,
    /// The API server's client certificate towards etcd.
    pub apiserver_client: CertPair,
    /// The runner's client certificate for readiness probes.
    pub healthcheck_client: CertPair,
}

impl EtcdPki {
    fn generate(dir: &Path) -> Result<Self, PkiError> {
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        let (ca, ca_cert, issuer) = new_ca(dir, "etcd-ca", "dra-e2e local etcd CA")?;
        let server = leaf(
            dir,
            "etcd-server",
            &issuer,
            "etcd-server",
            &[],
            &LOOPBACK_NAMES,
            &[ServerAuth, ClientAuth],
        )?;
        let peer = leaf(
            dir,
            "etcd-peer",
            &issuer,
            "etcd-peer",
            &[],
            &LOOPBACK_NAMES,
            &[ServerAuth, ClientAuth],
        )?;
        let apiserver_client = leaf(
            dir,
            "apiserver-etcd-client",
            &issuer,
            "kube-apiserver-etcd-client",
            &[],
            &[],
            &[ClientAuth],
        )?;
        let healthcheck_client = leaf(
            dir,
            "etcd-healthcheck-client",
            &issuer,
            "dra-e2e-etcd-healthcheck-client",
            &[],
            &[],
            &[ClientAuth],
        )?;
        Ok(Self {
            ca,
            ca_der: ca_cert.der().to_vec(),
            server,
            peer,
            apiserver_client,
            healthcheck_client,
        })
    }
}

impl Pki {
    /// Generates everything and writes it to `dir` (keys with mode 0600).
    pub fn generate(dir: &Path) -> Result<Self, PkiError> {
        let (ca, ca_cert, issuer) = new_ca(dir, "ca", "dra-e2e local cluster CA")?;
        let ca_der = ca_cert.der().to_vec();
        let (front_proxy_ca, _, _) = new_ca(
            dir,
            "front-proxy-ca",
            "dra-e2e local cluster front-proxy CA",
        )?;

        let apiserver_names = apiserver_names();
        let apiserver_names: Vec<&str> = apiserver_names.iter().map(String::as_str).collect();
        let apiserver = leaf(
            dir,
            "apiserver",
            &issuer,
            "kube-apiserver",
            &[],
            &apiserver_names,
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )?;
        let scheduler_serving = leaf(
            dir,
            "kube-scheduler-serving",
            &issuer,
            "kube-scheduler",
            &[],
            &LOOPBACK_NAMES,
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )?;
        let controller_manager_serving = leaf(
            dir,
            "kube-controller-manager-serving",
            &issuer,
            "kube-controller-manager",
            &[],
            &LOOPBACK_NAMES,
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )?;
        let admin = leaf(
            dir,
            "admin",
            &issuer,
            "admin",
            &["system:masters"],
            &[],
            &[ExtendedKeyUsagePurpose::ClientAuth],
        )?;

        let apiserver_kubelet_client = leaf(
            dir,
            "apiserver-kubelet-client",
            &issuer,
            "kube-apiserver-kubelet-client",
            &["system:masters"],
            &[],
            &[ExtendedKeyUsagePurpose::ClientAuth],
        )?;

        let etcd = EtcdPki::generate(dir)?;

        let sa_key = gen_key("the service-account signing key")?;
        let sa_key_path = dir.join("sa.key");
        let sa_pub_path = dir.join("sa.pub");
        write_file(&sa_key_path, &sa_key.serialize_pem(), 0o600)?;
        write_file(&sa_pub_path, &sa_key.public_key_pem(), 0o644)?;

        Ok(Self {
            ca,
            ca_der,
            front_proxy_ca,
            apiserver,
            scheduler_serving,
            controller_manager_serving,
            admin,
            apiserver_kubelet_client,
            etcd,
            sa_key_path,
            sa_pub_path,
        })
    }
}

/// What a real kubelet needs to join the cluster as `system:node:<name>`.
#[derive(Debug, Clone)]
pub struct KubeletCredentials {
    /// Client certificate CN=system:node:<name>, O=system:nodes, so the Node
    /// authorizer and NodeRestriction admission apply to it.
    pub client: CertPair,
    /// Serving certificate for the node's name and IP, which the API server
    /// verifies against the cluster CA.
    pub serving: CertPair,
}

impl Pki {
    /// Issues a kubelet's client and serving certificates into `dir`.
    pub fn kubelet_credentials(
        &self,
        dir: &Path,
        node: &str,
        node_ip: std::net::IpAddr,
    ) -> Result<KubeletCredentials, PkiError> {
        let key = KeyPair::from_pem(&self.ca.key_pem).map_err(|source| PkiError::Generate {
            what: "the CA key",
            source,
        })?;
        let issuer = Issuer::from_ca_cert_pem(&self.ca.cert_pem, key).map_err(|source| {
            PkiError::Generate {
                what: "the CA issuer",
                source,
            }
        })?;
        let client = leaf(
            dir,
            "kubelet-client",
            &issuer,
            &format!("system:node:{node}"),
            &["system:nodes"],
            &[],
            &[ExtendedKeyUsagePurpose::ClientAuth],
        )?;
        let ip = node_ip.to_string();
        let serving = leaf(
            dir,
            "kubelet-serving",
            &issuer,
            node,
            &[],
            &[node, ip.as_str()],
            &[ExtendedKeyUsagePurpose::ServerAuth],
        )?;
        Ok(KubeletCredentials { client, serving })
    }
}

fn new_ca(
    dir: &Path,
    stem: &str,
    common_name: &str,
) -> Result<(CertPair, rcgen::Certificate, Issuer<'static, KeyPair>), PkiError> {
    let key = gen_key("a CA key")?;
    let mut params = CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = params
        .self_signed(&key)
        .map_err(|source| PkiError::Generate {
            what: "a CA certificate",
            source,
        })?;
    let pair = write_pair(dir, stem, cert.pem(), key.serialize_pem())?;
    Ok((pair, cert, Issuer::new(params, key)))
}

fn gen_key(what: &'static str) -> Result<KeyPair, PkiError> {
    KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
        .map_err(|source| PkiError::Generate { what, source })
}

fn leaf(
    dir: &Path,
    file_stem: &str,
    issuer: &Issuer<'_, KeyPair>,
    common_name: &str,
    organizations: &[&str],
    names: &[&str],
    usages: &[ExtendedKeyUsagePurpose],
) -> Result<CertPair, PkiError> {
    let what = "a leaf certificate";
    let key = gen_key("a leaf key")?;
    let names: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
    let mut params =
        CertificateParams::new(names).map_err(|source| PkiError::Generate { what, source })?;
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    for org in organizations {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *org);
    }
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = usages.to_vec();
    params.use_authority_key_identifier_extension = true;
    let cert = params
        .signed_by(&key, issuer)
        .map_err(|source| PkiError::Generate { what, source })?;
    write_pair(dir, file_stem, cert.pem(), key.serialize_pem())
}

fn write_pair(
    dir: &Path,
    stem: &str,
    cert_pem: String,
    key_pem: String,
) -> Result<CertPair, PkiError> {
    let cert_path = dir.join(format!("{stem}.crt"));
    let key_path = dir.join(format!("{stem}.key"));
    write_file(&cert_path, &cert_pem, 0o644)?;
    write_file(&key_path, &key_pem, 0o600)?;
    Ok(CertPair {
        cert_pem,
        key_pem,
        cert_path,
        key_path,
    })
}

/// Creates `path` with `mode` from the start, so a key is never readable by
/// others even for a moment.
pub(crate) fn write_file(path: &Path, contents: &str, mode: u32) -> Result<(), PkiError> {
    let result = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .and_then(|mut f| f.write_all(contents.as_bytes()));
    result.map_err(|source| PkiError::Write {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;
    use x509_parser::prelude::*;

    fn parse(pem_text: &str) -> Vec<u8> {
        let (_, pem) = x509_parser::pem::parse_x509_pem(pem_text.as_bytes()).unwrap();
        pem.contents
    }

    #[test]
    fn certificates_carry_the_names_kubernetes_relies_on() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();

        let der = parse(&pki.admin.cert_pem);
        let (_, admin) = X509Certificate::from_der(&der).unwrap();
        let cn: Vec<_> = admin.subject().iter_common_name().collect();
        let org: Vec<_> = admin.subject().iter_organization().collect();
        assert_eq!(cn[0].as_str().unwrap(), "admin");
        assert_eq!(org[0].as_str().unwrap(), "system:masters");
        let ca_der = parse(&pki.ca.cert_pem);
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
        assert_eq!(admin.issuer(), ca.subject());
        assert!(ca.is_ca());
        admin.verify_signature(Some(ca.public_key())).unwrap();

        let der = parse(&pki.apiserver.cert_pem);
        let (_, server) = X509Certificate::from_der(&der).unwrap();
        let san = server.subject_alternative_name().unwrap().unwrap();
        let names: Vec<String> = san
            .value
            .general_names
            .iter()
            .map(|n| match n {
                GeneralName::DNSName(d) => d.to_string(),
                GeneralName::IPAddress(ip) => format!("{ip:?}"),
                other => format!("{other:?}"),
            })
            .collect();
        assert!(
            names.contains(&"kubernetes.default.svc".to_string()),
            "{names:?}"
        );
        assert!(names.contains(&"localhost".to_string()), "{names:?}");
        assert!(
            names.contains(&format!("{:?}", &[127u8, 0, 0, 1][..])),
            "{names:?}"
        );
        // The `kubernetes` Service's ClusterIP, as an IP SAN (a DNS SAN
        // "10.0.0.1" would not match a client dialling the address).
        let service_ip = KUBERNETES_SERVICE_IP.octets();
        assert!(
            san.value
                .general_names
                .iter()
                .any(|n| matches!(n, GeneralName::IPAddress(ip) if *ip == service_ip)),
            "{names:?}"
        );
        assert!(
            !names.contains(&KUBERNETES_SERVICE_IP.to_string()),
            "{names:?}"
        );
        server.verify_signature(Some(ca.public_key())).unwrap();
    }

    #[test]
    fn kubelet_credentials_name_the_node_and_chain_to_the_ca() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();
        let node_dir = tmp.path().join("node");
        fs::create_dir(&node_dir).unwrap();
        let creds = pki
            .kubelet_credentials(&node_dir, "n-0", "10.77.0.2".parse().unwrap())
            .unwrap();
        let ca_der = parse(&pki.ca.cert_pem);
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();

        let der = parse(&creds.client.cert_pem);
        let (_, client) = X509Certificate::from_der(&der).unwrap();
        let cn: Vec<_> = client.subject().iter_common_name().collect();
        let org: Vec<_> = client.subject().iter_organization().collect();
        assert_eq!(cn[0].as_str().unwrap(), "system:node:n-0");
        assert_eq!(org[0].as_str().unwrap(), "system:nodes");
        client.verify_signature(Some(ca.public_key())).unwrap();

        let der = parse(&creds.serving.cert_pem);
        let (_, serving) = X509Certificate::from_der(&der).unwrap();
        let san = serving.subject_alternative_name().unwrap().unwrap();
        let names: Vec<String> = san
            .value
            .general_names
            .iter()
            .map(|n| format!("{n:?}"))
            .collect();
        assert!(names.iter().any(|n| n.contains("n-0")), "{names:?}");
        assert!(
            names.iter().any(|n| n.contains("[10, 77, 0, 2]")),
            "{names:?}"
        );
        serving.verify_signature(Some(ca.public_key())).unwrap();
    }

    #[test]
    fn etcd_certificates_chain_to_etcd_ca_only() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();
        let etcd_ca_der = parse(&pki.etcd.ca.cert_pem);
        let (_, etcd_ca) = X509Certificate::from_der(&etcd_ca_der).unwrap();
        let ca_der = parse(&pki.ca.cert_pem);
        let (_, ca) = X509Certificate::from_der(&ca_der).unwrap();
        assert!(etcd_ca.is_ca());
        assert_ne!(etcd_ca.subject(), ca.subject());
        for pair in [
            &pki.etcd.server,
            &pki.etcd.peer,
            &pki.etcd.apiserver_client,
            &pki.etcd.healthcheck_client,
        ] {
            let der = parse(&pair.cert_pem);
            let (_, cert) = X509Certificate::from_der(&der).unwrap();
            assert_eq!(cert.issuer(), etcd_ca.subject(), "{pair:?}");
            cert.verify_signature(Some(etcd_ca.public_key())).unwrap();
            assert!(cert.verify_signature(Some(ca.public_key())).is_err());
        }
        // The API server's etcd client certificate is a client certificate.
        let der = parse(&pki.etcd.apiserver_client.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.client_auth && !eku.server_auth);
        let der = parse(&pki.etcd.server.cert_pem);
        let (_, cert) = X509Certificate::from_der(&der).unwrap();
        let eku = cert.extended_key_usage().unwrap().unwrap().value;
        assert!(eku.server_auth);
    }

    #[test]
    fn keys_are_private_to_the_owner() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();
        for path in [
            &pki.ca.key_path,
            &pki.admin.key_path,
            &pki.sa_key_path,
            &pki.etcd.ca.key_path,
            &pki.etcd.server.key_path,
            &pki.etcd.peer.key_path,
            &pki.etcd.apiserver_client.key_path,
            &pki.etcd.healthcheck_client.key_path,
        ] {
            let mode = fs::metadata(path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        let public = fs::read_to_string(&pki.sa_pub_path).unwrap();
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
    }
}
