//! The Kubernetes sandbox provider: provisions sandboxes as agent-sandbox `Sandbox` objects,
//! `SandboxClaim`s on an agent-sandbox warm pool, or `batch/v1` Jobs, reaching the cluster only
//! through the [`Kube`] trait.
//!
//! The logic is plain Rust over [`Kube`], [`Clock`] and [`Log`], so it runs natively against
//! an in-memory fake in tests; `component.rs` (wasm32 only) binds it to the WIT world
//! `kubernetes-provider`.

pub mod acquire;
mod adoption;
pub mod api_versions;
mod backend;
pub mod call_arena;
pub mod clock;
pub mod compensation;
pub mod config;
pub mod describe;
pub mod destroy;
pub mod errors;
pub mod event_stream;
pub mod exec_wrapper;
pub mod execute;
pub mod expiry;
pub mod host_fit;
pub mod image_ref;
pub mod input_limits;
pub mod job_manifest;
pub mod k8s_types;
pub mod kube_api;
pub mod lease;
pub mod lenient_json;
pub mod log;
pub mod naming;
pub use contract::k8s::object;
pub mod old_pod;
pub mod placement;
pub mod pod_spec;
pub mod probe;
pub mod readiness;
pub mod redact;
pub mod release;
pub mod renew;
pub mod response_body;
pub mod resume;
pub mod retry;
/// RFC 3339 time stamps, written once in the contract for the host to read the same way.
pub use contract::rfc3339;
pub mod sandbox_manifest;
pub mod secret;
pub mod workload_state;

#[cfg(any(test, feature = "testing"))]
mod fake_exec;
#[cfg(any(test, feature = "testing"))]
pub mod fake_kube;
#[cfg(test)]
mod testkit;

#[cfg(target_arch = "wasm32")]
mod component;
#[cfg(not(target_arch = "wasm32"))]
mod system_clock;

pub use acquire::{AcquireRequest, EnvVar};
pub use clock::Clock;
pub use config::{Backend, ConfigProblem, Validation};
pub use describe::{AccessRule, AccessVerb, ProviderInfo};
pub use destroy::{DeleteOutcome, DestroyReport, ObjectReport};
pub use errors::{ErrorDetail, InvalidConfigDetail, ProviderError};
pub use execute::{ExecRequest, ExecResult};
pub use kube_api::{Kube, KubeError, Watch};
pub use lease::{Lease, LeaseMetadata, LeaseRef};
pub use log::{Level, Log};
pub use probe::{Diagnostic, ProbeResult, Severity};
pub use resume::ResumeOutcome;
#[cfg(not(target_arch = "wasm32"))]
pub use system_clock::SystemClock;

/// The provider: every lifecycle call of the WIT `provider` interface, over a cluster, a clock
/// and a log. Each call checks its input against [`input_limits`] before it starts.
pub struct Provider<K: Kube, C: Clock, L: Log> {
    kube: K,
    clock: C,
    log: L,
}

impl<K: Kube, C: Clock, L: Log> Provider<K, C, L> {
    /// A provider over these capabilities.
    pub fn new(kube: K, clock: C, log: L) -> Self {
        Self { kube, clock, log }
    }

    /// The cluster access (for hosts and tests that inspect it).
    pub fn kube(&self) -> &K {
        &self.kube
    }

    /// Identity, capabilities and the config's JSON Schema.
    pub fn describe(&self) -> ProviderInfo {
        describe::describe()
    }

    /// Every problem of a config with its path, warnings, and the normalized config; a config
    /// the host's policy or deadline cannot run is invalid too ([`host_fit`]).
    pub fn validate_config(&self, config: &str) -> Validation {
        let (validation, parsed) = config::validate_and_parse(config);
        host_fit::check(validation, parsed.as_ref(), &self.kube, &self.clock)
    }

    /// Whether a config can work against the cluster; problems are diagnostics, never errors.
    pub fn probe(&self, config: &str) -> ProbeResult {
        probe::probe(&self.kube, &self.clock, &self.log, config)
    }

    /// Provisions a sandbox and waits until it is ready; idempotent on the acquisition id.
    /// A request over a size limit is refused before anything in it is parsed.
    pub fn acquire(&self, request: AcquireRequest) -> Result<Lease, ProviderError> {
        input_limits::check_request(&request)?;
        acquire::acquire(&self.kube, &self.clock, &self.log, &request)
    }

    /// Whether a stored lease can be used again; an error means "could not tell".
    pub fn resume_check(&self, lease: LeaseRef) -> Result<ResumeOutcome, ProviderError> {
        input_limits::check_lease(&lease.lease)?;
        resume::resume_check(&self.kube, &self.clock, &self.log, &lease)
    }

    /// Moves the lease's expiry (epoch millis, capped at now + lease TTL); a gone sandbox is
    /// `expired`, an error means "could not renew".
    pub fn renew(&self, lease: LeaseRef, expires_at: i64) -> Result<ResumeOutcome, ProviderError> {
        input_limits::check_lease(&lease.lease)?;
        renew::renew(&self.kube, &self.clock, &self.log, &lease, expires_at)
    }

    /// Ends the run: destroys an ephemeral lease, suspends a reusable one.
    pub fn release(&self, lease: LeaseRef) -> Result<(), ProviderError> {
        input_limits::check_lease(&lease.lease)?;
        release::release(&self.kube, &self.log, &lease)
    }

    /// Runs a command in the lease's sandbox: its exit code and output, secrets redacted.
    pub fn execute(&self, lease: LeaseRef, request: ExecRequest) -> Result<ExecResult, ProviderError> {
        input_limits::check_lease(&lease.lease)?;
        execute::execute(&self.kube, &self.clock, &self.log, &lease, &request)
    }

    /// Deletes everything the lease could own, from its id alone; idempotent.
    pub fn destroy(&self, lease: LeaseRef) -> Result<DestroyReport, ProviderError> {
        input_limits::check_lease(&lease.lease)?;
        destroy::destroy(&self.kube, &self.log, &lease)
    }
}
