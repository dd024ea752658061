//! The Job controller (and TTL-after-finished) state machines, observed through kube-rs.

use std::time::Duration;

use crate::common::*;
use embedded_cluster::SandboxVersions;
use embedded_cluster::behaviour::Behaviour;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::conditions::is_deleted;
use serde_json::{Value, json};

fn job(name: &str, spec: Value, knobs: &Behaviour) -> Job {
    let mut s = json!({"backoffLimit": 0, "template": {"metadata": {"annotations": knobs.to_annotations()},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "task", "image": "busybox:1.36"}]}}});
    if let (Some(o), Some(extra)) = (s.as_object_mut(), spec.as_object()) {
        o.extend(extra.clone());
    }
    serde_json::from_value(json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": s}))
        .expect("job")
}

fn has_job_condition(kind: &'static str, reason: Option<&'static str>) -> impl kube::runtime::wait::Condition<Job> {
    move |j: Option<&Job>| {
        j.and_then(|j| j.status.as_ref()).and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
            cs.iter()
                .any(|c| c.type_ == kind && c.status == "True" && reason.is_none_or(|r| c.reason.as_deref() == Some(r)))
        })
    }
}

async fn job_pods(pods: &Api<Pod>, name: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={name}"))).await.expect("list").items
}

#[tokio::test]
async fn a_successful_pod_completes_the_job() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let knobs = Behaviour { run_duration: Some(Duration::from_millis(300)), exit_code: Some(0), ..Default::default() };
    let created = jobs.create(&PostParams::default(), &job("ok", json!({}), &knobs)).await.expect("create");
    let done = wait_for(&jobs, "ok", has_job_condition("Complete", None), "Complete").await.expect("job");
    let status = done.status.expect("status");
    assert_eq!(status.succeeded, Some(1));
    assert!(status.start_time.is_some() && status.completion_time.is_some());
    let pods = job_pods(&pods, "ok").await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    let uid = created.uid().expect("uid");
    assert_eq!(pod.labels().get("batch.kubernetes.io/controller-uid"), Some(&uid));
    assert_eq!(pod.labels().get("job-name").map(String::as_str), Some("ok"));
    assert!(pod.owner_references().iter().any(|o| o.uid == uid && o.controller == Some(true)));
    assert_eq!(pod.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded"));
}

#[tokio::test]
async fn a_failed_pod_exceeds_backoff_limit_zero() {
    let c = full_cluster(SandboxVersions::Both).await;
    let jobs: Api<Job> = Api::namespaced(c.client().await.expect("client"), "default");
    let knobs = Behaviour { run_duration: Some(Duration::from_millis(100)), exit_code: Some(2), ..Default::default() };
    jobs.create(&PostParams::default(), &job("bad", json!({}), &knobs)).await.expect("create");
    let failed =
        wait_for(&jobs, "bad", has_job_condition("Failed", Some("BackoffLimitExceeded")), "Failed").await.expect("job");
    assert_eq!(failed.status.and_then(|s| s.failed), Some(1));
}

#[tokio::test]
async fn active_deadline_fails_the_job_and_stops_its_pods() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    jobs.create(&PostParams::default(), &job("slow", json!({"activeDeadlineSeconds": 600}), &Behaviour::default()))
        .await
        .expect("create");
    wait_for(
        &jobs,
        "slow",
        |j: Option<&Job>| j.and_then(|j| j.status.as_ref()).and_then(|s| s.ready) == Some(1),
        "a ready pod",
    )
    .await;
    c.clock().advance(Duration::from_secs(601));
    wait_for(&jobs, "slow", has_job_condition("Failed", Some("DeadlineExceeded")), "DeadlineExceeded").await;
    eventually("the job's pods to stop", || async {
        job_pods(&pods, "slow").await.iter().all(|p| {
            p.metadata.deletion_timestamp.is_some()
                || p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed")
        })
    })
    .await;
}

#[tokio::test]
async fn ttl_after_finished_deletes_job_and_pods() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let knobs = Behaviour { run_duration: Some(Duration::from_millis(100)), ..Default::default() };
    let created = jobs
        .create(&PostParams::default(), &job("ttl", json!({"ttlSecondsAfterFinished": 900}), &knobs))
        .await
        .expect("create");
    wait_for(&jobs, "ttl", has_job_condition("Complete", None), "Complete").await;
    c.clock().advance(Duration::from_secs(901));
    wait_for(&jobs, "ttl", is_deleted(&created.uid().expect("uid")), "TTL deletion").await;
    eventually("pods collected", || async { job_pods(&pods, "ttl").await.is_empty() }).await;
}

#[tokio::test]
async fn suspend_holds_pods_back() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    jobs.create(&PostParams::default(), &job("held", json!({"suspend": true}), &Behaviour::default()))
        .await
        .expect("create");
    wait_for(&jobs, "held", has_job_condition("Suspended", None), "Suspended").await;
    assert!(job_pods(&pods, "held").await.is_empty());
    jobs.patch("held", &PatchParams::default(), &Patch::Merge(json!({"spec": {"suspend": false}})))
        .await
        .expect("resume");
    wait_for(
        &jobs,
        "held",
        |j: Option<&Job>| j.and_then(|j| j.status.as_ref()).and_then(|s| s.active) == Some(1),
        "an active pod",
    )
    .await;
}

/// The controller finds a Job's pods by its selector (the controller-uid label), as
/// kube-controller-manager does: a pod outside the selector is not the Job's to count or stop,
/// whatever its ownerReferences say.
#[tokio::test]
async fn a_pod_outside_the_jobs_selector_is_not_the_jobs() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let created = jobs
        .create(&PostParams::default(), &job("held", json!({"suspend": true}), &Behaviour::default()))
        .await
        .expect("create");
    wait_for(&jobs, "held", has_job_condition("Suspended", None), "Suspended").await;
    let uid = created.uid().expect("uid");
    let stray: Pod = serde_json::from_value(json!({
        "metadata": {"name": "stray", "ownerReferences": [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "held", "uid": uid, "controller": true}]},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "task", "image": "busybox:1.36"}]}
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &stray).await.expect("create the stray pod");
    // A suspended Job deletes its active pods; give the controller time to (wrongly) do so.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let still = pods.get_opt("stray").await.expect("read the stray pod");
    assert!(
        still.is_some_and(|p| p.metadata.deletion_timestamp.is_none()),
        "the suspended Job stopped a pod it does not select"
    );
    let status = jobs.get("held").await.expect("job").status.unwrap_or_default();
    assert_eq!(status.active.unwrap_or(0), 0, "{status:?}");
}

#[tokio::test]
async fn the_controllers_follow_the_servers_version() {
    use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster};
    use k8s_openapi::api::core::v1::Node;
    let types = |j: &Job| -> Vec<String> {
        j.status.iter().flat_map(|s| s.conditions.iter().flatten()).map(|c| c.type_.clone()).collect()
    };
    let knobs = Behaviour { run_duration: Some(Duration::from_millis(100)), exit_code: Some(0), ..Default::default() };
    for (minor, expected) in [(28, vec!["Complete"]), (33, vec!["SuccessCriteriaMet", "Complete"])] {
        let c = EmbeddedCluster::start(ClusterConfig {
            controllers: vec![ControllerKind::Kubelet, ControllerKind::Job],
            reported_minor_version: minor,
            ..Default::default()
        })
        .await
        .expect("start");
        let client = c.client().await.expect("client");
        let jobs: Api<Job> = Api::namespaced(client.clone(), "default");
        jobs.create(&PostParams::default(), &job("ok", json!({}), &knobs)).await.expect("create");
        let done = wait_for(&jobs, "ok", has_job_condition("Complete", None), "Complete").await.expect("job");
        assert_eq!(types(&done), expected, "1.{minor}");
        let status = serde_json::to_value(done.status.clone().unwrap_or_default()).unwrap_or_default();
        // 1.28's Job status has no terminating count (JobPodReplacementPolicy was alpha).
        assert_eq!(status.get("terminating").is_some(), minor >= 29, "1.{minor}: {status}");
        let nodes: Api<Node> = Api::all(client);
        let node = nodes.list(&ListParams::default()).await.expect("nodes").items.into_iter().next().expect("a node");
        let version = node.status.and_then(|s| s.node_info).map(|i| i.kubelet_version).unwrap_or_default();
        assert_eq!(version, format!("v1.{minor}.0"), "the node reports its server's version");
    }
}
