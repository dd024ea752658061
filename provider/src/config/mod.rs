//! The provider config: its types and defaults, its validation (every problem with a
//! JSON-pointer path, unknown keys as warnings), and the normalized form a host stores.
//!
//! Validation walks the JSON by hand instead of deriving `Deserialize`, so one pass reports
//! every problem with its exact path instead of stopping at the first: `checker` walks JSON,
//! `check` holds the rules per field, `sizes` the size limits, `security` the hardened pod
//! defaults, and `schema` the JSON Schema that `describe` publishes.
//!
//! Backend `claim` takes the pod from a `SandboxTemplate`: the keys that shape the pod
//! (`POD_KEYS`) do not apply to it, are warned about when set, and are left out of its
//! normalized config; `claim` names the warm pool and the template (at least one; which one
//! the cluster's SandboxClaim version needs is checked at acquire and probe, where the served
//! version is known).

mod check;
mod checker;
mod schema;
mod security;
mod sizes;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::errors::ProviderError;

pub use check::{is_env_name, is_quantity};
pub use schema::SCHEMA;

/// Default readiness budget. A host times a lifecycle call out after 30 s by default; 20 s of
/// waiting leaves room for the creates before it and the clean-up after a failure.
pub const DEFAULT_READINESS_TIMEOUT_SECONDS: u32 = 20;
/// Default lease life without renewal.
pub const DEFAULT_LEASE_TTL_SECONDS: u32 = 3600;
/// Default command: a sandbox must keep running while the host executes commands in it.
pub const DEFAULT_COMMAND: [&str; 2] = ["sleep", "infinity"];

pub use contract::{Backend, ConfigProblem, Validation};

/// Which Sandbox API version to create with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SandboxApiVersion {
    /// Discover what the cluster serves; prefer v1beta1.
    Auto,
    V1beta1,
    V1alpha1,
}

/// Requests and limits, as Kubernetes quantities.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    pub requests: BTreeMap<String, String>,
    pub limits: BTreeMap<String, String>,
}

impl Default for Resources {
    fn default() -> Self {
        let map = |pairs: [(&str, &str); 2]| pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Self { requests: map([("cpu", "250m"), ("memory", "512Mi")]), limits: map([("cpu", "2"), ("memory", "4Gi")]) }
    }
}

/// A pod toleration (the Kubernetes fields).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// Job backend settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSettings {
    pub backoff_limit: i32,
    pub ttl_seconds_after_finished: i32,
}

impl Default for JobSettings {
    fn default() -> Self {
        Self { backoff_limit: 0, ttl_seconds_after_finished: 900 }
    }
}

/// A persistent workspace: a PVC from a claim template, kept while a reusable lease is suspended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceVolume {
    pub size: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// Sandbox backend settings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSettings {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace_volume: Option<WorkspaceVolume>,
}

/// Linux capabilities of the container.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub drop: Vec<String>,
    pub add: Vec<String>,
}

/// The pod's seccomp profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SeccompProfile {
    RuntimeDefault,
    Unconfined,
}

impl SeccompProfile {
    /// The Kubernetes `seccompProfile.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RuntimeDefault => "RuntimeDefault",
            Self::Unconfined => "Unconfined",
        }
    }
}

/// Hardened pod defaults; each field loosens only when a config sets it explicitly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Security {
    pub run_as_non_root: bool,
    pub run_as_user: i64,
    pub run_as_group: i64,
    pub fs_group: i64,
    pub allow_privilege_escalation: bool,
    pub capabilities: Capabilities,
    pub seccomp_profile: SeccompProfile,
    pub read_only_root_filesystem: bool,
    pub automount_service_account_token: bool,
}

impl Default for Security {
    fn default() -> Self {
        Self {
            run_as_non_root: true,
            run_as_user: 1000,
            run_as_group: 1000,
            fs_group: 1000,
            allow_privilege_escalation: false,
            capabilities: Capabilities { drop: vec!["ALL".to_string()], add: Vec::new() },
            seccomp_profile: SeccompProfile::RuntimeDefault,
            read_only_root_filesystem: true,
            automount_service_account_token: false,
        }
    }
}

/// Backend `claim` settings: what the SandboxClaim names. The served SandboxClaim version decides
/// which one is needed: v1beta1 claims name the warm pool (whose template makes the Sandbox),
/// v1alpha1 claims name the template and optionally a pool (`default`: any pool of the template).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimSettings {
    /// The `SandboxWarmPool` to adopt a ready Sandbox from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_pool: Option<String>,
    /// The `SandboxTemplate` a Sandbox is made from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

impl ClaimSettings {
    /// Whether neither is set.
    pub fn is_empty(&self) -> bool {
        self.warm_pool.is_none() && self.template.is_none()
    }
}

/// A validated config with every default filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub namespace: String,
    pub backend: Backend,
    pub sandbox_api_version: SandboxApiVersion,
    pub image: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    pub command: Vec<String>,
    pub args: Vec<String>,
    pub working_dir: String,
    pub resources: Resources,
    pub env: BTreeMap<String, String>,
    pub node_selector: BTreeMap<String, String>,
    pub tolerations: Vec<Toleration>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    pub image_pull_secrets: Vec<String>,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub name_prefix: String,
    pub lease_ttl_seconds: u32,
    pub readiness_timeout_seconds: u32,
    pub job: JobSettings,
    pub sandbox: SandboxSettings,
    pub security: Security,
    #[serde(skip_serializing_if = "ClaimSettings::is_empty")]
    pub claim: ClaimSettings,
}

/// Keys of the top-level object.
pub(crate) const TOP_KEYS: &[&str] = &[
    "namespace",
    "backend",
    "sandboxApiVersion",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "workingDir",
    "resources",
    "env",
    "nodeSelector",
    "tolerations",
    "runtimeClassName",
    "serviceAccountName",
    "imagePullSecrets",
    "labels",
    "annotations",
    "namePrefix",
    "leaseTtlSeconds",
    "readinessTimeoutSeconds",
    "job",
    "sandbox",
    "security",
    "claim",
];
/// Top-level keys that shape the pod or the workload the provider builds; backend `claim` takes
/// both from the template, so they do not apply to it.
pub(crate) const POD_KEYS: &[&str] = &[
    "sandboxApiVersion",
    "image",
    "imagePullPolicy",
    "command",
    "args",
    "workingDir",
    "resources",
    "nodeSelector",
    "tolerations",
    "runtimeClassName",
    "serviceAccountName",
    "imagePullSecrets",
    "job",
    "sandbox",
    "security",
];
pub(crate) const CLAIM_KEYS: &[&str] = &["warmPool", "template"];
pub(crate) const RESOURCES_KEYS: &[&str] = &["requests", "limits"];
pub(crate) const TOLERATION_KEYS: &[&str] = &["key", "operator", "value", "effect", "tolerationSeconds"];
pub(crate) const JOB_KEYS: &[&str] = &["backoffLimit", "ttlSecondsAfterFinished"];
pub(crate) const SANDBOX_KEYS: &[&str] = &["workspaceVolume"];
pub(crate) const WORKSPACE_VOLUME_KEYS: &[&str] = &["size", "storageClassName"];
pub(crate) const SECURITY_KEYS: &[&str] = &[
    "runAsNonRoot",
    "runAsUser",
    "runAsGroup",
    "fsGroup",
    "allowPrivilegeEscalation",
    "capabilities",
    "seccompProfile",
    "readOnlyRootFilesystem",
    "automountServiceAccountToken",
];
pub(crate) const CAPABILITIES_KEYS: &[&str] = &["drop", "add"];

/// Validates a config: every problem with its path (the first 50 errors and warnings, and how
/// many more), warnings for unknown keys and loosened defaults, and the normalized config when
/// there are no errors.
pub fn validate(text: &str) -> Validation {
    validate_and_parse(text).0
}

/// [`validate`], and the config it checked when it has no errors: for a caller that goes on to
/// use the config (the host's fit, a probe) without walking the text a second time.
pub fn validate_and_parse(text: &str) -> (Validation, Option<Config>) {
    let (config, checker) = check::check(text);
    let normalized_config = config.as_ref().and_then(normalized);
    let (errors, warnings) = checker.into_problems();
    (Validation { ok: config.is_some(), warnings, errors, normalized_config }, config)
}

/// The normalized config a host stores: every default filled in; for backend `claim`, without
/// the keys that do not apply to it ([`POD_KEYS`]), so validating it again warns of nothing.
fn normalized(config: &Config) -> Option<String> {
    let mut value = serde_json::to_value(config).ok()?;
    if config.backend == Backend::Claim
        && let Some(map) = value.as_object_mut()
    {
        for key in POD_KEYS {
            map.remove(*key);
        }
    }
    serde_json::to_string(&value).ok()
}

/// Parses a config for a lifecycle call; the first problem is the error.
pub fn parse(text: &str) -> Result<Config, ProviderError> {
    parse_with_warnings(text).map(|(config, _)| config)
}

/// [`parse`], with the warnings `validate` gives (unknown keys, keys the backend ignores), for
/// a call that goes on but should say what it ignored.
pub fn parse_with_warnings(text: &str) -> Result<(Config, Vec<ConfigProblem>), ProviderError> {
    match check::check(text) {
        (Some(config), checker) => Ok((config, checker.into_problems().1)),
        (None, checker) => Err(match checker.into_problems().0.into_iter().next() {
            Some(p) => ProviderError::invalid_config(
                p.path,
                format!("{}; run validate-config for every problem", p.message.trim_end_matches('.')),
            ),
            None => ProviderError::internal("config check failed without naming a problem"),
        }),
    }
}
