//! What can go wrong when the host runs a provider call, as one typed error.
//!
//! A provider's own answer (`provider-error`) stays typed inside [`HostError::Provider`], so a
//! caller can tell "the provider said no" from "the sandbox around the provider failed".

use std::error::Error as StdError;

use crate::records::ProviderError;

/// An error's message and its causes', outermost first, each said once: a cause whose text the
/// message so far already holds is left out (many errors repeat their source's message in
/// their own), and one whose error does not say why (hyper's "client error (Connect)") gets
/// its innermost cause's reason ("Connection refused"). For messages on one line.
pub fn with_causes(err: &(dyn StdError + 'static)) -> String {
    let mut text = err.to_string();
    let mut current = err.source();
    while let Some(cause) = current {
        let said = cause.to_string();
        if !text.contains(&said) {
            text = format!("{text}: {said}");
        }
        current = cause.source();
    }
    text
}

/// Why a host operation failed.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The host's own settings (policy, limits, cache directory) cannot work.
    #[error("invalid host settings: {0}")]
    Config(String),
    /// The component could not be read, validated or compiled.
    #[error("cannot load the provider component: {0}")]
    Load(String),
    /// The component is valid WebAssembly but does not fit the `kubernetes-provider` world
    /// (an import the host does not offer, an export missing or of another type).
    #[error("the component does not fit the kubernetes-provider world: {0}")]
    Link(String),
    /// A fresh instance could not be created (for example the instance pool is exhausted).
    #[error("cannot start the provider for {call}: {message}")]
    Instantiate {
        /// The export that was about to be called.
        call: &'static str,
        /// Wasmtime's explanation.
        message: String,
    },
    /// The guest trapped (a panic, an abort, an out-of-bounds access); its instance is gone.
    #[error("the provider trapped in {call}: {message}")]
    Trap {
        /// The export that trapped.
        call: &'static str,
        /// The trap with the guest's backtrace.
        message: String,
    },
    /// The call ran past its wall-clock deadline; its instance was discarded.
    #[error("{call} did not finish within {limit_ms} ms; the provider instance was discarded")]
    Timeout {
        /// The export that overran.
        call: &'static str,
        /// The deadline that applied.
        limit_ms: u64,
    },
    /// The guest asked for more linear memory than the host allows; its instance was discarded.
    #[error(
        "{call} exceeded the memory limit of {limit_bytes} bytes (it asked for {requested_bytes}); \
         the provider instance was discarded"
    )]
    MemoryLimit {
        /// The export that ran out of memory.
        call: &'static str,
        /// The cap that applied.
        limit_bytes: u64,
        /// The size the guest tried to grow to.
        requested_bytes: u64,
    },
    /// The input of a call is larger than the host passes to a guest; nothing was called.
    #[error(
        "{call} was refused: its input is {bytes} bytes, and the host passes at most {limit} to a provider \
         (limits max-input-bytes); send less"
    )]
    InputTooLarge {
        /// The export that was not called.
        call: &'static str,
        /// The size of the input.
        bytes: u64,
        /// The limit that applied.
        limit: u64,
    },
    /// The provider ran to completion and answered with its own typed error.
    #[error("{0}")]
    Provider(ProviderError),
    /// A request the host made for itself (listing the installation's leases) failed.
    #[error("the host's own request to the cluster failed: {0}")]
    Cluster(String),
}

impl HostError {
    /// A stable, machine-readable name of the case (`timeout`, `trap`, ...; the WIT case name
    /// for a provider's own error), for wire protocols and log fields.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config(_) => "host-config",
            Self::Load(_) => "load",
            Self::Link(_) => "link",
            Self::Instantiate { .. } => "instantiate",
            Self::Trap { .. } => "trap",
            Self::Timeout { .. } => "timeout",
            Self::MemoryLimit { .. } => "memory-limit",
            Self::InputTooLarge { .. } => "input-too-large",
            Self::Provider(e) => e.kind(),
            Self::Cluster(_) => "cluster",
        }
    }

    /// Whether the same call may succeed later: true for a timeout and for a provider error
    /// that says so; a trap or a load failure will not fix itself.
    pub fn retryable(&self) -> bool {
        match self {
            Self::Timeout { .. } | Self::Instantiate { .. } => true,
            Self::Provider(e) => e.retryable(),
            Self::Config(_)
            | Self::Load(_)
            | Self::Link(_)
            | Self::Trap { .. }
            | Self::MemoryLimit { .. }
            | Self::InputTooLarge { .. }
            | Self::Cluster(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error that says `text` and has `cause` as its source, as hyper's do.
    #[derive(Debug)]
    struct Wrapped {
        text: &'static str,
        cause: std::io::Error,
    }

    impl std::fmt::Display for Wrapped {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.text)
        }
    }

    impl StdError for Wrapped {
        fn source(&self) -> Option<&(dyn StdError + 'static)> {
            Some(&self.cause)
        }
    }

    #[test]
    fn a_transport_failure_says_its_innermost_cause_once() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "Connection refused");
        let connect = Wrapped { text: "client error (Connect)", cause: refused() };
        assert_eq!(with_causes(&connect), "client error (Connect): Connection refused");
        let said = Wrapped { text: "connect failed: Connection refused", cause: refused() };
        assert_eq!(with_causes(&said), "connect failed: Connection refused", "a cause already said is not repeated");
    }
}
