//! agent-sandbox's `SandboxTemplate` controller: labels each template with its ref hash and,
//! unless the template opts out (`networkPolicyManagement: Unmanaged`), keeps one NetworkPolicy
//! per template that selects the pods made from it (by the same hash label).
//!
//! Decisions live in [`plan`]; `reconcile` reads the template and its policy and acts. The
//! embedded cluster stores NetworkPolicies but enforces none, so the policy is for clients
//! that read it, as on a cluster without a network plugin that enforces them.

pub mod plan;
mod reconcile;

pub use reconcile::run;
