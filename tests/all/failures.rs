//! What goes wrong, through the built component: foreign objects, faults mid-acquire, terminal
//! pod states, concurrent attempts of one acquisition, every resume-check answer, and the
//! host's policy.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use embedded_cluster::behaviour::{Behaviour, START_DELAY, UNSCHEDULABLE};
use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{PROVIDER_USER, SandboxVersions};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use provider_host::HostError;
use provider_host::records::{Lease, ProviderError, ResumeOutcome};
use serde_json::json;
use tests::*;

fn provider_error(e: HostError) -> ProviderError {
    match e {
        HostError::Provider(p) => p,
        other => panic!("expected the provider's own error, got {other}"),
    }
}

async fn knob_namespace(h: &Harness, knobs: &Behaviour) {
    let namespaces: Api<Namespace> = Api::all(h.admin.clone());
    namespaces
        .patch(
            NAMESPACE,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": knobs.to_annotations()}})),
        )
        .await
        .expect("annotate the namespace");
}

async fn nothing_left(h: &Harness, name: &str) {
    assert!(sandboxes(h, "v1beta1").get_opt(name).await.expect("get").is_none(), "Sandbox {name} left behind");
    let secrets: Api<Secret> = Api::namespaced(h.admin.clone(), NAMESPACE);
    assert!(secrets.get_opt(&format!("{name}-env")).await.expect("get").is_none(), "Secret left behind");
}

#[tokio::test]
async fn a_foreign_object_under_the_name_is_not_adopted() {
    let h = Harness::start(SandboxVersions::Both).await;
    let foreign: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "pc-taken-1"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "other"}]}}}
    }))
    .expect("sandbox");
    let created = sandboxes(&h, "v1beta1").create(&PostParams::default(), &foreign).await.expect("foreign Sandbox");
    let err =
        provider_error(h.host.acquire(request(&config("sandbox", json!({})), "taken-1")).await.expect_err("conflict"));
    assert_eq!(err.kind(), "conflict", "{err:?}");
    assert!(err.message().contains("pc-taken-1"), "the error names the object: {}", err.message());
    let still = sandboxes(&h, "v1beta1").get("pc-taken-1").await.expect("the foreign object is untouched");
    assert_eq!(still.metadata.uid, created.metadata.uid);
}

#[tokio::test]
async fn a_failure_mid_acquire_leaves_nothing_behind() {
    let h = Harness::start(SandboxVersions::Both).await;
    h.cluster.faults().add(Rule {
        matches: Match {
            verb: Some("create".into()),
            resource: Some("secrets".into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        // Refused for good (an admission webhook, say): a 500 would be asked again and succeed.
        action: Action::Error { code: 403, reason: "Forbidden".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: Some(1),
        probability: None,
    });
    let err =
        h.host.acquire(request(&config("sandbox", json!({})), "half-1")).await.expect_err("the Secret create fails");
    let err = provider_error(err);
    assert!(!err.message().contains(SECRET_VALUE));
    nothing_left(&h, "pc-half-1").await;
}

/// Acquires one acquisition id `n` times at once, the starts spread over a second so that the
/// attempts' deadlines differ as they do between real callers.
async fn herd(h: &Arc<Harness>, cfg: &str, acquisition: &str, n: u64) -> Vec<Result<Lease, HostError>> {
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (h, req) = (h.clone(), request(cfg, acquisition));
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(1000 * i / n)).await;
                h.host.acquire(req).await
            })
        })
        .collect();
    let mut results = Vec::new();
    for task in tasks {
        results.push(task.await.expect("the acquire task"));
    }
    results
}

/// Every object of an acquisition in the test namespace, as `kind/name`.
async fn objects_of(h: &Harness, acquisition: &str) -> Vec<String> {
    let params = ListParams::default().labels(&format!("sandbox.paperclip.io/acquisition-id={acquisition}"));
    let names = |kind: &str, items: Vec<Option<String>>| {
        items.into_iter().map(|n| format!("{kind}/{}", n.unwrap_or_default())).collect::<Vec<_>>()
    };
    let mut found = Vec::new();
    let sandboxes = sandboxes(h, "v1beta1").list(&params).await.expect("list sandboxes").items;
    found.extend(names("Sandbox", sandboxes.into_iter().map(|o| o.metadata.name).collect()));
    let jobs = Api::<Job>::namespaced(h.admin.clone(), NAMESPACE).list(&params).await.expect("list jobs").items;
    found.extend(names("Job", jobs.into_iter().map(|o| o.metadata.name).collect()));
    let secrets = Api::<Secret>::namespaced(h.admin.clone(), NAMESPACE).list(&params).await.expect("list").items;
    found.extend(names("Secret", secrets.into_iter().map(|o| o.metadata.name).collect()));
    let pods = Api::<Pod>::namespaced(h.admin.clone(), NAMESPACE).list(&params).await.expect("list pods").items;
    found.extend(names("Pod", pods.into_iter().map(|o| o.metadata.name).collect()));
    found
}

/// Either every attempt got the one sandbox, or every attempt failed retryably and, once they
/// all returned, nothing of the acquisition is left.
async fn assert_converged(h: &Harness, what: &str, acquisition: &str, results: Vec<Result<Lease, HostError>>) {
    let uids: BTreeSet<String> =
        results.iter().filter_map(|r| r.as_ref().ok()).map(|l| l.workload_uid.clone()).collect();
    let oks = results.iter().filter(|r| r.is_ok()).count();
    if oks == results.len() {
        assert_eq!(uids.len(), 1, "{what}: every attempt succeeded, but on {} sandboxes", uids.len());
        return;
    }
    assert_eq!(oks, 0, "{what}: {oks} attempts succeeded and the others failed: {results:?}");
    for result in results {
        let err = provider_error(result.expect_err("failed"));
        assert!(err.retryable(), "{what}: an attempt failed for good: {err:?}");
    }
    eventually(&format!("{what}: nothing of the acquisition left"), || async {
        objects_of(h, acquisition).await.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_acquires_of_one_acquisition_converge() {
    let h = Arc::new(Harness::start(SandboxVersions::Both).await);
    let cfg = config("sandbox", json!({"annotations": {START_DELAY: "1s"}}));
    let results = herd(&h, &cfg, "herd-1", 10).await;
    assert!(results.iter().all(Result::is_ok), "the pod starts in time, so every attempt succeeds: {results:?}");
    assert_converged(&h, "a pod starting in time", "herd-1", results).await;

    // The pod starts later than the readiness timeout: the first attempt to give up cleans up
    // what the others adopted.
    for backend in ["sandbox", "job"] {
        let acquisition = format!("herd-slow-{backend}");
        let cfg = config(backend, json!({"readinessTimeoutSeconds": 2, "annotations": {START_DELAY: "4s"}}));
        let results = herd(&h, &cfg, &acquisition, 10).await;
        assert_converged(&h, &format!("{backend}, a pod slower than the timeout"), &acquisition, results).await;
    }
}

#[tokio::test]
async fn a_cluster_that_stops_answering_mid_acquire_is_reported_lost_within_seconds() {
    let h = Harness::start(SandboxVersions::Both).await;
    let provider = |verb: Option<&str>, resource: Option<&str>| Match {
        verb: verb.map(str::to_string),
        resource: resource.map(str::to_string),
        user: Some(PROVIDER_USER.into()),
        ..Default::default()
    };
    // The pods watch ends as soon as it opens, so the provider keeps reopening it, as it does
    // after any disconnect.
    h.cluster.faults().add(Rule {
        matches: provider(Some("watch"), Some("pods")),
        action: Action::EndWatch { code: None, after_events: 0 },
        after: 0,
        times: None,
        probability: None,
    });
    let mark = h.cluster.requests().mark();
    let cfg = config("sandbox", json!({"annotations": {START_DELAY: "60s"}}));
    let acquire = h.host.acquire(request(&cfg, "lost-1"));
    let cut = async {
        eventually("the provider to wait for the pod", || async {
            h.provider_calls_since(mark).iter().any(|e| e.verb == "watch" && e.resource == "pods")
        })
        .await;
        // From now on every request of the provider loses its connection: the cluster is gone.
        h.cluster.faults().add(Rule {
            matches: provider(None, None),
            action: Action::DropBeforeApply,
            after: 0,
            times: None,
            probability: None,
        });
        Instant::now()
    };
    let (result, cut_at) = tokio::join!(acquire, cut);
    let err = provider_error(result.expect_err("the cluster is gone"));
    assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err:?}");
    assert!(err.message().contains("the cluster stopped answering"), "{}", err.message());
    assert!(cut_at.elapsed() < Duration::from_secs(8), "reported after {:?}, not at the deadline", cut_at.elapsed());
    assert!(!err.message().contains(SECRET_VALUE));
}

#[tokio::test]
async fn image_pull_failures_fail_fast_and_clean_up() {
    let h = Harness::start(SandboxVersions::Both).await;
    knob_namespace(&h, &Behaviour { image_pull_fails: true, ..Default::default() }).await;
    let started = Instant::now();
    let err =
        provider_error(h.host.acquire(request(&config("sandbox", json!({})), "pull-1")).await.expect_err("image pull"));
    assert_eq!(err.kind(), "image-pull", "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(10), "failed fast, not at the readiness timeout");
    nothing_left(&h, "pc-pull-1").await;
}

/// Unschedulable that lasts the whole readiness deadline is a retryable capacity error, with
/// the scheduler's words.
#[tokio::test]
async fn unschedulable_is_a_retryable_capacity_error() {
    let h = Harness::start(SandboxVersions::Both).await;
    knob_namespace(&h, &Behaviour { unschedulable: true, ..Default::default() }).await;
    let cfg = config("job", json!({"readinessTimeoutSeconds": 3}));
    let err = provider_error(h.host.acquire(request(&cfg, "full-1")).await.expect_err("capacity"));
    assert_eq!(err.kind(), "capacity", "{err:?}");
    assert!(err.retryable() && err.message().contains("nodes are available"), "{err:?}");
}

/// Unschedulable clears by itself on a real cluster (a volume claim binds, a terminating pod
/// frees its node): an acquire that sees it keeps waiting, and gets its sandbox once the
/// scheduler places the pod, instead of tearing everything down at the first sighting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unschedulable_for_a_moment_is_waited_out() {
    let h = Harness::start(SandboxVersions::Both).await;
    knob_namespace(&h, &Behaviour { unschedulable: true, ..Default::default() }).await;
    for backend in ["job", "sandbox"] {
        let cfg = config(backend, json!({"readinessTimeoutSeconds": 24}));
        let id = format!("moment-{backend}");
        let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
        let namespaces: Api<Namespace> = Api::all(h.admin.clone());
        // Its own task: the acquire keeps this one busy while the guest runs.
        let clear_once_seen = tokio::spawn(async move {
            eventually(&format!("{backend}: the scheduler marks the pod unschedulable"), || async {
                pods.list(&ListParams::default()).await.expect("pods").items.iter().any(|p| {
                    let conditions = p.status.as_ref().and_then(|s| s.conditions.as_ref());
                    conditions.into_iter().flatten().any(|c| c.reason.as_deref() == Some("Unschedulable"))
                })
            })
            .await;
            let clear = json!({"metadata": {"annotations": {UNSCHEDULABLE: null}}});
            namespaces.patch(NAMESPACE, &PatchParams::default(), &Patch::Merge(clear)).await.expect("clear the knob");
        });
        let acquired = h.host.acquire(request(&cfg, &id)).await;
        clear_once_seen.await.expect("the knob was cleared once the pod was unschedulable");
        let lease = acquired.unwrap_or_else(|e| panic!("{backend}: waited out: {e}"));
        assert!(lease.pod_name.is_some(), "{backend}: {lease:?}");
        h.host.destroy(lease_ref(&lease, &cfg)).await.expect("destroy");
        knob_namespace(&h, &Behaviour { unschedulable: true, ..Default::default() }).await;
    }
}

/// A kubelet whose Secret cache lags says `failed to sync secret cache` for a container whose
/// Secret exists; it starts once the cache syncs. Acquire waits it out on every backend that
/// makes its own pod, instead of rejecting the sandbox at the first sighting.
#[tokio::test]
async fn a_lagging_secret_cache_is_waited_out() {
    let h = Harness::start(SandboxVersions::Both).await;
    knob_namespace(&h, &Behaviour { config_sync_delay: Some(Duration::from_secs(3)), ..Default::default() }).await;
    for backend in ["job", "sandbox"] {
        let cfg = config(backend, json!({}));
        let lease = h
            .host
            .acquire(request(&cfg, &format!("lagging-{backend}")))
            .await
            .unwrap_or_else(|e| panic!("{backend}: the lagging cache was waited out: {e}"));
        let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
        let pod = pods.get(lease.pod_name.as_deref().expect("a pod")).await.expect("the pod");
        let running = pod.status.and_then(|s| s.phase);
        assert_eq!(running.as_deref(), Some("Running"), "{backend}");
        h.host.destroy(lease_ref(&lease, &cfg)).await.expect("destroy");
    }
}

#[tokio::test]
async fn crash_loops_are_rejected() {
    let h = Harness::start(SandboxVersions::Both).await;
    knob_namespace(&h, &Behaviour { crash_loop: true, ..Default::default() }).await;
    let err = provider_error(
        h.host.acquire(request(&config("sandbox", json!({})), "crash-1")).await.expect_err("crash loop"),
    );
    assert_eq!(err.kind(), "rejected", "{err:?}");
    nothing_left(&h, "pc-crash-1").await;
}

#[tokio::test]
async fn resume_check_answers() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({}));
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);

    let lease = h.host.acquire(request(&cfg, "answers-1")).await.expect("acquire");
    let r = lease_ref(&lease, &cfg);
    let pod_name = lease.pod_name.clone().expect("pod");
    pods.delete(&pod_name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .expect("delete the pod");
    match h.host.resume_check(r.clone()).await.expect("resume-check") {
        ResumeOutcome::Resumable(l) => assert_ne!(l.pod_uid, lease.pod_uid, "the replaced pod is reported"),
        ResumeOutcome::Expired(why) => panic!("a replaced pod is not an expired lease: {why}"),
    }

    // A transient failure is asked again inside resume-check's wait; one whose Retry-After lands
    // past that wait's deadline is "could not tell" at once.
    h.cluster.faults().add(Rule {
        matches: Match {
            verb: Some("get".into()),
            resource: Some("sandboxes".into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        action: Action::Error { code: 500, reason: "InternalError".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: Some(2),
        probability: None,
    });
    assert!(matches!(h.host.resume_check(r.clone()).await.expect("resume-check"), ResumeOutcome::Resumable(_)));
    h.cluster.faults().add(Rule {
        matches: Match {
            verb: Some("get".into()),
            resource: Some("sandboxes".into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        action: Action::Error {
            code: 503,
            reason: "ServiceUnavailable".into(),
            message: None,
            retry_after_seconds: Some(60),
        },
        after: 0,
        times: None,
        probability: None,
    });
    let started = Instant::now();
    let err = provider_error(h.host.resume_check(r.clone()).await.expect_err("could not tell"));
    assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(5), "no wait for a Retry-After past the deadline");
    h.cluster.faults().clear();

    let name = lease.provider_lease_id.split(':').nth(3).unwrap_or_default().to_string();
    sandboxes(&h, "v1beta1").delete(&name, &DeleteParams::background()).await.expect("someone deletes the Sandbox");
    let replacement: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": name},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}}
    }))
    .expect("sandbox");
    sandboxes(&h, "v1beta1")
        .create(&PostParams::default(), &replacement)
        .await
        .expect("a new Sandbox under the old name");
    match h.host.resume_check(r.clone()).await.expect("resume-check") {
        ResumeOutcome::Expired(why) => {
            assert!(why.contains("uid") || why.contains("replaced") || why.contains("recreated"), "{why}")
        }
        ResumeOutcome::Resumable(_) => panic!("a different object under the same name is not this lease"),
    }
    sandboxes(&h, "v1beta1").delete(&name, &DeleteParams::background()).await.expect("delete the replacement");
    assert!(
        matches!(h.host.resume_check(r).await.expect("resume-check"), ResumeOutcome::Expired(_)),
        "gone is expired"
    );
}

#[tokio::test]
async fn the_host_policy_refuses_other_namespaces() {
    let h = Harness::start(SandboxVersions::Both).await;
    let namespaces: Api<Namespace> = Api::all(h.admin.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "elsewhere"}})).expect("ns"),
        )
        .await
        .expect("ns");
    let mark = h.cluster.requests().mark();
    let cfg = json!({"namespace": "elsewhere", "backend": "sandbox", "image": "busybox:1.36"}).to_string();
    let err = provider_error(h.host.acquire(request(&cfg, "denied-1")).await.expect_err("denied"));
    assert_eq!(err, ProviderError::invalid_config("/namespace", err.message().to_string()), "refused by its path");
    assert!(err.message().contains("\"elsewhere\""), "{err}");
    let writes = h.provider_calls_since(mark).into_iter().filter(|e| e.namespace == "elsewhere").count();
    assert_eq!(writes, 0, "a denied call never reaches the cluster");
}

#[tokio::test]
async fn the_wait_and_its_clean_up_fit_the_hosts_call_deadline() {
    let h = Harness::start(SandboxVersions::Both).await;
    let limits = provider_host::Limits { call_timeout_ms: 8_000, ..Default::default() };
    let host = load_host_with(&h.cluster.kubeconfig(PROVIDER_USER).expect("kubeconfig"), limits).await;

    // A wait the host's deadline cannot hold is refused up front, with the largest that fits.
    let too_long = config("sandbox", json!({"readinessTimeoutSeconds": 20}));
    let validation = host.validate_config(&too_long).await.expect("validate-config");
    let problem = validation.errors.iter().find(|p| p.path == "/readinessTimeoutSeconds").expect("refused");
    assert!(problem.message.contains("at most 2"), "{problem:?}");
    let mark = h.cluster.requests().mark();
    let err = provider_error(host.acquire(request(&too_long, "deadline-1")).await.expect_err("refused"));
    assert!(matches!(&err, ProviderError::InvalidConfig(d) if d.path == "/readinessTimeoutSeconds"), "{err:?}");
    assert!(h.provider_calls_since(mark).is_empty(), "nothing was sent");

    // A wait that fits ends in the provider's own timeout with everything cleaned up, instead of
    // the host cutting the call off and leaving the Sandbox, its pod and its Secret behind.
    knob_namespace(&h, &Behaviour { start_delay: Some(Duration::from_secs(30)), ..Default::default() }).await;
    let fits = config("sandbox", json!({"readinessTimeoutSeconds": 2}));
    let started = Instant::now();
    let err = provider_error(host.acquire(request(&fits, "deadline-2")).await.expect_err("not ready"));
    assert_eq!((err.kind(), err.retryable()), ("timeout", true), "{err:?}");
    assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(8), "inside the host's deadline: {:?}", started.elapsed());
    eventually("the Sandbox to be gone", || async {
        sandboxes(&h, "v1beta1").get_opt("pc-deadline-2").await.ok().flatten().is_none()
    })
    .await;
    nothing_left(&h, "pc-deadline-2").await;
}

#[tokio::test]
async fn a_hung_api_server_never_outlives_the_call() {
    let h = Harness::start(SandboxVersions::Both).await;
    let limits = provider_host::Limits { call_timeout_ms: 3_000, ..Default::default() };
    let host = load_host_with(&h.cluster.kubeconfig(PROVIDER_USER).expect("kubeconfig"), limits).await;
    h.cluster.faults().add(Rule {
        matches: Match {
            verb: Some("get".into()),
            resource: Some("namespaces".into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        action: Action::Delay { millis: 20_000 },
        after: 0,
        times: None,
        probability: None,
    });
    // Each request the host sends for the provider ends before the call does, even though the
    // per-request timeout (10 s) is longer than the call (3 s): the provider hears of it and
    // answers, instead of the host ending the call under it.
    let probe = host.probe(&config("job", json!({}))).await.expect("probe answers before the host ends the call");
    assert!(!probe.ok);
    assert!(
        probe
            .diagnostics
            .iter()
            .any(|d| d.code == "namespace-check-failed" && d.message.contains("did not answer within")),
        "{probe:?}"
    );
}
