//! The agent-sandbox controller's state machine, observed through kube-rs as a provider would,
//! on both API versions.

use std::time::Duration;

use crate::common::*;
use embedded_cluster::behaviour::Behaviour;
use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster, SandboxVersions};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::conditions::is_deleted;
use serde_json::{Value, json};

fn sandbox(version: &str, name: &str, extra_spec: Value, knobs: &Behaviour) -> DynamicObject {
    let mut spec = json!({"podTemplate": {"metadata": {"labels": {"app": "agent", "agents.x-k8s.io/dropped": "x"}, "annotations": knobs.to_annotations()},
        "spec": {"containers": [{"name": "agent", "image": "busybox:1.36"}]}}});
    if let (Some(s), Some(extra)) = (spec.as_object_mut(), extra_spec.as_object()) {
        s.extend(extra.clone());
    }
    serde_json::from_value(json!({"apiVersion": format!("agents.x-k8s.io/{version}"), "kind": "Sandbox", "metadata": {"name": name}, "spec": spec}))
        .expect("sandbox")
}

fn fnv1a(s: &str) -> String {
    let mut h: u32 = 0x811c9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x01000193);
    }
    format!("{h:08x}")
}

#[tokio::test]
async fn sandbox_becomes_ready_with_its_pod() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = sbs
        .create(&PostParams::default(), &sandbox("v1beta1", "sb-ready", json!({}), &Behaviour::default()))
        .await
        .expect("create");
    let ready = wait_for(&sbs, "sb-ready", has_condition("Ready", "True", Some("DependenciesReady")), "Ready")
        .await
        .expect("sandbox");
    assert_eq!(ready.annotations().get("agents.x-k8s.io/pod-name").map(String::as_str), Some("sb-ready"));
    let generation = ready.metadata.generation.expect("generation");
    for c in ready.data["status"]["conditions"].as_array().expect("conditions") {
        assert_eq!(c["observedGeneration"].as_i64(), Some(generation), "{c}");
    }
    assert_eq!(ready.data["status"]["selector"], format!("agents.x-k8s.io/sandbox-name-hash={}", fnv1a("sb-ready")));
    assert!(ready.data["status"]["podIPs"].as_array().is_some_and(|ips| !ips.is_empty()));

    let pod = pods.get("sb-ready").await.expect("pod named like the sandbox");
    let owner = pod.owner_references().first().cloned().expect("owner");
    assert_eq!(
        (owner.uid.as_str(), owner.controller, owner.block_owner_deletion),
        (created.uid().as_deref().unwrap_or_default(), Some(true), Some(true))
    );
    assert_eq!(pod.labels().get("agents.x-k8s.io/sandbox-name-hash"), Some(&fnv1a("sb-ready")));
    assert_eq!(pod.labels().get("app").map(String::as_str), Some("agent"));
    assert!(!pod.labels().contains_key("agents.x-k8s.io/dropped"), "agents.x-k8s.io/ template labels are dropped");
    let status = pod.status.expect("pod status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.pod_ip.is_some());
}

#[tokio::test]
async fn deleted_pod_is_recreated_with_a_new_uid() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    sbs.create(&PostParams::default(), &sandbox("v1beta1", "sb-re", json!({}), &Behaviour::default()))
        .await
        .expect("create");
    wait_for(&sbs, "sb-re", has_condition("Ready", "True", None), "Ready").await;
    let first = pods.get("sb-re").await.expect("pod").uid().expect("uid");
    pods.delete("sb-re", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .expect("delete pod");
    eventually("a new pod under the same name", || async {
        pods.get_opt("sb-re").await.ok().flatten().and_then(|p| p.uid()).is_some_and(|u| u != first)
    })
    .await;
    wait_for(&sbs, "sb-re", has_condition("Ready", "True", None), "Ready again").await;
}

#[tokio::test]
async fn terminal_pod_finishes_the_sandbox_for_good() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let knobs = Behaviour { exit_code: Some(3), run_duration: Some(Duration::from_millis(200)), ..Default::default() };
    let mut sb = sandbox("v1beta1", "sb-fail", json!({}), &knobs);
    sb.data["spec"]["podTemplate"]["spec"]["restartPolicy"] = json!("Never");
    sbs.create(&PostParams::default(), &sb).await.expect("create");
    let done = wait_for(&sbs, "sb-fail", has_condition("Finished", "True", Some("PodFailed")), "Finished").await;
    assert_eq!(condition(done.as_ref(), "Ready"), Some(("False".into(), "PodFailed".into())));
    let uid = pods.get("sb-fail").await.expect("pod kept").uid();
    // A spec change the pod does not depend on makes the controller reconcile once more; its
    // conditions then carry the new generation, so the check below follows a reconcile that saw
    // the terminal pod, whatever the scheduler did.
    let far_off = json!({"spec": {"shutdownTime": "2099-01-01T00:00:00Z"}});
    let patched = sbs.patch("sb-fail", &PatchParams::default(), &Patch::Merge(&far_off)).await.expect("patch");
    let generation = patched.metadata.generation.expect("a generation");
    let reconciled = move |obj: Option<&DynamicObject>| {
        obj.and_then(|o| o.data["status"]["conditions"].as_array()).is_some_and(|cs| {
            cs.iter().any(|c| c["type"] == "Finished" && c["status"] == "True" && c["observedGeneration"] == generation)
        })
    };
    wait_for(&sbs, "sb-fail", reconciled, "a reconcile of the changed spec").await;
    assert_eq!(pods.get("sb-fail").await.expect("pod").uid(), uid, "a terminal pod is never replaced");
}

async fn suspend_and_resume(version: &'static str, versions: SandboxVersions) {
    let c = full_cluster(versions).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource(version));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    sbs.create(&PostParams::default(), &sandbox(version, "sb-sus", json!({}), &Behaviour::default()))
        .await
        .expect("create");
    wait_for(&sbs, "sb-sus", has_condition("Ready", "True", None), "Ready").await;
    let first = pods.get("sb-sus").await.expect("pod").uid().expect("uid");
    let (suspend, resume) = if version == "v1beta1" {
        (json!({"spec": {"operatingMode": "Suspended"}}), json!({"spec": {"operatingMode": "Running"}}))
    } else {
        (json!({"spec": {"replicas": 0}}), json!({"spec": {"replicas": 1}}))
    };
    sbs.patch("sb-sus", &PatchParams::default(), &Patch::Merge(&suspend)).await.expect("suspend");
    let suspended =
        wait_for(&sbs, "sb-sus", has_condition("Suspended", "True", Some("PodTerminated")), "Suspended").await;
    assert_eq!(condition(suspended.as_ref(), "Ready"), Some(("False".into(), "SandboxSuspended".into())));
    wait_for(&pods, "sb-sus", is_deleted(&first), "the pod to go").await;
    let s = sbs.get("sb-sus").await.expect("sandbox");
    assert!(!s.annotations().contains_key("agents.x-k8s.io/pod-name"));
    assert!(s.data["status"]["podIPs"].as_array().is_none_or(Vec::is_empty));
    sbs.patch("sb-sus", &PatchParams::default(), &Patch::Merge(&resume)).await.expect("resume");
    wait_for(&sbs, "sb-sus", has_condition("Ready", "True", None), "Ready after resume").await;
    assert_ne!(pods.get("sb-sus").await.expect("pod").uid().expect("uid"), first);
}

/// The kubelet gives a deleted pod a terminal phase before it removes it, so a suspend can leave
/// Finished=True in the status until the controller sees the pod gone. A resume that comes first
/// (the provider resumes as soon as the old pod is gone) must still get a pod. The controller is
/// stopped while the status holds that state, so the order is the test's, not the scheduler's.
#[tokio::test]
async fn a_resume_that_finds_a_stale_finished_condition_still_gets_a_pod() {
    let controllers = ControllerKind::ALL.into_iter().filter(|k| *k != ControllerKind::Sandbox).collect();
    let c = EmbeddedCluster::start(ClusterConfig { controllers, ..Default::default() }).await.expect("cluster");
    let controller_client = c.client_as(ControllerKind::Sandbox.user()).await.expect("controller client");
    let start_controller =
        || tokio::spawn(embedded_cluster::controllers::sandbox::run(controller_client.clone(), c.clock().clone()));
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let controller = start_controller();
    let mut sb = sandbox("v1beta1", "sb-stale", json!({}), &Behaviour::default());
    // The default main process ignores SIGTERM; a short grace period keeps the suspend short.
    sb.data["spec"]["podTemplate"]["spec"]["terminationGracePeriodSeconds"] = json!(1);
    sbs.create(&PostParams::default(), &sb).await.expect("create");
    wait_for(&sbs, "sb-stale", has_condition("Ready", "True", None), "Ready").await;
    let first = pods.get("sb-stale").await.expect("pod").uid().expect("uid");
    let suspend = json!({"spec": {"operatingMode": "Suspended"}});
    sbs.patch("sb-stale", &PatchParams::default(), &Patch::Merge(&suspend)).await.expect("suspend");
    wait_for(&sbs, "sb-stale", has_condition("Suspended", "True", Some("PodTerminated")), "Suspended").await;
    wait_for(&pods, "sb-stale", is_deleted(&first), "the pod to go").await;

    controller.abort();
    let _ = controller.await;
    let finished = json!({"status": {"conditions": [
        {"type": "Finished", "status": "True", "reason": "PodFailed", "message": "Pod failed",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2},
        {"type": "Suspended", "status": "False", "reason": "PodTerminating",
         "message": "Pod is terminating. Sandbox is suspending",
         "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2},
    ]}});
    sbs.patch_status("sb-stale", &PatchParams::default(), &Patch::Merge(&finished)).await.expect("stale status");
    let resume = json!({"spec": {"operatingMode": "Running"}});
    sbs.patch("sb-stale", &PatchParams::default(), &Patch::Merge(&resume)).await.expect("resume");

    let _controller = start_controller();
    let ready = wait_for(&sbs, "sb-stale", has_condition("Ready", "True", None), "Ready after resume").await;
    assert_eq!(condition(ready.as_ref(), "Finished"), None, "Finished goes with its pod");
    assert_ne!(pods.get("sb-stale").await.expect("a new pod").uid().expect("uid"), first);
}

#[tokio::test]
async fn suspend_and_resume_v1beta1() {
    suspend_and_resume("v1beta1", SandboxVersions::V1beta1Only).await;
}

#[tokio::test]
async fn suspend_and_resume_v1alpha1() {
    suspend_and_resume("v1alpha1", SandboxVersions::V1alpha1Only).await;
}

#[tokio::test]
async fn shutdown_time_with_delete_policy_removes_the_sandbox() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let at = embedded_cluster::clock::format_time(c.clock().now() + jiff::SignedDuration::from_secs(600));
    let created = sbs
        .create(
            &PostParams::default(),
            &sandbox(
                "v1beta1",
                "sb-ttl",
                json!({"shutdownTime": at, "shutdownPolicy": "Delete"}),
                &Behaviour::default(),
            ),
        )
        .await
        .expect("create");
    wait_for(&sbs, "sb-ttl", has_condition("Ready", "True", None), "Ready").await;
    c.clock().advance(Duration::from_secs(601));
    wait_for(&sbs, "sb-ttl", is_deleted(&created.uid().expect("uid")), "the expired Sandbox to be deleted").await;
    eventually("the pod to go", || async { pods.get_opt("sb-ttl").await.ok().flatten().is_none() }).await;
}

#[tokio::test]
async fn shutdown_time_with_retain_expires_and_renews() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let at = embedded_cluster::clock::format_time(c.clock().now() + jiff::SignedDuration::from_secs(600));
    sbs.create(
        &PostParams::default(),
        &sandbox("v1beta1", "sb-keep", json!({"shutdownTime": at, "shutdownPolicy": "Retain"}), &Behaviour::default()),
    )
    .await
    .expect("create");
    wait_for(&sbs, "sb-keep", has_condition("Ready", "True", None), "Ready").await;
    c.clock().advance(Duration::from_secs(601));
    wait_for(&sbs, "sb-keep", has_condition("Ready", "False", Some("SandboxExpired")), "SandboxExpired").await;
    eventually("the pod to go", || async { pods.get_opt("sb-keep").await.ok().flatten().is_none() }).await;
    let later = embedded_cluster::clock::format_time(c.clock().now() + jiff::SignedDuration::from_secs(3600));
    sbs.patch("sb-keep", &PatchParams::default(), &Patch::Merge(json!({"spec": {"shutdownTime": later}})))
        .await
        .expect("renew");
    wait_for(&sbs, "sb-keep", has_condition("Ready", "True", None), "Ready after renewal").await;
}

#[tokio::test]
async fn shutdown_time_in_the_past_never_starts_a_pod() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let past = embedded_cluster::clock::format_time(c.clock().now() - jiff::SignedDuration::from_secs(60));
    sbs.create(
        &PostParams::default(),
        &sandbox("v1beta1", "sb-past", json!({"shutdownTime": past}), &Behaviour::default()),
    )
    .await
    .expect("create");
    wait_for(&sbs, "sb-past", has_condition("Ready", "False", Some("SandboxExpired")), "SandboxExpired").await;
    assert!(pods.get_opt("sb-past").await.expect("get").is_none());
}

#[tokio::test]
async fn service_and_volume_claims_follow_the_sandbox() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let sbs: Api<DynamicObject> = Api::namespaced_with(client.clone(), "default", &sandbox_resource("v1beta1"));
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");
    let extra = json!({"service": true, "volumeClaimTemplates": [{"metadata": {"name": "work"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]});
    sbs.create(&PostParams::default(), &sandbox("v1beta1", "sb-svc", extra, &Behaviour::default()))
        .await
        .expect("create");
    let ready = wait_for(&sbs, "sb-svc", has_condition("Ready", "True", None), "Ready").await.expect("sandbox");
    assert_eq!(ready.data["status"]["serviceFQDN"], "sb-svc.default.svc.cluster.local");
    let svc = services.get("sb-svc").await.expect("headless service");
    assert_eq!(svc.spec.and_then(|s| s.cluster_ip).as_deref(), Some("None"));
    pvcs.get("work-sb-svc").await.expect("claim from the template");

    let err = sbs
        .patch("sb-svc", &PatchParams::default(), &Patch::Merge(json!({"spec": {"volumeClaimTemplates": null}})))
        .await
        .expect_err("volumeClaimTemplates are immutable");
    assert!(
        matches!(err, kube::Error::Api(s) if s.code == 422 && s.message.contains("volumeClaimTemplates is immutable"))
    );

    sbs.delete("sb-svc", &DeleteParams::background()).await.expect("delete");
    eventually("service and claim collected", || async {
        services.get_opt("sb-svc").await.ok().flatten().is_none()
            && pvcs.get_opt("work-sb-svc").await.ok().flatten().is_none()
    })
    .await;
}

#[tokio::test]
async fn schema_errors_are_invalid_with_causes() {
    let c = full_cluster(SandboxVersions::Both).await;
    let sbs: Api<DynamicObject> =
        Api::namespaced_with(c.client().await.expect("client"), "default", &sandbox_resource("v1beta1"));
    let missing: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "bad"}, "spec": {}}),
    )
    .expect("obj");
    let err = sbs.create(&PostParams::default(), &missing).await.expect_err("podTemplate is required");
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    assert!(causes.iter().any(|c| c.field == "spec.podTemplate" && c.reason == "FieldValueRequired"), "{causes:?}");

    let bad_enum = sandbox(
        "v1beta1",
        "bad",
        json!({"shutdownPolicy": "Sometimes", "shutdownTime": "tomorrow"}),
        &Behaviour::default(),
    );
    let err = sbs.create(&PostParams::default(), &bad_enum).await.expect_err("enum and format");
    let kube::Error::Api(status) = err else { panic!("{err:?}") };
    let causes = status.details.as_ref().map(|d| d.causes.clone()).unwrap_or_default();
    assert!(
        causes.iter().any(|c| c.field == "spec.shutdownPolicy" && c.reason == "FieldValueNotSupported"),
        "{causes:?}"
    );
    assert!(causes.iter().any(|c| c.field == "spec.shutdownTime"), "{causes:?}");

    let pruned = sandbox("v1beta1", "pruned", json!({"notAField": 1}), &Behaviour::default());
    let created = sbs.create(&PostParams::default(), &pruned).await.expect("unknown fields are pruned");
    assert!(created.data["spec"].get("notAField").is_none());
    assert_eq!(created.data["spec"]["operatingMode"], "Running", "defaults applied");
    let strict = PatchParams::default().validation(kube::api::ValidationDirective::Strict);
    let err = sbs.patch("pruned", &strict, &Patch::Merge(json!({"spec": {"notAField": 1}}))).await.expect_err("strict");
    assert!(
        matches!(err, kube::Error::Api(s) if s.code == 400 && s.message.contains("unknown field \"spec.notAField\""))
    );
}
