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

use serde::Serialize;

use crate::api_versions;
use crate::config::Backend;
pub use crate::lease::ClaimedSandbox;
use crate::lease::{self, Lease, LeaseMetadata};
use crate::lenient_json::{self, Kind, Schema};
use crate::naming::LeaseId;

/// The metadata key of the placement.
const KEY: &str = "kubernetes";

/// The placement's keys.
static PLACEMENT: Schema = Schema(&[
    ("backend", Kind::Scalar),
    ("namespace", Kind::Scalar),
    ("api-version", Kind::Scalar),
    ("workload-uid", Kind::Scalar),
    ("pod-name", Kind::Scalar),
    ("pod-uid", Kind::Scalar),
    ("pod-ip", Kind::Scalar),
]);

/// What [`placement`] reads of the metadata: the placement, and a claim lease's Sandbox.
static PLACED: Schema = Schema(&[(KEY, Kind::Object(&PLACEMENT)), ("sandbox", Kind::Object(&lease::SANDBOX))]);

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

/// The neutral form of `lease`: its placement moves into the metadata. The metadata is read
/// as [`LeaseMetadata`] and written back with the placement, so keys the provider does not know
/// are not kept (as resume-check and renew, which rewrite it, never kept them).
pub fn neutral(lease: Lease) -> NeutralLease {
    let placed = Written {
        backend: lease.backend.as_str(),
        namespace: &lease.namespace,
        api_version: &lease.api_version,
        workload_uid: &lease.workload_uid,
        pod_name: &lease.pod_name,
        pod_uid: &lease.pod_uid,
        pod_ip: &lease.pod_ip,
    };
    let metadata = LeaseMetadata::parse_lenient(&lease.metadata).to_json_with(Some((KEY, &placed)));
    NeutralLease {
        provider_lease_id: lease.provider_lease_id,
        expires_at: lease.expires_at,
        reusable: lease.reusable,
        metadata,
    }
}

/// The placement as metadata records it (a pod field not known yet as `null`).
#[derive(Serialize)]
#[serde(rename_all = "kebab-case")]
struct Written<'a> {
    backend: &'a str,
    namespace: &'a str,
    api_version: &'a str,
    workload_uid: &'a str,
    pod_name: &'a Option<String>,
    pod_uid: &'a Option<String>,
    pod_ip: &'a Option<String>,
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
    let mut metadata = lenient_json::read(&lease.metadata, &PLACED)?;
    let mut p = metadata.take(KEY).into_object()?;
    let backend = Backend::parse(&p.take("backend").into_text()?)?;
    let sandbox = match backend {
        Backend::Claim => metadata.take("sandbox").into_object().and_then(lease::sandbox_from),
        Backend::Sandbox | Backend::Job => None,
    };
    Some(Placement {
        backend,
        namespace: p.take("namespace").into_text()?,
        api_version: p.take("api-version").into_text()?,
        workload_uid: p.take("workload-uid").into_text()?,
        pod_name: p.take("pod-name").into_text(),
        pod_uid: p.take("pod-uid").into_text(),
        pod_ip: p.take("pod-ip").into_text(),
        sandbox,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

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
            pod_ip: Some("10.244.0.7".into()),
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
    fn the_neutral_form_keeps_the_provider_s_own_keys_and_one_placement() {
        let stale = r#"{"format":1,"run-id":"r1","kubernetes":{"backend":"job","namespace":"old"},"unknown":[1]}"#;
        let neutral = neutral(Lease { pod_ip: None, metadata: stale.into(), ..lease() });
        let metadata: Value = serde_json::from_str(&neutral.metadata).expect("JSON");
        let keys: Vec<&str> = metadata.as_object().expect("an object").keys().map(String::as_str).collect();
        assert_eq!(keys, ["adopted", "format", "kubernetes", "run-id"], "{metadata}");
        assert_eq!(metadata["kubernetes"]["namespace"], "team-a", "the lease's placement, not the stale one");
        assert_eq!(metadata["kubernetes"]["pod-ip"], Value::Null, "not known yet");
    }

    #[test]
    fn a_placement_field_of_another_type_reads_as_absent() {
        let mut metadata: Value = serde_json::from_str(&neutral(lease()).metadata).expect("JSON");
        metadata["kubernetes"]["pod-name"] = 7.into();
        let mangled = NeutralLease { metadata: metadata.to_string(), ..neutral(lease()) };
        assert_eq!(placement(&mangled).map(|p| (p.pod_name, p.pod_uid)), Some((None, Some("p-1".to_string()))));
        metadata["kubernetes"]["workload-uid"] = Value::Null;
        let unplaced = NeutralLease { metadata: metadata.to_string(), ..neutral(lease()) };
        assert_eq!(placement(&unplaced), None, "a required field lost");
        metadata["kubernetes"] = "job".into();
        assert_eq!(placement(&NeutralLease { metadata: metadata.to_string(), ..neutral(lease()) }), None);
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
