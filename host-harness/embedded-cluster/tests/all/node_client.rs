//! A client nobody here wrote: `@kubernetes/client-node` (the official JavaScript client),
//! installed from npm by this test, drives the embedded cluster unchanged: typed core and
//! batch calls, a JSON patch, label selectors, custom objects, a watch, and error bodies.
//! The scenario is `node_client/scenario.mjs`; it prints what it saw as one JSON document.

use std::path::PathBuf;
use std::process::Command;

use embedded_cluster::SandboxVersions;
use serde_json::{Value, json};

/// The client release under test: the newest that runs on Node 20 (2.x needs Node 22).
const CLIENT: &str = "@kubernetes/client-node@1.4.0";

fn run(cmd: &mut Command, what: &str) -> std::process::Output {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e} (Node 20 and npm are expected on PATH)"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A directory with the client installed (kept under target/ between runs) and the scenario.
fn installed() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/node-client");
    std::fs::create_dir_all(&dir).expect("create the client's directory");
    let version = CLIENT.rsplit('@').next().unwrap_or_default();
    let manifest = dir.join("node_modules/@kubernetes/client-node/package.json");
    let current = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|p| p["version"].as_str().map(String::from));
    if current.as_deref() != Some(version) {
        run(
            Command::new("npm")
                .args(["install", "--no-audit", "--no-fund", "--no-save", "--loglevel=error", CLIENT])
                .current_dir(&dir),
            "npm install",
        );
    }
    let scenario = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/all/node_client/scenario.mjs");
    std::fs::copy(&scenario, dir.join("scenario.mjs")).expect("copy the scenario next to node_modules");
    dir
}

#[tokio::test]
async fn the_official_javascript_client_works_unchanged() {
    let dir = tokio::task::spawn_blocking(installed).await.expect("join");
    let c = crate::common::full_cluster(SandboxVersions::Both).await;
    let kubeconfig = dir.join(format!("kubeconfig-{}", std::process::id()));
    c.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let script = dir.join("scenario.mjs");
    let out = tokio::task::spawn_blocking(move || {
        run(Command::new("node").arg(script).arg(&kubeconfig), "node scenario.mjs")
    })
    .await
    .expect("join");
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("the scenario's output is not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout))
    });
    assert_eq!(
        seen,
        json!({
            "configMapUid": true,
            "configMapData": {"k": "v"},
            "patchedData": {"k": "w"},
            "listedNames": ["settings"],
            "secretData": {"token": "czNjcmV0"},
            "missing": {"code": 404, "reason": "NotFound"},
            "jobUid": true,
            "sandboxGeneration": 1,
            "sandboxReady": true,
            "watched": ["ADDED settings", "MODIFIED settings", "DELETED settings"]
        })
    );
    let _ = std::fs::remove_file(dir.join(format!("kubeconfig-{}", std::process::id())));
}
