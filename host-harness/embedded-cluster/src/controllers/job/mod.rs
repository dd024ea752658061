//! The simulated batch/v1 Job controller and TTL-after-finished controller, as in
//! kube-controller-manager 1.33.
//!
//! They talk to the API server only through a `kube::Client`, so the same code drives the
//! embedded API server and a real kube-apiserver. Decisions live in pure functions
//! ([`sync::plan_sync`], [`ttl::ttl_decision`]); [`run`] only reads, applies and schedules.

pub mod backoff;
pub mod conditions;
pub mod ledger;
pub mod pods;
mod runner;
pub mod sync;
pub mod template;
#[cfg(test)]
mod test_support;
pub mod ttl;

pub use runner::run;
