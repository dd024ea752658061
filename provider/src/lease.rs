//! The lease a host stores, and the provider's own metadata inside it.
//!
//! Metadata is informational: every later call works from the lease id and the lease's typed
//! fields, so metadata that a host lost or mangled is read leniently and never fails a call.

use contract::k8s::agent_sandbox::{LAUNCH_COLD, LAUNCH_WARM};
use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::input_limits::LEASE_METADATA;
use crate::lenient_json::{self, Fields, Kind, Schema};

/// This provider's lease ids read `k8s:<backend>:<namespace>:<name>[:pvc]`, its API versions
/// `agents.x-k8s.io/v1beta1`, `agents.x-k8s.io/v1alpha1`, `batch/v1` or (claim leases)
/// `extensions.agents.x-k8s.io/v1beta1` or `/v1alpha1`, and its metadata is [`LeaseMetadata`]
/// as JSON.
pub use contract::{ClaimedSandbox, Lease, LeaseRef};

/// How metadata records a claim lease's Sandbox (its launch type as the label says it).
struct SandboxWritten<'a>(&'a ClaimedSandbox);

impl Serialize for SandboxWritten<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let sandbox = self.0;
        let mut map = serializer.serialize_map(Some(4))?;
        map.serialize_entry("api-version", &sandbox.api_version)?;
        map.serialize_entry("name", &sandbox.name)?;
        map.serialize_entry("uid", &sandbox.uid)?;
        map.serialize_entry("launch-type", if sandbox.warm { LAUNCH_WARM } else { LAUNCH_COLD })?;
        map.end()
    }
}

/// How metadata records a claim lease's Sandbox, for [`lenient_json::read`].
pub static SANDBOX: Schema = Schema(&[
    ("api-version", Kind::Scalar),
    ("name", Kind::Scalar),
    ("uid", Kind::Scalar),
    ("launch-type", Kind::Scalar),
]);

/// Whole or not at all: a record missing a field, or with another launch type, reads as none.
pub fn sandbox_from(mut record: Fields) -> Option<ClaimedSandbox> {
    let warm = match record.take("launch-type").into_text()?.as_str() {
        LAUNCH_WARM => true,
        LAUNCH_COLD => false,
        _ => return None,
    };
    Some(ClaimedSandbox {
        api_version: record.take("api-version").into_text()?,
        name: record.take("name").into_text()?,
        uid: record.take("uid").into_text()?,
        warm,
    })
}

/// How metadata records the container a claim lease's commands run in.
static CONTAINER: Schema = Schema(&[("pod", Kind::Scalar), ("name", Kind::Scalar)]);

/// The container commands run in, picked when the lease got its pod: a claim's pod names its
/// own containers (its pool's template), so execute would otherwise read the pod each time to
/// pick one. Recorded with the pod it was picked in, and used only for that pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodContainer {
    /// The pod's name.
    pub pod: String,
    /// The container's name.
    pub name: String,
}

impl Serialize for PodContainer {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("pod", &self.pod)?;
        map.serialize_entry("name", &self.name)?;
        map.end()
    }
}

/// Whole or not at all.
fn container_from(mut record: Fields) -> Option<PodContainer> {
    Some(PodContainer { pod: record.take("pod").into_text()?, name: record.take("name").into_text()? })
}

/// The keys of [`LeaseMetadata`].
static METADATA: Schema = Schema(&[
    ("run-id", Kind::Scalar),
    ("acquisition-id", Kind::Scalar),
    ("agent-id", Kind::Scalar),
    ("name", Kind::Scalar),
    ("secret-name", Kind::Scalar),
    ("workspace-pvc", Kind::Scalar),
    ("acquired-at", Kind::Scalar),
    ("adopted", Kind::Scalar),
    ("previous-pod-uid", Kind::Scalar),
    ("renewed-at", Kind::Scalar),
    ("sandbox", Kind::Object(&SANDBOX)),
    ("container", Kind::Object(&CONTAINER)),
]);

/// What the provider records in `lease.metadata`. Never a secret value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaseMetadata {
    pub run_id: Option<String>,
    pub acquisition_id: Option<String>,
    pub agent_id: Option<String>,
    /// The workload's name.
    pub name: Option<String>,
    /// The per-lease Secret, when the lease had secret env values.
    pub secret_name: Option<String>,
    /// The persistent workspace claim, when the lease has one.
    pub workspace_pvc: Option<String>,
    /// When acquire returned (epoch millis).
    pub acquired_at: Option<i64>,
    /// The acquire adopted an object of an earlier attempt with the same acquisition id.
    pub adopted: bool,
    /// The pod uid before the last resume-check found the pod replaced (its disk is gone).
    pub previous_pod_uid: Option<String>,
    /// When the lease was last renewed (epoch millis).
    pub renewed_at: Option<i64>,
    /// A claim lease's Sandbox.
    pub sandbox: Option<ClaimedSandbox>,
    /// A claim lease's container for commands, in the pod it was picked in.
    pub container: Option<PodContainer>,
}

/// The metadata format written today.
const FORMAT: i64 = 1;

impl LeaseMetadata {
    /// Reads metadata without ever failing: a field that is missing or of the wrong type reads
    /// as absent, and text that is not a JSON object, or is longer than [`LEASE_METADATA`]
    /// allows, reads as empty metadata.
    pub fn parse_lenient(text: &str) -> Self {
        if text.len() > LEASE_METADATA.max {
            return Self::default();
        }
        let Some(mut f) = lenient_json::read(text, &METADATA) else {
            return Self::default();
        };
        Self {
            run_id: f.take("run-id").into_text(),
            acquisition_id: f.take("acquisition-id").into_text(),
            agent_id: f.take("agent-id").into_text(),
            name: f.take("name").into_text(),
            secret_name: f.take("secret-name").into_text(),
            workspace_pvc: f.take("workspace-pvc").into_text(),
            acquired_at: f.take("acquired-at").as_int(),
            adopted: f.take("adopted").as_bool().unwrap_or(false),
            previous_pod_uid: f.take("previous-pod-uid").into_text(),
            renewed_at: f.take("renewed-at").as_int(),
            sandbox: f.take("sandbox").into_object().and_then(sandbox_from),
            container: f.take("container").into_object().and_then(container_from),
        }
    }

    /// The JSON a lease carries (absent fields are left out).
    pub fn to_json(&self) -> String {
        self.to_json_with::<()>(None)
    }

    /// The JSON a lease carries, with one more key (`extra`) beside the provider's own.
    pub fn to_json_with<T: Serialize>(&self, extra: Option<(&str, &T)>) -> String {
        // Text keys and plain values cannot fail to write; were `extra` to, the lease would carry
        // empty metadata, which every reader takes as lost.
        serde_json::to_string(&Written { metadata: self, extra }).unwrap_or_else(|_| String::from("{}"))
    }
}

/// [`LeaseMetadata`] as JSON, written from its fields without building a JSON tree.
struct Written<'a, T> {
    metadata: &'a LeaseMetadata,
    extra: Option<(&'a str, &'a T)>,
}

impl<T: Serialize> Serialize for Written<'_, T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        fn some<M: SerializeMap, V: Serialize>(map: &mut M, key: &str, value: Option<V>) -> Result<(), M::Error> {
            value.map_or(Ok(()), |v| map.serialize_entry(key, &v))
        }
        let m = self.metadata;
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("format", &FORMAT)?;
        some(&mut map, "run-id", m.run_id.as_ref())?;
        some(&mut map, "acquisition-id", m.acquisition_id.as_ref())?;
        some(&mut map, "agent-id", m.agent_id.as_ref())?;
        some(&mut map, "name", m.name.as_ref())?;
        some(&mut map, "secret-name", m.secret_name.as_ref())?;
        some(&mut map, "workspace-pvc", m.workspace_pvc.as_ref())?;
        some(&mut map, "acquired-at", m.acquired_at)?;
        map.serialize_entry("adopted", &m.adopted)?;
        some(&mut map, "previous-pod-uid", m.previous_pod_uid.as_ref())?;
        some(&mut map, "renewed-at", m.renewed_at)?;
        some(&mut map, "sandbox", m.sandbox.as_ref().map(SandboxWritten))?;
        some(&mut map, "container", m.container.as_ref())?;
        if let Some((key, value)) = self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::Backend;

    #[test]
    fn metadata_round_trips() {
        let m = LeaseMetadata {
            run_id: Some("r".into()),
            acquisition_id: Some("a".into()),
            agent_id: None,
            name: Some("pc-a".into()),
            secret_name: Some("pc-a-env".into()),
            workspace_pvc: None,
            acquired_at: Some(5),
            adopted: true,
            previous_pod_uid: None,
            renewed_at: None,
            sandbox: None,
            container: None,
        };
        let json = m.to_json();
        assert!(json.contains("\"format\":1"), "{json}");
        assert_eq!(LeaseMetadata::parse_lenient(&json), m);
        let sandbox = ClaimedSandbox {
            api_version: "agents.x-k8s.io/v1beta1".into(),
            name: "pool-x7k2p".into(),
            uid: "u-s".into(),
            warm: true,
        };
        let claimed = LeaseMetadata { sandbox: Some(sandbox), ..m };
        let json = claimed.to_json();
        assert!(json.contains("\"launch-type\":\"warm\""), "{json}");
        assert_eq!(LeaseMetadata::parse_lenient(&json), claimed);
        let partial = r#"{"sandbox": {"name": "s", "uid": "u", "launch-type": "warm"}}"#;
        assert_eq!(LeaseMetadata::parse_lenient(partial).sandbox, None, "no api-version: not whole");
    }

    #[test]
    fn every_field_written_is_read_back() {
        // The keys are named twice, where the metadata is read and where it is written.
        let m = LeaseMetadata {
            run_id: Some("r".into()),
            acquisition_id: Some("a".into()),
            agent_id: Some("g".into()),
            name: Some("pc-a".into()),
            secret_name: Some("pc-a-env".into()),
            workspace_pvc: Some("pc-a-ws".into()),
            acquired_at: Some(5),
            adopted: true,
            previous_pod_uid: Some("p-0".into()),
            renewed_at: Some(6),
            sandbox: Some(ClaimedSandbox {
                api_version: "agents.x-k8s.io/v1beta1".into(),
                name: "pool-x7k2p".into(),
                uid: "u-s".into(),
                warm: false,
            }),
            container: Some(PodContainer { pod: "pool-x7k2p".into(), name: "agent".into() }),
        };
        assert_eq!(LeaseMetadata::parse_lenient(&m.to_json()), m);
        let partial = r#"{"container": {"name": "agent"}}"#;
        assert_eq!(LeaseMetadata::parse_lenient(partial).container, None, "no pod: not whole");
    }

    #[test]
    fn metadata_is_written_with_one_more_key_and_reads_the_same() {
        let m = LeaseMetadata { run_id: Some("r".into()), renewed_at: Some(-1), ..LeaseMetadata::default() };
        let json = m.to_json_with(Some(("extra", &[1, 2])));
        let value: serde_json::Value = serde_json::from_str(&json).expect("JSON");
        assert_eq!(value, json!({"format": 1, "run-id": "r", "adopted": false, "renewed-at": -1, "extra": [1, 2]}));
        assert_eq!(LeaseMetadata::parse_lenient(&json), m);
    }

    #[test]
    fn garbage_metadata_reads_as_empty_or_partial() {
        for text in ["", "null", "[1,2]", "{not json", "\"text\""] {
            assert_eq!(LeaseMetadata::parse_lenient(text), LeaseMetadata::default(), "{text}");
        }
        let partial = LeaseMetadata::parse_lenient(r#"{"run-id": 7, "name": "pc-x", "adopted": "yes"}"#);
        assert_eq!(partial.run_id, None);
        assert_eq!(partial.name.as_deref(), Some("pc-x"));
        assert!(!partial.adopted);
    }

    #[test]
    fn oversized_metadata_is_not_read() {
        let text = json!({"run-id": "r", "padding": "x".repeat(100_000)}).to_string();
        assert_eq!(LeaseMetadata::parse_lenient(&text), LeaseMetadata::default());
    }

    #[test]
    fn lease_serializes_with_wit_field_names() {
        let lease = Lease {
            provider_lease_id: "k8s:job:ns:pc-1".into(),
            backend: Backend::Job,
            namespace: "ns".into(),
            api_version: "batch/v1".into(),
            workload_uid: "u".into(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: Some(1),
            reusable: false,
            metadata: "{}".into(),
        };
        let v = serde_json::to_value(&lease).unwrap();
        assert_eq!(v["provider-lease-id"], "k8s:job:ns:pc-1");
        assert_eq!(v["backend"], "job");
        assert_eq!(v["workload-uid"], "u");
        let back: Lease = serde_json::from_value(v).unwrap();
        assert_eq!(back, lease);
    }
}
