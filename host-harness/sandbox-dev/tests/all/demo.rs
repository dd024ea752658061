//! `sandbox-dev demo` on a cluster named by a kubeconfig, as `make demo KUBECONFIG=...` runs it
//! on a real one: every step goes as expected, the output speaks the JSON words, and what the
//! demo made is removed at the end (or kept with `--keep`, which says how to remove it).

use crate::built;
use std::process::Command;

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::{ApiResource, GroupVersionKind};

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-dev");

/// Runs the demo against `cluster` through an admin kubeconfig: (exit code, stdout, stderr).
fn demo(cluster: &EmbeddedCluster, tag: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let dir = std::env::temp_dir().join(format!("sandbox-dev-demo-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    cluster.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let out = tokio::task::block_in_place(|| {
        Command::new(BIN)
            .arg("demo")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--component")
            .arg(built("provider.wasm"))
            .arg("--reference-component")
            .arg(built("reference_provider.wasm"))
            .arg("--cache-dir")
            .arg(dir.join("cache"))
            .args(extra)
            .env_remove("RUST_LOG")
            .output()
    })
    .expect("run the demo");
    let _ = std::fs::remove_dir_all(&dir);
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

async fn warm_pools(cluster: &EmbeddedCluster) -> usize {
    let gvk = GroupVersionKind::gvk("extensions.agents.x-k8s.io", "v1beta1", "SandboxWarmPool");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "sandboxwarmpools");
    let client = cluster.client().await.expect("admin client");
    let pools = Api::<DynamicObject>::namespaced_with(client, "sandbox-demo", &resource);
    pools.list(&ListParams::default()).await.expect("list warm pools").items.len()
}

/// The rows: on a real cluster the demo left its namespace, template and a 2-member
/// warm pool running, and printed Rust's `AlreadyGone` where `--json` says `already-gone`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_on_a_kubeconfig_removes_what_it_made() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let (code, stdout, stderr) = demo(&cluster, "clean", &[]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("already-gone") && !stdout.contains("AlreadyGone"), "{stdout}");
    assert!(!stdout.contains("Deleted") && !stdout.contains("Loaded"), "no Rust names: {stdout}");
    assert!(!stderr.contains("WARN provider:"), "the demo's configs draw no warning: {stderr}");
    assert!(stdout.contains("removed the warm pools demo-warm and demo-empty and the template demo"), "{stdout}");
    assert!(stdout.contains("the namespace sandbox-demo, which the demo made"), "{stdout}");
    let namespace = Api::<Namespace>::all(cluster.client().await.expect("client")).get_opt("sandbox-demo").await;
    let namespace = namespace.expect("read the namespace");
    assert!(namespace.is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "the namespace goes");

    let kept = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let (code, stdout, stderr) = demo(&kept, "keep", &["--keep"]);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("remove it with: kubectl delete namespace sandbox-demo"), "{stdout}");
    assert_eq!(warm_pools(&kept).await, 2, "--keep keeps the pools");
}
