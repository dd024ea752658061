//! The lease a host stores, and the provider's own metadata inside it.
//!
//! Metadata is informational: every later call works from the lease id and the lease's typed
//! fields, so metadata that a host lost or mangled is read leniently and never fails a call.

use contract::k8s::agent_sandbox::{LAUNCH_COLD, LAUNCH_WARM};
use serde_json::{Map, Value, json};

use crate::input_limits::LEASE_METADATA;

/// This provider's lease ids read `k8s:<backend>:<namespace>:<name>[:pvc]`, its API versions
/// `agents.x-k8s.io/v1beta1`, `agents.x-k8s.io/v1alpha1`, `batch/v1` or (claim leases)
/// `extensions.agents.x-k8s.io/v1beta1` or `/v1alpha1`, and its metadata is [`LeaseMetadata`]
/// as JSON.
pub use contract::{ClaimedSandbox, Lease, LeaseRef};

/// How metadata records a claim lease's Sandbox (its launch type as the label says it).
fn sandbox_to_json(sandbox: &ClaimedSandbox) -> Value {
    let launch = if sandbox.warm { LAUNCH_WARM } else { LAUNCH_COLD };
    json!({"api-version": sandbox.api_version, "name": sandbox.name, "uid": sandbox.uid, "launch-type": launch})
}

/// Whole or not at all: a record missing a field, or with another launch type, reads as none.
fn sandbox_from_json(value: &Value) -> Option<ClaimedSandbox> {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_string);
    let warm = match value.get("launch-type").and_then(Value::as_str)? {
        LAUNCH_WARM => true,
        LAUNCH_COLD => false,
        _ => return None,
    };
    Some(ClaimedSandbox { api_version: text("api-version")?, name: text("name")?, uid: text("uid")?, warm })
}

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
        let Ok(Value::Object(map)) = serde_json::from_str::<Value>(text) else {
            return Self::default();
        };
        let string = |key: &str| map.get(key).and_then(Value::as_str).map(str::to_string);
        let int = |key: &str| map.get(key).and_then(Value::as_i64);
        Self {
            run_id: string("run-id"),
            acquisition_id: string("acquisition-id"),
            agent_id: string("agent-id"),
            name: string("name"),
            secret_name: string("secret-name"),
            workspace_pvc: string("workspace-pvc"),
            acquired_at: int("acquired-at"),
            adopted: map.get("adopted").and_then(Value::as_bool).unwrap_or(false),
            previous_pod_uid: string("previous-pod-uid"),
            renewed_at: int("renewed-at"),
            sandbox: map.get("sandbox").and_then(sandbox_from_json),
        }
    }

    /// The JSON a lease carries (absent fields are left out).
    pub fn to_json(&self) -> String {
        let mut map = Map::new();
        map.insert("format".into(), json!(FORMAT));
        let mut put = |key: &str, value: Option<Value>| {
            if let Some(v) = value {
                map.insert(key.to_string(), v);
            }
        };
        put("run-id", self.run_id.as_ref().map(|v| json!(v)));
        put("acquisition-id", self.acquisition_id.as_ref().map(|v| json!(v)));
        put("agent-id", self.agent_id.as_ref().map(|v| json!(v)));
        put("name", self.name.as_ref().map(|v| json!(v)));
        put("secret-name", self.secret_name.as_ref().map(|v| json!(v)));
        put("workspace-pvc", self.workspace_pvc.as_ref().map(|v| json!(v)));
        put("acquired-at", self.acquired_at.map(|v| json!(v)));
        put("adopted", Some(json!(self.adopted)));
        put("previous-pod-uid", self.previous_pod_uid.as_ref().map(|v| json!(v)));
        put("renewed-at", self.renewed_at.map(|v| json!(v)));
        put("sandbox", self.sandbox.as_ref().map(sandbox_to_json));
        Value::Object(map).to_string()
    }
}

#[cfg(test)]
mod tests {
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
