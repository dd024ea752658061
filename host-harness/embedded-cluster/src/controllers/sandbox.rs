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

pub use contract::k8s::agent_sandbox::{
    GROUP, POD_NAME_ANNOTATION, SANDBOX_NAME_HASH_LABEL as NAME_HASH_LABEL, name_hash,
};

/// Kind of the resource this controller drives.
pub const KIND: &str = contract::k8s::agent_sandbox::SANDBOX_KIND;
/// Plural resource name, used when discovery does not list the resource itself.
pub const PLURAL: &str = contract::k8s::agent_sandbox::SANDBOXES;
/// Cluster DNS domain used for `status.serviceFQDN`.
pub const CLUSTER_DOMAIN: &str = "cluster.local";
