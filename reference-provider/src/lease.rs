//! The lease: the only place this provider keeps state. Every call gets a fresh instance, so
//! whatever a later call needs is written into the lease's metadata at acquire (and renew):
//! when it was acquired, when it expires, the lease TTL renewals are capped by, whether it is
//! reusable, and the ids it was acquired for. Nothing secret: env values are never read.
//!
//! Lease ids read `reference:<acquisition-id>`, so a retried acquire gets the same id. The
//! contract's lease is neutral (`provider-lease-id`, `expires-at`, `reusable`, `metadata`); the
//! placement a host stores beside it says there is no workload ([`crate::placement`]).
//!
//! Reading a stored lease checks that it is one this provider wrote and that the host handed it
//! back as it was returned: the id's prefix, the metadata's format and fields, and that the
//! typed `provider-lease-id`, `expires-at` and `reusable` agree with the metadata. This is no
//! proof of origin (a provider without a key or storage cannot tell its own lease from a
//! careful forgery); it catches leases of other providers, mangled metadata, and hosts that
//! edit a lease or keep an old one.

use contract::{Lease, quote};
use serde::{Deserialize, Serialize};

use crate::config::MAX_LEASE_TTL_SECONDS;
use crate::input_limits::{HOST_ID, LEASE_METADATA};
use crate::placement;

/// The prefix of every lease id this provider writes.
pub const LEASE_ID_PREFIX: &str = "reference:";

/// The longest lease id this provider writes.
pub const LEASE_ID_MAX: usize = LEASE_ID_PREFIX.len() + HOST_ID.max;

/// The metadata format written today.
const FORMAT: u32 = 1;

/// The lease id for an acquisition: the same for every retry of it, and different for every
/// other acquisition id.
pub fn lease_id(acquisition_id: &str) -> String {
    format!("{LEASE_ID_PREFIX}{acquisition_id}")
}

/// Whether this provider could have written `id`.
pub fn is_ours(id: &str) -> bool {
    id.starts_with(LEASE_ID_PREFIX) && id.len() > LEASE_ID_PREFIX.len() && id.len() <= LEASE_ID_MAX
}

/// What the provider keeps of a lease, as its metadata (JSON, kebab-case keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeaseState {
    format: u32,
    /// The lease's id, so metadata moved to another lease is noticed.
    pub lease_id: String,
    /// When acquire returned (epoch millis).
    pub acquired_at: i64,
    /// When the lease ends (epoch millis); the typed `expires-at` says the same.
    pub expires_at: i64,
    /// The config's lease TTL at acquire: every renewal is capped at now plus this.
    pub lease_ttl_seconds: u32,
    /// Whether the host asked for a reusable lease.
    pub reusable: bool,
    /// The host's run the lease serves.
    pub run_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// When the lease was last renewed (epoch millis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renewed_at: Option<i64>,
}

/// Why a stored lease cannot be used: each is an `expired` answer for resume-check and renew.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreadable {
    #[error(
        "the lease id {} is not one this provider writes (reference:<acquisition-id>); this lease belongs to another \
         provider. Send it to the provider that made it, or acquire a new lease.",
        quote(.0)
    )]
    NotOurs(String),
    #[error(
        "the lease's metadata is {0} bytes, more than this provider ever writes ({max} bytes); the host changed it. \
         Acquire a new lease.",
        max = LEASE_METADATA.max
    )]
    MetadataTooLarge(usize),
    #[error(
        "the lease's metadata is not this provider's lease state ({0}); the host lost or changed it. Acquire a new \
         lease."
    )]
    Metadata(String),
    #[error("the lease's metadata has format {0}, and this provider reads format {FORMAT}. Acquire a new lease.")]
    Format(u32),
    #[error(
        "the lease's {0} does not match its metadata: the host changed the lease, or kept an old copy after renew \
         returned a new one. Store each lease exactly as returned; acquire a new lease."
    )]
    Changed(&'static str),
}

/// How a serde error is shown: its category and position, never the input it quotes.
fn describe_json_error(e: &serde_json::Error) -> String {
    let category = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "a field is missing or of the wrong type",
        serde_json::error::Category::Eof => "cut short",
    };
    format!("{category}, at line {} column {}", e.line(), e.column())
}

impl LeaseState {
    /// The state of a lease acquired at `now` until `expires_at`.
    pub fn new(
        lease_id: String,
        now: i64,
        expires_at: i64,
        lease_ttl_seconds: u32,
        reusable: bool,
        run_id: String,
        agent_id: Option<String>,
    ) -> Self {
        Self {
            format: FORMAT,
            lease_id,
            acquired_at: now,
            expires_at,
            lease_ttl_seconds,
            reusable,
            run_id,
            agent_id,
            renewed_at: None,
        }
    }

    /// The lease the host stores: this state as its metadata, placed nowhere (no workload).
    pub fn to_lease(&self) -> Lease {
        placement::whole(
            self.lease_id.clone(),
            Some(self.expires_at),
            self.reusable,
            serde_json::to_string(self).unwrap_or_default(),
        )
    }

    /// The state of a stored lease, when it is one this provider wrote and the host kept it
    /// as returned (see the module docs).
    pub fn read(lease: &Lease) -> Result<Self, Unreadable> {
        if !is_ours(&lease.provider_lease_id) {
            return Err(Unreadable::NotOurs(lease.provider_lease_id.clone()));
        }
        if lease.metadata.len() > LEASE_METADATA.max {
            return Err(Unreadable::MetadataTooLarge(lease.metadata.len()));
        }
        let state: Self =
            serde_json::from_str(&lease.metadata).map_err(|e| Unreadable::Metadata(describe_json_error(&e)))?;
        if state.format != FORMAT {
            return Err(Unreadable::Format(state.format));
        }
        if state.lease_ttl_seconds == 0 || state.lease_ttl_seconds > MAX_LEASE_TTL_SECONDS {
            return Err(Unreadable::Metadata(format!(
                "a lease TTL of {} s, outside 1 to {MAX_LEASE_TTL_SECONDS}",
                state.lease_ttl_seconds
            )));
        }
        if state.lease_id != lease.provider_lease_id {
            return Err(Unreadable::Changed("provider-lease-id"));
        }
        if lease.expires_at != Some(state.expires_at) {
            return Err(Unreadable::Changed("expires-at"));
        }
        if lease.reusable != state.reusable {
            return Err(Unreadable::Changed("reusable"));
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state() -> LeaseState {
        LeaseState::new(lease_id("a-1"), 1_000, 61_000, 60, false, "r-1".into(), Some("agent".into()))
    }

    #[test]
    fn a_lease_round_trips_through_its_metadata() {
        let lease = state().to_lease();
        assert_eq!(lease.provider_lease_id, "reference:a-1");
        assert_eq!(lease.expires_at, Some(61_000));
        assert_eq!((lease.namespace.as_str(), lease.api_version.as_str(), lease.workload_uid.as_str()), ("", "", ""));
        assert_eq!((lease.pod_name, lease.pod_uid, lease.pod_ip), (None, None, None));
        let metadata: serde_json::Value = serde_json::from_str(&lease.metadata).unwrap();
        assert_eq!(metadata["format"], 1);
        assert_eq!(metadata["lease-ttl-seconds"], 60);
        assert_eq!(metadata["acquired-at"], 1_000);
        assert_eq!(LeaseState::read(&state().to_lease()), Ok(state()));
    }

    #[test]
    fn lease_ids_derive_from_the_acquisition_id_alone() {
        assert_eq!(lease_id("a-1"), lease_id("a-1"));
        assert_ne!(lease_id("a-1"), lease_id("a-2"));
        assert!(is_ours(&lease_id("a-1")));
        assert!(is_ours(&lease_id(&"x".repeat(HOST_ID.max))));
        for foreign in ["k8s:job:default:pc-1", "reference:", "", &lease_id(&"x".repeat(HOST_ID.max + 1))] {
            assert!(!is_ours(foreign), "{foreign}");
        }
    }

    #[test]
    fn a_lease_of_another_provider_or_with_garbage_metadata_is_unreadable() {
        let mut foreign = state().to_lease();
        foreign.provider_lease_id = "k8s:job:default:pc-1".into();
        assert!(matches!(LeaseState::read(&foreign), Err(Unreadable::NotOurs(_))));
        for garbage in ["", "null", "{not json", "[1]", r#"{"format":1}"#, "\"text\""] {
            let lease = Lease { metadata: garbage.into(), ..state().to_lease() };
            assert!(matches!(LeaseState::read(&lease), Err(Unreadable::Metadata(_))), "{garbage}");
        }
        let huge = Lease { metadata: "x".repeat(LEASE_METADATA.max + 1), ..state().to_lease() };
        assert_eq!(LeaseState::read(&huge), Err(Unreadable::MetadataTooLarge(LEASE_METADATA.max + 1)));
        let future = Lease {
            metadata: state().to_lease().metadata.replace("\"format\":1", "\"format\":2"),
            ..state().to_lease()
        };
        assert_eq!(LeaseState::read(&future), Err(Unreadable::Format(2)));
        let no_ttl = Lease {
            metadata: state().to_lease().metadata.replace("\"lease-ttl-seconds\":60", "\"lease-ttl-seconds\":0"),
            ..state().to_lease()
        };
        assert!(matches!(LeaseState::read(&no_ttl), Err(Unreadable::Metadata(m)) if m.contains("0 s")));
    }

    #[test]
    fn a_lease_the_host_changed_is_unreadable() {
        let lease = state().to_lease();
        let moved = Lease { provider_lease_id: lease_id("a-2"), ..lease.clone() };
        assert_eq!(LeaseState::read(&moved), Err(Unreadable::Changed("provider-lease-id")));
        let stretched = Lease { expires_at: Some(999_999), ..lease.clone() };
        assert_eq!(LeaseState::read(&stretched), Err(Unreadable::Changed("expires-at")));
        let reusable = Lease { reusable: true, ..lease };
        assert_eq!(LeaseState::read(&reusable), Err(Unreadable::Changed("reusable")));
    }

    #[test]
    fn messages_quote_only_a_short_prefix_of_what_they_were_sent() {
        let long_id = format!("k8s:{}", "z".repeat(10_000));
        let message = Unreadable::NotOurs(long_id).to_string();
        assert!(message.len() < 400, "{message}");
        let secret_field = Lease { metadata: format!("{{\"{}\": 1}}", "s".repeat(3_000)), ..state().to_lease() };
        let message = LeaseState::read(&secret_field).unwrap_err().to_string();
        assert!(!message.contains("sss"), "the metadata's text is not echoed: {message}");
    }
}
