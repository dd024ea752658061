//! `sandbox-dev contract` with the reference provider, which declares no `kube` access: the
//! scenarios it can be held to pass, each fault-matrix operation says it was skipped, and a
//! provider told to fail fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-dev");

fn built(file: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/component").join(file);
    assert!(path.exists(), "no component at {}: run `make component` (make test does)", path.display());
    path
}

/// A scratch directory that also serves as `HOME`, so no kubeconfig can be inferred.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("sandbox-dev-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Self(dir)
    }

    fn write(&self, name: &str, value: &Value) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, value.to_string()).expect("write");
        path.to_string_lossy().into_owned()
    }

    /// `sandbox-dev ARGS --component COMPONENT` with no cluster to infer.
    fn run(&self, component: &Path, args: &[&str]) -> Output {
        Command::new(BIN)
            .args(args)
            .arg("--component")
            .arg(component)
            .arg("--cache-dir")
            .arg(self.0.join("cache"))
            .env("HOME", &self.0)
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env_remove("RUST_BACKTRACE")
            .env_remove("RUST_LIB_BACKTRACE")
            .output()
            .expect("run sandbox-dev")
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

/// `contract` on a provider that keeps the contract exits 0 and prints one JSON record per
/// scenario and per matrix operation (skipped: no request to fail); on one told to fail every
/// acquire, it exits 1 and says which scenarios failed.
#[test]
fn contract_passes_a_provider_that_keeps_it_and_fails_one_that_does_not() {
    let scratch = Scratch::new("contract");
    let component = built("reference_provider.wasm");
    let out = scratch.run(&component, &["contract", "--json", "--embedded"]);
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
    let out = scratch.run(&component, &["contract", "--config", &failing, "--no-matrix"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("fail") && table.contains("full"), "the table says what failed: {table}");
}

#[test]
fn contract_refuses_two_clusters_at_once() {
    let scratch = Scratch::new("contract-two");
    let out = scratch.run(&built("reference_provider.wasm"), &["contract", "--embedded", "--kubeconfig", "k.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("cannot be used with"), "{}", text(&out));
}
