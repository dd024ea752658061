//! Reusable leases, the leak guard and terminating workloads, through the built component.

use std::time::{Duration, Instant};

use embedded_cluster::behaviour::TERMINATION_DELAY;
use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{PROVIDER_USER, SandboxVersions};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use provider_host::HostError;
use provider_host::records::ResumeOutcome;
use serde_json::json;
use tests::*;

#[tokio::test]
async fn a_reusable_lease_is_suspended_on_release_and_resumed_by_resume_check() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
    let mut req = request(&cfg, "reuse-1");
    req.reusable = true;
    let lease = h.host.acquire(req).await.expect("acquire");
    assert!(lease.reusable, "a Sandbox with a workspace volume can be reused");
    let name = "pc-reuse-1";
    let r = lease_ref(&lease, &cfg);

    h.host.release(r.clone()).await.expect("release suspends");
    let suspended = sandboxes(&h, "v1beta1").get(name).await.expect("the Sandbox is kept");
    assert_eq!(suspended.data["spec"]["operatingMode"], "Suspended");
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
    eventually("the pod to stop", || async { pods.get_opt(name).await.ok().flatten().is_none() }).await;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.admin.clone(), NAMESPACE);
    assert!(!claims.list(&Default::default()).await.expect("list").items.is_empty(), "the disk is kept");

    match h.host.resume_check(r.clone()).await.expect("resume-check") {
        ResumeOutcome::Resumable(l) => {
            assert_ne!(l.pod_uid, lease.pod_uid, "a new pod after the resume");
            assert_eq!(l.workload_uid, lease.workload_uid);
        }
        ResumeOutcome::Expired(why) => panic!("a suspended reusable lease resumes: {why}"),
    }
    assert_eq!(sandboxes(&h, "v1beta1").get(name).await.expect("sandbox").data["spec"]["operatingMode"], "Running");

    let report = h.host.destroy(r).await.expect("destroy");
    assert!(report.objects.iter().any(|o| o.kind == "PersistentVolumeClaim"), "destroy covers the claim: {report:?}");
    eventually("the claim to go", || async {
        claims.list(&Default::default()).await.map(|l| l.items.is_empty()).unwrap_or(false)
    })
    .await;
}

/// A kubelet stops a deleted pod only as fast as its main process answers SIGTERM (up to the
/// grace period). Resumed while its old pod is still stopping, the Sandbox followed that pod
/// and ended with it, and the lease was lost with its workspace intact: resume waits for the
/// old pod first.
#[tokio::test]
async fn a_reusable_lease_resumed_right_after_release_waits_for_its_old_pod() {
    let h = Harness::start(SandboxVersions::Both).await;
    let slow = json!({"metadata": {"annotations": {TERMINATION_DELAY: "5s"}}});
    Api::<Namespace>::all(h.admin.clone())
        .patch(NAMESPACE, &PatchParams::default(), &Patch::Merge(slow))
        .await
        .expect("pods take 5 s to stop");
    let cfg = config("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
    let mut req = request(&cfg, "reuse-fast");
    req.reusable = true;
    let lease = h.host.acquire(req).await.expect("acquire");
    let r = lease_ref(&lease, &cfg);
    h.host.release(r.clone()).await.expect("release suspends");
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
    // The controller deletes the pod after the suspend; it then takes 5 s to stop.
    eventually("the old pod stopping, not yet gone", || async {
        let old = pods.get_opt("pc-reuse-fast").await.expect("read the pod");
        old.is_some_and(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;

    match h.host.resume_check(r.clone()).await.expect("resume-check") {
        ResumeOutcome::Resumable(l) => {
            assert_ne!(l.pod_uid, lease.pod_uid, "a new pod after the resume");
            assert_eq!(l.workload_uid, lease.workload_uid, "the same Sandbox, with its workspace");
        }
        ResumeOutcome::Expired(why) => panic!("resumed right after release: {why}"),
    }
    assert_eq!(
        sandboxes(&h, "v1beta1").get("pc-reuse-fast").await.expect("sandbox").data["spec"]["operatingMode"],
        "Running"
    );
    h.host.destroy(r).await.expect("destroy");
}

#[tokio::test]
async fn acquiring_a_released_reusable_lease_again_resumes_it_and_a_failure_never_deletes_it() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
    let mut req = request(&cfg, "reuse-2");
    req.reusable = true;
    let name = "pc-reuse-2";
    let pods: Api<Pod> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(h.admin.clone(), NAMESPACE);
    let lease = h.host.acquire(req.clone()).await.expect("acquire");
    h.host.release(lease_ref(&lease, &cfg)).await.expect("release suspends");
    eventually("the pod to stop", || async { pods.get_opt(name).await.ok().flatten().is_none() }).await;

    let started = Instant::now();
    let again = h.host.acquire(req.clone()).await.expect("acquiring it again resumes it");
    assert!(started.elapsed() < Duration::from_secs(10), "resumed, not waited out: {:?}", started.elapsed());
    assert_eq!(again.workload_uid, lease.workload_uid, "the same Sandbox, with its workspace");
    assert_ne!(again.pod_uid, lease.pod_uid);
    assert_eq!(sandboxes(&h, "v1beta1").get(name).await.expect("sandbox").data["spec"]["operatingMode"], "Running");

    // Released again, then acquired while the pods cannot be watched: the acquire fails, and the
    // Sandbox is suspended again with its claim, never deleted.
    h.host.release(lease_ref(&again, &cfg)).await.expect("release suspends");
    h.cluster.faults().add(Rule {
        matches: Match {
            verb: Some("watch".into()),
            resource: Some("pods".into()),
            user: Some(PROVIDER_USER.into()),
            ..Default::default()
        },
        action: Action::Error { code: 403, reason: "Forbidden".into(), message: None, retry_after_seconds: None },
        after: 0,
        times: None,
        probability: None,
    });
    match h.host.acquire(req).await {
        Err(HostError::Provider(e)) => assert!(e.message().contains("suspended again"), "{e:?}"),
        other => panic!("expected the provider's error, got {other:?}"),
    }
    h.cluster.faults().clear();
    let kept = sandboxes(&h, "v1beta1").get(name).await.expect("the Sandbox is kept");
    assert_eq!(kept.metadata.uid.as_deref(), Some(lease.workload_uid.as_str()));
    assert_eq!(kept.data["spec"]["operatingMode"], "Suspended");
    assert!(!claims.list(&Default::default()).await.expect("list").items.is_empty(), "the workspace is kept");
    h.host.destroy(lease_ref(&lease, &cfg)).await.expect("destroy");
}

#[tokio::test]
async fn the_leak_guard_removes_an_abandoned_sandbox() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({}));
    let lease = h.host.acquire(request(&cfg, "abandoned-1")).await.expect("acquire");
    h.cluster.clock().advance(Duration::from_secs(2 * 3600));
    eventually("the expired Sandbox to be deleted by the cluster", || async {
        sandboxes(&h, "v1beta1").get_opt("pc-abandoned-1").await.ok().flatten().is_none()
    })
    .await;
    match h.host.resume_check(lease_ref(&lease, &cfg)).await.expect("resume-check") {
        ResumeOutcome::Expired(why) => assert!(!why.is_empty()),
        ResumeOutcome::Resumable(_) => panic!("an expired sandbox is not resumable"),
    }
}

#[tokio::test]
async fn a_terminating_workload_is_expired() {
    let h = Harness::start(SandboxVersions::Both).await;
    let cfg = config("sandbox", json!({}));
    let lease = h.host.acquire(request(&cfg, "ending-1")).await.expect("acquire");
    sandboxes(&h, "v1beta1")
        .patch(
            "pc-ending-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold"]}})),
        )
        .await
        .expect("hold the Sandbox");
    sandboxes(&h, "v1beta1").delete("pc-ending-1", &DeleteParams::background()).await.expect("delete");
    match h.host.resume_check(lease_ref(&lease, &cfg)).await.expect("resume-check") {
        ResumeOutcome::Expired(why) => assert!(why.contains("terminat") || why.contains("deleted"), "{why}"),
        ResumeOutcome::Resumable(_) => panic!("a terminating Sandbox is never handed back"),
    }
    sandboxes(&h, "v1beta1")
        .patch("pc-ending-1", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("release the hold");
}
