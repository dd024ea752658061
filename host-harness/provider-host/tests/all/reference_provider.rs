//! The reference provider (`reference-provider/`) in the host, unchanged: a component of
//! contract 0.3.0 (world `kubernetes-provider`, whose `kube` import it never uses), so every run
//! of these tests goes through the host's 0.3 glue (`versions/since_v0_3_0.rs`). It loads with and
//! without a cluster, runs every call of a lease's life, its leases come back with the
//! placement its `kubernetes` export reports, `execute` is its own `unsupported`, a configured
//! failure comes back typed, and the host's deadline ends it when its config makes it stall past.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use provider_host::records::{
    AcquireRequest, Backend, DeleteOutcome, ExecRequest, Lease, LeaseRef, ProviderError, ResumeOutcome, Severity,
};
use provider_host::{ComponentSource, HostError, HostOptions, Limits, Policy, ProviderHost};
use serde_json::{Value, json};

/// The component `cargo build -p reference-provider --target wasm32-wasip2 --profile component` builds.
fn component() -> ComponentSource {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/wasm32-wasip2/component/reference_provider.wasm");
    assert!(
        path.exists(),
        "no reference provider at {}: build it with `cargo build -p reference-provider --target wasm32-wasip2 \
         --profile component` (make component)",
        path.display()
    );
    ComponentSource::File(path)
}

fn options(limits: Limits) -> HostOptions {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/provider-cache-tests");
    HostOptions { policy: Policy::kubernetes_default(["default"]), limits, cache_dir: Some(cache) }
}

/// A client that is never used for a request: the provider makes no `kube` calls.
fn idle_client() -> kube::Client {
    let config = kube::Config::new("http://127.0.0.1:9".parse().expect("uri"));
    provider_host::client_from_config(config).expect("client")
}

async fn load(limits: Limits) -> ProviderHost {
    ProviderHost::load(component(), idle_client(), options(limits)).await.expect("the reference provider loads")
}

fn now_millis() -> i64 {
    i64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("after 1970").as_millis())
        .expect("millis fit")
}

/// The normalized form of `config`, as a host stores it.
async fn normalized(host: &ProviderHost, config: Value) -> String {
    let validation = host.validate_config(&config.to_string()).await.expect("validate-config");
    assert!(validation.ok, "{validation:?}");
    validation.normalized_config.expect("a normalized config")
}

fn request(config: &str, acquisition_id: &str) -> AcquireRequest {
    AcquireRequest {
        config: config.to_string(),
        run_id: "run-1".into(),
        acquisition_id: acquisition_id.into(),
        agent_id: Some("agent-1".into()),
        requested_expires_at: None,
        env: Vec::new(),
        reusable: false,
    }
}

#[tokio::test]
async fn it_loads_without_a_cluster_and_is_granted_nothing() {
    let host = ProviderHost::load_without_cluster(component(), options(Limits::default())).await.expect("loads");
    assert_eq!(host.contract_version(), "0.3.0");
    let grants = host.grants();
    assert_eq!(grants.declared.as_deref(), Some(&[][..]), "it declares no access");
    assert!(grants.effective.resources.is_empty() && grants.refused.is_empty(), "{grants:?}");
    let info = host.describe().await.expect("describe");
    assert_eq!(info.driver_key, "reference");
    assert!(info.reusable_leases);
    assert!(info.backends.is_empty() && info.access.is_empty(), "{info:?}");
    let schema: Value = serde_json::from_str(&info.config_schema).expect("the schema is JSON");
    assert!(schema["properties"]["operations"]["properties"]["resume-check"].is_object(), "{schema}");
}

#[tokio::test]
async fn a_whole_lease_life_runs_through_the_host() {
    let host = load(Limits::default()).await;
    let config = normalized(&host, json!({"leaseTtlSeconds": 3600})).await;
    let probe = host.probe(&config).await.expect("probe");
    assert!(probe.ok, "{probe:?}");
    let deadline = probe.diagnostics.iter().find(|d| d.code == "host-deadline").expect("the host's deadline");
    assert_eq!(deadline.severity, Severity::Info);
    assert!(deadline.message.contains("after 30000 ms"), "the deadline import: {}", deadline.message);

    let before = now_millis();
    let lease = host.acquire(request(&config, "life-1")).await.expect("acquire");
    assert_eq!(lease.provider_lease_id, "reference:life-1");
    let expires_at = lease.expires_at.expect("an expiry");
    assert!(expires_at >= before + 3_600_000 && expires_at <= now_millis() + 3_600_000, "{expires_at}");
    let retry = host.acquire(request(&config, "life-1")).await.expect("a retried acquire");
    assert_eq!(retry.provider_lease_id, lease.provider_lease_id);

    let stored = LeaseRef { lease: lease.clone(), config: config.clone() };
    match host.resume_check(stored.clone()).await.expect("resume-check") {
        ResumeOutcome::Resumable(l) => assert_eq!(l, lease),
        other => panic!("{other:?}"),
    }
    let wanted = now_millis() + 600_000;
    let renewed = match host.renew(stored.clone(), wanted).await.expect("renew") {
        ResumeOutcome::Resumable(l) => l,
        other => panic!("{other:?}"),
    };
    assert_eq!(renewed.expires_at, Some(wanted), "honoured: inside the TTL");
    let stored = LeaseRef { lease: renewed, config: config.clone() };
    host.release(stored.clone()).await.expect("release");
    let report = host.destroy(stored.clone()).await.expect("destroy");
    assert_eq!(report.objects.len(), 1, "{report:?}");
    assert_eq!((report.objects[0].kind.as_str(), report.objects[0].name.as_str()), ("Lease", "reference:life-1"));
    assert_eq!(report.objects[0].outcome, DeleteOutcome::Deleted);
    assert_eq!(host.calls_started(), 9, "one instance per call, describe at load included");
}

#[tokio::test]
async fn each_call_s_whole_time_holds_its_guest_and_import_time() {
    let host = load(Limits::default()).await;
    let config = normalized(&host, json!({"leaseTtlSeconds": 3600})).await;
    let before = host.call_times();
    let started = Instant::now();
    host.acquire(request(&config, "timed-1")).await.expect("acquire");
    let outside = started.elapsed();
    let call = host.call_times().since(&before);
    assert!(call.guest > Duration::ZERO, "the provider's code ran: {call:?}");
    assert!(call.imports > Duration::ZERO, "acquire reads the host's clock: {call:?}");
    assert!(call.whole >= call.guest + call.imports, "the whole call holds both parts: {call:?}");
    assert!(call.own() > Duration::ZERO, "a fresh instance is made and dropped: {call:?}");
    assert!(call.whole <= outside, "the host's figure lies within what its caller saw: {call:?}, {outside:?}");
}

/// The placement of every reference lease, as the `kubernetes` export reports it: no workload.
fn assert_placed_nowhere(lease: &Lease) {
    assert_eq!(lease.backend, Backend::Sandbox, "{lease:?}");
    assert_eq!((lease.namespace.as_str(), lease.api_version.as_str(), lease.workload_uid.as_str()), ("", "", ""));
    assert_eq!((&lease.pod_name, &lease.pod_uid, &lease.pod_ip), (&None, &None, &None));
    assert_eq!(lease.claimed_sandbox, None);
}

fn exec_request() -> ExecRequest {
    serde_json::from_value(json!({"command": "sh", "args": ["-c", "echo $TOKEN"],
        "env": [{"name": "TOKEN", "value": "exec-secret-5", "secret": true}]}))
    .expect("request")
}

/// Contract 0.3.0 end to end through the host's 0.3 glue: the neutral lease comes back from
/// acquire, resume-check and renew with the placement `kubernetes.placement-of` reports, and the
/// lease the host stores reads as a 0.2.0 component's did (no placement added to the metadata);
/// destroy takes it back; `execute` reaches the component, whose own answer (`unsupported`, or
/// what its config asks for) comes back, not the host's answer for a contract without execute.
#[tokio::test]
async fn the_0_3_0_glue_carries_a_lease_with_its_placement_and_executes_answer() {
    let host = load(Limits::default()).await;
    assert_eq!(host.contract_version(), "0.3.0");
    let config = normalized(&host, json!({"leaseTtlSeconds": 600})).await;
    let lease = host.acquire(request(&config, "glue-1")).await.expect("acquire");
    assert_placed_nowhere(&lease);
    let expires_at = lease.expires_at.expect("an expiry");
    let stored_json = serde_json::to_value(&lease).expect("the lease is JSON");
    assert_eq!(
        stored_json,
        json!({"provider-lease-id": "reference:glue-1", "backend": "sandbox", "namespace": "", "api-version": "",
            "workload-uid": "", "pod-name": null, "pod-uid": null, "pod-ip": null, "expires-at": expires_at,
            "reusable": false, "metadata": lease.metadata}),
        "the lease JSON a host keeps, as under contract 0.2.0"
    );
    let metadata: Value = serde_json::from_str(&lease.metadata).expect("the metadata is JSON");
    let mut keys: Vec<&str> = metadata.as_object().expect("an object").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["acquired-at", "agent-id", "expires-at", "format", "lease-id", "lease-ttl-seconds", "reusable", "run-id"],
        "the provider's own state, no placement: {metadata}"
    );

    let stored = LeaseRef { lease: lease.clone(), config: config.clone() };
    match host.resume_check(stored.clone()).await.expect("resume-check") {
        ResumeOutcome::Resumable(l) => assert_eq!(l, lease, "placed again, the same lease"),
        other => panic!("{other:?}"),
    }
    let wanted = now_millis() + 300_000;
    let renewed = match host.renew(stored.clone(), wanted).await.expect("renew") {
        ResumeOutcome::Resumable(l) => l,
        other => panic!("{other:?}"),
    };
    assert_placed_nowhere(&renewed);
    assert_eq!((renewed.provider_lease_id.as_str(), renewed.expires_at), ("reference:glue-1", Some(wanted)));
    let stored = LeaseRef { lease: renewed, config: config.clone() };

    match host.execute(stored.clone(), exec_request()).await {
        Err(HostError::Provider(ProviderError::Unsupported(d))) => {
            assert!(d.message.contains("runs no sandbox"), "the provider's own answer: {}", d.message);
            assert!(!d.message.contains("built against contract"), "not the host's: {}", d.message);
            assert!(!d.message.contains("exec-secret-5") && !d.retryable, "{d:?}");
        }
        other => panic!("expected unsupported, got {other:?}"),
    }
    let failing = normalized(
        &host,
        json!({"operations": {"execute": {"fail": {"error": "unavailable", "retryable": true, "message": "away"}}}}),
    )
    .await;
    match host.execute(LeaseRef { config: failing, ..stored.clone() }, exec_request()).await {
        Err(HostError::Provider(ProviderError::Unavailable(d))) => {
            assert_eq!((d.message.as_str(), d.retryable), ("away", true))
        }
        other => panic!("expected the configured unavailable, got {other:?}"),
    }

    let report = host.destroy(stored).await.expect("destroy");
    assert_eq!(report.objects.len(), 1, "{report:?}");
    assert_eq!(
        (report.objects[0].name.as_str(), &report.objects[0].outcome),
        ("reference:glue-1", &DeleteOutcome::Deleted)
    );
}

/// An execute's deadline is the call timeout plus the command's (the host's `exec-timeout-ms`
/// bound, or the request's): the `deadline` import says so inside the call, so a stall before
/// it answers after the plain call timeout has passed, and a stall past it is ended there.
#[tokio::test]
async fn an_executes_deadline_is_the_call_timeout_plus_the_commands() {
    let host = load(Limits { call_timeout_ms: 1_000, ..Limits::default() }).await;
    let config = normalized(&host, json!({})).await;
    let lease = host.acquire(request(&config, "exec-deadline-1")).await.expect("acquire");
    let command = ExecRequest { timeout_ms: Some(600), ..exec_request() };

    let before = normalized(
        &host,
        json!({"operations": {"execute": {"stall": {"until": "before-deadline", "marginMillis": 300}}}}),
    )
    .await;
    let started = Instant::now();
    let answer = host.execute(LeaseRef { lease: lease.clone(), config: before }, command.clone()).await;
    let took = started.elapsed();
    assert!(matches!(answer, Err(HostError::Provider(ProviderError::Unsupported(_)))), "{answer:?}");
    assert!(took >= Duration::from_millis(1_200) && took < Duration::from_millis(1_600), "past 1000 ms: {took:?}");

    let past = normalized(&host, json!({"operations": {"execute": {"stall": {"until": "past-deadline"}}}})).await;
    let started = Instant::now();
    let answer = host.execute(LeaseRef { lease, config: past }, command).await;
    let took = started.elapsed();
    assert!(matches!(answer, Err(HostError::Timeout { call: "execute", limit_ms: 1_600 })), "{answer:?}");
    assert!(took >= Duration::from_millis(1_600) && took < Duration::from_millis(2_600), "{took:?}");
}

#[tokio::test]
async fn a_lease_expires_by_the_clock_alone() {
    let host = load(Limits::default()).await;
    let config = normalized(&host, json!({})).await;
    let soon = AcquireRequest { requested_expires_at: Some(now_millis() + 300), ..request(&config, "short-1") };
    let lease = host.acquire(soon).await.expect("acquire");
    tokio::time::sleep(Duration::from_millis(400)).await;
    let stored = LeaseRef { lease, config };
    assert!(
        matches!(host.resume_check(stored.clone()).await, Ok(ResumeOutcome::Expired(r)) if r.contains("expired at"))
    );
    assert!(matches!(host.renew(stored.clone(), now_millis() + 60_000).await, Ok(ResumeOutcome::Expired(_))));
    let report = host.destroy(stored).await.expect("destroy");
    assert_eq!(report.objects[0].outcome, DeleteOutcome::AlreadyGone);
}

#[tokio::test]
async fn a_configured_failure_reaches_the_host_typed() {
    let host = load(Limits::default()).await;
    let config = normalized(
        &host,
        json!({"operations": {
            "acquire": {"fail": {"error": "capacity", "retryable": true, "message": "no room in the reference pool"}},
            "renew": {"fail": {"error": "invalid-config"}}
        }}),
    )
    .await;
    let err = host.acquire(request(&config, "fail-1")).await.expect_err("a configured failure");
    match &err {
        HostError::Provider(ProviderError::Capacity(d)) => {
            assert_eq!((d.message.as_str(), d.retryable), ("no room in the reference pool", true));
        }
        other => panic!("{other:?}"),
    }
    assert!(err.retryable());
    let lease = host.acquire(request(&normalized(&host, json!({})).await, "fail-1")).await.expect("acquire");
    match host.renew(LeaseRef { lease, config }, now_millis() + 1_000).await {
        Err(HostError::Provider(ProviderError::InvalidConfig(d))) => assert_eq!(d.path, "/operations/renew/fail"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_hosts_deadline_ends_a_stall_past_it_and_a_stall_before_it_answers_in_time() {
    let host = load(Limits { call_timeout_ms: 1_500, ..Limits::default() }).await;
    let refused = host
        .validate_config(&json!({"operations": {"acquire": {"delayMillis": 1_500}}}).to_string())
        .await
        .expect("validate-config");
    assert!(!refused.ok, "a delay as long as the deadline: {refused:?}");
    assert_eq!(refused.errors[0].path, "/operations/acquire/delayMillis");

    let past = normalized(&host, json!({"operations": {"acquire": {"stall": {"until": "past-deadline"}}}})).await;
    let started = Instant::now();
    let result = host.acquire(request(&past, "stall-1")).await;
    let took = started.elapsed();
    assert!(matches!(result, Err(HostError::Timeout { call: "acquire", limit_ms: 1_500 })), "{result:?}");
    assert!(
        took >= Duration::from_millis(1_500) && took < Duration::from_millis(2_500),
        "ended at the deadline: {took:?}"
    );

    let before = normalized(
        &host,
        json!({"operations": {"acquire": {"stall": {"until": "before-deadline", "marginMillis": 500}}}}),
    )
    .await;
    let started = Instant::now();
    let lease = host.acquire(request(&before, "stall-2")).await.expect("answered inside the deadline");
    let took = started.elapsed();
    assert_eq!(lease.provider_lease_id, "reference:stall-2");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_millis(1_500), "woke before it: {took:?}");
}
