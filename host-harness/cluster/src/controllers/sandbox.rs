//! The agent-sandbox controller for the `Sandbox` custom resource (v1beta1 and v1alpha1).
//!
//! Decisions live in pure functions ([`plan`]) so they can be tested without a cluster; the
//! thin I/O loop in `reconcile` observes the cluster, asks the plan what to do, and does it.

pub mod model;
pub mod plan;
mod pod_index;
mod reconcile;
pub mod resources;
pub mod status;
#[cfg(test)]
mod tests;

pub use reconcile::run;

/// API group of the `Sandbox` resource.
pub const GROUP: &str = "agents.x-k8s.io";
/// Kind of the resource this controller drives.
pub const KIND: &str = "Sandbox";
/// Plural resource name, used when discovery does not list the resource itself.
pub const PLURAL: &str = "sandboxes";
/// Label on every pod, service and PVC of a Sandbox; the Service selects the pod by it.
pub const NAME_HASH_LABEL: &str = "agents.x-k8s.io/sandbox-name-hash";
/// Annotation on the Sandbox naming its pod, so clients can find the pod.
pub const POD_NAME_ANNOTATION: &str = "agents.x-k8s.io/pod-name";
/// Cluster DNS domain used for `status.serviceFQDN`.
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// FNV-1a 32-bit of the name as 8 lowercase hex digits (the `agents.x-k8s.io/sandbox-name-hash`
/// label), so label values stay short and valid whatever the Sandbox name is.
pub fn name_hash(name: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}
