//! agent-sandbox's `SandboxWarmPool` controller: keeps `spec.replicas` Sandboxes made from the
//! pool's template started, so a claim can adopt a ready one instead of waiting for a pod.
//!
//! Decisions live in pure functions ([`plan`]); the thin loop in `reconcile` observes the
//! cluster (informer caches, and a fresh list before it creates or deletes anything, so a cache
//! behind its own writes never makes it create twice), asks the plan, and acts.

pub mod model;
pub mod plan;
mod reconcile;
#[cfg(test)]
pub(crate) mod tests;

pub use reconcile::run;
