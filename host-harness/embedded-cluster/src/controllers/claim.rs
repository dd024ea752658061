//! agent-sandbox's `SandboxClaim` controller: gives each claim one Sandbox, adopted from a warm
//! pool when a member is Ready (its pod keeps running: nothing restarts) or started cold from
//! the template, and keeps the claim's status and lifetime.
//!
//! Decisions live in pure functions ([`plan`], [`build`], [`candidates`], [`status`]); the
//! I/O is in `reconcile` and, for the one multi-step write, `adopt`.

mod adopt;
pub mod build;
pub mod candidates;
pub mod model;
pub mod plan;
mod reconcile;
pub mod reservations;
pub mod status;
#[cfg(test)]
mod tests;

pub use reconcile::run;
