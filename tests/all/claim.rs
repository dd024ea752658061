//! The claim backend end to end, through the built component in the wasmtime host, on the
//! embedded cluster's warm pool and claim controllers: a warm acquire adopts a Ready member
//! (its pod keeps running, nothing restarts) and the pool replenishes; an empty pool starts the
//! Sandbox cold; the secret reaches commands but never the claim; destroy takes the claim, its
//! Sandbox and its pod; a burst as large as the pool is all warm hits, a larger one falls back
//! to cold starts; and both extensions API versions work.

use std::collections::BTreeSet;
use std::time::Duration;

use contract_suite::warm_pool::{self, PoolSpec};
use embedded_cluster::SandboxVersions;
use embedded_cluster::controllers::ControllerKind;
use embedded_cluster::faults::{Action, Match, Rule};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};
use provider_host::records::{Backend, DeleteOutcome, ExecRequest, Lease, LeaseRef, ResumeOutcome};
use serde_json::json;
use tests::*;

const TEMPLATE: &str = "py";
const POOL: &str = "py-pool";
const EMPTY_POOL: &str = "py-empty";

/// A pool `name` of `replicas` members from the template `template`, in the suite's namespace.
fn pool_spec(name: &str, template: &str, replicas: u32) -> PoolSpec {
    PoolSpec {
        namespace: NAMESPACE.into(),
        name: name.into(),
        template: template.into(),
        replicas,
        image: "busybox:1.36".into(),
    }
}

async fn pool(h: &Harness, name: &str, replicas: u32) {
    let spec = pool_spec(name, TEMPLATE, replicas);
    warm_pool::apply(&h.admin, &spec).await.expect("apply the pool");
    warm_pool::wait_ready(&h.admin, NAMESPACE, name, replicas, WAIT).await.expect("pool Ready");
}

/// Creates the template `template` and a pool of no members serving it, as an operator whose
/// template the suite did not write would.
async fn pool_with_template(h: &Harness, version: &str, spec: &PoolSpec, template: serde_json::Value) {
    let extension = |kind: &str, plural: &str| {
        let gvk = GroupVersionKind::gvk("extensions.agents.x-k8s.io", version, kind);
        Api::<DynamicObject>::namespaced_with(
            h.admin.clone(),
            NAMESPACE,
            &ApiResource::from_gvk_with_plural(&gvk, plural),
        )
    };
    let post = Default::default();
    let object = |v: serde_json::Value| serde_json::from_value::<DynamicObject>(v).expect("object");
    extension("SandboxTemplate", "sandboxtemplates").create(&post, &object(template)).await.expect("template");
    let pool = warm_pool::pool_manifest(spec, version);
    extension("SandboxWarmPool", "sandboxwarmpools").create(&post, &object(pool)).await.expect("pool");
}

fn claim_config(pool: &str) -> String {
    config("claim", json!({"claim": {"warmPool": pool, "template": TEMPLATE}}))
}

fn claims(h: &Harness, version: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("extensions.agents.x-k8s.io", version, "SandboxClaim");
    Api::namespaced_with(h.admin.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&gvk, "sandboxclaims"))
}

fn workload_name(lease: &provider_host::records::Lease) -> String {
    lease.provider_lease_id.split(':').nth(3).unwrap_or_default().to_string()
}

async fn lifecycle(versions: SandboxVersions, version: &str, sandbox_version: &str) {
    let h = Harness::start(versions).await;
    let (logs, _guard) = capture_logs();
    pool(&h, POOL, 2).await;
    let cfg = claim_config(POOL);
    let member_pods: BTreeSet<String> = Api::<Pod>::namespaced(h.admin.clone(), NAMESPACE)
        .list(&Default::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .filter_map(|p| p.metadata.uid)
        .collect();

    let lease = h.host.acquire(request(&cfg, "warm-1")).await.expect("acquire");
    assert_eq!(lease.backend, Backend::Claim);
    assert_eq!(lease.api_version, format!("extensions.agents.x-k8s.io/{version}"));
    assert!(lease.provider_lease_id.starts_with("k8s:claim:e2e:"), "{}", lease.provider_lease_id);
    let sandbox = lease.claimed_sandbox.clone().expect("the claimed Sandbox");
    assert!(sandbox.warm, "a Ready member was adopted: {sandbox:?}");
    assert_eq!(sandbox.api_version, format!("agents.x-k8s.io/{sandbox_version}"));
    assert!(sandbox.name.starts_with("py-pool-"), "a pool member's name: {}", sandbox.name);
    let pod_uid = lease.pod_uid.clone().expect("pod uid");
    assert!(member_pods.contains(&pod_uid), "the member's pod, already running, not a new one");

    let name = workload_name(&lease);
    let claim = claims(&h, version).get(&name).await.expect("the claim");
    assert_eq!(claim.metadata.uid.as_deref(), Some(lease.workload_uid.as_str()));
    assert_eq!(claim.data["spec"]["lifecycle"]["shutdownPolicy"], "Delete");
    assert!(!claim.data.to_string().contains(SECRET_VALUE), "the secret is not in the claim");
    assert!(claim.data["spec"].get("env").is_none(), "no env on the claim: it would force a cold start");
    let adopted = sandboxes(&h, sandbox_version).get(&sandbox.name).await.expect("the adopted Sandbox");
    let owner = adopted.metadata.owner_references.clone().unwrap_or_default();
    assert!(owner.iter().any(|o| o.uid == lease.workload_uid && o.controller == Some(true)), "owned by the claim");
    warm_pool::wait_ready(&h.admin, NAMESPACE, POOL, 2, WAIT).await.expect("the pool refills");

    let stored = LeaseRef { lease: lease.clone(), config: cfg.clone() };
    let exec: ExecRequest =
        serde_json::from_value(json!({"command": "sh", "args": ["-c", "echo $TASK; echo $API_TOKEN | wc -c"]}))
            .expect("request");
    let out = h.host.execute(stored.clone(), exec).await.expect("execute");
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert_eq!(out.stdout, format!("e2e\n{}\n", SECRET_VALUE.len() + 1), "the env reaches the command");

    let later = jiff::Timestamp::now().as_millisecond() + 2 * 3_600_000;
    let renewed = match h.host.renew(stored.clone(), later).await.expect("renew") {
        ResumeOutcome::Resumable(l) => l,
        ResumeOutcome::Expired(why) => panic!("renew said expired: {why}"),
    };
    assert_eq!(renewed.claimed_sandbox.as_ref().map(|s| &s.uid), Some(&sandbox.uid));
    assert!(matches!(h.host.resume_check(stored.clone()).await.expect("resume"), ResumeOutcome::Resumable(_)));

    let report = h.host.destroy(stored.clone()).await.expect("destroy");
    assert!(
        report.objects.iter().any(|o| o.kind == "SandboxClaim" && o.outcome == DeleteOutcome::Deleted),
        "{report:?}"
    );
    eventually("the claim's Sandbox and pod are gone", || async {
        let sandbox_gone = sandboxes(&h, sandbox_version).get_opt(&sandbox.name).await.ok().flatten().is_none();
        let pods = Api::<Pod>::namespaced(h.admin.clone(), NAMESPACE);
        let pod_gone = pods
            .list(&Default::default())
            .await
            .map(|l| !l.items.iter().any(|p| p.metadata.uid.as_deref() == Some(pod_uid.as_str())));
        sandbox_gone && pod_gone.unwrap_or(false)
    })
    .await;
    assert!(matches!(h.host.resume_check(stored.clone()).await.expect("resume"), ResumeOutcome::Expired(_)));
    let again = h.host.destroy(stored).await.expect("destroy again");
    assert!(again.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{again:?}");
    assert!(!logs.text().contains(SECRET_VALUE), "no secret in the logs");
}

#[tokio::test]
async fn a_claim_adopts_a_warm_member_on_v1beta1() {
    lifecycle(SandboxVersions::Both, "v1beta1", "v1beta1").await;
}

#[tokio::test]
async fn a_claim_adopts_a_warm_member_on_v1alpha1() {
    lifecycle(SandboxVersions::V1alpha1Only, "v1alpha1", "v1alpha1").await;
}

#[tokio::test]
async fn an_empty_pool_starts_the_sandbox_cold() {
    let h = Harness::start(SandboxVersions::Both).await;
    pool(&h, EMPTY_POOL, 0).await;
    let cfg = claim_config(EMPTY_POOL);
    let lease = h.host.acquire(request(&cfg, "cold-1")).await.expect("acquire");
    let sandbox = lease.claimed_sandbox.clone().expect("the claimed Sandbox");
    assert!(!sandbox.warm, "{sandbox:?}");
    assert_eq!(sandbox.name, workload_name(&lease), "a cold Sandbox is named like its claim");
    h.host.destroy(LeaseRef { lease, config: cfg }).await.expect("destroy");
}

#[tokio::test]
async fn a_missing_pool_fails_fast_and_leaves_nothing() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = claim_config("no-such-pool");
    let started = std::time::Instant::now();
    let error = h.host.acquire(request(&cfg, "missing-1")).await.expect_err("no pool");
    assert!(started.elapsed() < Duration::from_secs(10), "failed fast, not at the readiness timeout");
    assert!(error.to_string().contains("no-such-pool"), "{error}");
    eventually("the failed claim is cleaned up", || async {
        claims(&h, "v1beta1").list(&Default::default()).await.map(|l| l.items.is_empty()).unwrap_or(false)
    })
    .await;
}

/// A pool the operator named but whose template runs as root: the host reads the template and
/// holds it to the pod-security ceiling as any pod spec, so probe says acquire would be denied
/// and acquire creates nothing.
#[tokio::test]
async fn a_pools_template_above_the_pod_security_ceiling_is_refused() {
    let h = Harness::start(SandboxVersions::Both).await;
    let spec = pool_spec("root-pool", "root", 0);
    let version = "v1beta1";
    let mut template = warm_pool::template_manifest(&spec, version);
    template["spec"]["podTemplate"]["spec"]["securityContext"] = json!({"runAsUser": 0});
    template["spec"]["podTemplate"]["spec"]["containers"][0]["securityContext"] =
        json!({"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}});
    pool_with_template(&h, version, &spec, template).await;

    let cfg = config("claim", json!({"claim": {"warmPool": "root-pool", "template": "root"}}));
    let probe = h.host.probe(&cfg).await.expect("probe");
    let finding = probe.diagnostics.iter().find(|d| d.code == provider_host::warm_pool_ceiling::OVER_CEILING);
    assert!(!probe.ok && finding.is_some(), "{probe:?}");
    assert!(
        probe.summary.contains("\"root-pool\"'s template \"root\"") && probe.summary.contains("privileged"),
        "{probe:?}"
    );

    let mark = h.cluster.requests().mark();
    let error = h.host.acquire(request(&cfg, "root-1")).await.expect_err("refused");
    let message = error.to_string();
    assert!(message.contains("pod-security ceiling") && message.contains("runAsNonRoot"), "{message}");
    let writes = h.provider_writes_since(mark);
    assert!(writes.is_empty(), "a refused claim creates nothing: {writes:?}");
}

/// A template whose pod does not share its process namespace keeps its main process as PID 1,
/// which on a real node reaps nothing and ignores SIGTERM: probe warns of it (the config still
/// works), and not of the suite's template, which shares.
#[tokio::test]
async fn a_pools_template_whose_main_process_is_pid_1_is_warned_of() {
    let h = Harness::start(SandboxVersions::Both).await;
    pool(&h, EMPTY_POOL, 0).await;
    let shared = h.host.probe(&claim_config(EMPTY_POOL)).await.expect("probe");
    let warned = |p: &provider_host::records::ProbeResult| {
        p.diagnostics.iter().find(|d| d.code == provider_host::warm_pool_ceiling::NO_SHARED_PROCESSES).cloned()
    };
    assert!(shared.ok && warned(&shared).is_none(), "{shared:?}");

    let spec = pool_spec("plain-pool", "plain", 0);
    let version = "v1beta1";
    let mut template = warm_pool::template_manifest(&spec, version);
    let pod_spec = template["spec"]["podTemplate"]["spec"].as_object_mut().expect("the template's pod spec");
    assert!(pod_spec.remove("shareProcessNamespace").is_some(), "the suite's template shares its processes");
    pool_with_template(&h, version, &spec, template).await;

    let probe = h.host.probe(&config("claim", json!({"claim": {"warmPool": "plain-pool"}}))).await.expect("probe");
    let warning = warned(&probe).unwrap_or_else(|| panic!("no warning: {probe:?}"));
    assert!(probe.ok, "a warning, not an error: {probe:?}");
    assert_eq!(warning.severity, provider_host::records::Severity::Warning);
    assert!(
        warning.message.contains("\"plain-pool\"'s template \"plain\"")
            && warning.message.contains("shareProcessNamespace: true"),
        "{warning:?}"
    );
}

/// A pool whose template names several containers: a claim lease's commands go to the one the
/// template's `kubectl.kubernetes.io/default-container` annotation marks, which acquire picks
/// from the pod it gets; an execute then reads the pod once (the host's read that binds the
/// exec to it), not a second time to pick the container.
#[tokio::test]
async fn a_claim_lease_runs_commands_in_the_container_its_template_marks() {
    let h = Harness::start(SandboxVersions::Both).await;
    let spec = pool_spec("two-pool", "two", 1);
    let version = "v1beta1";
    let mut template = warm_pool::template_manifest(&spec, version);
    let pod = &mut template["spec"]["podTemplate"];
    let base = pod["spec"]["containers"][0].clone();
    let container = |name: &str| {
        let mut c = base.clone();
        c["name"] = json!(name);
        c["env"].as_array_mut().expect("the suite's container env").push(json!({"name": "WHICH", "value": name}));
        c
    };
    pod["spec"]["containers"] = json!([container("sidecar"), container("agent")]);
    pod["metadata"]["annotations"] = json!({"kubectl.kubernetes.io/default-container": "agent"});
    pool_with_template(&h, version, &spec, template).await;
    warm_pool::wait_ready(&h.admin, NAMESPACE, "two-pool", 1, WAIT).await.expect("pool Ready");

    let cfg = config("claim", json!({"claim": {"warmPool": "two-pool", "template": "two"}}));
    let lease = h.host.acquire(request(&cfg, "two-1")).await.expect("acquire");
    let stored = LeaseRef { lease: lease.clone(), config: cfg };
    let exec: ExecRequest =
        serde_json::from_value(json!({"command": "sh", "args": ["-c", "echo $WHICH"]})).expect("request");
    let first = h.host.execute(stored.clone(), exec.clone()).await.expect("execute");
    assert_eq!(first.stdout, "agent\n", "{first:?}");
    let mark = h.cluster.requests().mark();
    let out = h.host.execute(stored.clone(), exec.clone()).await.expect("execute");
    assert_eq!(out.stdout, "agent\n", "{out:?}");
    let calls = h.provider_calls_since(mark);
    let pod_reads = calls.iter().filter(|e| e.resource == "pods" && e.subresource.is_empty()).count();
    assert_eq!(pod_reads, 1, "the host's binding read alone: {calls:?}");

    // Metadata is the host's to keep: a recorded container the pod lacks is refused by the API
    // server, and the command goes to the one picked from the pod.
    let mut metadata: serde_json::Value = serde_json::from_str(&lease.metadata).expect("metadata");
    assert_eq!(metadata["container"]["name"], "agent", "acquire recorded the container: {metadata}");
    metadata["container"]["name"] = json!("no-such-container");
    let mangled = LeaseRef { lease: Lease { metadata: metadata.to_string(), ..lease }, config: stored.config.clone() };
    let out = h.host.execute(mangled, exec).await.expect("execute with a mangled container");
    assert_eq!(out.stdout, "agent\n", "{out:?}");
    h.host.destroy(stored).await.expect("destroy");
}

/// A v1alpha1 claim names its own template besides its pool, and starts cold from it when the
/// pool has no ready member: that template is held to the ceiling too, whatever the pool's is.
#[tokio::test]
async fn a_v1alpha1_claims_own_template_above_the_ceiling_is_refused() {
    let h = Harness::start(SandboxVersions::V1alpha1Only).await;
    pool(&h, EMPTY_POOL, 0).await;
    let mut root = warm_pool::template_manifest(&pool_spec("unused", "root", 0), "v1alpha1");
    root["spec"]["podTemplate"]["spec"]["securityContext"] = json!({"runAsUser": 0});
    let gvk = GroupVersionKind::gvk("extensions.agents.x-k8s.io", "v1alpha1", "SandboxTemplate");
    let templates: Api<DynamicObject> =
        Api::namespaced_with(h.admin.clone(), NAMESPACE, &ApiResource::from_gvk_with_plural(&gvk, "sandboxtemplates"));
    let root: DynamicObject = serde_json::from_value(root).expect("template");
    templates.create(&Default::default(), &root).await.expect("the root template");

    let cfg = config("claim", json!({"claim": {"warmPool": EMPTY_POOL, "template": "root"}}));
    let probe = h.host.probe(&cfg).await.expect("probe");
    assert!(
        !probe.ok && probe.summary.contains("template \"root\"") && probe.summary.contains("runAsNonRoot"),
        "{probe:?}"
    );
    let mark = h.cluster.requests().mark();
    let error = h.host.acquire(request(&cfg, "alpha-root-1")).await.expect_err("refused");
    assert!(error.to_string().contains("pod-security ceiling"), "{error}");
    let writes = h.provider_writes_since(mark);
    assert!(writes.is_empty(), "a refused claim creates nothing: {writes:?}");
}

/// Acquires `count` leases at once; their claimed Sandboxes.
async fn burst(h: &Harness, cfg: &str, tag: &str, count: usize) -> Vec<provider_host::records::Lease> {
    let acquires = (0..count).map(|i| h.host.acquire(request(cfg, &format!("{tag}-{i}"))));
    futures::future::join_all(acquires).await.into_iter().map(|r| r.expect("every acquire succeeds")).collect()
}

#[tokio::test]
async fn a_burst_as_large_as_the_pool_is_all_warm_and_a_larger_one_falls_back_to_cold() {
    const SIZE: usize = 12;
    let h = Harness::start(SandboxVersions::Both).await;
    pool(&h, POOL, SIZE as u32).await;
    let cfg = claim_config(POOL);
    let leases = burst(&h, &cfg, "burst", SIZE).await;
    let names: BTreeSet<String> =
        leases.iter().filter_map(|l| l.claimed_sandbox.as_ref()).map(|s| s.name.clone()).collect();
    assert_eq!(names.len(), SIZE, "no member adopted twice");
    assert!(leases.iter().all(|l| l.claimed_sandbox.as_ref().is_some_and(|s| s.warm)), "every acquire a warm hit");
    for lease in leases {
        h.host.destroy(LeaseRef { lease, config: cfg.clone() }).await.expect("destroy");
    }
    warm_pool::wait_ready(&h.admin, NAMESPACE, POOL, SIZE as u32, WAIT).await.expect("refilled");

    // The pool cannot replenish during the larger burst (its creates fail), so exactly the
    // claims it has no member for must start cold, and still succeed.
    h.cluster.faults().add(Rule {
        matches: Match {
            user: Some(ControllerKind::WarmPool.user().to_string()),
            verb: Some("create".into()),
            resource: Some("sandboxes".into()),
            ..Match::default()
        },
        action: Action::Error {
            code: 503,
            reason: "ServiceUnavailable".into(),
            message: None,
            retry_after_seconds: None,
        },
        after: 0,
        times: None,
        probability: None,
    });
    let larger = burst(&h, &cfg, "larger", SIZE + 6).await;
    let warm = larger.iter().filter(|l| l.claimed_sandbox.as_ref().is_some_and(|s| s.warm)).count();
    let cold = larger.iter().filter(|l| l.claimed_sandbox.as_ref().is_some_and(|s| !s.warm)).count();
    assert_eq!((warm, cold), (SIZE, 6), "the pool's members, then cold starts for the rest");
    h.cluster.faults().clear();
    for lease in larger {
        h.host.destroy(LeaseRef { lease, config: cfg.clone() }).await.expect("destroy");
    }
    eventually("no claim and no claimed Sandbox is left", || async {
        let no_claims = claims(&h, "v1beta1").list(&Default::default()).await.map(|l| l.items.is_empty());
        let claimed = sandboxes(&h, "v1beta1").list(&Default::default()).await.map(|l| {
            l.items.iter().any(|s| s.metadata.owner_references.iter().flatten().any(|o| o.kind == "SandboxClaim"))
        });
        no_claims.unwrap_or(false) && claimed.is_ok_and(|c| !c)
    })
    .await;
}

#[tokio::test]
async fn the_host_refuses_a_claim_on_a_pool_its_policy_does_not_name() {
    use provider_host::{ComponentSource, HostOptions, Policy, ProviderHost};
    let h = Harness::start(SandboxVersions::Both).await;
    pool(&h, POOL, 1).await;
    let kubeconfig = h.cluster.kubeconfig(embedded_cluster::PROVIDER_USER).expect("kubeconfig");
    let config = embedded_cluster::tls::config_from_kubeconfig(&kubeconfig).await.expect("config");
    let client = provider_host::client_from_config(config).expect("client");
    // The default policy names no pool; this one names another.
    let policy = Policy { warm_pools: vec!["team-b-pool".into()], ..Policy::kubernetes_default([NAMESPACE]) };
    let options = HostOptions { policy, ..Default::default() };
    let host = ProviderHost::load(ComponentSource::File(component_path()), client, options).await.expect("load");
    let mark = h.cluster.requests().mark();
    // probe says so before any acquire: the provider's probe only reads, which it may.
    let probe = host.probe(&claim_config(POOL)).await.expect("probe");
    assert!(!probe.ok, "a probe of a claim on a pool the policy does not name is not ok: {probe:?}");
    let refusal = probe.diagnostics.iter().find(|d| d.code == "claim-source-not-allowed").expect("the finding");
    assert!(refusal.message.contains(POOL) && refusal.message.contains("warm-pools"), "{refusal:?}");
    let error = host.acquire(request(&claim_config(POOL), "refused-1")).await.expect_err("refused");
    assert!(error.to_string().contains("warm-pools"), "{error}");
    assert_eq!(h.provider_writes_since(mark), Vec::<String>::new(), "nothing was written");
    let allowed = host.probe(&claim_config("team-b-pool")).await.expect("probe");
    assert!(allowed.diagnostics.iter().all(|d| d.code != "claim-source-not-allowed"), "{allowed:?}");
}
