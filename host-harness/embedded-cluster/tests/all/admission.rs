//! What a real namespace has besides its objects: ResourceQuota (admission and status),
//! LimitRange (container defaults and bounds), NetworkPolicy storage, and `pods/log`, through
//! kube-rs with no controllers running.

use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use k8s_openapi::api::core::v1::{LimitRange, Namespace, Pod, ResourceQuota, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{Api, DeleteParams, LogParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

async fn cluster_with_namespace(ns: &str) -> (EmbeddedCluster, kube::Client) {
    let c = EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..Default::default() })
        .await
        .expect("start the embedded cluster");
    let client = c.client().await.expect("client");
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces.create(&PostParams::default(), &typed(json!({"metadata": {"name": ns}}))).await.expect("namespace");
    (c, client)
}

fn typed<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
}

fn forbidden<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> String {
    match r {
        Err(kube::Error::Api(s)) if s.code == 403 && s.reason == "Forbidden" => s.message,
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

fn pod(name: &str, resources: Value) -> Pod {
    typed(json!({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "c", "image": "busybox:1.36", "resources": resources}]}}))
}

#[tokio::test]
async fn an_object_count_quota_refuses_the_create_past_it_and_keeps_its_status() {
    let (_c, client) = cluster_with_namespace("team").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "team");
    let secrets: Api<Secret> = Api::namespaced(client, "team");
    quotas
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "q"}, "spec": {"hard": {"count/secrets": "2"}}})),
        )
        .await
        .expect("quota");
    let secret = |name: &str| typed::<Secret>(json!({"metadata": {"name": name}, "stringData": {"k": "v"}}));
    for name in ["s1", "s2"] {
        secrets.create(&PostParams::default(), &secret(name)).await.expect("within the quota");
    }
    assert_eq!(
        forbidden(secrets.create(&PostParams::default(), &secret("s3")).await),
        "secrets \"s3\" is forbidden: exceeded quota: q, requested: count/secrets=1, used: count/secrets=2, limited: count/secrets=2"
    );
    let status = quotas.get("q").await.expect("quota").status.expect("status");
    let used = status.used.unwrap_or_default();
    assert_eq!(used.get("count/secrets").map(|q| q.0.as_str()), Some("2"));
    secrets.delete("s1", &DeleteParams::default()).await.expect("delete");
    let used = quotas.get("q").await.expect("quota").status.and_then(|s| s.used).unwrap_or_default();
    assert_eq!(used.get("count/secrets").map(|q| q.0.as_str()), Some("1"), "a removal frees its share");
    secrets.create(&PostParams::default(), &secret("s3")).await.expect("room again");
}

#[tokio::test]
async fn a_compute_quota_needs_requests_and_refuses_past_its_hard_limit() {
    let (_c, client) = cluster_with_namespace("team").await;
    let quotas: Api<ResourceQuota> = Api::namespaced(client.clone(), "team");
    let pods: Api<Pod> = Api::namespaced(client, "team");
    quotas
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "compute"}, "spec": {"hard": {"requests.cpu": "1"}}})),
        )
        .await
        .expect("quota");
    assert_eq!(
        forbidden(pods.create(&PostParams::default(), &pod("bare", json!({}))).await),
        "pods \"bare\" is forbidden: failed quota: compute: must specify requests.cpu for: c"
    );
    let requests = json!({"requests": {"cpu": "600m"}});
    pods.create(&PostParams::default(), &pod("a", requests.clone())).await.expect("within the quota");
    assert_eq!(
        forbidden(pods.create(&PostParams::default(), &pod("b", requests.clone())).await),
        "pods \"b\" is forbidden: exceeded quota: compute, requested: requests.cpu=600m, used: requests.cpu=600m, limited: requests.cpu=1"
    );
    let used =
        |q: ResourceQuota| q.status.and_then(|s| s.used).unwrap_or_default().get("requests.cpu").map(|v| v.0.clone());
    assert_eq!(used(quotas.get("compute").await.expect("quota")), Some("600m".into()));
    // A terminal pod uses nothing: the status follows the pod's phase, and there is room again.
    pods.patch_status("a", &PatchParams::default(), &Patch::Merge(json!({"status": {"phase": "Succeeded"}})))
        .await
        .expect("pod finished");
    assert_eq!(used(quotas.get("compute").await.expect("quota")), Some("0".into()));
    pods.create(&PostParams::default(), &pod("b", requests)).await.expect("room after the first pod finished");
}

#[tokio::test]
async fn a_limit_range_defaults_containers_and_bounds_them() {
    let (_c, client) = cluster_with_namespace("team").await;
    let ranges: Api<LimitRange> = Api::namespaced(client.clone(), "team");
    let pods: Api<Pod> = Api::namespaced(client, "team");
    ranges
        .create(
            &PostParams::default(),
            &typed(json!({"metadata": {"name": "limits"}, "spec": {"limits": [
                {"type": "Container", "default": {"cpu": "500m"}, "max": {"cpu": "1"}}]}})),
        )
        .await
        .expect("limit range");
    let created = pods.create(&PostParams::default(), &pod("defaulted", json!({}))).await.expect("pod");
    let resources = created.spec.expect("spec").containers[0].resources.clone().expect("resources");
    let cpu = |m: Option<
        std::collections::BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    >| { m.and_then(|m| m.get("cpu").map(|q| q.0.clone())) };
    assert_eq!(cpu(resources.limits), Some("500m".into()));
    assert_eq!(cpu(resources.requests), Some("500m".into()), "the default limit is also the default request");
    assert_eq!(
        forbidden(pods.create(&PostParams::default(), &pod("big", json!({"limits": {"cpu": "2"}}))).await),
        "pods \"big\" is forbidden: maximum cpu usage per Container is 1, but limit is 2"
    );
}

#[tokio::test]
async fn network_policies_are_served() {
    let (_c, client) = cluster_with_namespace("team").await;
    let policies: Api<NetworkPolicy> = Api::namespaced(client, "team");
    let deny: NetworkPolicy = typed(json!({"metadata": {"name": "deny-all"}, "spec": {"podSelector": {},
        "policyTypes": ["Ingress", "Egress"]}}));
    policies.create(&PostParams::default(), &deny).await.expect("create");
    let got = policies.get("deny-all").await.expect("get");
    assert_eq!(got.spec.and_then(|s| s.policy_types), Some(vec!["Ingress".to_string(), "Egress".to_string()]));
}

#[tokio::test]
async fn pod_logs_answer_as_the_kubelet_would() {
    let (_c, client) = cluster_with_namespace("team").await;
    let pods: Api<Pod> = Api::namespaced(client, "team");
    pods.create(&PostParams::default(), &pod("p", json!({}))).await.expect("pod");
    let err = pods.logs("p", &LogParams::default()).await.expect_err("not started");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message == "container \"c\" in pod \"p\" is waiting to start: ContainerCreating"),
        "{err:?}"
    );
    let running = json!({"status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": true,
        "restartCount": 0, "image": "busybox:1.36", "imageID": "", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]}});
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(running)).await.expect("status");
    assert_eq!(pods.logs("p", &LogParams::default()).await.expect("log"), "");
    let other = LogParams { container: Some("other".into()), ..Default::default() };
    let err = pods.logs("p", &other).await.expect_err("no such container");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message == "container other is not valid for pod p"),
        "{err:?}"
    );

    // An init container's log is asked for by name, and its status is among the init ones.
    let mut with_init = pod("q", json!({}));
    with_init.spec.as_mut().expect("spec").init_containers =
        Some(vec![typed(json!({"name": "setup", "image": "busybox:1.36"}))]);
    pods.create(&PostParams::default(), &with_init).await.expect("pod");
    let setup = LogParams { container: Some("setup".into()), ..Default::default() };
    let err = pods.logs("q", &setup).await.expect_err("not started");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 400 && s.message == "container \"setup\" in pod \"q\" is waiting to start: ContainerCreating"),
        "{err:?}"
    );
    let done = json!({"status": {"phase": "Pending", "initContainerStatuses": [{"name": "setup", "ready": false,
        "restartCount": 0, "image": "busybox:1.36", "imageID": "",
        "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}});
    pods.patch_status("q", &PatchParams::default(), &Patch::Merge(done)).await.expect("status");
    assert_eq!(pods.logs("q", &setup).await.expect("the init container's log"), "");
}
