//! `-n/--namespace` is the namespace a command works in, as in kubectl (else the kubeconfig
//! context's); the operator's allow-list is `--allow-namespace` or a policy file, and a denial
//! names the setting that would allow the namespace.

use std::process::{Command, Output};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::support::{BIN, OutputBlocking, ProviderCli, component, refused};

/// The namespace the tests below work in besides `default`.
const NS: &str = "agents";

/// `ProviderCli` with namespace `agents`, a kubeconfig whose context names it, and a config
/// that names no namespace.
struct Bed {
    cli: ProviderCli,
    /// The provider's kubeconfig with `namespace: agents` in its current context.
    in_agents: String,
    /// A Job config without `namespace`.
    unnamed: String,
}

impl Bed {
    async fn start(tag: &str) -> Self {
        let cli = ProviderCli::start(tag).await;
        let admin = cli.cluster.client().await.expect("admin client");
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).expect("namespace");
        Api::<Namespace>::all(admin).create(&PostParams::default(), &namespace).await.expect("create the namespace");
        let mut kubeconfig: serde_json::Value =
            serde_yaml_ng::from_str(&std::fs::read_to_string(&cli.kubeconfig).expect("kubeconfig")).expect("YAML");
        let current = kubeconfig["current-context"].as_str().expect("a current context").to_string();
        let contexts = kubeconfig["contexts"].as_array_mut().expect("contexts");
        let context = contexts.iter_mut().find(|c| c["name"] == current.as_str()).expect("the current context");
        context["context"]["namespace"] = json!(NS);
        let in_agents = cli.dir.join("kubeconfig-agents");
        std::fs::write(&in_agents, serde_yaml_ng::to_string(&kubeconfig).expect("YAML")).expect("write");
        let unnamed = cli.dir.join("unnamed.json");
        std::fs::write(&unnamed, json!({"backend": "job", "image": "busybox:1.36"}).to_string()).expect("config");
        let path = |p: std::path::PathBuf| p.to_string_lossy().into_owned();
        Self { in_agents: path(in_agents), unnamed: path(unnamed), cli }
    }

    /// `sandbox-host ARGS` with the component and cache only: each test names its cluster and
    /// config.
    fn run(&self, args: &[&str]) -> Output {
        let mut cmd = Command::new(BIN);
        cmd.env_remove("RUST_BACKTRACE").env_remove("KUBECONFIG").env("HOME", &self.cli.dir);
        cmd.args(args).arg("--component").arg(component()).arg("--cache-dir").arg(&self.cli.cache);
        cmd.output_blocking().expect("run sandbox-host")
    }

    /// An acquire that must succeed: its lease.
    fn acquired(&self, args: &[&str]) -> serde_json::Value {
        let out = self.run(&[&["acquire", "--json", "--run-id", "run-1"], args].concat());
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).expect("the lease as JSON")
    }
}

/// The issue's first row: a kubeconfig and a config that both name `agents` were refused with
/// "allowed: [default]". The context's namespace is the target, and (the kubeconfig being the
/// operator's) the one namespace the default policy allows; a config naming none takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kubeconfig_context_names_the_namespace_as_in_kubectl() {
    let bed = Bed::start("ns-context").await;
    let named = bed.cli.dir.join("agents.json");
    std::fs::write(&named, json!({"namespace": NS, "backend": "job", "image": "busybox:1.36"}).to_string())
        .expect("config");
    let named = named.to_string_lossy().into_owned();
    let lease = bed.acquired(&["--kubeconfig", &bed.in_agents, "--config", &named, "--acquisition-id", "ctx-a"]);
    assert_eq!(lease["namespace"], NS, "{lease}");
    let lease = bed.acquired(&["--kubeconfig", &bed.in_agents, "--config", &bed.unnamed, "--acquisition-id", "ctx-b"]);
    assert_eq!(lease["namespace"], NS, "a config naming no namespace takes the context's: {lease}");

    // A kubeconfig trusted less than the operator chooses a target but widens nothing.
    let out = bed.run(&[
        "acquire",
        "--kubeconfig",
        &bed.in_agents,
        "--untrusted-kubeconfig",
        "--config",
        &named,
        "--acquisition-id",
        "ctx-c",
    ]);
    let stderr = refused(&out);
    assert!(stderr.contains(r#"does not allow namespace "agents" (allowed: [default])"#), "{stderr}");
    assert!(stderr.contains("--allow-namespace"), "the denial names the setting that allows it: {stderr}");
}

/// `-n` names the target: a config naming none takes it, a config or a lease naming another is
/// refused before the cluster is reached, and an allow-list that leaves it out is named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dash_n_is_the_target_and_the_allow_list_has_its_own_name() {
    let bed = Bed::start("ns-flag").await;
    let kubeconfig = bed.cli.kubeconfig.to_string_lossy().into_owned();
    let default_config = bed.cli.config.to_string_lossy().into_owned();
    let lease = bed.acquired(&[
        "-n",
        NS,
        "--kubeconfig",
        &kubeconfig,
        "--config",
        &bed.unnamed,
        "--acquisition-id",
        "flag-a",
        "--out",
        &bed.cli.dir.join("lease.json").to_string_lossy(),
    ]);
    assert_eq!(lease["namespace"], NS, "{lease}");

    let writes = bed.cli.provider_writes().len();
    let out = bed.run(&[
        "acquire",
        "--namespace",
        NS,
        "--kubeconfig",
        &kubeconfig,
        "--config",
        &default_config,
        "--acquisition-id",
        "flag-b",
    ]);
    let stderr = refused(&out);
    assert!(stderr.contains(r#"the config names namespace "default" and -n/--namespace names "agents""#), "{stderr}");
    let lease_file = bed.cli.dir.join("lease.json").to_string_lossy().into_owned();
    let out = bed.run(&[
        "destroy",
        "-n",
        "default",
        "--kubeconfig",
        &kubeconfig,
        "--config",
        &bed.unnamed,
        "--lease",
        &lease_file,
    ]);
    let stderr = refused(&out);
    assert!(stderr.contains(r#"the lease is in namespace "agents" and -n/--namespace names "default""#), "{stderr}");
    assert_eq!(bed.cli.provider_writes().len(), writes, "refused before any write");

    let out = bed.run(&[
        "acquire",
        "-n",
        NS,
        "--allow-namespace",
        "default",
        "--kubeconfig",
        &kubeconfig,
        "--config",
        &bed.unnamed,
        "--acquisition-id",
        "flag-c",
    ]);
    let stderr = refused(&out);
    assert!(stderr.contains(r#"does not allow namespace "agents" (allowed: [default])"#), "{stderr}");
    assert!(stderr.contains("add it to --allow-namespace"), "{stderr}");
    let policy = bed.cli.dir.join("policy.json");
    std::fs::write(&policy, json!({"namespaces": ["default"]}).to_string()).expect("policy");
    let policy = policy.to_string_lossy().into_owned();
    let out =
        bed.run(&["acquire", "-n", NS, "--policy", &policy, "--kubeconfig", &kubeconfig, "--config", &bed.unnamed]);
    let stderr = refused(&out);
    assert!(stderr.contains(&format!("add it to `namespaces` in the policy file {policy}")), "{stderr}");

    let out =
        bed.run(&["destroy", "-n", NS, "--kubeconfig", &kubeconfig, "--config", &bed.unnamed, "--lease", &lease_file]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));

    // Offline, `-n` completes a config just the same; without it the config must name one.
    let out = bed.run(&["validate-config", "--no-cluster", "-n", NS, "--config", &bed.unnamed]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let out = bed.run(&["validate-config", "--no-cluster", "--config", &bed.unnamed]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("/namespace: is required"), "{out:?}");
    let out = bed.run(&["validate-config", "--no-cluster", "-n", "Not_A_Namespace", "--config", &bed.unnamed]);
    assert!(refused(&out).contains(r#"-n/--namespace "Not_A_Namespace" is not a namespace name"#), "{out:?}");
}
