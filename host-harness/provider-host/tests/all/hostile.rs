//! A hostile component in the host, against the embedded cluster: the `hostile-provider`
//! fixture tries to escape the policy and ownership, computes and waits forever, allocates
//! without bound, opens watches without end and floods the host with oversized strings. Each
//! attempt must be refused with the right `kube-error` case and leave the cluster unchanged,
//! each exhaustion must end only its own call, and nothing it sends may grow the host.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use embedded_cluster::{ADMIN_USER, EmbeddedCluster, PROVIDER_USER};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DynamicObject, PostParams};
use kube::core::ApiResource;
use provider_host::owner_signature;
use provider_host::records::{AcquireRequest, ExecRequest, LeaseRef, ProbeResult, ProviderError};
use provider_host::{ComponentSource, HostError, HostOptions, Limits, Policy, ProviderHost};
use serde_json::json;

use crate::support::*;

/// The fixture as `cargo build -p hostile-provider --target wasm32-wasip2 --profile component` leaves it.
fn fixture() -> PathBuf {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/component/hostile_provider.wasm");
    assert!(
        path.is_file(),
        "no hostile fixture at {}: build it with `cargo build -p hostile-provider --target wasm32-wasip2 --profile component` \
         (make test does)",
        path.display()
    );
    path
}

/// The fixture in a host that reaches the cluster as the provider's user, under the default
/// policy for the test namespace.
async fn load(c: &EmbeddedCluster, limits: Limits) -> ProviderHost {
    let options = HostOptions { policy: Policy::kubernetes_default([NS]), limits, cache_dir: None };
    ProviderHost::load(ComponentSource::File(fixture()), client_for(c, PROVIDER_USER).await, options)
        .await
        .expect("the fixture loads")
}

/// A component of contract 0.2.0 has no `execute`: the host answers `unsupported` itself,
/// naming the component's contract and what to do, and the next call is served. The fixture is
/// the 0.2.0 component these tests have (and the reference provider moved to 0.3.0); this needs
/// no cluster.
#[tokio::test]
async fn a_provider_of_contract_0_2_0_has_no_execute_and_the_host_says_so() {
    let options = HostOptions { policy: Policy::kubernetes_default([NS]), limits: Limits::default(), cache_dir: None };
    let host = ProviderHost::load_without_cluster(ComponentSource::File(fixture()), options).await.expect("loads");
    assert_eq!(host.contract_version(), "0.2.0");
    // The fixture makes no lease; any lease will do, since the guest has nothing to call.
    let lease = serde_json::from_value(json!({"provider-lease-id": "k8s:job:default:pc-exec-1", "backend": "job",
        "namespace": NS, "api-version": "batch/v1", "workload-uid": "u-1", "metadata": "{}"}))
    .expect("lease");
    let request: ExecRequest = serde_json::from_value(json!({"command": "true"})).expect("request");
    match host.execute(LeaseRef { lease, config: r#"{"mode":"quiet"}"#.into() }, request).await {
        Err(HostError::Provider(ProviderError::Unsupported(d))) => {
            assert!(d.message.contains("contract 0.2.0") && d.message.contains("0.3.0"), "{}", d.message);
            assert!(!d.retryable);
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    still_serving(&host).await;
}

/// Whether a probe diagnostic is the host's own finding (network isolation, ownership without
/// a key), not the fixture's.
fn hosts_own(code: &str) -> bool {
    provider_host::network_policy::PROBE_CODES.contains(&code) || code == owner_signature::UNSIGNED_OWNERSHIP
}

/// The fixture's answers in a probe result: attempt -> `case: message` (the host's own
/// findings left out).
fn answers(result: ProbeResult) -> BTreeMap<String, String> {
    result.diagnostics.into_iter().filter(|d| !hosts_own(&d.code)).map(|d| (d.code, d.message)).collect()
}

/// The requests the fixture's calls sent since `mark`, without the host's own isolation check
/// in `probe` (`provider_host::network_policy`).
fn provider_sent(c: &EmbeddedCluster, mark: u64) -> Vec<String> {
    requests_by(c, PROVIDER_USER, mark).into_iter().filter(|r| !r.starts_with("list networkpolicies ")).collect()
}

/// The fixture's answers in the `rejected` error of a lease call.
fn answers_in_error(result: Result<impl std::fmt::Debug, HostError>) -> BTreeMap<String, String> {
    match result {
        Err(HostError::Provider(ProviderError::Rejected(detail))) => {
            serde_json::from_str(&detail.message).expect("the fixture's report is a JSON object")
        }
        other => panic!("expected the fixture's report in a rejected error, got {other:?}"),
    }
}

/// The kube-error case of an answer (`denied`, `not-owned`, ... or `ok`).
fn case(answer: &str) -> &str {
    answer.split_once(':').map_or(answer, |(case, _)| case)
}

/// A benign call after a hostile one: the host still serves the component.
async fn still_serving(host: &ProviderHost) {
    let quiet = host.probe(r#"{"mode":"quiet"}"#).await.expect("the next call is served");
    assert!(quiet.ok && quiet.diagnostics.iter().all(|d| hosts_own(&d.code)), "{quiet:?}");
}

/// Every object of the kinds an escape could touch, cluster-wide, with its resourceVersion.
async fn snapshot(admin: &kube::Client) -> Vec<String> {
    let kinds = [
        ApiResource::erase::<Namespace>(&()),
        ApiResource::erase::<Secret>(&()),
        ApiResource::erase::<Pod>(&()),
        ApiResource::erase::<Job>(&()),
        ApiResource::erase::<Role>(&()),
        ApiResource::erase::<RoleBinding>(&()),
        ApiResource::erase::<ClusterRole>(&()),
        ApiResource::erase::<ClusterRoleBinding>(&()),
    ];
    let mut objects = Vec::new();
    for kind in kinds {
        let api: Api<DynamicObject> = Api::all_with(admin.clone(), &kind);
        for object in api.list(&Default::default()).await.expect("list").items {
            let meta = object.metadata;
            objects.push(format!(
                "{} {}/{} {}",
                kind.plural,
                meta.namespace.unwrap_or_default(),
                meta.name.unwrap_or_default(),
                meta.resource_version.unwrap_or_default()
            ));
        }
    }
    objects.sort();
    objects
}

/// The foreign objects an escape aims at: a namespace the policy does not allow with a Secret
/// in it, and in the test namespace a Secret, a pod and a Job someone else made.
async fn foreign_objects(admin: &kube::Client) {
    let post = PostParams::default();
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": "other"}})).expect("namespace");
    Api::<Namespace>::all(admin.clone()).create(&post, &namespace).await.expect("namespace");
    let elsewhere: Secret = serde_json::from_str(&secret("elsewhere", json!({}))).expect("secret");
    Api::<Secret>::namespaced(admin.clone(), "other").create(&post, &elsewhere).await.expect("secret");
    let theirs: Secret = serde_json::from_str(&secret("their-secret", json!({}))).expect("secret");
    Api::<Secret>::namespaced(admin.clone(), NS).create(&post, &theirs).await.expect("secret");
    let pod: Pod = serde_json::from_value(json!({"metadata": {"name": "their-pod"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}))
    .expect("pod");
    Api::<Pod>::namespaced(admin.clone(), NS).create(&post, &pod).await.expect("pod");
    let job: Job = serde_json::from_str(&job("their-job", json!({}))).expect("job");
    Api::<Job>::namespaced(admin.clone(), NS).create(&post, &job).await.expect("job");
}

/// The escape config naming the objects of [`foreign_objects`].
fn escape_config() -> String {
    json!({"mode": "escape", "namespace": NS, "foreign-namespace": "other", "elsewhere-secret": "elsewhere",
        "foreign-secret": "their-secret", "foreign-pod": "their-pod", "foreign-job": "their-job"})
    .to_string()
}

/// Every escape attempt, the case the host must answer it with, and what the answer must say.
const ESCAPES: &[(&str, &str, &str)] = &[
    ("get-secret-in-another-namespace", "denied", "does not allow namespace \"other\""),
    ("list-secrets-in-another-namespace", "denied", "host policy denies list on secrets"),
    ("get-foreign-secret", "not-owned", "not created by this installation"),
    ("list-secrets", "denied", "host policy denies list on secrets"),
    ("get-traversing-name", "invalid", "is not a valid Kubernetes name"),
    ("list-namespaces", "denied", "host policy denies list on namespaces"),
    ("discover-rbac", "denied", "discovery of API group \"rbac.authorization.k8s.io\""),
    ("create-cluster-role", "denied", "no rule for this resource type"),
    ("get-foreign-pod", "not-owned", "not created by this installation"),
    ("patch-foreign-pod", "denied", "host policy denies patch on pods"),
    ("patch-foreign-secret", "not-owned", "not created by this installation"),
    ("delete-foreign-job", "not-owned", "not created by this installation"),
    ("watch-cluster-wide", "denied", "across all namespaces"),
    ("create-token-secret", "denied", "only Opaque Secrets"),
    ("create-job-mounting-foreign-secret", "denied", "refer only to Secrets this installation created"),
];

fn assert_refused(answers: &BTreeMap<String, String>) {
    let attempted: Vec<&str> = answers.keys().map(String::as_str).collect();
    let mut expected: Vec<&str> = ESCAPES.iter().map(|(attempt, ..)| *attempt).collect();
    expected.sort_unstable();
    assert_eq!(attempted, expected, "every attempt is reported, and has an expectation");
    for (attempt, want, says) in ESCAPES {
        let answer = &answers[*attempt];
        assert_eq!(case(answer), *want, "{attempt}: {answer}");
        assert!(answer.contains(says), "{attempt} should say {says:?}: {answer}");
        assert!(!answer.contains("hunter2"), "{attempt} showed a foreign Secret's value: {answer}");
    }
}

#[tokio::test]
async fn escapes_are_refused_by_the_host_and_change_nothing() {
    let c = cluster().await;
    let admin = client_for(&c, ADMIN_USER).await;
    foreign_objects(&admin).await;
    let host = load(&c, Limits::default()).await;
    let refused: Vec<&str> = host.grants().refused.iter().map(|r| r.plural.as_str()).collect();
    assert!(refused.contains(&"clusterroles"), "the declaration asked for more than the policy grants: {refused:?}");
    let before = snapshot(&admin).await;
    let mark = c.requests().mark();

    assert_refused(&answers(host.probe(&escape_config()).await.expect("probe")));
    let request = AcquireRequest {
        config: escape_config(),
        run_id: "run-1".into(),
        acquisition_id: "acq-1".into(),
        agent_id: None,
        requested_expires_at: None,
        env: Vec::new(),
        reusable: false,
    };
    assert_refused(&answers_in_error(host.acquire(request).await));

    let sent = provider_sent(&c, mark);
    assert!(
        sent.iter().all(|r| r.starts_with("get ")),
        "only the host's own ownership reads reached the cluster: {sent:?}"
    );
    let elsewhere: Vec<_> = c.requests().since(mark).into_iter().filter(|e| e.namespace == "other").collect();
    assert!(elsewhere.is_empty(), "nothing was sent to the namespace the policy does not allow: {elsewhere:?}");
    assert_eq!(snapshot(&admin).await, before, "nothing in the cluster changed");
}

/// How long a test waits for the host to end a call that never ends by itself, so that a host
/// that fails to makes the test fail instead of hang.
const OUTLAST: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_guest_that_computes_forever_is_stopped_at_the_deadline() {
    let c = cluster().await;
    let host = load(&c, Limits { call_timeout_ms: 500, ..Limits::default() }).await;
    let started = Instant::now();
    let result =
        tokio::time::timeout(OUTLAST, host.validate_config(r#"{"mode":"spin"}"#)).await.expect("the host ended it");
    let took = started.elapsed();
    assert!(matches!(result, Err(HostError::Timeout { call: "validate-config", limit_ms: 500 })), "{result:?}");
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(2), "{took:?}");
    still_serving(&host).await;
}

#[tokio::test]
async fn a_guest_that_waits_forever_in_a_host_call_is_stopped_at_the_deadline() {
    let c = cluster().await;
    let host = load(&c, Limits { call_timeout_ms: 500, ..Limits::default() }).await;
    let started = Instant::now();
    let result =
        tokio::time::timeout(OUTLAST, host.validate_config(r#"{"mode":"sleep"}"#)).await.expect("the host ended it");
    let took = started.elapsed();
    assert!(matches!(result, Err(HostError::Timeout { call: "validate-config", limit_ms: 500 })), "{result:?}");
    assert!(took >= Duration::from_millis(500) && took < Duration::from_secs(2), "{took:?}");
    still_serving(&host).await;
}

#[tokio::test]
async fn a_guest_that_allocates_without_bound_is_trapped_at_the_memory_cap() {
    let c = cluster().await;
    let host = load(&c, Limits::default()).await;
    let result = host.validate_config(r#"{"mode":"hoard"}"#).await;
    assert!(
        matches!(result, Err(HostError::MemoryLimit { call: "validate-config", limit_bytes, requested_bytes })
            if limit_bytes == 64 << 20 && requested_bytes > 64 << 20),
        "{result:?}"
    );
    still_serving(&host).await;
}

#[tokio::test]
async fn watches_beyond_the_limit_are_refused_before_they_reach_the_cluster() {
    let c = cluster().await;
    let host = load(&c, Limits::default()).await;
    let limit = Limits::default().max_open_watches as usize;
    let config = json!({"mode": "watches", "namespace": NS, "attempts": 20}).to_string();
    let mark = c.requests().mark();
    let answers = answers(host.probe(&config).await.expect("probe"));
    assert_eq!(answers.len(), 20, "{answers:?}");
    let opened: BTreeSet<String> = answers.iter().filter(|(_, a)| *a == "ok").map(|(w, _)| w.clone()).collect();
    let first: BTreeSet<String> = (1..=limit).map(|n| format!("watch-{n}")).collect();
    assert_eq!(opened, first, "the first {limit} open: {answers:?}");
    for (watch, answer) in answers.iter().filter(|(_, a)| *a != "ok") {
        assert_eq!(case(answer), "denied", "{watch}: {answer}");
        assert!(answer.contains("max-open-watches"), "{watch} names the limit: {answer}");
    }
    let sent = provider_sent(&c, mark);
    assert_eq!(sent.len(), limit, "the refused watches never reached the cluster: {sent:?}");
    assert!(sent.iter().all(|r| r.starts_with("watch pods")), "{sent:?}");
    still_serving(&host).await;
}

/// Tests that move 100 MiB take turns, so that one's reading of the process's memory is not
/// another's allocation.
static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The size of a flood.
const FLOOD: u64 = 100 << 20;

/// A guest memory cap that lets the fixture build a flood, so the host's side is what is tested.
const ROOMY: u64 = 256 << 20;

fn flood(into: &str) -> String {
    json!({"mode": "flood", "namespace": NS, "bytes": FLOOD, "into": into}).to_string()
}

/// The process's resident memory around one call, in MiB (read from Linux's `/proc`; elsewhere
/// nothing is measured).
struct Reading {
    what: String,
    before: Option<u64>,
}

/// A field of `/proc/self/status` in MiB (`VmRSS` now, `VmHWM` the peak).
fn status_mib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse::<u64>().ok().map(|kib| kib / 1024)
}

impl Reading {
    /// Starts a reading: the peak restarts from now (`clear_refs` 5 resets `VmHWM`).
    fn start(what: &str) -> Self {
        let _ = std::fs::write("/proc/self/clear_refs", "5");
        Self { what: what.to_string(), before: status_mib("VmRSS:") }
    }

    /// Reports the peak during the call and what is left after it, its result and its store
    /// dropped (the caller waits for the host to settle first). Fails if the peak held more
    /// than `copies` of the flood (the guest's own counts: its memory is the host process's) or
    /// if half a flood or more stayed behind.
    fn finish(self, copies: u64) {
        let (Some(before), Some(peak), Some(after)) = (self.before, status_mib("VmHWM:"), status_mib("VmRSS:")) else {
            return;
        };
        let (grew, kept) = (peak.saturating_sub(before), after.saturating_sub(before));
        let flood = FLOOD >> 20;
        eprintln!("{}: resident {before} MiB before, peak +{grew} MiB, +{kept} MiB after", self.what);
        assert!(
            grew < copies * flood + flood / 2,
            "{}: the peak held more than {copies} copies: +{grew} MiB",
            self.what
        );
        assert!(kept < flood / 2, "{}: {kept} MiB of a {flood} MiB flood stayed in the host", self.what);
    }
}

#[tokio::test]
async fn an_oversized_result_is_bounded_by_the_memory_cap() {
    let _turn = HEAVY.lock().await;
    let c = cluster().await;
    let capped = load(&c, Limits::default()).await;
    let result = capped.probe(&flood("return")).await;
    assert!(matches!(result, Err(HostError::MemoryLimit { call: "probe", .. })), "{:?}", result.map(|_| ()));
    still_serving(&capped).await;

    let roomy = load(&c, Limits { memory_bytes: ROOMY, ..Limits::default() }).await;
    let reading = Reading::start("a 100 MiB result");
    let returned = roomy.probe(&flood("return")).await.expect("probe");
    assert_eq!(answers(returned)["return"].len() as u64, FLOOD, "under a roomy cap the result arrives whole");
    settle(&roomy).await;
    reading.finish(2);
    still_serving(&roomy).await;
}

/// Collects formatted log output in memory.
#[derive(Clone, Default)]
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn oversized_strings_sent_to_the_host_are_refused_or_cut() {
    let _turn = HEAVY.lock().await;
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _logging = tracing::subscriber::set_default(subscriber);
    let c = cluster().await;
    let host = load(&c, Limits { memory_bytes: ROOMY, ..Limits::default() }).await;
    // How many copies of the flood the process may hold at the peak: the guest's and the one
    // the host lifts out of it; a selector also becomes a URL, which the http crate then refuses
    // for its length.
    let floods = [
        ("create", "denied", "max-body-bytes", 2),
        ("patch", "denied", "max-body-bytes", 2),
        ("selector", "invalid", "cannot build the request", 4),
        ("log", "ok", "", 2),
    ];
    for (into, want, says, copies) in floods {
        let mark = c.requests().mark();
        let reading = Reading::start(&format!("a 100 MiB {into}"));
        let answer = answers(host.probe(&flood(into)).await.expect("probe")).remove(into).expect("answered");
        assert_eq!(case(&answer), want, "{into}: {answer}");
        assert!(answer.contains(says), "{into} should say {says:?}: {answer}");
        assert!(answer.len() < 1024, "{into}: the host's answer quotes little of the flood: {} bytes", answer.len());
        let sent = provider_sent(&c, mark);
        assert!(sent.is_empty(), "{into}: nothing reached the cluster: {sent:?}");
        settle(&host).await;
        reading.finish(copies);
    }
    let logged = String::from_utf8_lossy(&captured.0.lock().expect("lock")).into_owned();
    let line = logged.lines().find(|l| l.contains(" provider:")).expect("the provider's line was logged");
    assert!(line.len() < 8 * 1024, "the logged line is cut: {} bytes", line.len());
    still_serving(&host).await;
}
