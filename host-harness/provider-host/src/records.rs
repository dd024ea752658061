//! Conversions between the wasmtime bindgen types of `types.wit` and the contract's serde types
//! ([`contract`], re-exported here), as macros that each version's glue in `versions/`
//! expands where `wit` names its own `types`: the records every version shares, the flat lease
//! of 0.1.0 and 0.2.0, the declared access of 0.2.0 on, and the error cases.
//!
//! The bindgen types carry no serde and use snake_case fields; a host stores leases and prints
//! results as JSON that must read like the contract, so it works with the contract's types and
//! converts at the component boundary. Secret values travel only inside [`AcquireRequest`],
//! which can be read but never written as JSON and whose `Debug` hides them.

pub use contract::{
    AccessRule, AccessVerb, AcquireRequest, Backend, ClaimedSandbox, ConfigProblem, DeleteOutcome, DestroyReport,
    Diagnostic, EnvVar, ErrorDetail, ExecRequest, ExecResult, InvalidConfigDetail, Lease, LeaseRef, ObjectReport,
    ProbeResult, ProviderError, ProviderInfo, ResumeOutcome, Severity, Validation,
};

/// Conversions between one contract version's bindgen records and the contract types, for the
/// records every released version shares. Expanded once per version, in a module where `wit`
/// names that version's `types` interface, so a new version adds no copy of them.
/// The `lease-ref` and `resume-outcome` conversions take the version's own lease conversions
/// (`From<Lease>`, and `From<wit::Lease>` where a lease converts without a call).
macro_rules! shared_records {
    () => {
        impl From<EnvVar> for wit::EnvVar {
            fn from(e: EnvVar) -> Self {
                Self { name: e.name, value: e.value, secret: e.secret }
            }
        }

        impl From<AcquireRequest> for wit::AcquireRequest {
            fn from(r: AcquireRequest) -> Self {
                Self {
                    config: r.config,
                    run_id: r.run_id,
                    acquisition_id: r.acquisition_id,
                    agent_id: r.agent_id,
                    requested_expires_at: r.requested_expires_at,
                    env: r.env.into_iter().map(Into::into).collect(),
                    reusable: r.reusable,
                }
            }
        }

        impl From<LeaseRef> for wit::LeaseRef {
            fn from(r: LeaseRef) -> Self {
                Self { lease: r.lease.into(), config: r.config }
            }
        }

        impl From<wit::DeleteOutcome> for DeleteOutcome {
            fn from(o: wit::DeleteOutcome) -> Self {
                match o {
                    wit::DeleteOutcome::Deleted => Self::Deleted,
                    wit::DeleteOutcome::AlreadyGone => Self::AlreadyGone,
                    wit::DeleteOutcome::Failed(reason) => Self::Failed(reason),
                }
            }
        }

        impl From<wit::DestroyReport> for DestroyReport {
            fn from(r: wit::DestroyReport) -> Self {
                Self {
                    objects: r
                        .objects
                        .into_iter()
                        .map(|o| ObjectReport { kind: o.kind, name: o.name, outcome: o.outcome.into() })
                        .collect(),
                }
            }
        }

        fn problems(list: Vec<wit::ConfigProblem>) -> Vec<ConfigProblem> {
            list.into_iter().map(|p| ConfigProblem { path: p.path, message: p.message }).collect()
        }

        impl From<wit::Validation> for Validation {
            fn from(v: wit::Validation) -> Self {
                Self {
                    ok: v.ok,
                    warnings: problems(v.warnings),
                    errors: problems(v.errors),
                    normalized_config: v.normalized_config,
                }
            }
        }

        impl From<wit::Severity> for Severity {
            fn from(s: wit::Severity) -> Self {
                match s {
                    wit::Severity::Info => Self::Info,
                    wit::Severity::Warning => Self::Warning,
                    wit::Severity::Error => Self::Error,
                }
            }
        }

        impl From<wit::ProbeResult> for ProbeResult {
            fn from(p: wit::ProbeResult) -> Self {
                Self {
                    ok: p.ok,
                    summary: p.summary,
                    diagnostics: p
                        .diagnostics
                        .into_iter()
                        .map(|d| Diagnostic { severity: d.severity.into(), code: d.code, message: d.message })
                        .collect(),
                }
            }
        }

        fn detail(d: wit::ErrorDetail) -> ErrorDetail {
            ErrorDetail { message: d.message, retryable: d.retryable }
        }
    };
}
pub(crate) use shared_records;

/// The records of contracts 0.3.0 on, whose lease is neutral and which have `execute`: the
/// lease as the component sees it (its placement is the host's, from `placement-of`), the
/// command and its result, the `exec` access verb and the `unsupported` error case.
macro_rules! neutral_records {
    () => {
        $crate::records::access_records!(Exec);
        $crate::records::provider_errors!(
            Forbidden,
            Denied,
            Conflict,
            Capacity,
            ImagePull,
            Rejected,
            Timeout,
            Unsupported,
            Unavailable,
            Internal
        );

        /// The neutral lease: what the host stores beside it is the provider's to report.
        impl From<Lease> for wit::Lease {
            fn from(l: Lease) -> Self {
                Self {
                    provider_lease_id: l.provider_lease_id,
                    expires_at: l.expires_at,
                    reusable: l.reusable,
                    metadata: l.metadata,
                }
            }
        }

        impl From<ExecRequest> for wit::ExecRequest {
            fn from(r: ExecRequest) -> Self {
                Self {
                    command: r.command,
                    args: r.args,
                    cwd: r.cwd,
                    env: r.env.into_iter().map(Into::into).collect(),
                    stdin: r.stdin,
                    timeout_ms: r.timeout_ms,
                }
            }
        }

        impl From<wit::ExecResult> for ExecResult {
            fn from(r: wit::ExecResult) -> Self {
                Self {
                    exit_code: r.exit_code,
                    signal: r.signal,
                    timed_out: r.timed_out,
                    stdout: r.stdout,
                    stderr: r.stderr,
                    stdout_truncated: r.stdout_truncated,
                    stderr_truncated: r.stderr_truncated,
                }
            }
        }
    };
}
pub(crate) use neutral_records;

/// The lease of contracts 0.1.0 and 0.2.0, whose record holds the Kubernetes placement itself.
macro_rules! flat_lease_records {
    () => {
        impl From<wit::Backend> for Backend {
            fn from(b: wit::Backend) -> Self {
                match b {
                    wit::Backend::Sandbox => Self::Sandbox,
                    wit::Backend::Job => Self::Job,
                }
            }
        }

        impl From<Backend> for wit::Backend {
            fn from(b: Backend) -> Self {
                match b {
                    // Contracts before 0.4.0 have no claim case; a claim's workload is a Sandbox.
                    Backend::Sandbox | Backend::Claim => Self::Sandbox,
                    Backend::Job => Self::Job,
                }
            }
        }

        impl From<wit::Lease> for Lease {
            fn from(l: wit::Lease) -> Self {
                Self {
                    provider_lease_id: l.provider_lease_id,
                    backend: l.backend.into(),
                    namespace: l.namespace,
                    api_version: l.api_version,
                    workload_uid: l.workload_uid,
                    pod_name: l.pod_name,
                    pod_uid: l.pod_uid,
                    pod_ip: l.pod_ip,
                    claimed_sandbox: None,
                    expires_at: l.expires_at,
                    reusable: l.reusable,
                    metadata: l.metadata,
                }
            }
        }

        impl From<Lease> for wit::Lease {
            fn from(l: Lease) -> Self {
                Self {
                    provider_lease_id: l.provider_lease_id,
                    backend: l.backend.into(),
                    namespace: l.namespace,
                    api_version: l.api_version,
                    workload_uid: l.workload_uid,
                    pod_name: l.pod_name,
                    pod_uid: l.pod_uid,
                    pod_ip: l.pod_ip,
                    expires_at: l.expires_at,
                    reusable: l.reusable,
                    metadata: l.metadata,
                }
            }
        }

        impl From<wit::ResumeOutcome> for ResumeOutcome {
            fn from(o: wit::ResumeOutcome) -> Self {
                match o {
                    wit::ResumeOutcome::Resumable(l) => Self::Resumable(l.into()),
                    wit::ResumeOutcome::Expired(reason) => Self::Expired(reason),
                }
            }
        }
    };
}
pub(crate) use flat_lease_records;

/// A provider's declared access (contract 0.2.0 on); `$($verb)*` are the version's verbs beyond
/// 0.2.0's.
macro_rules! access_records {
    ($($verb:ident),*) => {
        impl From<wit::AccessVerb> for AccessVerb {
            fn from(v: wit::AccessVerb) -> Self {
                match v {
                    wit::AccessVerb::Get => Self::Get,
                    wit::AccessVerb::Create => Self::Create,
                    wit::AccessVerb::Patch => Self::Patch,
                    wit::AccessVerb::Delete => Self::Delete,
                    wit::AccessVerb::List => Self::List,
                    wit::AccessVerb::Watch => Self::Watch,
                    wit::AccessVerb::Discovery => Self::Discovery,
                    $(wit::AccessVerb::$verb => Self::$verb,)*
                }
            }
        }

        impl From<wit::AccessRule> for AccessRule {
            fn from(r: wit::AccessRule) -> Self {
                Self {
                    group: r.group,
                    versions: r.versions,
                    plural: r.plural,
                    verbs: r.verbs.into_iter().map(Into::into).collect(),
                    subresources: r.subresources,
                    namespaced: r.namespaced,
                }
            }
        }
    };
}
pub(crate) use access_records;

/// `From<wit::ProviderError>` for a contract version whose `provider-error` has these cases
/// besides `invalid-config` (each carrying an `error-detail`); expanded where `wit` names that
/// version's `types`, like [`shared_records`].
macro_rules! provider_errors {
    ($($case:ident),* $(,)?) => {
        impl From<wit::ProviderError> for ProviderError {
            fn from(e: wit::ProviderError) -> Self {
                match e {
                    wit::ProviderError::InvalidConfig(d) => {
                        Self::InvalidConfig(InvalidConfigDetail { path: d.path, message: d.message })
                    }
                    $(wit::ProviderError::$case(d) => Self::$case(detail(d)),)*
                }
            }
        }
    };
}
pub(crate) use provider_errors;
