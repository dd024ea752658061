//! Describe: who the provider is, what it can do, the JSON Schema of its config, and the
//! `kube` access it needs, declared so the host grants exactly that (two-sided capabilities:
//! the host runs the provider with the intersection of this and the operator's policy).

pub use contract::{AccessRule, AccessVerb, ProviderInfo};

use crate::api_versions::{self, ClaimVersion, SandboxVersion};
use crate::config::{self, Backend};
use crate::kube_api::ResourceType;

/// A namespaced rule for a resource type the provider uses, in every listed version.
fn rule(types: &[ResourceType], verbs: &[AccessVerb]) -> AccessRule {
    let first = &types[0];
    let versions: Vec<&str> = types.iter().map(|t| t.version.as_str()).collect();
    AccessRule::new(&first.group, &versions, &first.plural, verbs)
}

/// Everything the provider does through the host's `kube` interface, and no more (a test of
/// the end-to-end suite checks that a full set of lifecycles uses every verb declared here):
/// Sandboxes in both versions (created, watched for readiness, renewed, suspended, deleted;
/// discovery picks the version; a claim lease reads and watches the Sandbox its claim got, and
/// destroy lists them by the claim's uid), SandboxClaims in both versions (created, watched
/// for readiness, renewed, deleted, listed by a watch's re-list; discovery picks the version),
/// Jobs (readiness watches their pods instead), pods read-only, the per-lease Secret
/// (refreshed when an earlier attempt made it), the workspace claim of a reusable lease
/// (deleted by destroy), and the namespace object (probe checks it exists).
pub fn access() -> Vec<AccessRule> {
    use AccessVerb::*;
    let sandboxes: Vec<ResourceType> = SandboxVersion::PREFERENCE.iter().map(|v| v.resource()).collect();
    let claims: Vec<ResourceType> = ClaimVersion::PREFERENCE.iter().map(|v| v.resource()).collect();
    vec![
        rule(&sandboxes, &[Get, Create, Patch, Delete, List, Watch, Discovery]),
        rule(&claims, &[Get, Create, Patch, Delete, List, Watch, Discovery]),
        rule(&[api_versions::jobs()], &[Get, Create, Patch, Delete]),
        rule(&[api_versions::pods()], &[Get, List, Watch, Exec]),
        rule(&[api_versions::secrets()], &[Create, Get, Delete, Patch]),
        rule(&[api_versions::pvcs()], &[Delete]),
        AccessRule { namespaced: false, ..rule(&[api_versions::namespaces()], &[Get]) },
    ]
}

/// The provider's description.
pub fn describe() -> ProviderInfo {
    ProviderInfo {
        driver_key: "kubernetes".to_string(),
        display_name: "Kubernetes (agent-sandbox Sandbox or SandboxClaim, or Job)".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        config_schema: config::SCHEMA.to_string(),
        reusable_leases: true,
        backends: Backend::ALL.to_vec(),
        access: access(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describes_the_provider() {
        let info = describe();
        assert_eq!(info.driver_key, "kubernetes");
        assert_eq!(info.backends, vec![Backend::Sandbox, Backend::Job, Backend::Claim]);
        let schema: serde_json::Value = serde_json::from_str(&info.config_schema).unwrap();
        assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
        assert_eq!(schema["required"], serde_json::json!(["namespace"]));
        assert_eq!(schema["else"]["required"], serde_json::json!(["image"]), "the image is required but for claims");
        assert_eq!(schema["then"]["required"], serde_json::json!(["claim"]));
    }

    #[test]
    fn declares_pods_read_only_and_no_listing_of_secrets() {
        let access = access();
        let find = |plural: &str| access.iter().find(|r| r.plural == plural).expect("declared");
        assert_eq!(find("sandboxes").versions, vec!["v1beta1", "v1alpha1"]);
        let claims = find("sandboxclaims");
        assert_eq!(
            (claims.group.as_str(), claims.versions.clone()),
            ("extensions.agents.x-k8s.io", vec!["v1beta1".to_string(), "v1alpha1".to_string()])
        );
        for verb in [
            AccessVerb::Get,
            AccessVerb::Create,
            AccessVerb::Patch,
            AccessVerb::Delete,
            AccessVerb::List,
            AccessVerb::Watch,
            AccessVerb::Discovery,
        ] {
            assert!(claims.allows(verb), "{verb}");
        }
        assert!(!claims.allows(AccessVerb::Exec));
        assert!(!find("pods").allows(AccessVerb::Delete) && !find("pods").allows(AccessVerb::Patch));
        assert!(!find("secrets").allows(AccessVerb::List) && !find("secrets").allows(AccessVerb::Watch));
        assert!(!find("namespaces").namespaced);
        assert!(access.iter().all(|r| r.subresources.is_empty()), "no status writes");
    }
}
