//! Describe: who the provider is and what it can do.
//!
//! - `driver-key` `reference`.
//! - `reusable-leases` true: release keeps nothing, so every lease can be resumed until its
//!   expiry, which is what the contract asks of a reusable lease (and what a stateless provider
//!   does for an ephemeral one too, see [`crate::resume`]).
//! - `backends` empty (reported by the `kubernetes` export's `backends`): the contract's
//!   backends are an agent-sandbox Sandbox and a Job, and this provider runs neither; a host
//!   that picks providers by backend never sends it real work.
//! - `access` empty: it makes no `kube` call (the built component does not even import `kube`),
//!   so a host grants it nothing.

use contract::ProviderInfo;

use crate::config;

/// The key a host registers this provider under.
pub const DRIVER_KEY: &str = "reference";

/// The provider's description.
pub fn describe() -> ProviderInfo {
    ProviderInfo {
        driver_key: DRIVER_KEY.to_string(),
        display_name: "Reference provider (leases only, no workload)".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        config_schema: config::schema().to_string(),
        reusable_leases: true,
        backends: Vec::new(),
        access: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_a_provider_that_needs_nothing_of_the_host() {
        let info = describe();
        assert_eq!(info.driver_key, "reference");
        assert!(info.reusable_leases);
        assert!(info.backends.is_empty() && info.access.is_empty(), "{info:?}");
        let schema: serde_json::Value = serde_json::from_str(&info.config_schema).unwrap();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    }
}
