//! What the tests of the `sandbox-host` binary share: a scratch directory, the built provider
//! component, and an embedded cluster in this process with the files the provider commands take.

use std::path::PathBuf;
use std::process::Command;

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::json;

/// The binary under test.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

/// A scratch directory of this test process, by tag.
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("sandbox-host-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs a command without stalling the async runtime's other work (the in-process cluster).
pub(crate) trait OutputBlocking {
    fn output_blocking(&mut self) -> std::io::Result<std::process::Output>;
}

impl OutputBlocking for Command {
    fn output_blocking(&mut self) -> std::io::Result<std::process::Output> {
        tokio::task::block_in_place(|| self.output())
    }
}

/// A component `make component` builds, by file name: the Kubernetes provider
/// (`provider.wasm`) is built for wasm32-unknown-unknown, the reference provider for
/// wasm32-wasip2.
pub(crate) fn built(file: &str) -> PathBuf {
    let target = if file == "provider.wasm" { "wasm32-unknown-unknown" } else { "wasm32-wasip2" };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target").join(target).join("component").join(file);
    assert!(path.exists(), "no component at {}: run `make component` (make test does)", path.display());
    path
}

/// The built provider component.
pub(crate) fn component() -> PathBuf {
    built("provider.wasm")
}

/// An embedded cluster in this process and the files the provider commands take.
pub(crate) struct ProviderCli {
    pub(crate) cluster: EmbeddedCluster,
    pub(crate) dir: PathBuf,
    pub(crate) kubeconfig: PathBuf,
    pub(crate) config: PathBuf,
    pub(crate) cache: PathBuf,
}

impl ProviderCli {
    /// A cluster, its kubeconfig for the provider's identity, and a Job backend config.
    pub(crate) async fn start(tag: &str) -> Self {
        let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
        let dir = temp_dir(tag);
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig"))
            .expect("write");
        let config = dir.join("config.json");
        std::fs::write(&config, json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}).to_string())
            .expect("config");
        let cache = dir.join("cache");
        Self { cluster, dir, kubeconfig, config, cache }
    }

    /// `sandbox-host ARGS` against the cluster, with the config; without backtraces, so its
    /// output is what a person sees.
    pub(crate) fn run(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        cmd.args(args)
            .arg("--component")
            .arg(component())
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .arg("--config")
            .arg(&self.config);
        cmd
    }

    /// `sandbox-host ARGS` against the cluster without `--config`, for what needs none.
    pub(crate) fn run_without_config(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        cmd.args(args).arg("--component").arg(component()).arg("--kubeconfig").arg(&self.kubeconfig);
        cmd.arg("--cache-dir").arg(&self.cache);
        cmd
    }

    /// `sandbox-host exec` on a lease file: `sh -c script`, which must come last.
    pub(crate) fn exec(&self, lease: &str, script: &str) -> std::process::Output {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("RUST_BACKTRACE").env_remove("RUST_LIB_BACKTRACE");
        cmd.arg("exec").arg("--component").arg(component()).arg("--kubeconfig").arg(&self.kubeconfig);
        cmd.arg("--cache-dir").arg(&self.cache).arg("--config").arg(&self.config).args(["--lease", lease]);
        cmd.args(["--", "sh", "-c", script]).output_blocking().expect("exec")
    }

    /// Applies the objects of a YAML stream (as `rbac` prints) as the admin, after `edit`.
    pub(crate) async fn apply_yaml(&self, yaml: &str, edit: impl Fn(&mut serde_json::Value)) {
        let admin = self.cluster.client().await.expect("admin client");
        for document in serde_yaml_ng::Deserializer::from_str(yaml) {
            let mut object: serde_json::Value = serde::Deserialize::deserialize(document).expect("a YAML document");
            if object.is_null() {
                continue;
            }
            edit(&mut object);
            let (api_version, kind) =
                (object["apiVersion"].as_str().unwrap_or(""), object["kind"].as_str().unwrap_or(""));
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let plural = format!("{}s", kind.to_lowercase());
            let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural);
            let namespace = object["metadata"]["namespace"].as_str().unwrap_or("default").to_string();
            let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &namespace, &resource);
            let typed: DynamicObject = serde_json::from_value(object.clone()).expect("an object");
            api.create(&PostParams::default(), &typed).await.unwrap_or_else(|e| panic!("apply {kind}: {e}"));
        }
    }

    /// Holds every watch the provider opens (its wait for readiness) until the returned fault
    /// rule is removed, so a test can act while an acquire is surely under way.
    pub(crate) fn hold_provider_watches(&self) -> u64 {
        self.cluster.faults().add(Rule {
            matches: Match {
                verb: Some("watch".into()),
                user: Some(embedded_cluster::PROVIDER_USER.into()),
                ..Default::default()
            },
            action: Action::Hold { millis: 300_000 },
            after: 0,
            times: None,
            probability: None,
        })
    }

    /// Requests of the provider's identity that change the cluster.
    pub(crate) fn provider_writes(&self) -> Vec<String> {
        self.cluster
            .requests()
            .entries()
            .into_iter()
            .filter(|e| e.user == embedded_cluster::PROVIDER_USER && e.is_write())
            .map(|e| format!("{} {}", e.verb, e.resource))
            .collect()
    }
}

impl Drop for ProviderCli {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Asserts that a command failed as a refusal (exit code 1) and returns its stderr.
pub(crate) fn refused(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "a refusal, not a crash: {stderr}");
    stderr
}
