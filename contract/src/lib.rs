//! The records of the sandbox-provider contract (`wit/since_v0.4.0/types.wit`, the newest) as
//! plain Rust types, defined once for the provider that produces them and the hosts that store
//! and print them.
//!
//! Bindgen types carry no serde and differ between guest and host, so each side converts
//! between its bindgen types and these. The JSON reads like the contract: kebab-case field
//! names, variants externally tagged (`{"expired": "reason"}`, `"deleted"`), enums as their WIT
//! case names, `option` as `null`, and `json` fields kept as JSON *text* (a string) so a host
//! hands back exactly the bytes a provider produced.
//!
//! Secret values travel only inside [`AcquireRequest`], which can be read but never written as
//! JSON and whose `Debug` hides them.
//!
//! [`k8s`] holds the Kubernetes rules (names, label values, quantities) that the provider, the
//! host and the embedded cluster must apply alike.

use std::fmt;

use serde::{Deserialize, Serialize};

pub mod exec;
pub mod k8s;
pub mod kube_error;
pub mod labels;
pub mod lease_id;
pub mod quote;
pub mod rfc3339;

pub use exec::{ExecRequest, ExecResult};
pub use kube_error::KubeError;
pub use quote::{Quoted, quote};

/// What stands in for a secret value wherever one would otherwise be shown.
pub const REDACTED: &str = "[redacted]";

/// Where a provider runs a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// An agent-sandbox `Sandbox` custom resource (`agents.x-k8s.io`).
    Sandbox,
    /// A `batch/v1` Job.
    Job,
    /// An agent-sandbox `SandboxClaim` (`extensions.agents.x-k8s.io`): a Sandbox adopted from a
    /// warm pool, or made from the pool's template when none is ready.
    Claim,
}

/// The backend of a config that names none.
impl Default for Backend {
    fn default() -> Self {
        Self::Sandbox
    }
}

impl Backend {
    /// Every backend, in the order a provider lists them.
    pub const ALL: [Self; 3] = [Self::Sandbox, Self::Job, Self::Claim];

    /// The WIT case name, which configs and lease ids also use.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sandbox => "sandbox",
            Self::Job => "job",
            Self::Claim => "claim",
        }
    }

    /// The backend of a WIT case name; `None` for any other text.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.as_str() == name)
    }

    /// The resource type (API group and plural) of the backend's workload, the object a lease
    /// id names.
    pub fn workload_resource(self) -> (&'static str, &'static str) {
        match self {
            Self::Sandbox => (k8s::agent_sandbox::GROUP, k8s::agent_sandbox::SANDBOXES),
            Self::Job => ("batch", "jobs"),
            Self::Claim => (k8s::agent_sandbox::EXTENSIONS_GROUP, k8s::agent_sandbox::CLAIMS),
        }
    }

    /// The backend whose workload is of this resource type (API group and plural); `None` for
    /// any other type, such as a lease's Secret.
    pub fn of_workload(group: &str, plural: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|b| b.workload_resource() == (group, plural))
    }
}

/// One environment variable for the sandbox. Deserialize-only and with a `Debug` that hides
/// secret values, so a secret cannot leak through JSON or a log line by accident. Unknown
/// fields are refused: a misspelt `secret` would otherwise make a secret value a plain one.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct EnvVar {
    pub name: String,
    /// Resolved by the host; secret when `secret` is true.
    pub value: String,
    /// The value must stay out of logs, errors, lease metadata and every object but the
    /// provider's secret store.
    #[serde(default)]
    pub secret: bool,
}

impl fmt::Debug for EnvVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let value = if self.secret { REDACTED } else { self.value.as_str() };
        f.debug_struct("EnvVar").field("name", &self.name).field("value", &value).field("secret", &self.secret).finish()
    }
}

/// What `acquire` is asked for. Deserialize-only, like [`EnvVar`], because it may hold secret
/// values; its derived `Debug` shows them through [`EnvVar`]'s redacting one.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AcquireRequest {
    /// JSON text, as `validate-config` normalized it.
    pub config: String,
    pub run_id: String,
    /// The idempotency key: a retried acquire with the same id gets the same sandbox.
    pub acquisition_id: String,
    #[serde(default)]
    pub agent_id: Option<String>,
    /// Epoch millis the sandbox must not outlive; the lease says the real expiry.
    #[serde(default)]
    pub requested_expires_at: Option<i64>,
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Ask for a lease that `release` suspends instead of destroying (when the backend can).
    #[serde(default)]
    pub reusable: bool,
}

/// A provisioned sandbox as a Kubernetes host stores it: the contract's neutral lease
/// (`provider-lease-id`, `expires-at`, `reusable`, `metadata`) with the placement a Kubernetes
/// provider reports (contract 0.3.0's `kubernetes.placement-of`; the lease record itself in
/// 0.1.0 and 0.2.0) beside it, so the JSON a host keeps reads the same for every version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Lease {
    /// Identifies everything the lease owns, so `destroy` works from it alone.
    pub provider_lease_id: String,
    pub backend: Backend,
    pub namespace: String,
    /// The API version the workload was created with, which later calls must keep using.
    pub api_version: String,
    /// A new object under the same name is a different sandbox.
    pub workload_uid: String,
    #[serde(default)]
    pub pod_name: Option<String>,
    #[serde(default)]
    pub pod_uid: Option<String>,
    #[serde(default)]
    pub pod_ip: Option<String>,
    /// A claim lease's Sandbox (contract 0.4.0 on); none for the other backends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_sandbox: Option<ClaimedSandbox>,
    /// Epoch millis when the cluster deletes the sandbox whatever happens to the host.
    #[serde(default)]
    pub expires_at: Option<i64>,
    #[serde(default)]
    pub reusable: bool,
    /// Provider-private JSON text, opaque to the host and echoed back unchanged.
    pub metadata: String,
}

/// The Sandbox behind a claim lease (contract 0.4.0's `kubernetes.claimed-sandbox`): named by
/// the warm pool when it was adopted from one, so it cannot be derived from the claim's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ClaimedSandbox {
    /// `agents.x-k8s.io/v1beta1` or `agents.x-k8s.io/v1alpha1`.
    pub api_version: String,
    pub name: String,
    pub uid: String,
    /// Adopted from a warm pool (already running); false when made from the template.
    pub warm: bool,
}

/// What a later lifecycle call gets: the lease as stored, and the config (JSON text) it was
/// made with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeaseRef {
    pub lease: Lease,
    pub config: String,
}

/// The answer of `resume-check` and `renew`: gone or expired is an answer, not an error.
// One value per call, moved a few times: boxing the lease would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResumeOutcome {
    /// Refreshed, since pod, IP and expiry may have changed.
    Resumable(Lease),
    /// Gone, terminating, finished or replaced; the reason says which and what to do.
    Expired(String),
}

/// What happened to one object `destroy` is responsible for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DeleteOutcome {
    Deleted,
    AlreadyGone,
    Failed(String),
}

/// One object of a lease and what destroying it did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ObjectReport {
    /// `Sandbox`, `Job`, `Secret`, `PersistentVolumeClaim`.
    pub kind: String,
    pub name: String,
    pub outcome: DeleteOutcome,
}

/// Every object a lease could own, each with its outcome, so a partial failure says what is
/// left behind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct DestroyReport {
    pub objects: Vec<ObjectReport>,
}

/// An operation on a resource type, as a provider declares and a host grants it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AccessVerb {
    /// Read one object.
    Get,
    /// Create an object.
    Create,
    /// Patch an object (merge, JSON or strategic).
    Patch,
    /// Delete an object.
    Delete,
    /// List objects.
    List,
    /// Watch objects.
    Watch,
    /// Ask which versions of the rule's group are served.
    Discovery,
    /// Run a command in a container (`pods/exec`, contract 0.3.0).
    Exec,
}

impl AccessVerb {
    /// Every verb, in the contract's order.
    pub const ALL: [Self; 8] =
        [Self::Get, Self::Create, Self::Patch, Self::Delete, Self::List, Self::Watch, Self::Discovery, Self::Exec];

    /// The WIT case name, which policies and messages use too.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Create => "create",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Discovery => "discovery",
            Self::Exec => "exec",
        }
    }
}

impl fmt::Display for AccessVerb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Access to one resource type: what a provider declares it needs, and (in a host's policy
/// file) what an operator grants. The host runs a provider with the intersection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AccessRule {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// The versions of the group the rule covers.
    pub versions: Vec<String>,
    /// The resource's plural name (`sandboxes`, `jobs`, `pods`).
    pub plural: String,
    /// The verbs; empty allows nothing.
    #[serde(default)]
    pub verbs: Vec<AccessVerb>,
    /// Subresources that may be patched (`status`); none by default.
    #[serde(default)]
    pub subresources: Vec<String>,
    /// Whether objects live in namespaces (false for `namespaces` itself).
    #[serde(default = "default_true")]
    pub namespaced: bool,
}

fn default_true() -> bool {
    true
}

impl AccessRule {
    /// A namespaced rule without subresources.
    pub fn new(group: &str, versions: &[&str], plural: &str, verbs: &[AccessVerb]) -> Self {
        Self {
            group: group.to_string(),
            versions: versions.iter().map(|v| (*v).to_string()).collect(),
            plural: plural.to_string(),
            verbs: verbs.to_vec(),
            subresources: Vec::new(),
            namespaced: true,
        }
    }

    /// `plural` or `plural.group`, as Kubernetes names a resource type in messages.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// Whether the rule grants `verb`.
    pub fn allows(&self, verb: AccessVerb) -> bool {
        self.verbs.contains(&verb)
    }
}

/// What a provider is and can do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProviderInfo {
    /// Stable key the host registers the provider under.
    pub driver_key: String,
    pub display_name: String,
    pub version: String,
    /// JSON Schema (draft 2020-12) of the config, as JSON text.
    pub config_schema: String,
    /// Whether `release` can keep a sandbox for a later `resume-check`.
    pub reusable_leases: bool,
    pub backends: Vec<Backend>,
    /// Everything the provider needs of the host's `kube` interface; empty for a provider of
    /// contract 0.1.0, which could not declare it.
    #[serde(default)]
    pub access: Vec<AccessRule>,
}

/// A problem in a config, with the JSON pointer of the field (`/image`) so it can be fixed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ConfigProblem {
    pub path: String,
    pub message: String,
}

/// The outcome of `validate-config`: problems are reported here, never as an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Validation {
    pub ok: bool,
    /// Problems that do not block use (unknown keys).
    pub warnings: Vec<ConfigProblem>,
    pub errors: Vec<ConfigProblem>,
    /// JSON text with defaults filled in, to store instead of the input (when ok).
    #[serde(default)]
    pub normalized_config: Option<String>,
}

/// How serious a probe finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Info,
    Warning,
    Error,
}

/// One finding of `probe`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable and machine-readable (`namespace-missing`), unlike the message.
    pub code: String,
    pub message: String,
}

/// The code of the `probe` finding that says writes were not checked (a provider cannot check
/// them without writing); a host that checks them itself replaces it with its own finding.
pub const PROBE_WRITES_UNCHECKED: &str = "writes-unchecked";

/// Whether a config can work against the cluster, and why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ProbeResult {
    pub ok: bool,
    pub summary: String,
    pub diagnostics: Vec<Diagnostic>,
}

/// Message and retry advice of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ErrorDetail {
    /// What happened, what it means, and what to do; never a secret value.
    pub message: String,
    /// Whether the same call may succeed if retried later.
    pub retryable: bool,
}

/// A config field that makes the call impossible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct InvalidConfigDetail {
    /// JSON pointer of the field (`/image`).
    pub path: String,
    pub message: String,
}

/// Why a provider call failed, as the provider classified it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderError {
    /// The config is wrong; fix the field at `path`.
    InvalidConfig(InvalidConfigDetail),
    /// The cluster's RBAC refused a call the provider needs.
    Forbidden(ErrorDetail),
    /// The host's policy refused a call; nothing was sent to the cluster.
    Denied(ErrorDetail),
    /// An object exists that is not this lease's, or a concurrent change won.
    Conflict(ErrorDetail),
    /// No room: unschedulable, quota exhausted.
    Capacity(ErrorDetail),
    /// The image cannot be pulled.
    ImagePull(ErrorDetail),
    /// The request, or the sandbox's own state, makes the call impossible.
    Rejected(ErrorDetail),
    /// The call ran out of its deadline.
    Timeout(ErrorDetail),
    /// The provider cannot do this (contract 0.3.0): `execute` where it has no way to run a
    /// command, or any call a provider's contract version lacks.
    Unsupported(ErrorDetail),
    /// The cluster could not be reached or is overloaded.
    Unavailable(ErrorDetail),
    /// A bug or an unexpected answer.
    Internal(ErrorDetail),
}

fn detail(message: impl Into<String>, retryable: bool) -> ErrorDetail {
    ErrorDetail { message: message.into(), retryable }
}

impl ProviderError {
    pub fn invalid_config(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidConfig(InvalidConfigDetail { path: path.into(), message: message.into() })
    }

    /// Not retryable: it will not help until someone changes a permission.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden(detail(message, false))
    }

    /// Not retryable: the operator's policy must change first.
    pub fn denied(message: impl Into<String>) -> Self {
        Self::Denied(detail(message, false))
    }

    /// Retryable only for a lost race, not for a foreign object.
    pub fn conflict(message: impl Into<String>, retryable: bool) -> Self {
        Self::Conflict(detail(message, retryable))
    }

    /// Retryable: room may free up.
    pub fn capacity(message: impl Into<String>) -> Self {
        Self::Capacity(detail(message, true))
    }

    /// Not retryable: the config must change.
    pub fn image_pull(message: impl Into<String>) -> Self {
        Self::ImagePull(detail(message, false))
    }

    /// Not retryable: the same request meets the same refusal.
    pub fn rejected(message: impl Into<String>) -> Self {
        Self::Rejected(detail(message, false))
    }

    /// Retryable: the cluster may be faster next time.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::Timeout(detail(message, true))
    }

    /// Not retryable: the same provider never can.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::Unsupported(detail(message, false))
    }

    /// Retryable: the cluster may be back.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable(detail(message, true))
    }

    /// Not retryable: an unexpected answer is not expected to change.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(detail(message, false))
    }

    /// The WIT case name (`invalid-config`, `image-pull`, ...), stable enough for exit codes,
    /// log fields and test assertions.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::InvalidConfig(_) => "invalid-config",
            Self::Forbidden(_) => "forbidden",
            Self::Denied(_) => "denied",
            Self::Conflict(_) => "conflict",
            Self::Capacity(_) => "capacity",
            Self::ImagePull(_) => "image-pull",
            Self::Rejected(_) => "rejected",
            Self::Timeout(_) => "timeout",
            Self::Unsupported(_) => "unsupported",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    pub fn message(&self) -> &str {
        match self.detail() {
            Ok(d) => &d.message,
            Err(d) => &d.message,
        }
    }

    /// Whether the same call may succeed later; an invalid config never does.
    pub fn retryable(&self) -> bool {
        self.detail().is_ok_and(|d| d.retryable)
    }

    /// The detail of every case but `invalid-config`, which has its own.
    fn detail(&self) -> Result<&ErrorDetail, &InvalidConfigDetail> {
        match self {
            Self::InvalidConfig(d) => Err(d),
            Self::Forbidden(d)
            | Self::Denied(d)
            | Self::Conflict(d)
            | Self::Capacity(d)
            | Self::ImagePull(d)
            | Self::Rejected(d)
            | Self::Timeout(d)
            | Self::Unsupported(d)
            | Self::Unavailable(d)
            | Self::Internal(d) => Ok(d),
        }
    }

    /// The same error with its message rewritten, for redaction and added context.
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::InvalidConfig(d) => Self::InvalidConfig(InvalidConfigDetail { path: d.path, message: f(d.message) }),
            Self::Forbidden(d) => Self::Forbidden(detail(f(d.message), d.retryable)),
            Self::Denied(d) => Self::Denied(detail(f(d.message), d.retryable)),
            Self::Conflict(d) => Self::Conflict(detail(f(d.message), d.retryable)),
            Self::Capacity(d) => Self::Capacity(detail(f(d.message), d.retryable)),
            Self::ImagePull(d) => Self::ImagePull(detail(f(d.message), d.retryable)),
            Self::Rejected(d) => Self::Rejected(detail(f(d.message), d.retryable)),
            Self::Timeout(d) => Self::Timeout(detail(f(d.message), d.retryable)),
            Self::Unsupported(d) => Self::Unsupported(detail(f(d.message), d.retryable)),
            Self::Unavailable(d) => Self::Unavailable(detail(f(d.message), d.retryable)),
            Self::Internal(d) => Self::Internal(detail(f(d.message), d.retryable)),
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// One spelling per backend: its name, its JSON form and what parses back to it agree.
    #[test]
    fn a_backend_name_parses_back_and_is_its_json_form() {
        for backend in Backend::ALL {
            assert_eq!(Backend::parse(backend.as_str()), Some(backend));
            assert_eq!(serde_json::to_value(backend).unwrap(), json!(backend.as_str()));
        }
        assert_eq!(Backend::parse("Sandbox"), None);
        assert_eq!(Backend::of_workload("batch", "jobs"), Some(Backend::Job));
        assert_eq!(Backend::of_workload("agents.x-k8s.io", "sandboxes"), Some(Backend::Sandbox));
        assert_eq!(Backend::of_workload("extensions.agents.x-k8s.io", "sandboxclaims"), Some(Backend::Claim));
        assert_eq!(Backend::of_workload("", "secrets"), None);
        assert_eq!(Backend::parse(""), None);
    }

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
            claimed_sandbox: None,
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
        assert_eq!(value["workload-uid"], "u-1");
        assert_eq!(value["pod-uid"], serde_json::Value::Null);
        assert_eq!(value["metadata"], r#"{"secret":"sb-abc-env"}"#);
        let back: Lease = serde_json::from_value(value).expect("parses");
        assert_eq!(back, lease());
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
    }

    #[test]
    fn errors_serialize_like_the_wit_variant_and_display_its_case_name() {
        let error = ProviderError::image_pull("no such image");
        assert_eq!(
            serde_json::to_value(&error).expect("serializes"),
            json!({"image-pull": {"message": "no such image", "retryable": false}})
        );
        assert_eq!(error.to_string(), "image-pull: no such image");
        let error = ProviderError::invalid_config("/image", "required");
        assert_eq!(
            serde_json::to_value(&error).expect("serializes"),
            json!({"invalid-config": {"path": "/image", "message": "required"}})
        );
        assert_eq!(error.to_string(), "invalid-config at /image: required");
        assert!(!error.retryable());
    }

    #[test]
    fn map_message_keeps_the_kind_and_retry_advice() {
        let error = ProviderError::conflict("lost a race", true).map_message(|m| format!("create Job: {m}"));
        assert_eq!((error.kind(), error.message(), error.retryable()), ("conflict", "create Job: lost a race", true));
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
        assert!(!request.env[1].secret);
        let shown = format!("{request:?}");
        assert!(!shown.contains("hunter2"), "{shown}");
        assert!(shown.contains(REDACTED), "{shown}");
        assert!(shown.contains("fast"), "{shown}");
    }
}
