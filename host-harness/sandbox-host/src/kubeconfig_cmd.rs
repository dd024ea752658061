//! `sandbox-host kubeconfig -n NS --service-account SA`: a kubeconfig with inline credentials
//! for a ServiceAccount (the one `rbac` prints a Role for), such as a Paperclip environment
//! takes: the cluster's server and CA written in, and a token, so the file works anywhere and
//! passes `--untrusted-kubeconfig` (which refuses the exec plugins of EKS, GKE and AKS, and files
//! a kubeconfig names).
//!
//! The token is a bound one: the operator's credentials (found as kubectl finds them) ask the
//! API server for a TokenRequest of the duration the operator chooses
//! (<https://kubernetes.io/docs/reference/kubernetes-api/authentication-resources/token-request-v1/>),
//! as `kubectl create token --duration` does. It is never stored in the cluster and stops
//! working at its expiry, or when the ServiceAccount is deleted; a kubeconfig holding one must
//! be made again before then (the command says when). The other way, a long-lived token
//! Secret (`kubernetes.io/service-account-token`), never expires but sits in the cluster until
//! someone deletes it: Kubernetes advises against it and this command does not make one.

use std::path::PathBuf;

use anyhow::Context;
use base64::Engine as _;
use clap::Args;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, PostParams};

use crate::namespace_args::NamespaceArg;

/// Options of `kubeconfig`.
#[derive(Args)]
pub struct KubeconfigArgs {
    /// The operator's kubeconfig, whose credentials request the token (default: as kubectl
    /// finds one: `KUBECONFIG`, `~/.kube/config`, in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    #[command(flatten)]
    pub namespace: NamespaceArg,
    /// The ServiceAccount the kubeconfig acts as.
    #[arg(long, default_value = "sandbox-host")]
    pub service_account: String,
    /// How long the token is valid, in seconds (at least 600; the API server may cap it, and
    /// then says so in the expiry printed on stderr).
    #[arg(long, value_name = "SECONDS", default_value_t = 86_400)]
    pub duration: i64,
}

/// PEM text of DER certificates.
fn pem(certificates: &[Vec<u8>]) -> String {
    let mut out = String::new();
    for der in certificates {
        out.push_str("-----BEGIN CERTIFICATE-----\n");
        let encoded = base64::engine::general_purpose::STANDARD.encode(der);
        for line in encoded.as_bytes().chunks(64) {
            out.push_str(&String::from_utf8_lossy(line));
            out.push('\n');
        }
        out.push_str("-----END CERTIFICATE-----\n");
    }
    out
}

/// The kubeconfig's cluster entry: the server and, inline, what verifies it.
fn cluster_entry(config: &kube::Config) -> anyhow::Result<serde_json::Value> {
    let mut cluster = serde_json::json!({"server": config.cluster_url.to_string().trim_end_matches('/')});
    let ca = match (&config.root_cert_file, &config.root_cert) {
        (Some(file), _) => {
            Some(std::fs::read_to_string(file).with_context(|| format!("read the CA {}", file.display()))?)
        }
        (None, Some(certificates)) => Some(pem(certificates)),
        (None, None) => None,
    };
    if let Some(ca) = ca {
        cluster["certificate-authority-data"] = base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    if config.accept_invalid_certs {
        cluster["insecure-skip-tls-verify"] = true.into();
    }
    if let Some(name) = &config.tls_server_name {
        cluster["tls-server-name"] = name.clone().into();
    }
    if let Some(proxy) = &config.proxy_url {
        cluster["proxy-url"] = proxy.to_string().into();
    }
    Ok(cluster)
}

/// Prints the kubeconfig on stdout and its expiry on stderr.
pub async fn run(args: KubeconfigArgs) -> anyhow::Result<()> {
    let namespace = args.namespace.given()?.unwrap_or(crate::policy_cmd::DEFAULT_NAMESPACE).to_string();
    let config = provider_host::kubeconfig::find(args.kubeconfig.as_deref()).await?;
    let cluster = cluster_entry(&config)?;
    let client = kube::Client::try_from(config).context("build a client from the operator's kubeconfig")?;
    let request = TokenRequest {
        spec: TokenRequestSpec { expiration_seconds: Some(args.duration), ..Default::default() },
        ..Default::default()
    };
    let accounts: Api<ServiceAccount> = Api::namespaced(client, &namespace);
    let answer = accounts.create_token_request(&args.service_account, &PostParams::default(), &request).await.with_context(|| {
        format!(
            "request a token for ServiceAccount {namespace}/{} (create it and its Role with `sandbox-host rbac -n {namespace} \
             --service-account {} | kubectl apply -f -`)",
            args.service_account, args.service_account
        )
    })?;
    let status = answer.status.context("the API server answered the TokenRequest without a token")?;
    let user = format!("system:serviceaccount:{namespace}:{}", args.service_account);
    let document = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "cluster", "cluster": cluster}],
        "users": [{"name": user, "user": {"token": status.token}}],
        "contexts": [{"name": "sandbox-host", "context": {"cluster": "cluster", "user": user, "namespace": namespace}}],
        "current-context": "sandbox-host",
    });
    crate::out!("{}", serde_yaml_ng::to_string(&document)?);
    eprintln!(
        "note: the token in this kubeconfig expires at {}; make a new one before then (it is never stored in the \
         cluster, and deleting the ServiceAccount revokes it)",
        status.expiration_timestamp.0
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn der_certificates_become_pem() {
        let text = pem(&[vec![0u8; 60]]);
        assert!(text.starts_with("-----BEGIN CERTIFICATE-----\n") && text.ends_with("-----END CERTIFICATE-----\n"));
        assert!(text.lines().all(|l| l.len() <= 64), "{text}");
    }
}
