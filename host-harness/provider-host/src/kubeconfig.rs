//! A cluster named by a kubeconfig, loaded as kube-rs loads it: the current context, its
//! cluster (server, CA or inline CA data) and its user (token, client certificate); or found
//! as kubectl finds one ([`find`]). Every product command, and the contract suite on a real
//! cluster, reaches a cluster through here; the embedded cluster writes such kubeconfigs but is
//! never needed to read one.
//!
//! Errors carry kube-rs's own cause as `#[source]`; the callers decide whether to show it (a
//! kubeconfig the operator did not write may hold credentials in what kube-rs quotes).

/// A kubeconfig that could not be turned into a client.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The named file could not be read.
    #[error("cannot read the kubeconfig {path}")]
    Read {
        /// The file.
        path: std::path::PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// None was named, and none is where kubectl looks.
    #[error(
        "no cluster: pass --kubeconfig, set KUBECONFIG, write ~/.kube/config, or run in a pod with a ServiceAccount"
    )]
    NotFound(#[source] kube::config::InferConfigError),
    /// The text is not a kubeconfig.
    #[error("not a kubeconfig (YAML with clusters, users and contexts)")]
    Parse(#[source] kube::config::KubeconfigError),
    /// A context, cluster or user it names is missing, or inline data is not base64.
    #[error(
        "the kubeconfig could not be loaded (a context, cluster or user it names is missing, or inline data is not base64)"
    )]
    Load(#[source] kube::config::KubeconfigError),
    /// The loaded configuration makes no client (such as a TLS setting rustls refuses).
    #[error("no Kubernetes client can be built from the kubeconfig")]
    Client(#[source] kube::Error),
}

/// The cluster as kubectl finds it: the kubeconfig at `path` when one is named, else the one
/// `KUBECONFIG` names, else `~/.kube/config`, else the pod's in-cluster ServiceAccount.
pub async fn find(path: Option<&std::path::Path>) -> Result<kube::Config, KubeconfigError> {
    match path {
        Some(path) => {
            let yaml = std::fs::read_to_string(path)
                .map_err(|source| KubeconfigError::Read { path: path.to_path_buf(), source })?;
            config(&yaml).await
        }
        None => kube::Config::infer().await.map_err(KubeconfigError::NotFound),
    }
}

/// The kube-rs configuration of a kubeconfig's text, for its current context.
pub async fn config(yaml: &str) -> Result<kube::Config, KubeconfigError> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).map_err(KubeconfigError::Parse)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(KubeconfigError::Load)
}

/// A plain kube-rs client (with kube-rs's own retries) for a kubeconfig's text: for an
/// operator's or a test's own reads and writes, never for the component's calls, which go
/// through [`crate::client_from_config`].
pub async fn client(yaml: &str) -> Result<kube::Client, KubeconfigError> {
    kube::Client::try_from(config(yaml).await?).map_err(KubeconfigError::Client)
}

/// A cluster's API server URL for messages: scheme, host, port and path, never user info or a
/// query (a kubeconfig's server URL may carry either, and a message must not).
pub fn shown_server(url: &http::Uri) -> Option<String> {
    let host = url.host()?;
    let port = url.port_u16().map(|p| format!(":{p}")).unwrap_or_default();
    let path = url.path().trim_end_matches('/');
    Some(format!("{}://{host}{port}{path}", url.scheme_str().unwrap_or("https")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_is_shown_without_credentials_or_query() {
        let shown = |url: &str| shown_server(&url.parse().expect("a URI"));
        assert_eq!(shown("https://127.0.0.1:6443/").as_deref(), Some("https://127.0.0.1:6443"));
        assert_eq!(
            shown("https://user:s3cret@rancher.example/k8s/clusters/c-1?token=s3cret").as_deref(),
            Some("https://rancher.example/k8s/clusters/c-1")
        );
    }

    #[tokio::test]
    async fn a_named_file_that_cannot_be_read_is_named() {
        let missing = std::path::Path::new("/nonexistent/kubeconfig");
        let e = find(Some(missing)).await.expect_err("no such file");
        assert!(matches!(&e, KubeconfigError::Read { path, .. } if path == missing), "{e}");
        assert!(e.to_string().contains("/nonexistent/kubeconfig"), "{e}");
    }

    #[tokio::test]
    async fn a_text_that_is_no_kubeconfig_says_so() {
        assert!(matches!(config("[1, 2]").await, Err(KubeconfigError::Parse(_))));
    }

    #[tokio::test]
    async fn a_context_naming_a_missing_cluster_is_a_load_error() {
        let yaml = "apiVersion: v1\nkind: Config\nclusters: []\nusers: [{name: u, user: {token: t}}]\n\
                    contexts: [{name: c, context: {cluster: gone, user: u}}]\ncurrent-context: c\n";
        assert!(matches!(config(yaml).await, Err(KubeconfigError::Load(_))));
    }

    #[tokio::test]
    async fn a_complete_kubeconfig_makes_a_client_for_its_server() {
        let yaml = "apiVersion: v1\nkind: Config\nclusters: [{name: k, cluster: {server: 'https://127.0.0.1:6443'}}]\n\
                    users: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: k, user: u, namespace: agents}}]\n\
                    current-context: c\n";
        let loaded = config(yaml).await.expect("loads");
        assert_eq!(loaded.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(loaded.default_namespace, "agents");
        client(yaml).await.expect("a client");
    }
}
