//! Which API versions the provider talks: the resource types it uses, the Sandbox version
//! (discovered, preferring v1beta1, or pinned by config) and the SandboxClaim version
//! (discovered, preferring v1beta1) a lease records.

use contract::k8s::agent_sandbox::{CLAIMS, EXTENSIONS_GROUP, SANDBOXES};

use crate::config::SandboxApiVersion;
use crate::errors::{FromKube, ProviderError};
use crate::kube_api::{Kube, ResourceType};

/// agent-sandbox's API group.
pub use contract::k8s::agent_sandbox::GROUP as SANDBOX_GROUP;

/// Core pods' group, version and plural.
const PODS: [&str; 3] = ["", "v1", "pods"];

/// `v1` pods.
pub fn pods() -> ResourceType {
    ResourceType::new(PODS[0], PODS[1], PODS[2])
}

/// Whether `resource` is pods (any version), told without building a [`ResourceType`]: asked
/// of every answer the provider parses.
pub fn is_pods(resource: &ResourceType) -> bool {
    resource.group == PODS[0] && resource.plural == PODS[2]
}

/// `v1` secrets.
pub fn secrets() -> ResourceType {
    ResourceType::new("", "v1", "secrets")
}

/// `v1` persistentvolumeclaims.
pub fn pvcs() -> ResourceType {
    ResourceType::new("", "v1", "persistentvolumeclaims")
}

/// `v1` namespaces (cluster-scoped).
pub fn namespaces() -> ResourceType {
    ResourceType::new("", "v1", "namespaces")
}

/// `batch/v1` jobs.
pub fn jobs() -> ResourceType {
    ResourceType::new("batch", "v1", "jobs")
}

/// A Sandbox API version the provider can create and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SandboxVersion {
    /// agent-sandbox v0.5 and later: `spec.operatingMode` suspends.
    V1beta1,
    /// agent-sandbox up to v0.5 (deprecated there, removed in v1.0): `spec.replicas` suspends.
    V1alpha1,
}

impl SandboxVersion {
    /// Every version, preferred first.
    pub const PREFERENCE: [SandboxVersion; 2] = [SandboxVersion::V1beta1, SandboxVersion::V1alpha1];

    /// `v1beta1` or `v1alpha1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1beta1 => "v1beta1",
            Self::V1alpha1 => "v1alpha1",
        }
    }

    /// The `sandboxes` resource in this version.
    pub fn resource(self) -> ResourceType {
        ResourceType::new(SANDBOX_GROUP, self.as_str(), SANDBOXES)
    }

    /// From a version name (`v1beta1`).
    pub fn from_version(version: &str) -> Option<Self> {
        Self::PREFERENCE.into_iter().find(|v| v.as_str() == version)
    }

    /// From an object's `apiVersion` (`agents.x-k8s.io/v1beta1`).
    pub fn from_api_version(api_version: &str) -> Option<Self> {
        let (group, version) = api_version.split_once('/')?;
        if group == SANDBOX_GROUP { Self::from_version(version) } else { None }
    }
}

/// The Sandbox versions the cluster serves that the provider knows, preferred first.
pub fn served_sandbox_versions<K: Kube>(kube: &K) -> Result<Vec<SandboxVersion>, ProviderError> {
    let served = kube
        .served_versions(SANDBOX_GROUP)
        .map_err(|e| ProviderError::from_kube(&e, "discover the agents.x-k8s.io API versions"))?;
    Ok(SandboxVersion::PREFERENCE.into_iter().filter(|v| served.iter().any(|s| s == v.as_str())).collect())
}

/// The version to create a Sandbox with: the config's pin if the cluster serves it, or the
/// preferred served version for `auto`.
pub fn resolve<K: Kube>(kube: &K, wanted: SandboxApiVersion) -> Result<SandboxVersion, ProviderError> {
    let served = served_sandbox_versions(kube)?;
    let pinned = match wanted {
        SandboxApiVersion::Auto => None,
        SandboxApiVersion::V1beta1 => Some(SandboxVersion::V1beta1),
        SandboxApiVersion::V1alpha1 => Some(SandboxVersion::V1alpha1),
    };
    let names = || served.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
    match pinned {
        Some(v) if served.contains(&v) => Ok(v),
        Some(v) if served.is_empty() => Err(not_installed(Some(v))),
        Some(v) => Err(ProviderError::invalid_config(
            "/sandboxApiVersion",
            format!(
                "is pinned to {} but the cluster serves only {}; set it to \"auto\" or to a served version",
                v.as_str(),
                names()
            ),
        )),
        None => served.first().copied().ok_or_else(|| not_installed(None)),
    }
}

fn not_installed(pinned: Option<SandboxVersion>) -> ProviderError {
    let wanted = pinned.map_or_else(|| "any Sandbox version".to_string(), |v| format!("Sandbox {}", v.as_str()));
    ProviderError::rejected(format!(
        "the cluster does not serve {wanted} (agents.x-k8s.io): agent-sandbox is not installed. Install \
         agent-sandbox (v0.5 or later), or set backend to \"job\"."
    ))
}

/// The version to reach an existing Sandbox with: the lease's own if still served, else the
/// preferred served one (the same object is visible in every served version). `None` when the
/// cluster serves no Sandbox version at all.
pub fn for_existing<K: Kube>(kube: &K, recorded_api_version: &str) -> Result<Option<SandboxVersion>, ProviderError> {
    let served = served_sandbox_versions(kube)?;
    let recorded = SandboxVersion::from_api_version(recorded_api_version).filter(|v| served.contains(v));
    Ok(recorded.or_else(|| served.first().copied()))
}

/// A SandboxClaim API version (`extensions.agents.x-k8s.io`) the provider can create and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimVersion {
    /// agent-sandbox v0.5 and later: a claim names a warm pool (`spec.warmPoolRef`), whose
    /// template makes the Sandbox.
    V1beta1,
    /// agent-sandbox v0.4: a claim names its template (`spec.sandboxTemplateRef`) and, in
    /// `spec.warmpool`, a pool, `default` (any pool of the template) or `none`.
    V1alpha1,
}

impl ClaimVersion {
    /// Every version, preferred first.
    pub const PREFERENCE: [ClaimVersion; 2] = [ClaimVersion::V1beta1, ClaimVersion::V1alpha1];

    /// `v1beta1` or `v1alpha1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1beta1 => "v1beta1",
            Self::V1alpha1 => "v1alpha1",
        }
    }

    /// The `sandboxclaims` resource in this version.
    pub fn resource(self) -> ResourceType {
        ResourceType::new(EXTENSIONS_GROUP, self.as_str(), CLAIMS)
    }

    /// From an object's `apiVersion` (`extensions.agents.x-k8s.io/v1beta1`).
    pub fn from_api_version(api_version: &str) -> Option<Self> {
        let (group, version) = api_version.split_once('/')?;
        if group == EXTENSIONS_GROUP { Self::PREFERENCE.into_iter().find(|v| v.as_str() == version) } else { None }
    }
}

/// The SandboxClaim versions the cluster serves that the provider knows, preferred first.
pub fn served_claim_versions<K: Kube>(kube: &K) -> Result<Vec<ClaimVersion>, ProviderError> {
    let served = kube
        .served_versions(EXTENSIONS_GROUP)
        .map_err(|e| ProviderError::from_kube(&e, &format!("discover the {EXTENSIONS_GROUP} API versions")))?;
    Ok(ClaimVersion::PREFERENCE.into_iter().filter(|v| served.iter().any(|s| s == v.as_str())).collect())
}

/// The version to create a claim with: the preferred one the cluster serves.
pub fn resolve_claim<K: Kube>(kube: &K) -> Result<ClaimVersion, ProviderError> {
    served_claim_versions(kube)?.first().copied().ok_or_else(|| {
        ProviderError::rejected(format!(
            "the cluster does not serve SandboxClaims ({EXTENSIONS_GROUP}): agent-sandbox's extensions (the claim, \
             template and warm pool controllers) are not installed. Install them, or set backend to \"sandbox\" or \
             \"job\"."
        ))
    })
}

/// The version to reach an existing claim with: the lease's own if still served, else the
/// preferred served one. `None` when the cluster serves no SandboxClaim version at all.
pub fn claim_for_existing<K: Kube>(
    kube: &K,
    recorded_api_version: &str,
) -> Result<Option<ClaimVersion>, ProviderError> {
    let served = served_claim_versions(kube)?;
    let recorded = ClaimVersion::from_api_version(recorded_api_version).filter(|v| served.contains(v));
    Ok(recorded.or_else(|| served.first().copied()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kube::{FakeClock, FakeKube};

    fn kube_serving(versions: &[&str]) -> FakeKube {
        let kube = FakeKube::new(FakeClock::new(0));
        kube.serve_sandbox_versions(versions);
        kube
    }

    fn kube_serving_claims(versions: &[&str]) -> FakeKube {
        let kube = FakeKube::new(FakeClock::new(0));
        kube.serve_claim_versions(versions);
        kube
    }

    #[test]
    fn claims_prefer_v1beta1_and_keep_a_served_recorded_version() {
        assert_eq!(resolve_claim(&kube_serving_claims(&["v1alpha1", "v1beta1"])).unwrap(), ClaimVersion::V1beta1);
        assert_eq!(resolve_claim(&kube_serving_claims(&["v1alpha1"])).unwrap(), ClaimVersion::V1alpha1);
        let err = resolve_claim(&kube_serving_claims(&[])).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(err.message().contains("not installed"), "{}", err.message());
        let both = kube_serving_claims(&["v1beta1", "v1alpha1"]);
        let recorded = "extensions.agents.x-k8s.io/v1alpha1";
        assert_eq!(claim_for_existing(&both, recorded).unwrap(), Some(ClaimVersion::V1alpha1));
        let beta = kube_serving_claims(&["v1beta1"]);
        assert_eq!(claim_for_existing(&beta, recorded).unwrap(), Some(ClaimVersion::V1beta1));
        assert_eq!(claim_for_existing(&beta, "agents.x-k8s.io/v1alpha1").unwrap(), Some(ClaimVersion::V1beta1));
        assert_eq!(claim_for_existing(&kube_serving_claims(&[]), recorded).unwrap(), None);
        assert_eq!(ClaimVersion::V1beta1.resource().api_version(), "extensions.agents.x-k8s.io/v1beta1");
    }

    #[test]
    fn auto_prefers_v1beta1_and_falls_back() {
        assert_eq!(
            resolve(&kube_serving(&["v1beta1", "v1alpha1"]), SandboxApiVersion::Auto).unwrap(),
            SandboxVersion::V1beta1
        );
        assert_eq!(
            resolve(&kube_serving(&["v1alpha1", "v1beta1"]), SandboxApiVersion::Auto).unwrap(),
            SandboxVersion::V1beta1
        );
        assert_eq!(resolve(&kube_serving(&["v1alpha1"]), SandboxApiVersion::Auto).unwrap(), SandboxVersion::V1alpha1);
        let err = resolve(&kube_serving(&[]), SandboxApiVersion::Auto).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(err.message().contains("agent-sandbox is not installed"), "{}", err.message());
    }

    #[test]
    fn a_pin_must_be_served() {
        assert_eq!(
            resolve(&kube_serving(&["v1alpha1"]), SandboxApiVersion::V1alpha1).unwrap(),
            SandboxVersion::V1alpha1
        );
        match resolve(&kube_serving(&["v1beta1"]), SandboxApiVersion::V1alpha1).unwrap_err() {
            ProviderError::InvalidConfig(d) => {
                assert_eq!(d.path, "/sandboxApiVersion");
                assert!(d.message.contains("serves only v1beta1"), "{}", d.message);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn existing_sandboxes_keep_their_version_while_served() {
        let both = kube_serving(&["v1beta1", "v1alpha1"]);
        assert_eq!(for_existing(&both, "agents.x-k8s.io/v1alpha1").unwrap(), Some(SandboxVersion::V1alpha1));
        let beta_only = kube_serving(&["v1beta1"]);
        assert_eq!(for_existing(&beta_only, "agents.x-k8s.io/v1alpha1").unwrap(), Some(SandboxVersion::V1beta1));
        assert_eq!(for_existing(&beta_only, "garbage").unwrap(), Some(SandboxVersion::V1beta1));
        assert_eq!(for_existing(&kube_serving(&[]), "agents.x-k8s.io/v1beta1").unwrap(), None);
    }
}
