//! The scheduler and kubelet: pod phases, conditions and the behaviour knobs.

use std::time::Duration;

use crate::common::*;
use embedded_cluster::SandboxVersions;
use embedded_cluster::behaviour::Behaviour;
use k8s_openapi::api::core::v1::{Event, Node, Pod, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::runtime::conditions::is_deleted;
use kube::runtime::wait::Condition;
use serde_json::{Value, json};

fn pod(name: &str, knobs: &Behaviour, spec_extra: Value) -> Pod {
    let mut spec = json!({"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]});
    if let (Some(o), Some(extra)) = (spec.as_object_mut(), spec_extra.as_object()) {
        o.extend(extra.clone());
    }
    serde_json::from_value(json!({"metadata": {"name": name, "annotations": knobs.to_annotations()}, "spec": spec}))
        .expect("pod")
}

fn waiting_reason(reason: &'static str) -> impl Condition<Pod> {
    move |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.container_statuses.as_ref()).is_some_and(|cs| {
            cs.iter().any(|c| {
                c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.as_deref()) == Some(reason)
            })
        })
    }
}

fn pod_condition(kind: &'static str, status: &'static str) -> impl Condition<Pod> {
    move |p: Option<&Pod>| {
        p.and_then(|p| p.status.as_ref())
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == kind && c.status == status))
    }
}

fn phase(p: &'static str) -> impl Condition<Pod> {
    move |pod: Option<&Pod>| pod.and_then(|x| x.status.as_ref()).and_then(|s| s.phase.as_deref()) == Some(p)
}

#[tokio::test]
async fn pods_are_scheduled_started_and_ready() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(&PostParams::default(), &pod("p", &Behaviour::default(), json!({}))).await.expect("create");
    let ready = wait_for(&pods, "p", pod_condition("Ready", "True"), "Ready").await.expect("pod");
    let node = ready.spec.as_ref().and_then(|s| s.node_name.clone()).expect("bound");
    let status = ready.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert!(status.pod_ip.is_some() && status.start_time.is_some());
    let nodes: Api<Node> = Api::all(client);
    nodes.get(&node).await.expect("the node is registered");
    let binds = c.requests().entries().into_iter().filter(|e| e.subresource == "binding" && e.name == "p").count();
    assert_eq!(binds, 1, "the scheduler binds through pods/binding");
}

#[tokio::test]
async fn a_missing_secret_blocks_start_until_it_appears() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let spec =
        json!({"containers": [{"name": "c", "image": "busybox", "envFrom": [{"secretRef": {"name": "creds"}}]}]});
    pods.create(&PostParams::default(), &pod("needs-secret", &Behaviour::default(), spec)).await.expect("create");
    wait_for(&pods, "needs-secret", waiting_reason("CreateContainerConfigError"), "CreateContainerConfigError").await;
    let secrets: Api<Secret> = Api::namespaced(client, "default");
    secrets
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "creds"}, "stringData": {"K": "v"}})).expect("secret"),
        )
        .await
        .expect("secret");
    wait_for(&pods, "needs-secret", phase("Running"), "Running once the secret exists").await;
}

/// A kubelet whose Secret cache lags a new pod (`config-sync-delay`) holds its container with
/// the real kubelet's words, though the Secret exists, and starts it once the cache syncs.
#[tokio::test]
async fn a_lagging_secret_cache_holds_the_container_with_the_kubelets_words() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = json!({"metadata": {"name": "creds"}, "stringData": {"K": "v"}});
    secrets.create(&PostParams::default(), &serde_json::from_value(secret).expect("secret")).await.expect("secret");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let spec =
        json!({"containers": [{"name": "c", "image": "busybox", "envFrom": [{"secretRef": {"name": "creds"}}]}]});
    let lagging = Behaviour { config_sync_delay: Some(Duration::from_secs(3)), ..Default::default() };
    pods.create(&PostParams::default(), &pod("lagging", &lagging, spec)).await.expect("create");
    let held =
        wait_for(&pods, "lagging", waiting_reason("CreateContainerConfigError"), "CreateContainerConfigError").await;
    let message = held
        .and_then(|p| p.status)
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.into_iter().next())
        .and_then(|c| c.state)
        .and_then(|s| s.waiting)
        .and_then(|w| w.message);
    assert_eq!(message.as_deref(), Some("failed to sync secret cache: timed out waiting for the condition"));
    wait_for(&pods, "lagging", phase("Running"), "Running once the cache syncs").await;
}

/// The scheduler and the kubelet record Events as upstream does: where the pod went, its
/// container's start, why it waits (a missing Secret, no node that fits), and its stop.
#[tokio::test]
async fn the_scheduler_and_the_kubelet_record_events() {
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client, "default");
    let of = |pod: &'static str| {
        let events = events.clone();
        async move {
            let params = ListParams::default().fields(&format!("involvedObject.name={pod}"));
            let listed = events.list(&params).await.expect("events").items;
            listed
                .into_iter()
                .map(|e| {
                    let source = e.source.and_then(|s| s.component).unwrap_or_default();
                    (e.reason.unwrap_or_default(), e.type_.unwrap_or_default(), source, e.message.unwrap_or_default())
                })
                .collect::<Vec<_>>()
        }
    };
    let has = |events: &[(String, String, String, String)], reason: &str, type_: &str, source: &str| {
        events.iter().any(|(r, t, s, _)| r == reason && t == type_ && s == source)
    };

    pods.create(&PostParams::default(), &pod("ev", &Behaviour::default(), json!({}))).await.expect("create");
    wait_for(&pods, "ev", phase("Running"), "Running").await;
    eventually("the start's events", || async {
        let seen = of("ev").await;
        ["Pulled", "Created", "Started"].iter().all(|r| has(&seen, r, "Normal", "kubelet"))
            && has(&seen, "Scheduled", "Normal", "default-scheduler")
    })
    .await;
    pods.delete("ev", &DeleteParams::default()).await.expect("delete");
    eventually("the stop's event", || async { has(&of("ev").await, "Killing", "Normal", "kubelet") }).await;

    let spec = json!({"containers": [{"name": "c", "image": "busybox", "envFrom": [{"secretRef": {"name": "gone"}}]}]});
    pods.create(&PostParams::default(), &pod("ev-secret", &Behaviour::default(), spec)).await.expect("create");
    eventually("the missing Secret's event", || async {
        of("ev-secret").await.iter().any(|(r, t, s, m)| {
            r == "Failed" && t == "Warning" && s == "kubelet" && m == "Error: secret \"gone\" not found"
        })
    })
    .await;

    let stuck = Behaviour { unschedulable: true, ..Default::default() };
    pods.create(&PostParams::default(), &pod("ev-stuck", &stuck, json!({}))).await.expect("create");
    eventually("the scheduler's failure event", || async {
        has(&of("ev-stuck").await, "FailedScheduling", "Warning", "default-scheduler")
    })
    .await;
}

#[tokio::test]
async fn image_pull_failures_back_off() {
    let c = full_cluster(SandboxVersions::Both).await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    pods.create(
        &PostParams::default(),
        &pod("pull", &Behaviour { image_pull_fails: true, ..Default::default() }, json!({})),
    )
    .await
    .expect("create");
    wait_for(&pods, "pull", waiting_reason("ErrImagePull"), "ErrImagePull").await;
    c.clock().advance(Duration::from_secs(30));
    wait_for(&pods, "pull", waiting_reason("ImagePullBackOff"), "ImagePullBackOff").await;
}

#[tokio::test]
async fn unschedulable_pods_say_why() {
    let c = full_cluster(SandboxVersions::Both).await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    pods.create(
        &PostParams::default(),
        &pod("nowhere", &Behaviour { unschedulable: true, ..Default::default() }, json!({})),
    )
    .await
    .expect("create");
    let p = wait_for(&pods, "nowhere", pod_condition("PodScheduled", "False"), "Unschedulable").await.expect("pod");
    let cond = p
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.type_ == "PodScheduled")
        .expect("condition");
    assert_eq!(cond.reason.as_deref(), Some("Unschedulable"));
    let selector = json!({"nodeSelector": {"disk": "nvme"}});
    pods.create(&PostParams::default(), &pod("picky", &Behaviour::default(), selector)).await.expect("create");
    wait_for(&pods, "picky", pod_condition("PodScheduled", "False"), "no node matches the selector").await;
}

#[tokio::test]
async fn crash_loops_and_exit_codes() {
    let c = full_cluster(SandboxVersions::Both).await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    let looping =
        pod("loop", &Behaviour { crash_loop: true, ..Default::default() }, json!({"restartPolicy": "Always"}));
    pods.create(&PostParams::default(), &looping).await.expect("create");
    let p = wait_for(&pods, "loop", waiting_reason("CrashLoopBackOff"), "CrashLoopBackOff").await.expect("pod");
    let restarts =
        p.status.and_then(|s| s.container_statuses).and_then(|cs| cs.first().map(|c| c.restart_count)).unwrap_or(0);
    assert!(restarts >= 1, "restartCount {restarts}");

    let exits = pod(
        "exit",
        &Behaviour { exit_code: Some(7), run_duration: Some(Duration::from_millis(100)), ..Default::default() },
        json!({}),
    );
    pods.create(&PostParams::default(), &exits).await.expect("create");
    let p = wait_for(&pods, "exit", phase("Failed"), "Failed").await.expect("pod");
    let code = p
        .status
        .and_then(|s| s.container_statuses)
        .and_then(|cs| cs.first().and_then(|c| c.state.clone()))
        .and_then(|s| s.terminated)
        .map(|t| t.exit_code);
    assert_eq!(code, Some(7));
}

#[tokio::test]
async fn evictions_and_graceful_deletion() {
    let c = full_cluster(SandboxVersions::Both).await;
    let pods: Api<Pod> = Api::namespaced(c.client().await.expect("client"), "default");
    pods.create(
        &PostParams::default(),
        &pod("evicted", &Behaviour { evict_after: Some(Duration::from_millis(200)), ..Default::default() }, json!({})),
    )
    .await
    .expect("create");
    let p = wait_for(&pods, "evicted", phase("Failed"), "eviction").await.expect("pod");
    assert_eq!(p.status.and_then(|s| s.reason).as_deref(), Some("Evicted"));

    pods.create(&PostParams::default(), &pod("graceful", &Behaviour::default(), json!({}))).await.expect("create");
    let running = wait_for(&pods, "graceful", phase("Running"), "Running").await.expect("pod");
    let res = pods.delete("graceful", &DeleteParams::default()).await.expect("delete");
    assert!(res.is_left(), "a running pod terminates gracefully first");
    wait_for(&pods, "graceful", is_deleted(&running.uid().expect("uid")), "the kubelet to finish the deletion").await;
    assert!(pods.list(&ListParams::default()).await.expect("list").items.iter().all(|p| p.name_any() != "graceful"));
}

fn scheduled_message(p: &Pod) -> Option<String> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "PodScheduled")?.message.clone()
}

fn with_claim(name: &str, claim: &str) -> Pod {
    pod(
        name,
        &Behaviour::default(),
        json!({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]}),
    )
}

#[tokio::test]
async fn a_pod_waits_for_its_claim_to_be_bound() {
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let c = full_cluster(SandboxVersions::Both).await;
    let client = c.client().await.expect("client");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client, "default");

    pods.create(&PostParams::default(), &with_claim("orphan", "absent")).await.expect("create");
    let waiting = wait_for(&pods, "orphan", pod_condition("PodScheduled", "False"), "unschedulable").await;
    assert_eq!(
        waiting.as_ref().and_then(scheduled_message).as_deref(),
        Some(
            "0/1 nodes are available: persistentvolumeclaim \"absent\" not found. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
    );

    let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    .expect("claim");
    claims.create(&PostParams::default(), &claim).await.expect("claim");
    let mark = c.requests().mark();
    pods.create(&PostParams::default(), &with_claim("user", "data")).await.expect("create");
    wait_for(&pods, "user", phase("Running"), "Running").await;
    let bound = claims.get("data").await.expect("claim");
    assert_eq!(bound.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Bound"));
    assert_eq!(
        bound.annotations().get("volume.kubernetes.io/selected-node").map(String::as_str),
        Some("embedded-node-1"),
        "bound where the pod goes"
    );
    let requests = c.requests().since(mark);
    let claim_bound = requests.iter().position(|e| e.resource == "persistentvolumeclaims" && e.subresource == "status");
    let pod_bound = requests.iter().position(|e| e.subresource == "binding" && e.name == "user");
    assert!(
        claim_bound < pod_bound && claim_bound.is_some(),
        "the claim is bound before the pod: {claim_bound:?} {pod_bound:?}"
    );
}

#[tokio::test]
async fn without_a_provisioner_a_pending_claim_keeps_the_pod_unschedulable() {
    use embedded_cluster::controllers::kubelet::KubeletConfig;
    use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster};
    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    let c = EmbeddedCluster::start(ClusterConfig {
        controllers: vec![ControllerKind::Kubelet],
        kubelet: KubeletConfig { provision_volumes: false, ..Default::default() },
        ..Default::default()
    })
    .await
    .expect("start");
    let client = c.client().await.expect("client");
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({"metadata": {"name": "data"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}))
    .expect("claim");
    claims.create(&PostParams::default(), &claim).await.expect("claim");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    pods.create(&PostParams::default(), &with_claim("user", "data")).await.expect("create");
    let waiting = wait_for(&pods, "user", pod_condition("PodScheduled", "False"), "unschedulable").await;
    assert_eq!(
        waiting.as_ref().and_then(scheduled_message).as_deref(),
        Some(
            "0/1 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
    );
}
