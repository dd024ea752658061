//! What every measurement runs against: an embedded cluster in this process, a namespace, and
//! the provider component loaded into the wasmtime host as the provider's own identity.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use embedded_cluster::controllers::kubelet::KubeletConfig;
use embedded_cluster::{ClusterConfig, EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use provider_host::records::{AcquireRequest, EnvVar, Lease, LeaseRef};
use provider_host::{ComponentSource, HostOptions, KubeHost, Limits, Policy, ProviderHost};
use serde_json::json;

/// The namespace the benchmark works in.
pub const NAMESPACE: &str = "bench";

/// The two backends, as their config names them.
pub const BACKENDS: [&str; 2] = ["sandbox", "job"];

/// The workspace's root, where `target/` is.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A component built by `make component` / `make fixtures`, by file name.
pub fn component(file: &str) -> anyhow::Result<PathBuf> {
    built(file, "component")
}

/// A component built with `profile` (`component`, or `component-names` for the provider with its
/// functions' names kept), by file name.
pub fn built(file: &str, profile: &str) -> anyhow::Result<PathBuf> {
    // The Kubernetes provider is built for wasm32-unknown-unknown, the others for wasm32-wasip2.
    let target = if file == "provider.wasm" { "wasm32-unknown-unknown" } else { "wasm32-wasip2" };
    let path = workspace_root().join("target").join(target).join(profile).join(file);
    anyhow::ensure!(path.exists(), "no component at {}: run `make bench`, which builds it", path.display());
    Ok(path)
}

/// The Kubernetes provider component.
pub fn provider_component() -> anyhow::Result<PathBuf> {
    component("provider.wasm")
}

/// A cluster with `nodes` simulated nodes (each takes 110 pods and 8 CPUs) and a fixed
/// kubelet start and ready delay, and the benchmark's namespace.
pub async fn cluster(nodes: usize, delay: Duration) -> anyhow::Result<EmbeddedCluster> {
    let kubelet = KubeletConfig {
        node_names: (1..=nodes).map(|i| format!("bench-node-{i}")).collect(),
        start_delay: delay,
        ready_delay: delay,
        ..KubeletConfig::default()
    };
    let cluster = EmbeddedCluster::start(ClusterConfig { kubelet, ..ClusterConfig::default() }).await?;
    let namespaces: Api<Namespace> = Api::all(cluster.client().await?);
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}}))?)
        .await
        .context("create the benchmark's namespace")?;
    Ok(cluster)
}

/// The host's own client of the cluster: no transparent retries, as every host runs.
pub async fn host_client(cluster: &EmbeddedCluster) -> anyhow::Result<kube::Client> {
    let config = embedded_cluster::tls::config_from_kubeconfig(&cluster.kubeconfig(PROVIDER_USER)?).await?;
    Ok(provider_host::client_from_config(config)?)
}

/// Where the benchmark keeps precompiled components.
pub fn cache_dir() -> PathBuf {
    workspace_root().join("target/provider-cache-bench")
}

/// The provider loaded as a host would, under the default policy for the namespace.
pub async fn load(cluster: &EmbeddedCluster, component: &Path, limits: Limits) -> anyhow::Result<ProviderHost> {
    load_with_client(host_client(cluster).await?, component, limits).await
}

/// [`load`] through any client of a cluster.
pub async fn load_with_client(client: kube::Client, component: &Path, limits: Limits) -> anyhow::Result<ProviderHost> {
    let policy = Policy {
        warm_pools: vec!["*".into()],
        claim_templates: vec!["*".into()],
        ..Policy::kubernetes_default([NAMESPACE])
    };
    let options = HostOptions { policy, limits, cache_dir: Some(cache_dir()) };
    Ok(ProviderHost::load(ComponentSource::File(component.to_path_buf()), client, options).await?)
}

/// The same transport (policy, ownership, client) the component's `kube` import is served by,
/// for the native provider.
pub async fn kube_host(cluster: &EmbeddedCluster, host: &ProviderHost, limits: &Limits) -> anyhow::Result<KubeHost> {
    let policy = Arc::new(host.policy().clone());
    Ok(KubeHost::new(host_client(cluster).await?, policy, limits.kube_request_timeout()).with_body_limit(limits))
}

/// The provider config of a backend.
pub fn config(backend: &str) -> String {
    json!({"namespace": NAMESPACE, "backend": backend, "image": "busybox:1.36", "command": ["sleep", "infinity"]})
        .to_string()
}

/// An acquire request with one plain and one secret variable, an hour of requested life.
pub fn request(config: &str, acquisition_id: &str) -> AcquireRequest {
    AcquireRequest {
        config: config.to_string(),
        run_id: format!("run-{acquisition_id}"),
        acquisition_id: acquisition_id.to_string(),
        agent_id: Some("bench-agent".into()),
        requested_expires_at: Some(jiff::Timestamp::now().as_millisecond() + 3_600_000),
        env: vec![
            EnvVar { name: "TASK".into(), value: "bench".into(), secret: false },
            EnvVar { name: "API_TOKEN".into(), value: "bench-secret-value".into(), secret: true },
        ],
        reusable: false,
    }
}

/// The lease and its config as a host stores them.
pub fn lease_ref(lease: &Lease, config: &str) -> LeaseRef {
    LeaseRef { lease: lease.clone(), config: config.to_string() }
}
