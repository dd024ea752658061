//! The contract suite against the built provider: every scenario on both backends and on both
//! Sandbox API versions (a v1beta1-only cluster, as agent-sandbox v1.0 serves, and a
//! v1alpha1-only one, as v0.4 did), and the leak audit's own proof that it catches a leak.

use std::path::PathBuf;
use std::time::Duration;

use contract_suite::audit::Observer;
use contract_suite::{Cluster, Report, SuiteOptions, Verdict};
use embedded_cluster::{ClusterConfig, EmbeddedCluster, SandboxVersions};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use kube::core::ApiResource;
use provider_e2e::component_path;
use provider_host::policy::MANAGED_BY_LABEL;
use serde_json::json;

const NAMESPACE: &str = "contract";

async fn suite(versions: SandboxVersions, backends: &[&str]) -> Report {
    let cluster = EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let configs = backends
        .iter()
        .map(|b| json!({"namespace": NAMESPACE, "backend": b, "image": "busybox:1.36"}).to_string())
        .collect();
    let options = SuiteOptions {
        component: component_path(),
        configs,
        namespace: NAMESPACE.to_string(),
        cache_dir: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/provider-cache-tests")),
        only: Vec::new(),
        limits: Default::default(),
    };
    contract_suite::run(&Cluster::Embedded(&cluster), &options, &mut |_| {}).await.expect("the suite runs")
}

fn assert_passed(report: &Report, scenarios_per_config: usize, configs: usize) {
    assert!(report.passed(), "the provider broke the contract:\n{report}");
    assert_eq!(report.records.len(), scenarios_per_config * configs, "{report}");
    assert_eq!(report.count(Verdict::Skip), 0, "nothing skipped on the embedded cluster:\n{report}");
}

#[tokio::test]
async fn both_backends_keep_the_contract() {
    let report = suite(SandboxVersions::Both, &["sandbox", "job"]).await;
    assert_passed(&report, contract_suite::scenario_names().len(), 2);
}

#[tokio::test]
async fn sandboxes_keep_the_contract_on_each_api_version() {
    for versions in [SandboxVersions::V1beta1Only, SandboxVersions::V1alpha1Only] {
        let report = suite(versions, &["sandbox"]).await;
        assert_passed(&report, contract_suite::scenario_names().len(), 1);
    }
}

/// Providers swap: the reference provider, which uses no cluster, passes everything it can be
/// held to, and the report says which Kubernetes-only scenarios it skipped.
#[tokio::test]
async fn the_reference_provider_keeps_the_contract_too() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let component = component_path().with_file_name("reference_provider.wasm");
    assert!(component.exists(), "no reference provider at {}: run `make component`", component.display());
    let options = SuiteOptions {
        component,
        configs: vec!["{}".to_string()],
        namespace: NAMESPACE.to_string(),
        cache_dir: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/provider-cache-tests")),
        only: Vec::new(),
        limits: Default::default(),
    };
    let report = contract_suite::run(&Cluster::Embedded(&cluster), &options, &mut |_| {}).await.expect("runs");
    assert!(report.passed(), "{report}");
    assert!(report.count(Verdict::Pass) >= 7, "{report}");
    let skipped: Vec<_> = report.records.iter().filter(|r| r.verdict == Verdict::Skip).collect();
    assert!(!skipped.is_empty() && skipped.iter().all(|r| r.why.contains("Kubernetes-only")), "{report}");
}

/// The audit fails a scenario that leaves an object behind, and one that ever made an object
/// with neither an owner nor an expiry: without this, a clean audit would prove nothing.
#[tokio::test]
async fn the_leak_audit_catches_what_is_left_and_what_was_unguarded() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let admin = cluster.client().await.expect("client");
    Cluster::Embedded(&cluster).ensure_namespace(NAMESPACE).await.expect("namespace");
    let secrets = ApiResource::erase::<Secret>(&());
    let observer = Observer::start(admin.clone(), NAMESPACE, "contract-audit", vec![secrets]).await;
    let leak: Secret =
        serde_json::from_value(json!({"metadata": {"name": "left", "labels": {MANAGED_BY_LABEL: "contract-audit"}}}))
            .expect("secret");
    Api::<Secret>::namespaced(admin, NAMESPACE).create(&PostParams::default(), &leak).await.expect("create");
    let left = observer.settled(Duration::from_millis(500)).await.expect_err("a leak is found");
    assert!(left.contains("Secret left"), "{left}");
    assert_eq!(observer.unguarded(), vec![format!("Secret {NAMESPACE}/left")]);
}
