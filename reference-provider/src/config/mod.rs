//! The provider config: the lease TTL, and per operation what the provider does before it
//! answers (a fixed delay, a stall measured from the host's deadline, a configured failure).
//!
//! Validation walks the JSON by hand (`checker`, rules in `check`), so one pass reports every
//! problem with its JSON-pointer path instead of stopping at the first; unknown keys are
//! warnings. `host_fit` adds what the host's deadline rules out, and `schema` is the JSON
//! Schema `describe` publishes. A valid config's normalized form has every default filled in.

mod check;
mod checker;
mod host_fit;
mod schema;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::time::Duration;

use contract::{ErrorDetail, ProviderError};
use serde::Serialize;

pub use contract::{ConfigProblem, Validation};
pub use schema::schema;

/// Default lease life without renewal.
pub const DEFAULT_LEASE_TTL_SECONDS: u32 = 3600;
/// Longest lease TTL: a week, as the Kubernetes provider allows.
pub const MAX_LEASE_TTL_SECONDS: u32 = 7 * 24 * 3600;
/// Longest configured delay: ten minutes, past any sensible call deadline.
pub const MAX_DELAY_MILLIS: u64 = 600_000;
/// Default distance of a stall's end from the host's deadline: enough for the answer to reach
/// the host before it (or for the host to have ended the call after it).
pub const DEFAULT_STALL_MARGIN_MILLIS: u64 = 200;
/// Largest stall margin.
pub const MAX_STALL_MARGIN_MILLIS: u64 = 60_000;

/// An operation whose behaviour a config can set, named as in the WIT `provider` interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Operation {
    Probe,
    Acquire,
    ResumeCheck,
    Renew,
    Release,
    Destroy,
    Execute,
}

impl Operation {
    /// Every operation a config can set, in the contract's order.
    pub const ALL: [Self; 7] =
        [Self::Probe, Self::Acquire, Self::ResumeCheck, Self::Renew, Self::Release, Self::Destroy, Self::Execute];

    /// The WIT name, which is also the config key.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Probe => "probe",
            Self::Acquire => "acquire",
            Self::ResumeCheck => "resume-check",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Destroy => "destroy",
            Self::Execute => "execute",
        }
    }
}

/// Where a stall ends, relative to the host's deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StallUntil {
    /// `margin` before the deadline; then the call answers as it would have.
    BeforeDeadline,
    /// `margin` past the deadline: the host must have ended the call by then.
    PastDeadline,
}

/// A wait measured from the host's deadline (the `deadline` import).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stall {
    pub until: StallUntil,
    pub margin_millis: u64,
}

impl Stall {
    /// The margin as a duration.
    pub fn margin(&self) -> Duration {
        Duration::from_millis(self.margin_millis)
    }
}

/// A `provider-error` case a config can ask for, named as in the WIT variant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorCase {
    InvalidConfig,
    Forbidden,
    Denied,
    Conflict,
    Capacity,
    ImagePull,
    Rejected,
    Timeout,
    Unsupported,
    Unavailable,
    Internal,
}

impl ErrorCase {
    /// Every case, in the contract's order.
    pub const ALL: [Self; 11] = [
        Self::InvalidConfig,
        Self::Forbidden,
        Self::Denied,
        Self::Conflict,
        Self::Capacity,
        Self::ImagePull,
        Self::Rejected,
        Self::Timeout,
        Self::Unsupported,
        Self::Unavailable,
        Self::Internal,
    ];

    /// The WIT case name, which is also the config value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidConfig => "invalid-config",
            Self::Forbidden => "forbidden",
            Self::Denied => "denied",
            Self::Conflict => "conflict",
            Self::Capacity => "capacity",
            Self::ImagePull => "image-pull",
            Self::Rejected => "rejected",
            Self::Timeout => "timeout",
            Self::Unsupported => "unsupported",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
        }
    }

    /// The case named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

/// A configured failure: the error an operation answers with, every time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Failure {
    pub error: ErrorCase,
    /// Absent for `invalid-config`, whose detail has no retry advice.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub retryable: Option<bool>,
    pub message: String,
}

impl Failure {
    /// The `provider-error` this failure answers; an `invalid-config` one points at `path`,
    /// the knob that asked for it.
    pub fn to_error(&self, path: &str) -> ProviderError {
        let detail = ErrorDetail { message: self.message.clone(), retryable: self.retryable.unwrap_or(false) };
        match self.error {
            ErrorCase::InvalidConfig => ProviderError::invalid_config(path, self.message.clone()),
            ErrorCase::Forbidden => ProviderError::Forbidden(detail),
            ErrorCase::Denied => ProviderError::Denied(detail),
            ErrorCase::Conflict => ProviderError::Conflict(detail),
            ErrorCase::Capacity => ProviderError::Capacity(detail),
            ErrorCase::ImagePull => ProviderError::ImagePull(detail),
            ErrorCase::Rejected => ProviderError::Rejected(detail),
            ErrorCase::Timeout => ProviderError::Timeout(detail),
            ErrorCase::Unsupported => ProviderError::Unsupported(detail),
            ErrorCase::Unavailable => ProviderError::Unavailable(detail),
            ErrorCase::Internal => ProviderError::Internal(detail),
        }
    }
}

/// What one operation does before it answers: wait (a fixed delay or a stall, not both),
/// then fail as configured or answer as it would have.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Behaviour {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delay_millis: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stall: Option<Stall>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fail: Option<Failure>,
}

/// A validated config with every default filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Config {
    pub lease_ttl_seconds: u32,
    /// Only the operations the config sets; the others answer at once.
    pub operations: BTreeMap<Operation, Behaviour>,
}

impl Config {
    /// What `operation` does before it answers (nothing, unless the config says so).
    pub fn behaviour(&self, operation: Operation) -> Behaviour {
        self.operations.get(&operation).cloned().unwrap_or_default()
    }
}

/// The JSON pointer of an operation's settings.
pub fn operation_path(operation: Operation) -> String {
    format!("/operations/{}", operation.as_str())
}

/// Keys of the top-level object.
pub(crate) const TOP_KEYS: &[&str] = &["leaseTtlSeconds", "operations"];
/// Keys of one operation's settings.
pub(crate) const BEHAVIOUR_KEYS: &[&str] = &["delayMillis", "stall", "fail"];
/// Keys of a stall.
pub(crate) const STALL_KEYS: &[&str] = &["until", "marginMillis"];
/// Keys of a configured failure.
pub(crate) const FAILURE_KEYS: &[&str] = &["error", "retryable", "message"];

/// Validates a config: every problem with its path (the first 50 errors and warnings, and how
/// many more), warnings for unknown keys, what the host's call deadline (when one is known)
/// rules out, and the normalized config when there are no errors.
pub fn validate(text: &str, call_timeout: Option<Duration>) -> Validation {
    let (config, mut checker) = check::check(text);
    let config = config.filter(|c| host_fit::check(&mut checker, c, call_timeout));
    let normalized_config = config.as_ref().and_then(|c| serde_json::to_string(c).ok());
    let (errors, warnings) = checker.into_problems();
    Validation { ok: normalized_config.is_some(), warnings, errors, normalized_config }
}

/// Parses a config for a lifecycle call; the first problem is the error.
pub fn parse(text: &str) -> Result<Config, ProviderError> {
    match check::check(text) {
        (Some(config), _) => Ok(config),
        (None, checker) => Err(match checker.into_problems().0.into_iter().next() {
            Some(p) => ProviderError::invalid_config(
                p.path,
                format!("{}; run validate-config for every problem", p.message.trim_end_matches('.')),
            ),
            None => ProviderError::internal("the config check failed without naming a problem; report this"),
        }),
    }
}
