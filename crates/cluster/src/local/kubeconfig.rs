//! The admin kubeconfig, usable by kube-rs, kubectl and the Go components.
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::host::pki::Pki;

/// Names used inside the kubeconfig for the cluster, user and context.
pub const CONTEXT: &str = "dra-e2e-local";

/// Renders a kubeconfig with the credentials embedded, so the file keeps
/// working when copied elsewhere. Every value is a URL or base64 text, which
/// needs no YAML quoting.
pub fn render(server_url: &str, pki: &Pki) -> String {
    let b64 = |s: &str| STANDARD.encode(s.as_bytes());
    format!(
        "apiVersion: v1\n\
         kind: Config\n\
         clusters:\n\
         - name: {CONTEXT}\n  \
           cluster:\n    \
             server: {server_url}\n    \
             certificate-authority-data: {ca}\n\
         users:\n\
         - name: admin\n  \
           user:\n    \
             client-certificate-data: {cert}\n    \
             client-key-data: {key}\n\
         contexts:\n\
         - name: {CONTEXT}\n  \
           context:\n    \
             cluster: {CONTEXT}\n    \
             user: admin\n\
         current-context: {CONTEXT}\n",
        ca = b64(&pki.ca.cert_pem),
        cert = b64(&pki.admin.cert_pem),
        key = b64(&pki.admin.key_pem),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kube_reads_what_we_write() {
        let tmp = tempfile::tempdir().unwrap();
        let pki = Pki::generate(tmp.path()).unwrap();
        let text = render("https://127.0.0.1:6443", &pki);
        let kc = kube::config::Kubeconfig::from_yaml(&text).unwrap();
        assert_eq!(kc.current_context.as_deref(), Some(CONTEXT));
        let cfg = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .unwrap();
        assert_eq!(cfg.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(cfg.root_cert.as_ref().map(Vec::len), Some(1));
        assert!(cfg.auth_info.client_certificate_data.is_some());
    }
}
