//! The cluster's PKI and client configuration: a CA generated at start-up, a serving
//! certificate for 127.0.0.1 and localhost signed by it, and kubeconfigs that trust that CA and
//! authenticate with a bearer token, as every real cluster's do.

use std::sync::Arc;

use anyhow::Context;
use base64::Engine;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;

/// The CA and the server's certificate.
pub struct Pki {
    /// The CA certificate, PEM, for kubeconfigs.
    pub ca_pem: String,
    server_cert: CertificateDer<'static>,
    server_key: Vec<u8>,
}

impl Pki {
    /// Generates a fresh CA and a serving certificate for the loopback names.
    pub fn generate() -> anyhow::Result<Self> {
        let ca_key = KeyPair::generate().context("generate the CA key")?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).context("CA parameters")?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "embedded-cluster-ca");
        ca_params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let ca_cert = ca_params.self_signed(&ca_key).context("self-sign the CA")?;
        let issuer = Issuer::new(ca_params, ca_key);

        let names = vec![
            "localhost".to_string(),
            "127.0.0.1".to_string(),
            "kubernetes".to_string(),
            "kubernetes.default.svc".to_string(),
        ];
        let mut params = CertificateParams::new(names).context("server certificate parameters")?;
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let server_key = KeyPair::generate().context("generate the server key")?;
        let cert = params.signed_by(&server_key, &issuer).context("sign the server certificate")?;
        Ok(Self { ca_pem: ca_cert.pem(), server_cert: cert.der().clone(), server_key: server_key.serialize_der() })
    }

    /// The rustls configuration of the HTTPS listener (HTTP/1.1 via ALPN).
    pub fn server_config(&self) -> anyhow::Result<Arc<rustls::ServerConfig>> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.server_key.clone()));
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_single_cert(vec![self.server_cert.clone()], key)
            .context("load the serving certificate")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

/// A kubeconfig for `server` that trusts `ca_pem` (when given) and authenticates with `token`.
pub fn kubeconfig_yaml(server: &str, ca_pem: Option<&str>, user: &str, token: &str) -> anyhow::Result<String> {
    let mut cluster = json!({"server": server});
    if let Some(pem) = ca_pem {
        cluster["certificate-authority-data"] = json!(base64::engine::general_purpose::STANDARD.encode(pem));
    }
    let doc = json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "embedded", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "embedded", "context": {"cluster": "embedded", "user": user, "namespace": "default"}}],
        "current-context": "embedded",
        "preferences": {},
    });
    serde_yaml_ng::to_string(&doc).context("render the kubeconfig")
}

/// A kube-rs configuration from a kubeconfig text.
pub async fn config_from_kubeconfig(yaml: &str) -> anyhow::Result<kube::Config> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).context("parse the kubeconfig")?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .context("load the kubeconfig")
}

/// A kube-rs client from a kubeconfig text.
pub async fn client_from_kubeconfig(yaml: &str) -> anyhow::Result<kube::Client> {
    kube::Client::try_from(config_from_kubeconfig(yaml).await?).context("build the client")
}
