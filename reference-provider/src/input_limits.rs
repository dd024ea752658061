//! Every size limit on what a caller sends, defined once with its reason, and the check of an
//! acquire request's own fields before anything in it is used.
//!
//! No Kubernetes or Linux limit applies (the provider makes no objects and starts no process),
//! so the numbers are the provider's own: large enough for any id or config a host sends in
//! practice, small enough that a lease stays a few hundred bytes and no message echoes much.

use contract::{AcquireRequest, ProviderError};

/// One limit: the largest accepted size in bytes, and what a caller over it should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limit {
    /// The largest size accepted, in UTF-8 bytes.
    pub max: usize,
    /// What to do instead.
    pub fix: &'static str,
}

impl Limit {
    /// `Err` with a message naming `what` (never its value) when `size` is over the limit.
    pub fn check(&self, what: &str, size: usize) -> Result<(), String> {
        if size > self.max {
            Err(format!("{what} is {size} bytes, over the provider's limit of {} bytes. {}", self.max, self.fix))
        } else {
            Ok(())
        }
    }
}

/// The config's JSON text: what the schema allows is a few hundred bytes.
pub const CONFIG_TEXT: Limit = Limit { max: 64 * 1024, fix: "Send the config validate-config normalized." };

/// The acquisition id, the run id and the agent id: bounded like Kubernetes' longest names, so
/// the lease id (which carries the acquisition id) stays short.
pub const HOST_ID: Limit = Limit { max: 253, fix: "Use a shorter id, such as a ULID or a UUID." };

/// A configured failure's message.
pub const FAILURE_MESSAGE: Limit = Limit { max: 1024, fix: "Shorten the message." };

/// Lease metadata the provider reads: what acquire writes is under 1 KiB (two ids of at most
/// 253 bytes and a few numbers); larger metadata is not this provider's.
pub const LEASE_METADATA: Limit = Limit { max: 4 * 1024, fix: "Pass the lease as acquire or renew returned it." };

/// Checks an acquire request's ids before its config is parsed (which checks the config's
/// size). An empty
/// acquisition id is refused: a lease id derived from it would name every such acquisition.
pub fn check_request(request: &AcquireRequest) -> Result<(), ProviderError> {
    if request.acquisition_id.is_empty() {
        return Err(ProviderError::rejected(
            "the acquisition id is empty: the lease id derives from it, so every retry must send the same non-empty \
             id. Send the id of this acquisition.",
        ));
    }
    HOST_ID.check("the acquisition id", request.acquisition_id.len()).map_err(ProviderError::rejected)?;
    HOST_ID.check("the run id", request.run_id.len()).map_err(ProviderError::rejected)?;
    match &request.agent_id {
        Some(agent) => HOST_ID.check("the agent id", agent.len()).map_err(ProviderError::rejected),
        None => Ok(()),
    }
}
