//! The embedded cluster: the API server on loopback plus the simulated controllers, started
//! together, with handles for tests (clients, faults, request log, clock).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::apiserver::ApiServer;
use crate::authorization::{Access, Identity};
use crate::clock::Clock;
use crate::controllers::kubelet::KubeletConfig;
use crate::controllers::kubelet::exec::{DEFAULT_EXEC_LIMIT, ExecHost};
use crate::controllers::kubelet::pid_namespace::PodProcess;
use crate::controllers::{self, ControllerKind};
use crate::faults::Faults;
use crate::rbac::bootstrap::{AUTHENTICATED_GROUP, MASTERS_GROUP};
use crate::request_log::RequestLog;
use crate::resources::SandboxVersions;
use crate::server::HttpFront;
use crate::tls::{self, Pki};

/// The user of the admin token written to kubeconfigs.
pub const ADMIN_USER: &str = "kubernetes-admin";
/// A user that may only read (get, list, watch), to exercise 403 Forbidden.
pub const VIEWER_USER: &str = "viewer";
/// The identity a sandbox-provider host uses, so the request log tells a provider's calls
/// from the controllers' and a test's own.
pub const PROVIDER_USER: &str = "system:serviceaccount:sandboxes:sandbox-provider";

/// How to start an embedded cluster.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Serve HTTPS with a generated CA (default); plain HTTP is for debugging only.
    pub tls: bool,
    pub sandbox_versions: SandboxVersions,
    /// Cluster time runs this many times faster than real time.
    pub time_scale: f64,
    /// Events kept for watches to resume from; older resourceVersions get 410 Gone.
    pub watch_history: usize,
    /// Seed of probabilistic fault rules.
    pub fault_seed: u64,
    /// Which controllers run in-process.
    pub controllers: Vec<ControllerKind>,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Nodes and default delays of the simulated kubelet.
    pub kubelet: KubeletConfig,
    /// The minor version `/version` reports (`1.N`), so that what follows the server's version
    /// (the simulated controllers, a client) can be tried against an older one; the API served
    /// stays 1.33's.
    pub reported_minor_version: u32,
    /// The longest a `pods/exec` command may run before it is killed (kube-apiserver has no
    /// such limit; here every exec is a local process, and none may run unbounded).
    pub exec_timeout: Duration,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        Self {
            port: 0,
            tls: true,
            sandbox_versions: SandboxVersions::Both,
            time_scale: 1.0,
            watch_history: 10_000,
            fault_seed: 0x5eed,
            controllers: ControllerKind::ALL.to_vec(),
            bookmark_interval: Duration::from_secs(1),
            kubelet: KubeletConfig::default(),
            reported_minor_version: crate::discovery::MINOR_VERSION,
            exec_timeout: DEFAULT_EXEC_LIMIT,
        }
    }
}

/// A running embedded cluster; dropping it stops the server and the controllers, kills every
/// `pods/exec` process (and what execs left running in the background) and removes their
/// directories.
pub struct EmbeddedCluster {
    api: Arc<ApiServer>,
    url: String,
    ca_pem: Option<String>,
    tokens: HashMap<String, String>,
    tasks: Vec<JoinHandle<()>>,
    config: ClusterConfig,
}

impl EmbeddedCluster {
    /// Starts the API server and the configured controllers.
    pub async fn start(config: ClusterConfig) -> anyhow::Result<Self> {
        let clock = Arc::new(Clock::scaled(config.time_scale));
        let mut api = ApiServer::new(config.sandbox_versions, clock.clone(), config.watch_history, config.fault_seed)?;
        api.exec = Arc::new(ExecHost::new(config.exec_timeout, config.kubelet.pod_pids_limit));
        let api = Arc::new(api);
        api.reported_minor.store(config.reported_minor_version, std::sync::atomic::Ordering::Relaxed);
        let listener = TcpListener::bind(("127.0.0.1", config.port))
            .await
            .with_context(|| format!("bind 127.0.0.1:{} (is the port in use?)", config.port))?;
        let address = listener.local_addr().context("read the listening address")?.to_string();
        let pki = if config.tls { Some(Pki::generate()?) } else { None };
        let scheme = if config.tls { "https" } else { "http" };
        let url = format!("{scheme}://{address}");

        let mut tokens = HashMap::new();
        let mut identities = HashMap::new();
        let mut add = |user: &str, access: Access| {
            let token = uuid::Uuid::new_v4().simple().to_string();
            tokens.insert(user.to_string(), token.clone());
            let mut groups = vec![AUTHENTICATED_GROUP.to_string()];
            if access == Access::Admin {
                groups.insert(0, MASTERS_GROUP.to_string());
            }
            identities.insert(token, Identity { user: user.to_string(), groups, access });
        };
        add(ADMIN_USER, Access::Admin);
        add(VIEWER_USER, Access::ReadOnly);
        add(PROVIDER_USER, Access::Unrestricted);
        for kind in ControllerKind::ALL {
            add(kind.user(), Access::Unrestricted);
        }

        let front = Arc::new(HttpFront {
            api: api.clone(),
            tokens: identities,
            address,
            bookmark_interval: config.bookmark_interval,
        });
        let tls_config = pki.as_ref().map(Pki::server_config).transpose()?;
        let mut tasks = vec![
            tokio::spawn(front.serve(listener, tls_config)),
            tokio::spawn(crate::pod_exec::clean_up_after_deleted_pods(api.clone())),
        ];
        let mut cluster =
            Self { api, url, ca_pem: pki.map(|p| p.ca_pem), tokens, tasks: Vec::new(), config: config.clone() };
        for kind in config.controllers {
            let client = cluster.client_as(kind.user()).await?;
            tasks.push(tokio::spawn(controllers::run_forever(kind, client, clock.clone(), config.kubelet.clone())));
        }
        cluster.tasks = tasks;
        Ok(cluster)
    }

    /// What it was started with, to start more clusters like it (with `port: 0`).
    pub fn config(&self) -> &ClusterConfig {
        &self.config
    }

    /// The server URL (`https://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The CA certificate (PEM) clients must trust; `None` on plain HTTP.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bearer token of a known user.
    pub fn token(&self, user: &str) -> Option<&str> {
        self.tokens.get(user).map(String::as_str)
    }

    /// A kubeconfig for a user (default: the admin).
    pub fn kubeconfig(&self, user: &str) -> anyhow::Result<String> {
        let token = self.token(user).with_context(|| format!("the embedded cluster has no user {user:?}"))?;
        self.kubeconfig_for_token(user, token)
    }

    /// A kubeconfig that authenticates with any bearer token, such as a ServiceAccount token
    /// from [`Self::service_account_token`] or a made-up one; `user_label` only names the
    /// kubeconfig's user entry (the server decides who the token belongs to).
    pub fn kubeconfig_for_token(&self, user_label: &str, token: &str) -> anyhow::Result<String> {
        tls::kubeconfig_yaml(&self.url, self.ca_pem.as_deref(), user_label, token)
    }

    /// A kube-rs client that authenticates with any bearer token.
    pub async fn client_for_token(&self, user_label: &str, token: &str) -> anyhow::Result<kube::Client> {
        tls::client_from_kubeconfig(&self.kubeconfig_for_token(user_label, token)?).await
    }

    /// Requests a token for a ServiceAccount through the API as the admin, with the TokenRequest
    /// `kubectl create token` sends (default audience and expiry).
    pub async fn service_account_token(&self, namespace: &str, name: &str) -> anyhow::Result<String> {
        let accounts: kube::Api<ServiceAccount> = kube::Api::namespaced(self.client().await?, namespace);
        let answer = accounts
            .create_token_request(name, &kube::api::PostParams::default(), &TokenRequest::default())
            .await
            .with_context(|| format!("request a token for serviceaccount {namespace}/{name}"))?;
        answer.status.map(|s| s.token).context("the TokenRequest answer has no status")
    }

    /// Writes the admin kubeconfig to `path` (creating parent directories).
    pub fn write_kubeconfig(&self, path: &Path) -> anyhow::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).with_context(|| format!("create {}", parent.display()))?;
        }
        std::fs::write(path, self.kubeconfig(ADMIN_USER)?).with_context(|| format!("write {}", path.display()))
    }

    /// A kube-rs client as the admin.
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        self.client_as(ADMIN_USER).await
    }

    /// A kube-rs client as any known user.
    pub async fn client_as(&self, user: &str) -> anyhow::Result<kube::Client> {
        tls::client_from_kubeconfig(&self.kubeconfig(user)?).await
    }

    /// The processes of a pod's PID namespace, as the machine sees them, so a test can count
    /// what execs left (zombies included); `None` while the pod has none (no exec yet, or the
    /// machine gives no namespaces: see the kubelet's `pid_namespace`).
    pub fn pod_processes(&self, pod_uid: &str) -> Option<Vec<PodProcess>> {
        self.api.exec.pod_processes(pod_uid)
    }

    /// The fault-injection rules.
    pub fn faults(&self) -> &Faults {
        &self.api.faults
    }

    /// The request log.
    pub fn requests(&self) -> &RequestLog {
        &self.api.log
    }

    /// The cluster clock.
    pub fn clock(&self) -> &Arc<Clock> {
        &self.api.clock
    }

    /// How many `pods/exec` sessions stream now (what finished execs left running in the
    /// background is not counted: it lives on with its pod).
    pub fn running_execs(&self) -> usize {
        self.api.exec.running()
    }

    /// Number of stored objects of a resource (by storage key: `pods`, `sandboxes.agents.x-k8s.io`).
    pub fn object_count(&self, storage: &str) -> usize {
        self.api.store.count(storage)
    }
}

impl Drop for EmbeddedCluster {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        self.api.exec.shutdown();
    }
}
