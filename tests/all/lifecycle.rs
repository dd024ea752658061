//! The lease lifecycle on both backends and both Sandbox API versions, through the built
//! component in the wasmtime host: acquire, resume-check, renew, release, destroy.

use embedded_cluster::SandboxVersions;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use provider_host::records::{Backend, DeleteOutcome, ResumeOutcome};
use serde_json::json;
use tests::*;

fn renewed(outcome: ResumeOutcome) -> provider_host::records::Lease {
    match outcome {
        ResumeOutcome::Resumable(lease) => lease,
        ResumeOutcome::Expired(why) => panic!("renew said expired: {why}"),
    }
}

/// The provider's writes since a mark: an acquire makes exactly two, the workload and then its
/// Secret, created already owned by it (no object ever exists without an owner or an expiry).
fn assert_two_writes(h: &Harness, mark: u64, workload: &str, name: &str) {
    let writes = h.provider_writes_since(mark);
    assert_eq!(writes, vec![format!("create {workload} {name}"), format!("create secrets {name}-env")]);
}

fn workload_name(lease: &provider_host::records::Lease) -> String {
    lease.provider_lease_id.split(':').nth(3).unwrap_or_default().to_string()
}

async fn sandbox_lifecycle(versions: SandboxVersions, version: &str) {
    let h = Harness::start(versions).await;
    let (logs, _guard) = capture_logs();
    // A lease may live 4 h, so renewing a 1 h lease by another hour moves it.
    let cfg = config("sandbox", json!({"leaseTtlSeconds": 14_400}));
    let requested = request(&cfg, "life-1");
    let requested_expiry = requested.requested_expires_at.unwrap_or_default();
    let mark = h.cluster.requests().mark();
    let lease = h.host.acquire(requested).await.expect("acquire");
    assert_two_writes(&h, mark, "sandboxes", "pc-life-1");
    assert_eq!(lease.backend, Backend::Sandbox);
    assert_eq!(lease.api_version, format!("agents.x-k8s.io/{version}"));
    assert_eq!(lease.namespace, NAMESPACE);
    assert!(lease.pod_ip.is_some() && lease.pod_uid.is_some(), "{lease:?}");
    assert!(lease.expires_at.is_some_and(|e| e <= requested_expiry), "expiry bounded by the request");

    let name = workload_name(&lease);
    let sb = sandboxes(&h, version).get(&name).await.expect("the Sandbox");
    assert_eq!(sb.metadata.uid.as_deref(), Some(lease.workload_uid.as_str()));
    assert_eq!(sb.data["spec"]["shutdownPolicy"], "Delete");
    assert!(sb.data["spec"]["shutdownTime"].is_string());

    let secret = Api::<Secret>::namespaced(h.admin.clone(), NAMESPACE)
        .get(&format!("{name}-env"))
        .await
        .expect("per-lease Secret");
    let owner = secret.metadata.owner_references.clone().unwrap_or_default();
    assert!(owner.iter().any(|o| o.uid == lease.workload_uid), "the Secret is owned by the workload");
    let pod = Api::<Pod>::namespaced(h.admin.clone(), NAMESPACE)
        .get(lease.pod_name.as_deref().expect("pod"))
        .await
        .expect("pod");
    assert!(!serde_json::to_string(&pod).expect("json").contains(SECRET_VALUE), "no secret value in the pod");
    assert!(!serde_json::to_string(&lease).expect("json").contains(SECRET_VALUE), "no secret value in the lease");

    let r = lease_ref(&lease, &cfg);
    match h.host.resume_check(r.clone()).await.expect("resume-check") {
        ResumeOutcome::Resumable(l) => assert_eq!(l.workload_uid, lease.workload_uid),
        ResumeOutcome::Expired(why) => panic!("expired right after acquire: {why}"),
    }
    let later = requested_expiry + 3_600_000;
    let renewed = renewed(h.host.renew(r.clone(), later).await.expect("renew"));
    assert!(renewed.expires_at > lease.expires_at, "renew moves the expiry");
    let moved = sandboxes(&h, version).get(&name).await.expect("the Sandbox");
    assert_ne!(moved.data["spec"]["shutdownTime"], sb.data["spec"]["shutdownTime"]);

    h.host.release(r.clone()).await.expect("release");
    match h.host.resume_check(r.clone()).await.expect("resume-check after release") {
        ResumeOutcome::Expired(why) => assert!(!why.is_empty()),
        ResumeOutcome::Resumable(_) => panic!("an ephemeral lease is destroyed on release"),
    }
    let report = h.host.destroy(r).await.expect("destroy again");
    assert!(report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{report:?}");
    assert!(!logs.text().contains(SECRET_VALUE), "no secret value in any log line");
}

#[tokio::test]
async fn sandbox_lifecycle_on_v1beta1() {
    sandbox_lifecycle(SandboxVersions::Both, "v1beta1").await;
}

#[tokio::test]
async fn sandbox_lifecycle_on_a_v1alpha1_only_cluster() {
    sandbox_lifecycle(SandboxVersions::V1alpha1Only, "v1alpha1").await;
}

#[tokio::test]
async fn job_lifecycle() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("job", json!({"leaseTtlSeconds": 14_400}));
    let mark = h.cluster.requests().mark();
    let lease = h.host.acquire(request(&cfg, "job-1")).await.expect("acquire");
    assert_two_writes(&h, mark, "jobs", "pc-job-1");
    assert_eq!(lease.backend, Backend::Job);
    assert_eq!(lease.api_version, "batch/v1");
    let name = workload_name(&lease);
    let jobs: Api<Job> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let job = jobs.get(&name).await.expect("the Job");
    let spec = job.spec.expect("spec");
    assert_eq!(spec.backoff_limit, Some(0));
    assert!(spec.active_deadline_seconds.is_some_and(|s| s > 0 && s <= 3601));
    let r = lease_ref(&lease, &cfg);
    assert!(matches!(h.host.resume_check(r.clone()).await.expect("resume-check"), ResumeOutcome::Resumable(_)));
    let renewed =
        renewed(h.host.renew(r.clone(), jiff::Timestamp::now().as_millisecond() + 7_200_000).await.expect("renew"));
    assert!(renewed.expires_at > lease.expires_at);
    h.host.release(r.clone()).await.expect("release");
    let gone =
        h.host.renew(r.clone(), jiff::Timestamp::now().as_millisecond() + 7_200_000).await.expect("renew a gone lease");
    assert!(matches!(gone, ResumeOutcome::Expired(_)), "renewing a gone sandbox is expired, not an error: {gone:?}");
    assert!(matches!(h.host.resume_check(r).await.expect("resume-check"), ResumeOutcome::Expired(_)));
    assert!(jobs.get_opt(&name).await.expect("get").is_none());
}

#[tokio::test]
async fn a_retried_acquire_returns_the_same_sandbox() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({}));
    let mark = h.cluster.requests().mark();
    let first = h.host.acquire(request(&cfg, "retry-1")).await.expect("first acquire");
    let second = h.host.acquire(request(&cfg, "retry-1")).await.expect("retried acquire");
    assert_eq!(first.workload_uid, second.workload_uid);
    assert_eq!(first.provider_lease_id, second.provider_lease_id);
    let creates = h
        .provider_calls_since(mark)
        .iter()
        .filter(|e| e.verb == "create" && e.resource == "sandboxes" && e.code == 201)
        .count();
    assert_eq!(creates, 1, "one Sandbox created for two acquires");
}

#[tokio::test]
async fn destroy_works_from_the_lease_id_alone_twice_and_concurrently() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({}));
    let lease = h.host.acquire(request(&cfg, "alone-1")).await.expect("acquire");
    let name = workload_name(&lease);
    let mut stripped = lease.clone();
    stripped.metadata = "{not json".into();
    stripped.workload_uid = String::new();
    stripped.pod_name = None;
    stripped.pod_uid = None;
    let r = lease_ref(&stripped, &cfg);
    let (a, b) = tokio::join!(h.host.destroy(r.clone()), h.host.destroy(r.clone()));
    for report in [a.expect("destroy"), b.expect("concurrent destroy")] {
        assert!(report.objects.iter().all(|o| !matches!(o.outcome, DeleteOutcome::Failed(_))), "{report:?}");
    }
    let again = h.host.destroy(r).await.expect("third destroy");
    assert!(again.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone), "{again:?}");
    assert!(sandboxes(&h, "v1beta1").get_opt(&name).await.expect("get").is_none());
    assert!(
        Api::<Secret>::namespaced(h.admin.clone(), NAMESPACE)
            .get_opt(&format!("{name}-env"))
            .await
            .expect("get")
            .is_none()
    );
    let pods = Api::<Pod>::namespaced(h.admin.clone(), NAMESPACE);
    eventually("the sandbox pod to be collected", || async {
        pods.list(&ListParams::default()).await.is_ok_and(|l| l.items.is_empty())
    })
    .await;
}

/// The sandbox's main process is not PID 1 (pause is), so the kubelet's SIGTERM ends it at
/// once: a destroyed sandbox's pod stops with 143, where `sleep infinity` as PID 1 ignored the
/// signal, held the pod for its whole grace period and died by SIGKILL (137).
#[tokio::test]
async fn a_destroyed_sandboxs_main_process_ends_at_sigterm_on_both_backends() {
    let h = Harness::start(SandboxVersions::Both).await;
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
    for backend in ["sandbox", "job"] {
        let cfg = config(backend, json!({}));
        let lease = h.host.acquire(request(&cfg, &format!("sigterm-{backend}"))).await.expect("acquire");
        let pod = lease.pod_name.clone().expect("the lease names its pod");
        let params = WatchParams::default().fields(&format!("metadata.name={pod}"));
        let mut events = pods.watch(&params, "0").await.expect("watch the pod").boxed();
        h.host.destroy(lease_ref(&lease, &cfg)).await.expect("destroy");
        let deleted = tokio::time::timeout(WAIT, async {
            while let Some(event) = events.try_next().await.expect("watch event") {
                if let WatchEvent::Deleted(pod) = event {
                    return pod;
                }
            }
            panic!("the watch of {pod} ended before its deletion");
        })
        .await
        .unwrap_or_else(|_| panic!("{backend}: {pod} was not deleted within {} s", WAIT.as_secs()));
        let ended = deleted
            .status
            .and_then(|s| s.container_statuses)
            .and_then(|cs| cs.into_iter().next())
            .and_then(|c| c.state)
            .and_then(|s| s.terminated)
            .map(|t| t.exit_code);
        assert_eq!(ended, Some(143), "{backend}: the main process ended by SIGTERM, not SIGKILL");
    }
}
