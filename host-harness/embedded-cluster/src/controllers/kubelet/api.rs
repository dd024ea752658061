//! Every write the scheduler and kubelet make, through the API server like any client.
//!
//! 404 (the object is gone) and 409 (someone else got there first) are ordinary outcomes in a
//! cluster where pods are deleted and re-bound concurrently; callers see them as `Outcome`s,
//! not errors, and simply re-read on their next pass.

use std::time::Duration;

use anyhow::Context as _;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Binding, Node, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client};
use serde_json::{Value, json};

use super::node;

/// Registration attempts before `run` gives up (the API server may still be starting).
const REGISTER_ATTEMPTS: u32 = 8;
/// First pause between registration attempts; it doubles.
const REGISTER_BACKOFF: Duration = Duration::from_millis(100);

/// How a write ended when it did not fail.
#[derive(Debug, PartialEq)]
pub(crate) enum Outcome {
    /// Done; for status writes, the resource version the server gave the object.
    Done(Option<String>),
    /// The object is gone (404) or changed under us (409): nothing to do until the caches
    /// show the new state.
    Moot,
}

/// A write's result: done (with the new resourceVersion), moot (404 or 409), or an error.
pub(crate) fn classify<T>(result: kube::Result<T>, version: impl FnOnce(T) -> Option<String>) -> kube::Result<Outcome> {
    match result {
        Ok(value) => Ok(Outcome::Done(version(value))),
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(Outcome::Moot),
        Err(error) => Err(error),
    }
}

fn pods(client: &Client, pod: &Pod) -> Api<Pod> {
    Api::namespaced(client.clone(), pod.metadata.namespace.as_deref().unwrap_or("default"))
}

fn name(pod: &Pod) -> &str {
    pod.metadata.name.as_deref().unwrap_or_default()
}

/// Binds `pod` to `node` through the pods/binding subresource, as kube-scheduler does; the
/// API server sets `spec.nodeName` and `PodScheduled=True`.
pub(crate) async fn bind(client: &Client, pod: &Pod, node: &str) -> anyhow::Result<Outcome> {
    let binding = Binding {
        metadata: ObjectMeta {
            name: pod.metadata.name.clone(),
            namespace: pod.metadata.namespace.clone(),
            uid: pod.metadata.uid.clone(),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".to_string()),
            kind: Some("Node".to_string()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    let result =
        pods(client, pod).create_subresource::<_, Value>("binding", name(pod), &PostParams::default(), &binding).await;
    // The answer is a Status that nothing here reads; a server that answers with something
    // else has still bound the pod.
    let result = match result {
        Err(kube::Error::SerdeError(_)) => Ok(Value::Null),
        other => other,
    };
    classify(result, |_| None).with_context(|| format!("binding pod {} to node {node}", name(pod)))
}

/// Merge-patches pods/status.
pub(crate) async fn patch_pod_status(client: &Client, pod: &Pod, patch: &Value) -> anyhow::Result<Outcome> {
    let result = pods(client, pod).patch_status(name(pod), &PatchParams::default(), &Patch::Merge(patch)).await;
    classify(result, |p| p.metadata.resource_version)
        .with_context(|| format!("writing the status of pod {}", name(pod)))
}

/// An ordinary graceful DELETE (the pod's default grace period), as a person would issue.
pub(crate) async fn delete_pod(client: &Client, pod: &Pod) -> anyhow::Result<Outcome> {
    let result = pods(client, pod).delete(name(pod), &DeleteParams::default()).await;
    classify(result, |_| None).with_context(|| format!("deleting pod {}", name(pod)))
}

/// The kubelet's final DELETE once containers are stopped: grace period 0, guarded by the UID
/// so a new pod of the same name is never removed by mistake.
pub(crate) async fn finish_deletion(client: &Client, pod: &Pod) -> anyhow::Result<Outcome> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions { uid: pod.metadata.uid.clone(), resource_version: None }),
        ..Default::default()
    };
    let result = pods(client, pod).delete(name(pod), &params).await;
    classify(result, |_| None).with_context(|| format!("finishing the deletion of pod {}", name(pod)))
}

/// Merge-patches nodes/status.
pub(crate) async fn patch_node_status(client: &Client, name: &str, patch: &Value) -> anyhow::Result<Outcome> {
    let result =
        Api::<Node>::all(client.clone()).patch_status(name, &PatchParams::default(), &Patch::Merge(patch)).await;
    classify(result, |n| n.metadata.resource_version).with_context(|| format!("writing the status of node {name}"))
}

/// Creates the node, or refreshes the labels of one that exists, then writes its status
/// (servers may drop the status of a create).
pub(crate) async fn register_node(
    client: &Client,
    name: &str,
    index: usize,
    now: Timestamp,
    version: &str,
) -> anyhow::Result<()> {
    let api = Api::<Node>::all(client.clone());
    let node = node::node_object(name, index, now, version);
    match api.create(&PostParams::default(), &node).await {
        Ok(_) => tracing::info!(node = name, "registered node"),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            let patch = json!({ "metadata": { "labels": node::labels(name) } });
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("updating the labels of existing node {name}"))?;
            tracing::info!(node = name, "node already registered; labels refreshed");
        }
        Err(error) => return Err(error).with_context(|| format!("creating node {name}")),
    }
    let patch = json!({ "status": node.status });
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .with_context(|| format!("writing the initial status of node {name}"))?;
    Ok(())
}

/// Registers every node, retrying while the API server comes up; fails after
/// `REGISTER_ATTEMPTS` tries, since a kubelet without its node is useless.
pub(crate) async fn register_nodes(
    client: &Client,
    names: &[String],
    now: impl Fn() -> Timestamp,
    version: &str,
) -> anyhow::Result<()> {
    for (index, name) in names.iter().enumerate() {
        let mut pause = REGISTER_BACKOFF;
        for attempt in 1..=REGISTER_ATTEMPTS {
            match register_node(client, name, index, now(), version).await {
                Ok(()) => break,
                Err(error) if attempt < REGISTER_ATTEMPTS => {
                    tracing::warn!(node = %name, attempt, error = %format!("{error:#}"), "node registration failed; retrying");
                    tokio::time::sleep(pause).await;
                    pause = pause.saturating_mul(2);
                }
                Err(error) => {
                    return Err(error).context(format!("giving up on registering node {name}"));
                }
            }
        }
    }
    Ok(())
}
