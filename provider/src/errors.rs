//! The provider's error type, mirroring the WIT `provider-error` variant, and the one place
//! where a Kubernetes API failure is classified for the host.
//!
//! Every message says what happened, what it means, and what to do; `retryable` says whether
//! the same call may succeed later. No message ever contains a secret value.

use serde::{Deserialize, Serialize};

use crate::kube_api::KubeError;

/// Message and retry advice of an error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ErrorDetail {
    pub message: String,
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

/// Why a provider call failed (mirrors the WIT `provider-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ProviderError {
    /// The config is wrong; fix the field at `path`.
    #[error("invalid config at {}: {}", .0.path, .0.message)]
    InvalidConfig(InvalidConfigDetail),
    /// The host's policy or the cluster's RBAC refused a call the provider needs.
    #[error("forbidden: {}", .0.message)]
    Forbidden(ErrorDetail),
    /// An object exists that is not this lease's, or a concurrent change won.
    #[error("conflict: {}", .0.message)]
    Conflict(ErrorDetail),
    /// No room: unschedulable, quota exhausted.
    #[error("capacity: {}", .0.message)]
    Capacity(ErrorDetail),
    /// The image cannot be pulled.
    #[error("image pull: {}", .0.message)]
    ImagePull(ErrorDetail),
    /// The request, or the sandbox's own state, makes the call impossible.
    #[error("rejected: {}", .0.message)]
    Rejected(ErrorDetail),
    /// The call ran out of its deadline.
    #[error("timeout: {}", .0.message)]
    Timeout(ErrorDetail),
    /// The cluster could not be reached or is overloaded.
    #[error("unavailable: {}", .0.message)]
    Unavailable(ErrorDetail),
    /// A bug or an unexpected answer.
    #[error("internal: {}", .0.message)]
    Internal(ErrorDetail),
}

fn detail(message: impl Into<String>, retryable: bool) -> ErrorDetail {
    ErrorDetail { message: message.into(), retryable }
}

impl ProviderError {
    /// A config field is wrong.
    pub fn invalid_config(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self::InvalidConfig(InvalidConfigDetail { path: path.into(), message: message.into() })
    }

    /// Refused by policy or RBAC; retrying will not help until someone changes a permission.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::Forbidden(detail(message, false))
    }

    /// A foreign object or a lost race.
    pub fn conflict(message: impl Into<String>, retryable: bool) -> Self {
        Self::Conflict(detail(message, retryable))
    }

    /// No room now; may succeed later.
    pub fn capacity(message: impl Into<String>) -> Self {
        Self::Capacity(detail(message, true))
    }

    /// The image cannot be pulled; the config must change.
    pub fn image_pull(message: impl Into<String>) -> Self {
        Self::ImagePull(detail(message, false))
    }

    /// The request or the sandbox's state makes the call impossible; retrying will not help.
    pub fn rejected(message: impl Into<String>) -> Self {
        Self::Rejected(detail(message, false))
    }

    /// Out of time; may succeed later.
    pub fn timeout(message: impl Into<String>) -> Self {
        Self::Timeout(detail(message, true))
    }

    /// The cluster is unreachable or overloaded; may succeed later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::Unavailable(detail(message, true))
    }

    /// Something the provider did not expect.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::Internal(detail(message, false))
    }

    /// The variant's stable name, as in the WIT (`image-pull`).
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

    /// What happened and what to do.
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

    /// Whether the same call may succeed later.
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

    /// The same error with its message rewritten (redaction, added context).
    pub fn map_message(self, f: impl FnOnce(String) -> String) -> Self {
        match self {
            Self::InvalidConfig(d) => Self::InvalidConfig(InvalidConfigDetail { path: d.path, message: f(d.message) }),
            Self::Forbidden(d) => Self::Forbidden(detail(f(d.message), d.retryable)),
            Self::Conflict(d) => Self::Conflict(detail(f(d.message), d.retryable)),
            Self::Capacity(d) => Self::Capacity(detail(f(d.message), d.retryable)),
            Self::ImagePull(d) => Self::ImagePull(detail(f(d.message), d.retryable)),
            Self::Rejected(d) => Self::Rejected(detail(f(d.message), d.retryable)),
            Self::Timeout(d) => Self::Timeout(detail(f(d.message), d.retryable)),
            Self::Unavailable(d) => Self::Unavailable(detail(f(d.message), d.retryable)),
            Self::Internal(d) => Self::Internal(detail(f(d.message), d.retryable)),
        }
    }

    /// Classifies a failed API call. `action` names what was attempted, for the message
    /// (`create Sandbox team-a/pc-1`).
    pub fn from_kube(error: &KubeError, action: &str) -> Self {
        match error {
            KubeError::NotFound(m) => Self::rejected(format!(
                "{action} failed: not found ({m}). The namespace or the resource type may not exist on this \
                 cluster; run probe to check the namespace and the served API versions."
            )),
            KubeError::AlreadyExists(m) => Self::conflict(
                format!("{action} failed: the object already exists ({m}). Another lease or a person owns that name."),
                false,
            ),
            KubeError::Conflict(m) => {
                Self::conflict(format!("{action} failed: a concurrent change won ({m}). Retry the call."), true)
            }
            KubeError::Gone(m) => Self::unavailable(format!(
                "{action} failed: the API server no longer has the version asked for ({m}). Retry the call."
            )),
            KubeError::Invalid(m) => Self::rejected(format!(
                "{action} was rejected as invalid: {m}. Fix the config field the message names, then retry."
            )),
            KubeError::Forbidden(m) if m.contains("exceeded quota") => Self::capacity(format!(
                "{action} failed: the namespace's resource quota is exhausted ({m}). Free quota or raise it, or \
                 lower the config's resources; retry later."
            )),
            KubeError::Forbidden(m) => Self::forbidden(format!(
                "{action} was refused by the host's policy or the cluster's RBAC: {m}. Allow this verb on this \
                 resource type in this namespace for the provider."
            )),
            KubeError::Unauthorized(m) => Self::unavailable(format!(
                "{action} failed: the cluster rejected the host's credentials ({m}). The host must refresh its \
                 kubeconfig or service-account token."
            )),
            KubeError::Timeout(m) => Self::timeout(format!(
                "{action} timed out ({m}). The API server is slow or overloaded; retry the call."
            )),
            KubeError::Unavailable { message, retry_after_seconds } => {
                let when = retry_after_seconds.map_or_else(|| "later".to_string(), |s| format!("in {s} s"));
                Self::unavailable(format!("{action} failed: the API server is unavailable ({message}). Retry {when}."))
            }
            KubeError::Transport(m) => Self::unavailable(format!(
                "{action} failed: the connection to the API server failed ({m}). Check the host's cluster access; \
                 retry the call."
            )),
            KubeError::Other { code, message } if *code == 429 || *code >= 500 => Self::unavailable(format!(
                "{action} failed with HTTP {code} ({message}). The API server is overloaded or failing; retry later."
            )),
            KubeError::Other { code, message } => Self::internal(format!(
                "{action} failed with an unexpected HTTP {code} ({message}). Report this with the message."
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_errors_are_classified() {
        let cases: Vec<(KubeError, &str, bool)> = vec![
            (KubeError::NotFound("x".into()), "rejected", false),
            (KubeError::AlreadyExists("x".into()), "conflict", false),
            (KubeError::Conflict("x".into()), "conflict", true),
            (KubeError::Gone("x".into()), "unavailable", true),
            (KubeError::Invalid("x".into()), "rejected", false),
            (KubeError::Forbidden("denied".into()), "forbidden", false),
            (KubeError::Forbidden("exceeded quota: compute".into()), "capacity", true),
            (KubeError::Unauthorized("x".into()), "unavailable", true),
            (KubeError::Timeout("x".into()), "timeout", true),
            (KubeError::Unavailable { message: "x".into(), retry_after_seconds: Some(3) }, "unavailable", true),
            (KubeError::Transport("x".into()), "unavailable", true),
            (KubeError::Other { code: 503, message: "x".into() }, "unavailable", true),
            (KubeError::Other { code: 418, message: "x".into() }, "internal", false),
        ];
        for (error, kind, retryable) in cases {
            let mapped = ProviderError::from_kube(&error, "create Sandbox ns/pc-1");
            assert_eq!(mapped.kind(), kind, "{error:?}");
            assert_eq!(mapped.retryable(), retryable, "{error:?}");
            assert!(mapped.message().starts_with("create Sandbox ns/pc-1"), "{}", mapped.message());
        }
    }

    #[test]
    fn retry_after_is_named() {
        let e = ProviderError::from_kube(
            &KubeError::Unavailable { message: "busy".into(), retry_after_seconds: Some(7) },
            "get Job ns/pc-1",
        );
        assert!(e.message().contains("Retry in 7 s"), "{}", e.message());
    }

    #[test]
    fn serializes_like_the_wit_variant() {
        let e = ProviderError::invalid_config("/image", "required");
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json, serde_json::json!({"invalid-config": {"path": "/image", "message": "required"}}));
        let e = ProviderError::image_pull("nope");
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json, serde_json::json!({"image-pull": {"message": "nope", "retryable": false}}));
    }
}
