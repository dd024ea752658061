//! Names and labels: every object name derives from the acquisition id, every label value is
//! valid, and the provider lease id alone names everything a lease owns.
//!
//! Ids that cannot map to a name unchanged are refused, never sanitised, so two ids can never
//! share an object. Label values that are not valid as given (run and agent ids) are hashed;
//! the raw ids go into annotations, which accept any text.

use std::collections::BTreeMap;

use contract::k8s::names;
use contract::quote;

use crate::input_limits::{DNS1123_LABEL_MAX_LEN, HOST_ID};
use crate::k8s_types::ObjectMeta;

/// `app.kubernetes.io/managed-by`: the host stamps it, with its installation's owner id, on
/// every object the provider creates, and proves ownership by it; the provider never sets it.
pub use contract::labels::LABEL_MANAGED_BY;
pub use contract::labels::{LABEL_ACQUISITION_ID, LABEL_RUN_ID};
/// The agent id, when the request has one (hashed when not a valid label value).
pub const LABEL_AGENT_ID: &str = "sandbox.paperclip.io/agent-id";
/// The raw acquisition id.
pub const ANNOTATION_ACQUISITION_ID: &str = "sandbox.paperclip.io/acquisition-id";
/// The raw run id.
pub const ANNOTATION_RUN_ID: &str = "sandbox.paperclip.io/run-id";
/// The raw agent id.
pub const ANNOTATION_AGENT_ID: &str = "sandbox.paperclip.io/agent-id";
/// Fingerprint of the pod template and workload settings; an adopted object must match it.
pub const ANNOTATION_SPEC_HASH: &str = "sandbox.paperclip.io/spec-hash";
/// The prefix of every key the provider owns; config may not set these.
pub const RESERVED_PREFIX: &str = "sandbox.paperclip.io/";

/// The container name inside every sandbox pod.
pub const CONTAINER_NAME: &str = "sandbox";
/// The name of the workspace volume (and of its claim template on the Sandbox backend).
pub use contract::lease_id::WORKSPACE_VOLUME;

/// 64-bit FNV-1a of `bytes`, as 16 lowercase hex digits.
pub fn fnv1a64_hex(bytes: &[u8]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// A DNS-1123 label: 1..=63 of `[a-z0-9-]`, starting and ending alphanumeric.
pub fn is_dns1123_label(s: &str) -> bool {
    names::dns1123_label(s).is_empty()
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    names::dns1123_subdomain(s).is_empty()
}

/// A label value: empty, or at most 63 of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
pub fn is_label_value(s: &str) -> bool {
    names::label_value(s).is_empty()
}

/// A label or annotation key: an optional DNS subdomain prefix and `/`, then a name of at most
/// 63 of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
pub fn is_qualified_name(s: &str) -> bool {
    names::qualified_name(s).is_empty()
}

/// `raw` when it is a valid label value, else its 64-bit FNV-1a hash (16 hex digits).
pub fn label_value(raw: &str) -> String {
    if is_label_value(raw) { raw.to_string() } else { fnv1a64_hex(raw.as_bytes()) }
}

/// Why an id cannot name an object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "acquisition id {} cannot name a Kubernetes object: with the name prefix {} it must be 1 to {max} \
     characters of lowercase letters, digits and '-', starting and ending with a letter or digit. The provider \
     refuses such ids instead of rewriting them, so two ids never share a sandbox; use an id of that form \
     (for example a lowercase ULID or UUID)",
    quote(.id),
    quote(.prefix)
)]
pub struct UnsafeId {
    pub id: String,
    pub prefix: String,
    pub max: usize,
}

/// The workload's name: `prefix + acquisition_id`, or a refusal when that is not a DNS-1123
/// label made of the id unchanged.
pub fn workload_name(prefix: &str, acquisition_id: &str) -> Result<String, UnsafeId> {
    let max = DNS1123_LABEL_MAX_LEN.saturating_sub(prefix.len());
    let id_ok = acquisition_id.len() <= max && is_dns1123_label(acquisition_id);
    let name = format!("{prefix}{acquisition_id}");
    if id_ok && is_dns1123_label(&name) {
        Ok(name)
    } else {
        Err(UnsafeId { id: acquisition_id.to_string(), prefix: prefix.to_string(), max })
    }
}

/// The per-lease Secret holding secret env values.
pub fn secret_name(workload: &str) -> String {
    format!("{workload}-env")
}

/// The PVC agent-sandbox makes from the workspace claim template.
pub fn workspace_pvc_name(workload: &str) -> String {
    contract::k8s::agent_sandbox::volume_claim_name(WORKSPACE_VOLUME, workload)
}

/// Who a lease is for: the ids that label every object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub run_id: String,
    pub acquisition_id: String,
    pub agent_id: Option<String>,
}

impl Identity {
    /// The provider's labels for this identity (config labels are added by the caller).
    pub fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::new();
        labels.insert(LABEL_RUN_ID.to_string(), label_value(&self.run_id));
        labels.insert(LABEL_ACQUISITION_ID.to_string(), label_value(&self.acquisition_id));
        if let Some(agent) = &self.agent_id {
            labels.insert(LABEL_AGENT_ID.to_string(), label_value(agent));
        }
        labels
    }

    /// The raw ids, as annotations.
    pub fn annotations(&self) -> BTreeMap<String, String> {
        let mut annotations = BTreeMap::new();
        annotations.insert(ANNOTATION_RUN_ID.to_string(), self.run_id.clone());
        annotations.insert(ANNOTATION_ACQUISITION_ID.to_string(), self.acquisition_id.clone());
        if let Some(agent) = &self.agent_id {
            annotations.insert(ANNOTATION_AGENT_ID.to_string(), agent.clone());
        }
        annotations
    }
}

/// Checks a host id (run id, agent id) that goes into labels (hashed if needed) and
/// annotations (raw): non-empty, within [`HOST_ID`], no control characters.
pub fn check_host_id(what: &str, id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err(format!("{what} is empty; the host must send a non-empty id"));
    }
    HOST_ID.check(|| what.to_string(), id.len()).map_err(|e| e.to_string())?;
    if id.chars().any(char::is_control) {
        return Err(format!("{what} contains control characters; send a printable id"));
    }
    Ok(())
}

/// The provider lease id (`k8s:<backend>:<namespace>:<name>[:pvc]`), which alone names
/// everything a lease owns; written once, in the contract, for the host to read it too.
pub use contract::lease_id::{BadLeaseId, LeaseId};

/// The metadata every object a lease owns starts from: its name, namespace, labels and
/// annotations (workload, Secret); one place so the three manifests cannot drift apart.
pub fn object_meta(
    name: &str,
    namespace: &str,
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(labels.clone()),
        annotations: Some(annotations.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Backend;

    #[test]
    fn names_derive_from_the_id_unchanged() {
        assert_eq!(workload_name("pc-", "01j9zq8k3m").unwrap(), "pc-01j9zq8k3m");
        assert_eq!(workload_name("pc-", "a").unwrap(), "pc-a");
        let sixty = "a".repeat(60);
        assert_eq!(workload_name("pc-", &sixty).unwrap().len(), 63);
    }

    #[test]
    fn unsafe_ids_are_refused_not_sanitised() {
        for id in [
            "",
            "UPPER",
            "01J9ZQ8K3M",
            "has space",
            "under_score",
            "dot.ted",
            "-leading",
            "trailing-",
            "slash/x",
            "ünïcode",
            &"a".repeat(61),
        ] {
            let err = workload_name("pc-", id).unwrap_err();
            assert_eq!(err.id, id);
            assert!(err.to_string().contains("refuses such ids"), "{err}");
        }
    }

    #[test]
    fn long_ids_are_quoted_by_a_short_prefix() {
        let id = "a".repeat(100_000);
        crate::testkit::assert_quotes_a_prefix(&workload_name("pc-", &id).unwrap_err().to_string(), &id);
        let lease_id = format!("k8s:job:ns:{id}");
        crate::testkit::assert_quotes_a_prefix(&LeaseId::parse(&lease_id).unwrap_err().to_string(), &lease_id);
    }

    #[test]
    fn distinct_ids_never_share_a_name() {
        let a = workload_name("pc-", "abc").unwrap();
        let b = workload_name("pc-", "abd").unwrap();
        assert_ne!(a, b);
        assert!(workload_name("pc-", "ABC").is_err(), "case folding would merge ABC with abc");
    }

    #[test]
    fn label_values_are_kept_or_hashed() {
        assert_eq!(label_value("run-42"), "run-42");
        assert_eq!(label_value("Run_4.2"), "Run_4.2");
        let hashed = label_value("run 42/with spaces");
        assert_eq!(hashed.len(), 16);
        assert!(is_label_value(&hashed));
        assert_eq!(hashed, label_value("run 42/with spaces"), "hashing is deterministic");
        let long = "x".repeat(64);
        assert_eq!(label_value(&long), fnv1a64_hex(long.as_bytes()));
    }

    #[test]
    fn fnv_matches_reference_vectors() {
        assert_eq!(fnv1a64_hex(b""), "cbf29ce484222325");
        assert_eq!(fnv1a64_hex(b"a"), "af63dc4c8601ec8c");
    }

    #[test]
    fn identity_labels_are_valid() {
        let id = Identity {
            run_id: "run with spaces".into(),
            acquisition_id: "acq-1".into(),
            agent_id: Some("agent/7".into()),
        };
        let labels = id.labels();
        assert!(!labels.contains_key(LABEL_MANAGED_BY), "the host's to set");
        assert_eq!(labels[LABEL_ACQUISITION_ID], "acq-1");
        for (k, v) in &labels {
            assert!(is_qualified_name(k), "{k}");
            assert!(is_label_value(v), "{k}={v}");
        }
        assert_eq!(id.annotations()[ANNOTATION_RUN_ID], "run with spaces");
    }

    #[test]
    fn host_ids_are_checked() {
        assert!(check_host_id("run id", "r-1").is_ok());
        assert!(check_host_id("run id", "").is_err());
        assert!(check_host_id("run id", "a\nb").is_err());
        assert!(check_host_id("run id", &"x".repeat(254)).is_err());
    }

    #[test]
    fn lease_ids_round_trip() {
        for id in [
            LeaseId {
                backend: Backend::Sandbox,
                namespace: "team-a".into(),
                name: "pc-1".into(),
                workspace_pvc: false,
            },
            LeaseId { backend: Backend::Sandbox, namespace: "team-a".into(), name: "pc-1".into(), workspace_pvc: true },
            LeaseId { backend: Backend::Job, namespace: "ns".into(), name: "pc-2".into(), workspace_pvc: false },
            LeaseId { backend: Backend::Claim, namespace: "ns".into(), name: "pc-3".into(), workspace_pvc: false },
        ] {
            assert_eq!(LeaseId::parse(&id.to_string()).unwrap(), id);
        }
        assert_eq!(secret_name(&LeaseId::parse("k8s:job:ns:pc-2").unwrap().name), "pc-2-env");
        assert_eq!(LeaseId::parse("k8s:claim:ns:pc-3").unwrap().to_string(), "k8s:claim:ns:pc-3");
    }

    #[test]
    fn foreign_lease_ids_are_refused() {
        for text in [
            "",
            "k8s",
            "k8s:vm:ns:pc-1",
            "k8s:job:ns:pc-1:pvc",
            "k8s:claim:ns:pc-1:pvc",
            "k8s:claims:ns:pc-1",
            "k8s:sandbox:ns:pc-1:disk",
            "k8s:sandbox:NS:pc-1",
            "k8s:sandbox:ns:pc_1",
            "docker:abc",
            "k8s:sandbox:ns:pc-1:pvc:extra",
        ] {
            assert!(LeaseId::parse(text).is_err(), "{text}");
        }
    }

    #[test]
    fn qualified_names() {
        assert!(is_qualified_name("app"));
        assert!(is_qualified_name("example.com/team"));
        assert!(!is_qualified_name("Example.com/team"));
        assert!(!is_qualified_name("/team"));
        assert!(!is_qualified_name("example.com/"));
        assert!(!is_qualified_name("a b"));
    }
}
