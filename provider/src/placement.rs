//! The lease as contract 0.3.0 carries it: neutral (`provider-lease-id`, `expires-at`,
//! `reusable`, `metadata`), with where the sandbox runs kept inside the metadata under
//! `"kubernetes"` and reported to the host by the `kubernetes.placement-of` export.
//!
//! The provider's logic works on the whole [`Lease`]; this module turns it into the neutral
//! form at the boundary and back. A claim lease's placement names its SandboxClaim (backend,
//! version, uid) and the Sandbox the claim got ([`ClaimedSandbox`], from the provider's own
//! metadata, where acquire and resume-check record it). A lease whose metadata lost its placement still names its
//! backend, namespace and workload in its id, so destroy and resume-check keep working: the
//! workload's uid is then unknown, and resume-check takes the object under the lease's name
//! (which the host still proves is this installation's).

use serde_json::{Map, Value, json};

use crate::api_versions;
use crate::config::Backend;
pub use crate::lease::ClaimedSandbox;
use crate::lease::{Lease, LeaseMetadata};
use crate::naming::LeaseId;

/// The metadata key of the placement.
const KEY: &str = "kubernetes";

/// A lease as the neutral contract carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeutralLease {
    pub provider_lease_id: String,
    pub expires_at: Option<i64>,
    pub reusable: bool,
    /// The provider's metadata with the placement in it.
    pub metadata: String,
}

/// Where a lease's sandbox runs (`kubernetes.placement-of`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub backend: Backend,
    pub namespace: String,
    pub api_version: String,
    pub workload_uid: String,
    pub pod_name: Option<String>,
    pub pod_uid: Option<String>,
    pub pod_ip: Option<String>,
    /// A claim lease's Sandbox; `None` for the other backends, and for a claim lease whose
    /// metadata lost it.
    pub sandbox: Option<ClaimedSandbox>,
}

impl Placement {
    /// What a lease id alone tells: backend and namespace, the API version a Job always has,
    /// and no uid (resume-check then goes by the name).
    fn unknown(backend: Backend, namespace: String) -> Self {
        let api_version = match backend {
            Backend::Job => api_versions::jobs().api_version(),
            Backend::Sandbox | Backend::Claim => String::new(),
        };
        Self {
            backend,
            namespace,
            api_version,
            workload_uid: String::new(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
            sandbox: None,
        }
    }
}

/// The neutral form of `lease`: its placement moves into the metadata.
pub fn neutral(lease: Lease) -> NeutralLease {
    let mut map = match serde_json::from_str::<Value>(&lease.metadata) {
        Ok(Value::Object(map)) => map,
        _ => Map::new(),
    };
    map.insert(
        KEY.to_string(),
        json!({
            "backend": lease.backend.as_str(),
            "namespace": lease.namespace,
            "api-version": lease.api_version,
            "workload-uid": lease.workload_uid,
            "pod-name": lease.pod_name,
            "pod-uid": lease.pod_uid,
            "pod-ip": lease.pod_ip,
        }),
    );
    NeutralLease {
        provider_lease_id: lease.provider_lease_id,
        expires_at: lease.expires_at,
        reusable: lease.reusable,
        metadata: Value::Object(map).to_string(),
    }
}

/// The whole lease back from its neutral form (see the module docs for lost metadata).
pub fn whole(lease: NeutralLease) -> Lease {
    let p = placement(&lease).unwrap_or_else(|| match LeaseId::parse(&lease.provider_lease_id) {
        Ok(id) => Placement::unknown(id.backend, id.namespace),
        // Not this provider's id: every later call refuses it by the id anyway.
        Err(_) => Placement::unknown(Backend::Sandbox, String::new()),
    });
    Lease {
        provider_lease_id: lease.provider_lease_id,
        backend: p.backend,
        namespace: p.namespace,
        api_version: p.api_version,
        workload_uid: p.workload_uid,
        pod_name: p.pod_name,
        pod_uid: p.pod_uid,
        pod_ip: p.pod_ip,
        claimed_sandbox: p.sandbox,
        expires_at: lease.expires_at,
        reusable: lease.reusable,
        metadata: lease.metadata,
    }
}

/// The placement recorded in a neutral lease's metadata, if it is there and whole. (The host
/// bounds the size of what it passes in; a lease this provider just made is always read.)
pub fn placement(lease: &NeutralLease) -> Option<Placement> {
    let metadata: Value = serde_json::from_str(&lease.metadata).ok()?;
    let p = metadata.get(KEY)?;
    let text = |key: &str| p.get(key).and_then(Value::as_str).map(str::to_string);
    let backend = Backend::parse(p.get("backend").and_then(Value::as_str)?)?;
    let sandbox = match backend {
        Backend::Claim => LeaseMetadata::parse_lenient(&lease.metadata).sandbox,
        Backend::Sandbox | Backend::Job => None,
    };
    Some(Placement {
        backend,
        namespace: text("namespace")?,
        api_version: text("api-version")?,
        workload_uid: text("workload-uid")?,
        pod_name: text("pod-name"),
        pod_uid: text("pod-uid"),
        pod_ip: text("pod-ip"),
        sandbox,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease() -> Lease {
        Lease {
            provider_lease_id: "k8s:job:team-a:pc-1".into(),
            backend: Backend::Job,
            namespace: "team-a".into(),
            api_version: "batch/v1".into(),
            workload_uid: "u-1".into(),
            pod_name: Some("pc-1-abcde".into()),
            pod_uid: Some("p-1".into()),
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: Some(1_700_000_000_000),
            reusable: false,
            metadata: r#"{"format":1,"run-id":"r1"}"#.into(),
        }
    }

    #[test]
    fn a_lease_survives_the_neutral_form_and_keeps_its_own_metadata() {
        let neutral = neutral(lease());
        let metadata: Value = serde_json::from_str(&neutral.metadata).expect("JSON");
        assert_eq!(metadata["run-id"], "r1");
        assert_eq!(metadata["kubernetes"]["workload-uid"], "u-1");
        assert_eq!(placement(&neutral).map(|p| p.pod_name), Some(Some("pc-1-abcde".to_string())));
        let back = whole(neutral);
        assert_eq!(Lease { metadata: lease().metadata, ..back.clone() }, lease());
    }

    #[test]
    fn a_claim_lease_places_its_claim_and_the_sandbox_it_got() {
        let sandbox = ClaimedSandbox {
            api_version: "agents.x-k8s.io/v1beta1".into(),
            name: "python-x7k2p".into(),
            uid: "u-sb".into(),
            warm: true,
        };
        let metadata = LeaseMetadata { sandbox: Some(sandbox.clone()), ..LeaseMetadata::default() };
        let claim = Lease {
            provider_lease_id: "k8s:claim:team-a:pc-1".into(),
            backend: Backend::Claim,
            api_version: "extensions.agents.x-k8s.io/v1beta1".into(),
            workload_uid: "u-claim".into(),
            metadata: metadata.to_json(),
            ..lease()
        };
        let p = placement(&neutral(claim.clone())).expect("placed");
        assert_eq!(
            (p.backend, p.api_version.as_str(), p.workload_uid.as_str()),
            (Backend::Claim, "extensions.agents.x-k8s.io/v1beta1", "u-claim")
        );
        assert_eq!(p.sandbox, Some(sandbox));
        assert_eq!(whole(neutral(claim.clone())).backend, Backend::Claim);
        assert_eq!(placement(&neutral(lease())).and_then(|p| p.sandbox), None, "no Sandbox of a Job lease");
        let lost = NeutralLease { metadata: "garbage".into(), ..neutral(claim) };
        assert_eq!(whole(lost).backend, Backend::Claim, "the id still names the backend");
    }

    #[test]
    fn lost_metadata_falls_back_on_the_lease_id() {
        let neutral = NeutralLease { metadata: "garbage".into(), ..neutral(lease()) };
        assert_eq!(placement(&neutral), None);
        let back = whole(neutral);
        assert_eq!(
            (back.backend, back.namespace.as_str(), back.api_version.as_str()),
            (Backend::Job, "team-a", "batch/v1")
        );
        assert_eq!(back.workload_uid, "", "unknown: resume-check goes by the name");
    }
}
