//! The provider's error type (the contract's `provider-error`), and the one place where a
//! Kubernetes API failure is classified for the host.
//!
//! Every message says what happened, what it means, and what to do; `retryable` says whether
//! the same call may succeed later. No message ever contains a secret value.

pub use contract::{ErrorDetail, InvalidConfigDetail, ProviderError};

use crate::kube_api::KubeError;

/// The provider's own way to build a [`ProviderError`]: the contract knows nothing of
/// Kubernetes, so classifying an API failure lives here.
pub trait FromKube {
    /// Classifies a failed API call. `action` names what was attempted, for the message
    /// (`create Sandbox team-a/pc-1`).
    fn from_kube(error: &KubeError, action: &str) -> Self;
}

impl FromKube for ProviderError {
    fn from_kube(error: &KubeError, action: &str) -> Self {
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
                "{action} failed: the API server answered 410 Gone ({m}), which does not say whether the object \
                 exists. Retry the call."
            )),
            KubeError::Invalid(m) => Self::rejected(format!(
                "{action} was rejected as invalid: {m}. Fix the config field the message names, then retry."
            )),
            KubeError::Forbidden(m) if m.contains("exceeded quota") => Self::capacity(format!(
                "{action} failed: the namespace's resource quota is exhausted ({m}). Free quota or raise it, or \
                 lower the config's resources; retry later."
            )),
            KubeError::Forbidden(m) => Self::forbidden(format!(
                "{action} was refused by the cluster's RBAC: {m}. Grant the host's service account this verb on \
                 this resource type in this namespace (`sandbox-host rbac` prints the Role it needs)."
            )),
            KubeError::Denied(m) => {
                Self::denied(format!("{action} was refused by the host, and nothing was sent to the cluster: {m}"))
            }
            KubeError::NotOwned(m) => Self::conflict(
                format!(
                    "{action} failed: the object exists and this installation did not create it ({m}). Another \
                     installation or a person holds the name; the host will not touch it."
                ),
                false,
            ),
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
            KubeError::Other { code, message } if *code >= 500 && kubelet_unreachable(message) => {
                Self::unavailable(format!(
                    "{action} failed: the API server could not reach the node's kubelet ({message}). The node may be \
                     down, or its kubelet port (10250) closed to the control plane; retry later, and acquire a new \
                     sandbox if the node is gone."
                ))
            }
            KubeError::Other { code, message } if *code == 429 || *code >= 500 => Self::unavailable(format!(
                "{action} failed with HTTP {code} ({message}). The API server is overloaded or failing; retry later."
            )),
            KubeError::Other { code, message } => Self::internal(format!(
                "{action} failed with an unexpected HTTP {code} ({message}). Report this with the message."
            )),
        }
    }
}

/// Whether an API server error says it could not reach a kubelet (an exec, log or port-forward
/// is proxied to the node): kube-apiserver's `error dialing backend: dial tcp ...:10250: ...`.
fn kubelet_unreachable(message: &str) -> bool {
    message.contains("error dialing backend") || message.contains(":10250")
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
            (KubeError::Denied("policy".into()), "denied", false),
            (KubeError::NotOwned("not ours".into()), "conflict", false),
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
    fn an_unreachable_kubelet_is_not_called_an_overloaded_api_server() {
        let dial = "error dialing backend: dial tcp 10.0.0.5:10250: connect: connection refused";
        let e = ProviderError::from_kube(&KubeError::Other { code: 500, message: dial.into() }, "exec in pod ns/p");
        assert_eq!((e.kind(), e.retryable()), ("unavailable", true));
        assert!(e.message().contains("could not reach the node's kubelet") && e.message().contains(dial), "{e}");
        assert!(!e.message().contains("overloaded"), "{e}");
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
