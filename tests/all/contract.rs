//! The contract suite against the built provider: every scenario on every backend and on both
//! Sandbox API versions (a v1beta1-only cluster, as agent-sandbox v1.0 serves, and a
//! v1alpha1-only one, as v0.4 did: the claim backend then claims through extensions v1alpha1),
//! the whole fault matrix on every backend (and on claims through v1alpha1), and the leak audit's own proof that it catches a
//! leak.

use std::path::PathBuf;
use std::time::Duration;

use contract_suite::audit::Observer;
use contract_suite::{Cluster, Report, SuiteOptions, Verdict};
use embedded_cluster::behaviour::TERMINATION_DELAY;
use embedded_cluster::{ClusterConfig, EmbeddedCluster, SandboxVersions};
use fault_matrix::{Embedded, Operation};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::core::ApiResource;
use provider_host::ComponentSource;
use provider_host::policy::MANAGED_BY_LABEL;
use serde_json::json;
use tests::component_path;

const NAMESPACE: &str = "contract";

async fn suite(versions: SandboxVersions, backends: &[&str]) -> Report {
    let cluster = EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let defaults = contract_suite::default_configs("kubernetes", NAMESPACE);
    let configs = backends
        .iter()
        .map(|b| {
            let backend = json!(b).to_string();
            defaults.iter().find(|c| c.contains(&format!("\"backend\":{backend}"))).cloned().expect("a default config")
        })
        .collect();
    contract_suite::run(&Cluster::Simulated(&Embedded(&cluster)), &options(component_path(), configs), &mut |_| {})
        .await
        .expect("the suite runs")
}

/// Every scenario of `component` with `configs`, in the suite's namespace.
fn options(component: PathBuf, configs: Vec<String>) -> SuiteOptions {
    SuiteOptions {
        component: ComponentSource::File(component),
        configs,
        namespace: NAMESPACE.to_string(),
        cache_dir: Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/provider-cache-tests")),
        only: Vec::new(),
        limits: Default::default(),
    }
}

fn assert_passed(report: &Report, scenarios_per_config: usize, configs: usize) {
    assert!(report.passed(), "the provider broke the contract:\n{report}");
    assert_eq!(report.records.len(), scenarios_per_config * configs, "{report}");
    assert_eq!(report.count(Verdict::Skip), 0, "nothing skipped on the embedded cluster:\n{report}");
}

#[tokio::test]
async fn every_backend_keeps_the_contract() {
    let report = suite(SandboxVersions::Both, &["sandbox", "job", "claim"]).await;
    assert_passed(&report, contract_suite::scenario_names().len(), 3);
}

#[tokio::test]
async fn sandboxes_and_claims_keep_the_contract_on_each_api_version() {
    for versions in [SandboxVersions::V1beta1Only, SandboxVersions::V1alpha1Only] {
        let report = suite(versions, &["sandbox", "claim"]).await;
        assert_passed(&report, contract_suite::scenario_names().len(), 2);
    }
}

/// Every request of every operation, failed once in every way, on every backend: every cell
/// keeps the contract. The tables print (with `--nocapture`) as `sandbox-host contract` shows them.
#[tokio::test]
async fn every_cell_of_the_fault_matrix_keeps_the_contract() {
    fault_matrix(SandboxVersions::Both, &["sandbox", "job", "claim"]).await;
}

/// The claim backend on agent-sandbox v0.4's API (extensions v1alpha1, claims name a template):
/// a claim there takes other requests and answers, and each must keep the contract too.
#[tokio::test]
async fn every_cell_of_the_fault_matrix_keeps_the_contract_for_v1alpha1_claims() {
    fault_matrix(SandboxVersions::V1alpha1Only, &["claim"]).await;
}

/// Runs the whole matrix on `backends` (in that order) of a cluster serving `versions`, and
/// checks that every cell ran and kept the contract.
async fn fault_matrix(versions: SandboxVersions, backends: &[&str]) {
    let cluster = EmbeddedCluster::start(ClusterConfig { sandbox_versions: versions, ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let configs = fault_matrix::default_configs("kubernetes", NAMESPACE)
        .into_iter()
        .filter(|config| backends.iter().any(|b| config.contains(&format!("\"backend\":{}", json!(b)))))
        .collect();
    let options = SuiteOptions { configs, ..options(component_path(), Vec::new()) };
    let (report, tables) = fault_matrix::run(&cluster, &options, &Operation::ALL, 8, &mut |_| {}).await.expect("runs");
    for table in &tables {
        println!("{table}\n");
    }
    let failed: Vec<_> = report.records.iter().filter(|r| r.verdict == Verdict::Fail).collect();
    assert!(failed.is_empty(), "{} cells broke the contract: {failed:#?}", failed.len());
    // Only a request that depends on timing may go untested, and it says so.
    let skipped: Vec<_> = report.records.iter().filter(|r| r.verdict == Verdict::Skip).collect();
    assert!(skipped.iter().all(|r| r.why.contains("made on some runs only")), "{skipped:#?}");
    assert_eq!(tables.iter().map(|t| t.backend.as_str()).collect::<Vec<_>>(), backends);
    for table in &tables {
        for operation in Operation::ALL {
            let rows: Vec<_> =
                table.rows.iter().filter(|(row, _)| row.starts_with(&format!("{} #", operation.as_str()))).collect();
            // Discovery is asked once per host (the first acquire), so a later call may make two.
            assert!(rows.len() >= 2, "{} makes at least 2 requests on {}:\n{table}", operation.as_str(), table.backend);
            // Every request gets every status, the late answer and the dropped connection.
            assert!(rows.iter().all(|(_, cells)| cells.len() >= 9), "{table}");
        }
        let (cells, passed) = table.totals();
        assert!(passed + skipped.len() >= cells && passed * 10 >= cells * 9, "{table}");
    }
}

/// Through a kubeconfig (here to an embedded cluster, reached as a real one would be) the
/// scenarios run, and those that need a simulator's hooks say they were skipped.
#[tokio::test]
async fn through_a_kubeconfig_the_scenarios_run() {
    let embedded = EmbeddedCluster::start(ClusterConfig::default()).await.expect("start the embedded cluster");
    let kubeconfig = embedded.kubeconfig(embedded_cluster::ADMIN_USER).expect("kubeconfig");
    let config = provider_host::kubeconfig::config(&kubeconfig).await.expect("a kubeconfig");
    let cluster = Cluster::Real { config: &config };
    let configs = vec![json!({"namespace": NAMESPACE, "backend": "job", "image": "busybox:1.36"}).to_string()];
    let only =
        vec!["lifecycle".to_string(), "resume-after-recreate".to_string(), "execute-into-a-replaced-pod".to_string()];
    let options = SuiteOptions { only, ..options(component_path(), configs) };
    let report = contract_suite::run(&cluster, &options, &mut |_| {}).await.expect("the suite runs");
    assert!(report.passed() && report.count(Verdict::Pass) == 2, "{report}");
    let skipped: Vec<_> = report.records.iter().filter(|r| r.verdict == Verdict::Skip).collect();
    assert!(
        skipped.len() == 1
            && skipped[0].scenario == "execute-into-a-replaced-pod"
            && skipped[0].why.contains("simulated"),
        "{report}"
    );
}

/// Providers swap: the reference provider, which uses no cluster, passes everything it can be
/// held to, and the report says which Kubernetes-only scenarios it skipped.
#[tokio::test]
async fn the_reference_provider_keeps_the_contract_too() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let component = root.join("target/wasm32-wasip2/component/reference_provider.wasm");
    assert!(component.exists(), "no reference provider at {}: run `make component`", component.display());
    let options = options(component, vec!["{}".to_string()]);
    let report =
        contract_suite::run(&Cluster::Simulated(&Embedded(&cluster)), &options, &mut |_| {}).await.expect("runs");
    assert!(report.passed(), "{report}");
    assert!(report.count(Verdict::Pass) >= 7, "{report}");
    let skipped: Vec<_> = report.records.iter().filter(|r| r.verdict == Verdict::Skip).collect();
    assert!(!skipped.is_empty() && skipped.iter().all(|r| r.why.contains("Kubernetes-only")), "{report}");
    let (cells, tables) = fault_matrix::run(&cluster, &options, &Operation::ALL, 1, &mut |_| {}).await.expect("runs");
    assert!(tables.is_empty(), "no request to fail, so no table");
    assert_eq!(cells.count(Verdict::Skip), Operation::ALL.len(), "{cells}");
    assert!(cells.records.iter().all(|r| r.why.contains("Kubernetes-only")), "{cells}");
}

/// The audit fails a scenario that leaves an object behind, and one that ever made an object
/// with neither an owner nor an expiry: without this, a clean audit would prove nothing.
#[tokio::test]
async fn the_leak_audit_catches_what_is_left_and_what_was_unguarded() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let admin = cluster.client().await.expect("client");
    Cluster::Simulated(&Embedded(&cluster)).ensure_namespace(NAMESPACE).await.expect("namespace");
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

/// A pod within its grace period is not a leak yet: a real kubelet waits the whole period for a
/// main process that ignores SIGTERM. The audit waits for it (the grace period from when it saw
/// it terminating, plus its settle time) instead of failing the scenario at its settle time.
#[tokio::test]
async fn the_leak_audit_waits_out_a_terminating_pods_grace_period() {
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await.expect("cluster");
    let admin = cluster.client().await.expect("client");
    Cluster::Simulated(&Embedded(&cluster)).ensure_namespace(NAMESPACE).await.expect("namespace");
    let slow = json!({"metadata": {"annotations": {TERMINATION_DELAY: "5s"}}});
    Api::<Namespace>::all(admin.clone())
        .patch(NAMESPACE, &PatchParams::default(), &Patch::Merge(slow))
        .await
        .expect("pods take 5 s to stop");
    let jobs = ApiResource::erase::<Job>(&());
    let observer = Observer::start(admin.clone(), NAMESPACE, "contract-grace", vec![jobs]).await;
    let job: Job = serde_json::from_value(json!({
        "metadata": {"name": "graced", "labels": {MANAGED_BY_LABEL: "contract-grace"}},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 20,
            "containers": [{"name": "main", "image": "busybox:1.36", "command": ["sleep", "3600"]}]}}}
    }))
    .expect("job");
    Api::<Job>::namespaced(admin.clone(), NAMESPACE).create(&PostParams::default(), &job).await.expect("job");
    let pods: Api<Pod> = Api::namespaced(admin.clone(), NAMESPACE);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let pod_name = loop {
        let listed = pods.list(&Default::default()).await.expect("pods").items;
        if let Some(p) = listed.iter().find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")) {
            break p.metadata.name.clone().expect("name");
        }
        assert!(tokio::time::Instant::now() < deadline, "waited 60 s for the Job's pod to run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let background = DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() };
    Api::<Job>::namespaced(admin, NAMESPACE).delete("graced", &background).await.expect("delete the Job");
    // The audit starts once garbage collection has marked the pod terminating: before that it
    // is an ordinary leftover, which only the settle time covers.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let pod = pods.get_opt(&pod_name).await.expect("get").expect("the pod is still stopping (5 s)");
        if pod.metadata.deletion_timestamp.is_some() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "waited 60 s for the Job's pod to be deleted");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    observer.settled(Duration::from_secs(1)).await.expect("the pod stops within its grace period");
    assert!(pods.get_opt(&pod_name).await.expect("get").is_none(), "the pod is gone, not merely given up on");
}
