//! Conversion between the served versions of one resource (agent-sandbox's conversion webhook).
//!
//! Sandboxes are stored in one hub form (v1beta1) whichever version wrote them, and converted on
//! every read, as a cluster running agent-sandbox v0.5 does: `spec.replicas` (v1alpha1) and
//! `spec.operatingMode` (v1beta1) are two views of one setting.

use std::borrow::Cow;

use contract::k8s::agent_sandbox;
use serde_json::{Value, json};

use crate::resources::ResourceType;

/// The version objects of a resource are stored in.
pub const SANDBOX_HUB: &str = "v1beta1";

/// Converts an object received in `rt`'s version to its storage (hub) form.
pub fn to_storage(rt: &ResourceType, mut obj: Value) -> Value {
    if rt.plural != agent_sandbox::SANDBOXES || rt.group != agent_sandbox::GROUP {
        return obj;
    }
    obj["apiVersion"] = json!(format!("{}/{SANDBOX_HUB}", rt.group));
    if rt.version == "v1alpha1" {
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            let replicas = spec.remove("replicas").and_then(|r| r.as_i64()).unwrap_or(1);
            let mode = if replicas == 0 { "Suspended" } else { "Running" };
            spec.insert("operatingMode".into(), json!(mode));
        }
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            status.remove("replicas");
        }
    }
    obj
}

/// Converts a stored object to the version `rt` serves.
pub fn from_storage(rt: &ResourceType, obj: &Value) -> Value {
    served(rt, obj).into_owned()
}

/// [`from_storage`] without a copy when `rt` serves the stored form itself (every resource but
/// a v1alpha1 Sandbox): a watch converts each event for each watcher, so the copy would be
/// paid per watcher.
pub fn served<'a>(rt: &ResourceType, obj: &'a Value) -> Cow<'a, Value> {
    if rt.plural != agent_sandbox::SANDBOXES || rt.group != agent_sandbox::GROUP {
        return Cow::Borrowed(obj);
    }
    let api_version = rt.api_version();
    if rt.version != "v1alpha1" && obj["apiVersion"].as_str() == Some(api_version.as_str()) {
        return Cow::Borrowed(obj);
    }
    let mut obj = obj.clone();
    obj["apiVersion"] = json!(api_version);
    if rt.version == "v1alpha1" {
        let mut suspended = false;
        if let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) {
            suspended = spec.remove("operatingMode").is_some_and(|m| m == "Suspended");
            spec.insert("replicas".into(), json!(if suspended { 0 } else { 1 }));
        }
        if let Some(status) = obj.get_mut("status").and_then(Value::as_object_mut) {
            let running = status.get("podIPs").and_then(Value::as_array).is_some_and(|ips| !ips.is_empty());
            status.remove("nodeName");
            if !status.is_empty() {
                status.insert("replicas".into(), json!(if running && !suspended { 1 } else { 0 }));
            }
        }
    }
    Cow::Owned(obj)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{SandboxVersions, served};

    fn sandbox(version: &str) -> ResourceType {
        served(SandboxVersions::Both)
            .into_iter()
            .find(|t| t.plural == agent_sandbox::SANDBOXES && t.version == version)
            .expect("served")
    }

    #[test]
    fn replicas_zero_is_suspended_and_back() {
        let alpha = sandbox("v1alpha1");
        let stored = to_storage(&alpha, json!({"apiVersion": "agents.x-k8s.io/v1alpha1", "spec": {"replicas": 0}}));
        assert_eq!(stored["spec"], json!({"operatingMode": "Suspended"}));
        assert_eq!(stored["apiVersion"], "agents.x-k8s.io/v1beta1");
        let back = from_storage(&alpha, &stored);
        assert_eq!(back["spec"], json!({"replicas": 0}));
        assert_eq!(back["apiVersion"], "agents.x-k8s.io/v1alpha1");
    }

    #[test]
    fn beta_reads_are_unchanged() {
        let beta = sandbox("v1beta1");
        let obj = json!({"apiVersion": "agents.x-k8s.io/v1beta1", "spec": {"operatingMode": "Running"}, "status": {"nodeName": "n"}});
        assert_eq!(from_storage(&beta, &to_storage(&beta, obj.clone())), obj);
    }

    #[test]
    fn alpha_status_drops_node_name_and_counts_replicas() {
        let alpha = sandbox("v1alpha1");
        let stored = json!({"spec": {"operatingMode": "Running"}, "status": {"nodeName": "n", "podIPs": ["10.0.0.1"]}});
        let read = from_storage(&alpha, &stored);
        assert_eq!(read["status"], json!({"podIPs": ["10.0.0.1"], "replicas": 1}));
    }
}
