//! What the tests share: an embedded cluster without controllers, clients, a `KubeHost` over
//! them, and request builders.

use std::sync::Arc;
use std::time::Duration;

use embedded_cluster::{ADMIN_USER, ClusterConfig, EmbeddedCluster};
use provider_host::bindings::kube::{DeleteOptions, ListOptions, ResourceType, WatchOptions};
use provider_host::policy::{AccessVerb, Policy};
use provider_host::{KubeHost, ProviderHost, client_from_config};
use serde_json::{Value, json};

/// The namespace every test works in.
pub const NS: &str = "default";

pub async fn cluster_with(config: ClusterConfig) -> EmbeddedCluster {
    EmbeddedCluster::start(ClusterConfig { controllers: Vec::new(), ..config }).await.expect("start the cluster")
}

pub async fn cluster() -> EmbeddedCluster {
    cluster_with(ClusterConfig::default()).await
}

pub async fn client_for(c: &EmbeddedCluster, user: &str) -> kube::Client {
    let yaml = c.kubeconfig(user).expect("kubeconfig");
    kube_client(&yaml).await
}

pub async fn kube_client(yaml: &str) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).expect("parse kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await.expect("config");
    client_from_config(config).expect("client")
}

pub async fn host_with(c: &EmbeddedCluster, policy: Policy, timeout: Duration) -> KubeHost {
    KubeHost::new(client_for(c, ADMIN_USER).await, Arc::new(policy), timeout)
}

/// The provider's default policy plus list, watch and discovery on Jobs: these tests exercise
/// the kube implementation with Jobs, which the provider itself only gets, creates, patches and
/// deletes (readiness watches their pods).
pub fn test_policy() -> Policy {
    let mut policy = Policy::kubernetes_default([NS]);
    for rule in policy.resources.iter_mut().filter(|r| r.plural == "jobs") {
        rule.verbs.extend([AccessVerb::List, AccessVerb::Watch, AccessVerb::Discovery]);
    }
    policy
}

pub async fn host(c: &EmbeddedCluster) -> KubeHost {
    host_with(c, test_policy(), Duration::from_secs(10)).await
}

pub fn rt(group: &str, version: &str, plural: &str) -> ResourceType {
    ResourceType { group: group.into(), version: version.into(), plural: plural.into() }
}

pub fn secrets() -> ResourceType {
    rt("", "v1", "secrets")
}

pub fn jobs() -> ResourceType {
    rt("batch", "v1", "jobs")
}

pub fn secret(name: &str, labels: Value) -> String {
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": labels},
        "stringData": {"TOKEN": "hunter2"}})
    .to_string()
}

/// A Job whose pod meets the host's default pod-security ceiling (Kubernetes' restricted level).
pub fn job(name: &str, labels: Value) -> String {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"spec": {"restartPolicy": "Never", "automountServiceAccountToken": false,
            "securityContext": restricted_pod_security(),
            "containers": [{"name": "main", "image": "busybox:1.36", "securityContext": restricted_container_security()}]}}}})
    .to_string()
}

/// A pod `securityContext` the restricted level accepts.
pub fn restricted_pod_security() -> Value {
    json!({"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}})
}

/// A container `securityContext` the restricted level accepts.
pub fn restricted_container_security() -> Value {
    json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}})
}

pub fn no_delete_options() -> DeleteOptions {
    DeleteOptions {
        propagation: None,
        precondition_uid: None,
        precondition_resource_version: None,
        grace_period_seconds: None,
    }
}

pub fn list_options() -> ListOptions {
    ListOptions {
        label_selector: None,
        field_selector: None,
        limit: None,
        continue_token: None,
        resource_version: None,
    }
}

pub fn watch_options(resource_version: Option<String>, allow_bookmarks: bool) -> WatchOptions {
    WatchOptions {
        label_selector: None,
        field_selector: None,
        resource_version,
        timeout_seconds: None,
        allow_bookmarks,
    }
}

pub fn parse(text: &str) -> Value {
    serde_json::from_str(text).expect("JSON")
}

/// The requests the admin made since a mark, as `verb resource name`.
pub fn requests_since(c: &EmbeddedCluster, mark: u64) -> Vec<String> {
    requests_by(c, ADMIN_USER, mark)
}

/// The requests `user` made since a mark, as `verb resource name`.
pub fn requests_by(c: &EmbeddedCluster, user: &str, mark: u64) -> Vec<String> {
    c.requests()
        .since(mark)
        .into_iter()
        .filter(|e| e.user == user)
        .map(|e| format!("{} {} {}", e.verb, e.resource, e.name))
        .collect()
}

/// Waits until `done` holds, checking every 20 ms; fails saying what it waited for after 60 s.
pub async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "waited 60 s for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits for the host's calls, their teardowns and the instance made ahead after them (all
/// follow a call's result), so what the host holds after a call is read once they are done.
pub async fn settle(host: &ProviderHost) {
    let within = Duration::from_secs(120);
    tokio::time::timeout(within, host.settled())
        .await
        .unwrap_or_else(|_| panic!("the host's calls and their teardowns did not finish within {within:?}"));
}
