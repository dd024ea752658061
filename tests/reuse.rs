//! Reusable leases, the leak guard and terminating workloads, through the built component.

use std::time::Duration;

use embedded_cluster::SandboxVersions;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use provider_e2e::*;
use provider_host::records::ResumeOutcome;
use serde_json::json;

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
