//! Claims before binding, as kube-scheduler's VolumeBinding plugin sees them, and the local
//! provisioner of the simulated nodes.
//!
//! A pod whose PersistentVolumeClaim does not exist is unschedulable, and one whose claim is
//! still Pending is not bound until the claim is: the scheduler picks a node, records it on
//! the claim (`volume.kubernetes.io/selected-node`, as for a WaitForFirstConsumer class), and
//! the provisioner binds the claim there (`spec.volumeName`, `status.phase: Bound`, the
//! capacity asked for). Without the provisioner (a cluster that has its own), a Pending claim
//! keeps the pod unschedulable with kube-scheduler's message.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use serde_json::json;

use super::api::{Outcome, classify};
use super::caches::Cache;

/// What a pod's claims allow.
pub(crate) enum Claims {
    /// No claims, or every one Bound (or the claims cannot be seen yet: no wait).
    Ready,
    /// A claim the pod names does not exist.
    Missing(String),
    /// Claims that exist but are not Bound yet.
    Unbound(Vec<Arc<PersistentVolumeClaim>>),
}

/// The state of the claims `pod` mounts.
pub(crate) fn claims(pod: &Pod, cache: &Cache<PersistentVolumeClaim>) -> Claims {
    if !cache.synced() {
        return Claims::Ready;
    }
    let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
    let mut unbound = Vec::new();
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten();
    for claim in volumes.filter_map(|v| v.persistent_volume_claim.as_ref()).map(|c| c.claim_name.as_str()) {
        match cache.store.get(&ObjectRef::new(claim).within(namespace)) {
            None => return Claims::Missing(claim.to_string()),
            Some(pvc) if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound") => {}
            Some(pvc) => unbound.push(pvc),
        }
    }
    if unbound.is_empty() { Claims::Ready } else { Claims::Unbound(unbound) }
}

fn no_preemption(nodes: usize) -> String {
    format!("preemption: 0/{nodes} nodes are available: {nodes} Preemption is not helpful for scheduling.")
}

/// kube-scheduler's message for a claim that does not exist.
pub(crate) fn missing_message(claim: &str, nodes: usize) -> String {
    format!("0/{nodes} nodes are available: persistentvolumeclaim \"{claim}\" not found. {}", no_preemption(nodes))
}

/// kube-scheduler's message for claims nobody binds.
pub(crate) fn unbound_message(nodes: usize) -> String {
    format!("0/{nodes} nodes are available: pod has unbound immediate PersistentVolumeClaims. {}", no_preemption(nodes))
}

/// Binds a Pending claim on `node`: the selected node and the volume on the claim, then its
/// status; a claim gone or changed meanwhile is left to the next pass.
pub(crate) async fn provision(
    client: &kube::Client,
    pvc: &PersistentVolumeClaim,
    node: &str,
) -> anyhow::Result<Outcome> {
    let namespace = pvc.metadata.namespace.as_deref().unwrap_or_default();
    let name = pvc.metadata.name.as_deref().unwrap_or_default();
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), namespace);
    let uid = pvc.metadata.uid.as_deref().unwrap_or_default();
    let volume = format!("pvc-{uid}");
    let spec = pvc.spec.as_ref();
    let storage =
        spec.and_then(|s| s.resources.as_ref()).and_then(|r| r.requests.as_ref()).and_then(|r| r.get("storage"));
    let bind = json!({
        "metadata": {"uid": uid, "annotations": {
            "volume.kubernetes.io/selected-node": node,
            "pv.kubernetes.io/bind-completed": "yes",
            "pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {"volumeName": volume},
    });
    if let Outcome::Moot =
        classify(api.patch(name, &PatchParams::default(), &Patch::Merge(&bind)).await, |p| p.metadata.resource_version)?
    {
        return Ok(Outcome::Moot);
    }
    let status = json!({"status": {
        "phase": "Bound",
        "accessModes": spec.and_then(|s| s.access_modes.clone()).unwrap_or_default(),
        "capacity": {"storage": storage.map(|q| q.0.clone()).unwrap_or_default()},
    }});
    let written = classify(api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await, |p| {
        p.metadata.resource_version
    })?;
    Ok(written)
}
