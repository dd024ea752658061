//! Why a Kubernetes call failed, as the contract's `kube-error` says it: the provider's logic
//! decides on these (adopt on `already-exists`, re-list on `gone`, back off on
//! `unavailable`), and each side of the WIT converts its own bindings to it once (the
//! component's glue in the provider, `KubeError::from` in the host).

/// How a `transport` error's message begins when the request surely never reached the API
/// server (the connection to it could not be made). The WIT has one case for every request
/// that got no answer; a create that was never sent made nothing, and clean-up after a failed
/// acquire must know that to say nothing of it.
pub const NOT_SENT: &str = "not sent: ";

/// Why a Kubernetes call failed (the WIT `kube-error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KubeError {
    #[error("not found: {0}")]
    NotFound(String),
    #[error("already exists: {0}")]
    AlreadyExists(String),
    #[error("conflict: {0}")]
    Conflict(String),
    /// 410: inside a watch, or for a list's continue token, the version asked for is too old
    /// (re-list); on any other call it proves nothing about the object.
    #[error("gone: {0}")]
    Gone(String),
    #[error("invalid: {0}")]
    Invalid(String),
    /// The cluster's RBAC refused the host's credentials (403).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// The host refused before sending anything: outside its policy.
    #[error("denied by the host: {0}")]
    Denied(String),
    /// The object exists but is not this installation's; the host neither reads nor writes it.
    /// For a lease, its object is gone and another holds the name.
    #[error("not this installation's: {0}")]
    NotOwned(String),
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    #[error("timeout: {0}")]
    Timeout(String),
    #[error("unavailable: {message}")]
    Unavailable { message: String, retry_after_seconds: Option<u32> },
    #[error("transport: {0}")]
    Transport(String),
    #[error("HTTP {code}: {message}")]
    Other { code: u16, message: String },
}

impl KubeError {
    /// Whether the request surely never reached the API server ([`NOT_SENT`]).
    pub fn was_not_sent(&self) -> bool {
        matches!(self, Self::Transport(message) if message.starts_with(NOT_SENT))
    }
}
