//! The `claim` backend: a lease is one agent-sandbox `SandboxClaim` on a warm pool, and the
//! Sandbox the claim controller hands it (a Ready member at once, or one made from the pool's
//! template). Each lifecycle step of this backend is here; the Sandbox and Job backends'
//! steps are still in the shared modules (`acquire`, `destroy`, `resume`, `renew`), which call
//! into these for a claim.

pub(crate) mod acquire;
pub(crate) mod destroy;
pub mod manifest;
pub mod readiness;
pub(crate) mod resume;
pub mod state;
