//! The reference sandbox provider: a provider for host authors that runs no workload and
//! needs no cluster. It is a component of contract 0.3.0's `kubernetes-provider` world, since
//! that is the world a Kubernetes host loads: it exports `provider` and `kubernetes` (no
//! backends, and a placement that says no object is behind a lease, [`placement`]), and uses
//! only the `log` and `deadline` imports, never `kube`. So a host can be tested against the
//! whole contract, and against the failures a config asks for, without a cluster.
//!
//! Every call gets a fresh instance, so the provider keeps no state of its own: everything it
//! needs later is in the lease it returns ([`lease`]). What that means for a host:
//!
//! - A lease is usable until its expiry and expired after it; the lease alone says which.
//! - `release` and `destroy` leave no trace. The provider cannot observe that a lease was
//!   released or destroyed: a later `resume-check` or `renew` of the same stored lease still
//!   answers from its expiry (`resumable` before it), and a second `destroy` of an unexpired
//!   lease reports `deleted` again. The host's own record must stop it from resuming a lease it
//!   released or destroyed.
//! - It cannot tell its own lease from a careful forgery (no key, no storage); it can tell a
//!   lease of another provider, mangled metadata, and a lease the host edited or kept after
//!   renew replaced it: `expired`, with the reason.
//! - A retried `acquire` returns the same lease id with a fresh expiry: the first attempt's is
//!   not known.
//! - A configured failure fails every call of its operation: attempts cannot be counted.
//! - `execute` answers `unsupported` (there is no sandbox to run a command in) unless its
//!   config asks for another error; a configured delay or stall runs first ([`execute`]).
//!
//! The config ([`config`]) sets the lease TTL and, per operation, a fixed delay, a stall
//! measured from the host's deadline, and a configured `provider-error` ([`behaviour`]). The
//! logic is plain Rust over [`Clock`] and [`Log`]; `component.rs` (wasm32 only) binds it to
//! the WIT world.

pub mod acquire;
pub mod behaviour;
pub mod clock;
pub mod config;
pub mod describe;
pub mod destroy;
pub mod execute;
pub mod expiry;
pub mod input_limits;
pub mod lease;
pub mod log;
pub mod placement;
pub mod probe;
pub mod release;
pub mod renew;
pub mod resume;

#[cfg(target_arch = "wasm32")]
mod component;
#[cfg(test)]
mod testkit;

use contract::{
    AcquireRequest, DestroyReport, ExecRequest, ExecResult, Lease, LeaseRef, ProbeResult, ProviderError, ProviderInfo,
    ResumeOutcome, Validation,
};

pub use clock::{Clock, SystemClock};
pub use log::{Level, Log};

/// The provider: every call of the WIT `provider` interface, over a clock and a log.
pub struct Provider<C: Clock, L: Log> {
    clock: C,
    log: L,
}

impl<C: Clock, L: Log> Provider<C, L> {
    /// A provider over this clock (with the host's deadline) and log.
    pub fn new(clock: C, log: L) -> Self {
        Self { clock, log }
    }

    /// Identity, capabilities and the config's JSON Schema.
    pub fn describe(&self) -> ProviderInfo {
        describe::describe()
    }

    /// Every problem of a config with its path, and the normalized config; a delay the host's
    /// call deadline cannot fit is an error too.
    pub fn validate_config(&self, config: &str) -> Validation {
        config::validate(config, self.clock.call_timeout())
    }

    /// The config as the provider reads it and the host's deadline, as diagnostics.
    pub fn probe(&self, config: &str) -> ProbeResult {
        probe::probe(&self.clock, &self.log, config)
    }

    /// A lease holding all its state; idempotent on the acquisition id.
    pub fn acquire(&self, request: AcquireRequest) -> Result<Lease, ProviderError> {
        acquire::acquire(&self.clock, &self.log, &request)
    }

    /// Whether a stored lease can be used again, from the lease alone.
    pub fn resume_check(&self, lease: LeaseRef) -> Result<ResumeOutcome, ProviderError> {
        resume::resume_check(&self.clock, &self.log, &lease)
    }

    /// Moves the lease's expiry (epoch millis), capped at now plus the lease's TTL.
    pub fn renew(&self, lease: LeaseRef, expires_at: i64) -> Result<ResumeOutcome, ProviderError> {
        renew::renew(&self.clock, &self.log, &lease, expires_at)
    }

    /// Ends the run; there is nothing to destroy or suspend.
    pub fn release(&self, lease: LeaseRef) -> Result<(), ProviderError> {
        release::release(&self.clock, &self.log, &lease)
    }

    /// Reports the lease destroyed, from its id alone; idempotent.
    pub fn destroy(&self, lease: LeaseRef) -> Result<DestroyReport, ProviderError> {
        destroy::destroy(&self.clock, &self.log, &lease)
    }

    /// `unsupported`: there is no sandbox to run a command in (after the config's `execute`
    /// behaviour, which may answer first).
    pub fn execute(&self, lease: LeaseRef, request: ExecRequest) -> Result<ExecResult, ProviderError> {
        execute::execute(&self.clock, &self.log, &lease, &request)
    }
}
