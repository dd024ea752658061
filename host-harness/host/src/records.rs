//! Serde mirrors of the WIT records in `types.wit`, with the WIT's kebab-case names.
//!
//! The bindgen types carry no serde and use snake_case fields; a host stores leases and prints
//! results as JSON that must read like the contract, so these mirrors exist and convert both
//! ways. Variants are externally tagged (`{"expired": "reason"}`, `"deleted"`), enums are
//! their WIT case names, `option` is `null`, and `json` fields stay JSON *text* (a string) so
//! the host hands back exactly the bytes a provider produced.
//!
//! Secret values travel only inside [`AcquireRequest`], which can be read but never written
//! as JSON and whose `Debug` hides them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bindings::paperclip::sandbox_provider::types as wit;

/// Where a provider runs a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// An agent-sandbox `Sandbox` custom resource.
    Sandbox,
    /// A `batch/v1` Job.
    Job,
}

/// One environment variable for the sandbox; `Debug` hides secret values.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Resolved value (secret when `secret` is true).
    pub value: String,
    /// Whether the value must stay out of logs, errors and lease metadata.
    #[serde(default)]
    pub secret: bool,
}

impl fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.secret { "<redacted>" } else { self.value.as_str() };
        f.debug_struct("EnvVar").field("name", &self.name).field("value", &value).field("secret", &self.secret).finish()
    }
}

/// What `acquire` is asked for. Deserialize-only: it may hold secret values.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AcquireRequest {
    /// The provider config as JSON text (normalized by `validate-config`).
    pub config: String,
    /// The host's run this sandbox serves.
    pub run_id: String,
    /// The idempotency key of the acquisition.
    pub acquisition_id: String,
    /// The agent the sandbox is for.
    #[serde(default)]
    pub agent_id: Option<String>,
    /// The latest instant (epoch millis) the sandbox may live.
    #[serde(default)]
    pub requested_expires_at: Option<i64>,
    /// Environment for the sandbox, secrets already resolved.
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Ask for a lease that `release` suspends instead of destroying.
    #[serde(default)]
    pub reusable: bool,
}

/// A provisioned sandbox, stored whole by the host and handed back on every later call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Lease {
    /// Identifies everything the lease owns; `destroy` works from it alone.
    pub provider_lease_id: String,
    /// The backend the workload runs on.
    pub backend: Backend,
    /// The namespace of the workload.
    pub namespace: String,
    /// The API version the workload was created with.
    pub api_version: String,
    /// The workload object's uid.
    pub workload_uid: String,
    /// The sandbox pod's name, once known.
    #[serde(default)]
    pub pod_name: Option<String>,
    /// The sandbox pod's uid, once known.
    #[serde(default)]
    pub pod_uid: Option<String>,
    /// The sandbox pod's IP, once known.
    #[serde(default)]
    pub pod_ip: Option<String>,
    /// When the cluster deletes the sandbox whatever happens to the host (epoch millis).
    #[serde(default)]
    pub expires_at: Option<i64>,
    /// Whether `release` suspends instead of destroying.
    #[serde(default)]
    pub reusable: bool,
    /// Provider-private JSON text, echoed back unchanged.
    pub metadata: String,
}

/// A stored lease and the config it was made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeaseRef {
    /// The lease as stored.
    pub lease: Lease,
    /// The provider config as JSON text.
    pub config: String,
}

/// The answer of `resume-check`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeOutcome {
    /// The sandbox is usable; the lease is refreshed.
    Resumable(Lease),
    /// The sandbox is gone, terminating, finished or replaced, and why.
    Expired(String),
}

/// What happened to one object during `destroy`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteOutcome {
    /// The object was deleted now.
    Deleted,
    /// The object did not exist (any more).
    AlreadyGone,
    /// The delete failed, and why.
    Failed(String),
}

/// One object of a lease and what destroying it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ObjectReport {
    /// `Sandbox`, `Job`, `Secret`, ...
    pub kind: String,
    /// The object's name.
    pub name: String,
    /// The result for this object.
    pub outcome: DeleteOutcome,
}

/// Every object a lease could own, each with its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DestroyReport {
    /// One entry per object.
    pub objects: Vec<ObjectReport>,
}

/// What a provider is and can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProviderInfo {
    /// Stable key the host registers the provider under.
    pub driver_key: String,
    /// Name for people.
    pub display_name: String,
    /// The provider's version.
    pub version: String,
    /// JSON Schema of the config, as JSON text.
    pub config_schema: String,
    /// Whether `release` can keep a sandbox for later.
    pub reusable_leases: bool,
    /// The backends the provider supports.
    pub backends: Vec<Backend>,
}

/// A problem in a config, with the JSON path of the field.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ConfigProblem {
    /// JSON pointer of the field (`/image`).
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// The outcome of `validate-config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Validation {
    /// Whether the config can be used.
    pub ok: bool,
    /// Problems that do not block use (unknown keys).
    pub warnings: Vec<ConfigProblem>,
    /// Problems that block use.
    pub errors: Vec<ConfigProblem>,
    /// The config with defaults filled in, as JSON text, when ok.
    #[serde(default)]
    pub normalized_config: Option<String>,
}

/// How serious a probe finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    /// For information.
    Info,
    /// Works, but something deserves attention.
    Warning,
    /// Cannot work.
    Error,
}

/// One finding of `probe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Diagnostic {
    /// How serious it is.
    pub severity: Severity,
    /// Stable machine-readable code.
    pub code: String,
    /// Explanation for people.
    pub message: String,
}

/// Whether a config can work against the cluster, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProbeResult {
    /// Whether nothing blocks use.
    pub ok: bool,
    /// One line for people.
    pub summary: String,
    /// The findings.
    pub diagnostics: Vec<Diagnostic>,
}

/// Message and retry advice of a provider error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ErrorDetail {
    /// What happened and what to do.
    pub message: String,
    /// Whether the same call may succeed later.
    pub retryable: bool,
}

/// A config field that makes a call impossible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct InvalidConfigDetail {
    /// JSON pointer of the field.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

/// Why a provider call failed, as the provider classified it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderError {
    /// The config is wrong at `path`.
    InvalidConfig(InvalidConfigDetail),
    /// The host's policy or the cluster's RBAC refused a needed call.
    Forbidden(ErrorDetail),
    /// An object exists that is not this lease's, or a concurrent change won.
    Conflict(ErrorDetail),
    /// No room: unschedulable, quota exhausted.
    Capacity(ErrorDetail),
    /// The image cannot be pulled.
    ImagePull(ErrorDetail),
    /// The request was refused as invalid.
    Rejected(ErrorDetail),
    /// The call ran out of its deadline.
    Timeout(ErrorDetail),
    /// The cluster could not be reached or is overloaded.
    Unavailable(ErrorDetail),
    /// A bug or an unexpected answer.
    Internal(ErrorDetail),
}

impl ProviderError {
    /// The WIT case name (`invalid-config`, `image-pull`, ...), for exit codes and log fields.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidConfig(_) => "invalid-config",
            Self::Forbidden(_) => "forbidden",
            Self::Conflict(_) => "conflict",
            Self::Capacity(_) => "capacity",
            Self::ImagePull(_) => "image-pull",
            Self::Rejected(_) => "rejected",
            Self::Timeout(_) => "timeout",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    /// The provider's message.
    pub fn message(&self) -> &str {
        match self {
            Self::InvalidConfig(d) => &d.message,
            Self::Forbidden(d)
            | Self::Conflict(d)
            | Self::Capacity(d)
            | Self::ImagePull(d)
            | Self::Rejected(d)
            | Self::Timeout(d)
            | Self::Unavailable(d)
            | Self::Internal(d) => &d.message,
        }
    }

    /// Whether the provider says a retry can help (an invalid config never does).
    pub fn retryable(&self) -> bool {
        match self {
            Self::InvalidConfig(_) => false,
            Self::Forbidden(d)
            | Self::Conflict(d)
            | Self::Capacity(d)
            | Self::ImagePull(d)
            | Self::Rejected(d)
            | Self::Timeout(d)
            | Self::Unavailable(d)
            | Self::Internal(d) => d.retryable,
        }
    }
}

impl fmt::Display for ProviderError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidConfig(d) => write!(f, "invalid-config at {}: {}", d.path, d.message),
            other => write!(f, "{}: {}", other.kind(), other.message()),
        }
    }
}

impl std::error::Error for ProviderError {}

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
            Backend::Sandbox => Self::Sandbox,
            Backend::Job => Self::Job,
        }
    }
}

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

impl From<LeaseRef> for wit::LeaseRef {
    fn from(r: LeaseRef) -> Self {
        Self { lease: r.lease.into(), config: r.config }
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

impl From<wit::ProviderInfo> for ProviderInfo {
    fn from(i: wit::ProviderInfo) -> Self {
        Self {
            driver_key: i.driver_key,
            display_name: i.display_name,
            version: i.version,
            config_schema: i.config_schema,
            reusable_leases: i.reusable_leases,
            backends: i.backends.into_iter().map(Into::into).collect(),
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

impl From<wit::ProviderError> for ProviderError {
    fn from(e: wit::ProviderError) -> Self {
        match e {
            wit::ProviderError::InvalidConfig(d) => {
                Self::InvalidConfig(InvalidConfigDetail { path: d.path, message: d.message })
            }
            wit::ProviderError::Forbidden(d) => Self::Forbidden(detail(d)),
            wit::ProviderError::Conflict(d) => Self::Conflict(detail(d)),
            wit::ProviderError::Capacity(d) => Self::Capacity(detail(d)),
            wit::ProviderError::ImagePull(d) => Self::ImagePull(detail(d)),
            wit::ProviderError::Rejected(d) => Self::Rejected(detail(d)),
            wit::ProviderError::Timeout(d) => Self::Timeout(detail(d)),
            wit::ProviderError::Unavailable(d) => Self::Unavailable(detail(d)),
            wit::ProviderError::Internal(d) => Self::Internal(detail(d)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease() -> Lease {
        Lease {
            provider_lease_id: "sb-abc".into(),
            backend: Backend::Sandbox,
            namespace: "agents".into(),
            api_version: "agents.x-k8s.io/v1beta1".into(),
            workload_uid: "u-1".into(),
            pod_name: Some("sb-abc".into()),
            pod_uid: None,
            pod_ip: Some("10.0.0.7".into()),
            expires_at: Some(1_700_000_000_000),
            reusable: false,
            metadata: r#"{"secret":"sb-abc-env"}"#.into(),
        }
    }

    #[test]
    fn leases_use_the_wit_names_and_round_trip() {
        let value = serde_json::to_value(lease()).expect("serializes");
        assert_eq!(value["provider-lease-id"], "sb-abc");
        assert_eq!(value["backend"], "sandbox");
        assert_eq!(value["pod-uid"], serde_json::Value::Null);
        assert_eq!(value["metadata"], r#"{"secret":"sb-abc-env"}"#);
        let back: Lease = serde_json::from_value(value).expect("parses");
        assert_eq!(back, lease());
        let wit_lease: wit::Lease = back.clone().into();
        assert_eq!(Lease::from(wit_lease), back);
    }

    #[test]
    fn variants_are_externally_tagged_in_kebab_case() {
        let expired = serde_json::to_value(ResumeOutcome::Expired("gone".into())).expect("serializes");
        assert_eq!(expired, json!({"expired": "gone"}));
        let report = DestroyReport {
            objects: vec![
                ObjectReport { kind: "Secret".into(), name: "s".into(), outcome: DeleteOutcome::AlreadyGone },
                ObjectReport { kind: "Job".into(), name: "j".into(), outcome: DeleteOutcome::Failed("503".into()) },
            ],
        };
        let value = serde_json::to_value(&report).expect("serializes");
        assert_eq!(value["objects"][0]["outcome"], "already-gone");
        assert_eq!(value["objects"][1]["outcome"], json!({"failed": "503"}));
        let error = ProviderError::ImagePull(ErrorDetail { message: "no such image".into(), retryable: false });
        assert_eq!(
            serde_json::to_value(&error).expect("serializes"),
            json!({"image-pull": {"message": "no such image", "retryable": false}})
        );
        assert_eq!(error.to_string(), "image-pull: no such image");
    }

    #[test]
    fn requests_parse_with_defaults_and_hide_secrets_in_debug() {
        let request: AcquireRequest = serde_json::from_value(json!({
            "config": "{}",
            "run-id": "r1",
            "acquisition-id": "a1",
            "env": [{"name": "TOKEN", "value": "hunter2", "secret": true}, {"name": "MODE", "value": "fast"}]
        }))
        .expect("parses");
        assert_eq!(request.agent_id, None);
        assert!(!request.reusable);
        let shown = format!("{request:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains("fast"), "{shown}");
    }
}
