//! `sandbox-host` with the reference provider, which declares no `kube` access: every provider
//! command runs with no cluster named and none to infer, while a provider that needs a cluster
//! still gets the "no cluster" error; and `sandbox-dev contract` holds it to the contract.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::built;

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

/// A scratch directory that also serves as `HOME`, so no kubeconfig can be inferred.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sandbox-host-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    fn write(&self, name: &str, value: &Value) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, value.to_string()).expect("write");
        path.to_string_lossy().into_owned()
    }

    /// `sandbox-host ARGS --component COMPONENT` with no cluster anywhere: no kubeconfig in
    /// `HOME`, no `KUBECONFIG`, not in a cluster.
    fn run(&self, component: &Path, args: &[&str]) -> Output {
        self.run_binary(Path::new(BIN), component, args)
    }

    /// [`Scratch::run`] with the test bed's `sandbox-dev`, for its `contract` and fault matrix.
    fn run_dev(&self, component: &Path, args: &[&str]) -> Output {
        self.run_binary(&crate::dev_bin(), component, args)
    }

    fn run_binary(&self, binary: &Path, component: &Path, args: &[&str]) -> Output {
        Command::new(binary)
            .args(args)
            .arg("--component")
            .arg(component)
            .arg("--cache-dir")
            .arg(self.0.join("cache"))
            .env("HOME", &self.0)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("KUBERNETES_SERVICE_PORT")
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .output()
            .expect("run the binary")
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn every_provider_command_runs_the_reference_provider_without_a_cluster() {
    let scratch = Scratch::new("reference");
    let component = built("reference_provider.wasm");
    let run = |args: &[&str]| scratch.run(&component, args);
    let config = scratch.write("config.json", &json!({"leaseTtlSeconds": 600}));
    let lease = scratch.0.join("lease.json").to_string_lossy().into_owned();

    let out = run(&["describe", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let info: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!((info["driver-key"].as_str(), &info["access"]), (Some("reference"), &json!([])));
    let out = run(&["validate-config", "--config", &config]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = run(&["probe", "--config", &config]);
    assert!(out.status.success() && text(&out).contains("host-deadline"), "{}", text(&out));

    let out = run(&[
        "acquire",
        "--config",
        &config,
        "--acquisition-id",
        "cli-1",
        "--run-id",
        "run-1",
        "--secret-env",
        "TOKEN=cli-secret-9",
        "--out",
        &lease,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(!text(&out).contains("cli-secret-9"), "{}", text(&out));
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&lease).expect("lease")).expect("JSON");
    assert_eq!(stored["provider-lease-id"], "reference:cli-1");

    let with_lease = |command: &str| run(&[command, "--config", &config, "--lease", &lease]);
    assert_eq!(with_lease("resume-check").status.code(), Some(0), "resumable");
    let out = run(&["renew", "--config", &config, "--lease", &lease, "--expires-in", "60"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = with_lease("release");
    assert!(out.status.success() && text(&out).contains("released"), "{}", text(&out));
    let out = run(&["destroy", "--json", "--config", &config, "--lease", &lease]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(report, json!({"objects": [{"kind": "Lease", "name": "reference:cli-1", "outcome": "deleted"}]}));

    let foreign = scratch.write(
        "foreign.json",
        &json!({"provider-lease-id": "k8s:job:default:pc-1", "backend": "job", "namespace": "default",
            "api-version": "batch/v1", "workload-uid": "u-1", "metadata": "{}"}),
    );
    let out = run(&["resume-check", "--config", &config, "--lease", &foreign]);
    assert_eq!(out.status.code(), Some(3), "another provider's lease is expired: {}", text(&out));

    let failing = scratch.write(
        "failing.json",
        &json!({"operations": {"acquire": {"fail": {"error": "capacity", "retryable": true, "message": "full"}}}}),
    );
    let out = run(&["acquire", "--config", &failing, "--acquisition-id", "cli-2", "--run-id", "run-1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("error (capacity, retryable): full"), "{}", text(&out));
}

/// The limits file reaches the host: its call deadline ends a call that outlasts it, and a file
/// that does not fit the schema is refused before anything runs.
#[test]
fn limits_come_from_the_limits_file() {
    let scratch = Scratch::new("limits");
    let component = built("reference_provider.wasm");
    let limits = scratch.write("limits.json", &json!({"call-timeout-ms": 500}));
    let config = scratch.write("config.json", &json!({"operations": {"probe": {"stall": {"until": "past-deadline"}}}}));
    let out = scratch.run(&component, &["probe", "--config", &config, "--limits", &limits]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("probe did not finish within 500 ms"), "{}", text(&out));
    let typo = scratch.write("typo.json", &json!({"call-timeout": 500}));
    let out = scratch.run(&component, &["describe", "--limits", &typo]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("does not match the limits schema"), "{}", text(&out));
}

#[test]
fn a_provider_that_needs_a_cluster_still_asks_for_one() {
    let scratch = Scratch::new("needs-cluster");
    // Not `describe` or `validate-config`: they make no cluster call and run without one.
    let config =
        scratch.write("config.json", &json!({"namespace": "default", "backend": "job", "image": "busybox:1.36"}));
    let out = scratch.run(&built("provider.wasm"), &["probe", "--config", &config]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("no cluster: pass --kubeconfig, set KUBECONFIG"), "{}", text(&out));
}

/// `contract` needs a cluster named: the product binary has no embedded one, and says where
/// that is.
#[test]
fn contract_without_a_kubeconfig_names_the_flag_and_the_test_beds_binary() {
    let scratch = Scratch::new("contract-no-cluster");
    let out = scratch.run(&built("reference_provider.wasm"), &["contract"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("pass --kubeconfig") && text(&out).contains("sandbox-dev contract"), "{}", text(&out));
}

/// `sandbox-dev contract` on a provider that keeps the contract exits 0 and prints one JSON record per
/// scenario and per matrix operation (skipped: no request to fail); on one told to fail every
/// acquire, it exits 1 and says which scenarios failed.
#[test]
fn contract_passes_a_provider_that_keeps_it_and_fails_one_that_does_not() {
    let scratch = Scratch::new("contract");
    let component = built("reference_provider.wasm");
    let out = scratch.run_dev(&component, &["contract", "--json", "--embedded"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON record ({e}): {l}")))
        .collect();
    let verdict = |r: &Value| r["verdict"].as_str().unwrap_or_default().to_string();
    assert!(records.iter().all(|r| ["pass", "skip"].contains(&verdict(r).as_str()) && r["why"].is_string()));
    let cells: Vec<&Value> =
        records.iter().filter(|r| r["scenario"].as_str().is_some_and(|s| s.starts_with("matrix "))).collect();
    assert_eq!(cells.len(), 5, "one skipped record per operation: {cells:?}");
    assert!(cells.iter().all(|c| verdict(c) == "skip"), "{cells:?}");
    assert!(records.len() > cells.len() && records.iter().any(|r| verdict(r) == "pass"), "{records:?}");

    let failing = scratch.write(
        "failing.json",
        &json!({"operations": {"acquire": {"fail": {"error": "capacity", "retryable": true, "message": "full"}}}}),
    );
    let out = scratch.run_dev(&component, &["contract", "--config", &failing, "--no-matrix"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("fail") && table.contains("full"), "the table says what failed: {table}");
}

/// `sandbox-dev contract --embedded` with a kubeconfig names two clusters, and is refused.
#[test]
fn contract_refuses_two_clusters_at_once() {
    let scratch = Scratch::new("contract-two");
    let out = scratch.run_dev(&built("reference_provider.wasm"), &["contract", "--embedded", "--kubeconfig", "k.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot be used with"), "{}", text(&out));
}
