//! The harness of the end-to-end scenarios: an embedded cluster, the built provider component
//! loaded into the wasmtime host (as its own cluster identity), and request builders.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use embedded_cluster::{ClusterConfig, EmbeddedCluster, PROVIDER_USER, SandboxVersions};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use provider_host::owner_signature::OwnershipKeys;
use provider_host::records::{AcquireRequest, EnvVar, Lease, LeaseRef};
use provider_host::{ComponentSource, HostOptions, Limits, Policy, ProviderHost};
use serde_json::{Value, json};

/// The namespace every scenario works in.
pub const NAMESPACE: &str = "e2e";
/// A secret value that must never show up outside the per-lease Secret.
/// The operator's ownership key of every test host ([`provider_host::owner_signature`]).
pub const OWNERSHIP_KEY: &str = "e2e-ownership-key-not-for-production-0001";

pub const SECRET_VALUE: &str = "s3cr3t-e2e-value-7f1c";

/// The component `make component` builds (or `PROVIDER_WASM`).
pub fn component_path() -> PathBuf {
    if let Some(p) = std::env::var_os("PROVIDER_WASM") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = root.join("target/wasm32-unknown-unknown/component/provider.wasm");
    assert!(path.exists(), "no provider component at {}: run `make component` (make test does)", path.display());
    path
}

/// A running cluster with the provider loaded.
pub struct Harness {
    pub cluster: EmbeddedCluster,
    pub host: ProviderHost,
    /// A client as the cluster admin, for the test's own reads and writes.
    pub admin: kube::Client,
}

impl Harness {
    /// The cluster with the given Sandbox versions, namespace `e2e`, and the provider.
    pub async fn start(versions: SandboxVersions) -> Self {
        let cluster = EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() })
            .await
            .expect("start the embedded cluster");
        let admin = cluster.client().await.expect("admin client");
        let namespaces: Api<Namespace> = Api::all(admin.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).expect("namespace"),
            )
            .await
            .expect("create the namespace");
        let host = load_host(&cluster.kubeconfig(PROVIDER_USER).expect("provider kubeconfig")).await;
        Self { cluster, host, admin }
    }

    /// Requests the provider made since a request-log mark.
    pub fn provider_calls_since(&self, mark: u64) -> Vec<embedded_cluster::request_log::Entry> {
        self.cluster.requests().since(mark).into_iter().filter(|e| e.user == PROVIDER_USER).collect()
    }

    /// The provider's writes since a mark, as `verb resource name`.
    pub fn provider_writes_since(&self, mark: u64) -> Vec<String> {
        self.provider_calls_since(mark)
            .into_iter()
            .filter(|e| e.is_write())
            .map(|e| format!("{} {} {}", e.verb, e.resource, e.name))
            .collect()
    }
}

/// The built provider in a host that reaches the cluster with `kubeconfig`, under the default
/// policy limited to the test namespace.
pub async fn load_host(kubeconfig: &str) -> ProviderHost {
    load_host_with(kubeconfig, Limits::default()).await
}

/// [`load_host`] with other per-call limits (a shorter call deadline, say).
pub async fn load_host_with(kubeconfig: &str, limits: Limits) -> ProviderHost {
    // The host's own client: no transparent retries, so the guest sees every answer.
    let config = embedded_cluster::tls::config_from_kubeconfig(kubeconfig).await.expect("provider config");
    let client = provider_host::client_from_config(config).expect("provider client");
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/provider-cache-tests");
    // The scenarios' warm pools are the test's own: any may be claimed.
    // Signed, as an operator should run it: every scenario proves ownership by signature.
    let policy = Policy {
        warm_pools: vec!["*".into()],
        claim_templates: vec!["*".into()],
        ownership_keys: Some(OwnershipKeys::parse(OWNERSHIP_KEY).expect("the test key")),
        ..Policy::kubernetes_default([NAMESPACE])
    };
    let options = HostOptions { policy, limits, cache_dir: Some(cache) };
    ProviderHost::load(ComponentSource::File(component_path()), client, options).await.expect("load the provider")
}

/// The Sandboxes of the test namespace in one API version, as the cluster admin sees them.
pub fn sandboxes(h: &Harness, version: &str) -> Api<DynamicObject> {
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("agents.x-k8s.io", version, "Sandbox"), "sandboxes");
    Api::namespaced_with(h.admin.clone(), NAMESPACE, &ar)
}

/// How long a test waits for the cluster where the wait is not what it tests: controllers
/// that finish in a second on an idle machine, with a wide margin for a loaded one.
pub const WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Polls `f` until true, for states no single watch shows (controllers act asynchronously).
pub async fn eventually<F, Fut>(what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < deadline {
        if f().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for: {what}");
}

/// A provider config for a backend, with extra keys merged in.
pub fn config(backend: &str, extra: Value) -> String {
    let mut c =
        json!({"namespace": NAMESPACE, "backend": backend, "image": "busybox:1.36", "command": ["sleep", "infinity"]});
    if let (Some(o), Some(e)) = (c.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    c.to_string()
}

/// An acquire request with one plain and one secret variable.
pub fn request(config: &str, acquisition_id: &str) -> AcquireRequest {
    AcquireRequest {
        config: config.to_string(),
        run_id: "run-1".into(),
        acquisition_id: acquisition_id.into(),
        agent_id: Some("agent-7".into()),
        requested_expires_at: Some(jiff::Timestamp::now().as_millisecond() + 3_600_000),
        env: vec![
            EnvVar { name: "TASK".into(), value: "e2e".into(), secret: false },
            EnvVar { name: "API_TOKEN".into(), value: SECRET_VALUE.into(), secret: true },
        ],
        reusable: false,
    }
}

/// The lease and config as a host stores them.
pub fn lease_ref(lease: &Lease, config: &str) -> LeaseRef {
    LeaseRef { lease: lease.clone(), config: config.to_string() }
}

/// Captured `tracing` output of the provider's log lines (and the host's), for secret checks.
#[derive(Clone, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything logged so far.
    pub fn text(&self) -> String {
        self.0.lock().map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Ok(mut b) = self.0.lock() {
            b.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
    type Writer = Captured;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

/// Captures every log line at debug and above on this thread until the guard is dropped.
pub fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(captured.clone())
        .with_ansi(false)
        .finish();
    (captured.clone(), tracing::subscriber::set_default(subscriber))
}
