//! Describe: who the provider is, what it can do, and the JSON Schema of its config.

pub use sandbox_contract::ProviderInfo;

use crate::config::{self, Backend};

/// The provider's description.
pub fn describe() -> ProviderInfo {
    ProviderInfo {
        driver_key: "kubernetes".to_string(),
        display_name: "Kubernetes (agent-sandbox Sandbox or Job)".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        config_schema: config::schema().to_string(),
        reusable_leases: true,
        backends: vec![Backend::Sandbox, Backend::Job],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_provider() {
        let info = describe();
        assert_eq!(info.driver_key, "kubernetes");
        assert_eq!(info.backends, vec![Backend::Sandbox, Backend::Job]);
        let schema: serde_json::Value = serde_json::from_str(&info.config_schema).unwrap();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(schema["required"], serde_json::json!(["namespace", "image"]));
    }
}
