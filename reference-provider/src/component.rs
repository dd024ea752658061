//! The WebAssembly component glue (contract 0.3.0, world `kubernetes-provider`): the `log`
//! import as [`Log`], the clock from `std::time` (WASI clocks) with the host's call deadline
//! from the `deadline` import, and the exported `provider` and `kubernetes` interfaces
//! converting WIT values to the contract's types and back (the neutral lease through
//! [`crate::placement`]). No decisions are made here. The world has a `kube` import and this
//! component never calls it, so the built component does not import it: a host links what it
//! offers, and this component asks for none of it.

use std::time::Duration;

use contract::{
    AcquireRequest, Backend, ConfigProblem, DeleteOutcome, DestroyReport, EnvVar, ErrorDetail, ExecRequest, ExecResult,
    Lease, LeaseRef, ProbeResult, ProviderError, ProviderInfo, ResumeOutcome, Severity, Validation,
};

use crate::Provider;
use crate::clock::{Clock, SystemClock};
use crate::log::{Level, Log};
use crate::placement::{self, Placement};

wit_bindgen::generate!({
    path: "../wit/since_v0.3.0",
    world: "kubernetes-provider",
});

use exports::paperclip::sandbox_provider::kubernetes as k8s;
use exports::paperclip::sandbox_provider::provider::Guest;
use paperclip::sandbox_provider::deadline as host_deadline;
use paperclip::sandbox_provider::log as host_log;
use paperclip::sandbox_provider::types as wit;

/// The host's `log` import.
struct HostLog;

/// WASI clocks, and the host's deadline for the call in progress.
struct HostClock;

impl Clock for HostClock {
    fn now_millis(&self) -> i64 {
        SystemClock.now_millis()
    }

    fn sleep(&self, duration: Duration) {
        SystemClock.sleep(duration)
    }

    fn call_remaining(&self) -> Option<Duration> {
        Some(Duration::from_millis(host_deadline::remaining_millis()))
    }

    fn call_timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(host_deadline::call_timeout_millis()))
    }
}

impl Log for HostLog {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let level = match level {
            Level::Trace => host_log::Level::Trace,
            Level::Debug => host_log::Level::Debug,
            Level::Info => host_log::Level::Info,
            Level::Warn => host_log::Level::Warn,
            Level::Error => host_log::Level::Error,
        };
        let fields: Vec<host_log::Field> =
            fields.iter().map(|(k, v)| host_log::Field { key: k.to_string(), value: v.to_string() }).collect();
        host_log::emit(level, message, &fields);
    }
}

fn provider() -> Provider<HostClock, HostLog> {
    Provider::new(HostClock, HostLog)
}

fn backend_to_wit(b: Backend) -> k8s::Backend {
    match b {
        // Contract 0.3.0 has no claim case, and this provider never makes claim leases.
        Backend::Sandbox | Backend::Claim => k8s::Backend::Sandbox,
        Backend::Job => k8s::Backend::Job,
    }
}

/// The neutral lease: the placement is [`placement::placement_of`]'s to say.
fn lease_to_wit(l: Lease) -> wit::Lease {
    wit::Lease {
        provider_lease_id: l.provider_lease_id,
        expires_at: l.expires_at,
        reusable: l.reusable,
        metadata: l.metadata,
    }
}

fn lease_from_wit(l: wit::Lease) -> Lease {
    placement::whole(l.provider_lease_id, l.expires_at, l.reusable, l.metadata)
}

fn lease_ref_from_wit(r: wit::LeaseRef) -> LeaseRef {
    LeaseRef { lease: lease_from_wit(r.lease), config: r.config }
}

fn outcome_to_wit(o: ResumeOutcome) -> wit::ResumeOutcome {
    match o {
        ResumeOutcome::Resumable(l) => wit::ResumeOutcome::Resumable(lease_to_wit(l)),
        ResumeOutcome::Expired(reason) => wit::ResumeOutcome::Expired(reason),
    }
}

fn error_to_wit(e: ProviderError) -> wit::ProviderError {
    let detail = |d: ErrorDetail| wit::ErrorDetail { message: d.message, retryable: d.retryable };
    match e {
        ProviderError::InvalidConfig(d) => {
            wit::ProviderError::InvalidConfig(wit::InvalidConfigDetail { path: d.path, message: d.message })
        }
        ProviderError::Forbidden(d) => wit::ProviderError::Forbidden(detail(d)),
        ProviderError::Denied(d) => wit::ProviderError::Denied(detail(d)),
        ProviderError::Conflict(d) => wit::ProviderError::Conflict(detail(d)),
        ProviderError::Capacity(d) => wit::ProviderError::Capacity(detail(d)),
        ProviderError::ImagePull(d) => wit::ProviderError::ImagePull(detail(d)),
        ProviderError::Rejected(d) => wit::ProviderError::Rejected(detail(d)),
        ProviderError::Timeout(d) => wit::ProviderError::Timeout(detail(d)),
        ProviderError::Unsupported(d) => wit::ProviderError::Unsupported(detail(d)),
        ProviderError::Unavailable(d) => wit::ProviderError::Unavailable(detail(d)),
        ProviderError::Internal(d) => wit::ProviderError::Internal(detail(d)),
    }
}

fn problems_to_wit(problems: Vec<ConfigProblem>) -> Vec<wit::ConfigProblem> {
    problems.into_iter().map(|p| wit::ConfigProblem { path: p.path, message: p.message }).collect()
}

/// The exported `provider` interface.
struct Component;

impl Guest for Component {
    fn describe() -> wit::ProviderInfo {
        // `access` is empty (describe.rs, whose test holds it so): this component uses no `kube`.
        // The backends are the `kubernetes` export's (`backends`).
        let ProviderInfo { driver_key, display_name, version, config_schema, reusable_leases, backends: _, access: _ } =
            provider().describe();
        wit::ProviderInfo { driver_key, display_name, version, config_schema, reusable_leases, access: Vec::new() }
    }

    fn validate_config(config: String) -> wit::Validation {
        let Validation { ok, warnings, errors, normalized_config } = provider().validate_config(&config);
        wit::Validation { ok, warnings: problems_to_wit(warnings), errors: problems_to_wit(errors), normalized_config }
    }

    fn probe(config: String) -> wit::ProbeResult {
        let ProbeResult { ok, summary, diagnostics } = provider().probe(&config);
        let diagnostics = diagnostics
            .into_iter()
            .map(|d| wit::Diagnostic {
                severity: match d.severity {
                    Severity::Info => wit::Severity::Info,
                    Severity::Warning => wit::Severity::Warning,
                    Severity::Error => wit::Severity::Error,
                },
                code: d.code,
                message: d.message,
            })
            .collect();
        wit::ProbeResult { ok, summary, diagnostics }
    }

    fn acquire(request: wit::AcquireRequest) -> Result<wit::Lease, wit::ProviderError> {
        let request = AcquireRequest {
            config: request.config,
            run_id: request.run_id,
            acquisition_id: request.acquisition_id,
            agent_id: request.agent_id,
            requested_expires_at: request.requested_expires_at,
            env: request.env.into_iter().map(|e| EnvVar { name: e.name, value: e.value, secret: e.secret }).collect(),
            reusable: request.reusable,
        };
        provider().acquire(request).map(lease_to_wit).map_err(error_to_wit)
    }

    fn resume_check(lease: wit::LeaseRef) -> Result<wit::ResumeOutcome, wit::ProviderError> {
        provider().resume_check(lease_ref_from_wit(lease)).map(outcome_to_wit).map_err(error_to_wit)
    }

    fn renew(lease: wit::LeaseRef, expires_at: i64) -> Result<wit::ResumeOutcome, wit::ProviderError> {
        provider().renew(lease_ref_from_wit(lease), expires_at).map(outcome_to_wit).map_err(error_to_wit)
    }

    fn release(lease: wit::LeaseRef) -> Result<(), wit::ProviderError> {
        provider().release(lease_ref_from_wit(lease)).map_err(error_to_wit)
    }

    fn destroy(lease: wit::LeaseRef) -> Result<wit::DestroyReport, wit::ProviderError> {
        let DestroyReport { objects } = provider().destroy(lease_ref_from_wit(lease)).map_err(error_to_wit)?;
        let objects = objects
            .into_iter()
            .map(|o| wit::ObjectReport {
                kind: o.kind,
                name: o.name,
                outcome: match o.outcome {
                    DeleteOutcome::Deleted => wit::DeleteOutcome::Deleted,
                    DeleteOutcome::AlreadyGone => wit::DeleteOutcome::AlreadyGone,
                    DeleteOutcome::Failed(why) => wit::DeleteOutcome::Failed(why),
                },
            })
            .collect();
        Ok(wit::DestroyReport { objects })
    }

    fn execute(lease: wit::LeaseRef, request: wit::ExecRequest) -> Result<wit::ExecResult, wit::ProviderError> {
        let request = ExecRequest {
            command: request.command,
            args: request.args,
            cwd: request.cwd,
            env: request.env.into_iter().map(|e| EnvVar { name: e.name, value: e.value, secret: e.secret }).collect(),
            stdin: request.stdin,
            timeout_ms: request.timeout_ms,
        };
        let ExecResult { exit_code, signal, timed_out, stdout, stderr, stdout_truncated, stderr_truncated } =
            provider().execute(lease_ref_from_wit(lease), request).map_err(error_to_wit)?;
        Ok(wit::ExecResult { exit_code, signal, timed_out, stdout, stderr, stdout_truncated, stderr_truncated })
    }
}

/// The exported `kubernetes` interface: no backends, and no workload behind any lease.
impl k8s::Guest for Component {
    fn backends() -> Vec<k8s::Backend> {
        placement::backends().into_iter().map(backend_to_wit).collect()
    }

    fn placement_of(lease: wit::Lease) -> Option<k8s::Placement> {
        let Placement { backend, namespace, api_version, workload_uid, pod_name, pod_uid, pod_ip } =
            placement::placement_of(&lease.provider_lease_id)?;
        Some(k8s::Placement {
            backend: backend_to_wit(backend),
            namespace,
            api_version,
            workload_uid,
            pod_name,
            pod_uid,
            pod_ip,
        })
    }
}

export!(Component);
