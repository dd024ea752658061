//! A Sandbox as the pool and claim controllers read it: identity, labels, owner, and the parts
//! of its status they decide on. Either served version reads the same way.

use std::collections::BTreeMap;

use contract::k8s::agent_sandbox::{FINISHED, READY};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::DynamicObject;

use super::controller_of;
use crate::controllers::sandbox::model::{Condition, SandboxStatus};

/// One Sandbox, read leniently: a malformed status counts as empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SandboxView {
    /// Object name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID (the key of ownership).
    pub uid: String,
    /// The resourceVersion read, the optimistic lock of an adoption.
    pub resource_version: String,
    /// `metadata.creationTimestamp` (whole seconds, as the server writes it).
    pub created: Option<Timestamp>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Object labels.
    pub labels: BTreeMap<String, String>,
    /// Object annotations.
    pub annotations: BTreeMap<String, String>,
    /// The controller reference, if any.
    pub controller: Option<OwnerReference>,
    /// The status as stored.
    pub status: SandboxStatus,
}

impl SandboxView {
    /// Reads a Sandbox; `None` without the name, namespace or uid every decision needs.
    pub fn from_dynamic(obj: &DynamicObject) -> Option<Self> {
        let meta = &obj.metadata;
        Some(Self {
            name: meta.name.clone()?,
            namespace: meta.namespace.clone()?,
            uid: meta.uid.clone()?,
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleting: meta.deletion_timestamp.is_some(),
            labels: meta.labels.clone().unwrap_or_default(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            controller: controller_of(meta).cloned(),
            status: SandboxStatus::from_value(obj.data.get("status")),
        })
    }

    /// The `Ready` condition, if written yet.
    pub fn ready_condition(&self) -> Option<&Condition> {
        self.status.condition(READY)
    }

    /// The `Finished` condition, if the pod ended.
    pub fn finished_condition(&self) -> Option<&Condition> {
        self.status.condition(FINISHED)
    }

    /// Ready=True.
    pub fn is_ready(&self) -> bool {
        self.ready_condition().is_some_and(|c| c.status == "True")
    }

    /// The pod's IPs as the Sandbox reports them.
    pub fn pod_ips(&self) -> &[String] {
        self.status.pod_ips.as_deref().unwrap_or_default()
    }

    /// Whether the controller reference's uid is `uid`.
    pub fn controlled_by(&self, uid: &str) -> bool {
        self.controller.as_ref().is_some_and(|r| r.uid == uid)
    }

    /// Whether a label has this value.
    pub fn has_label(&self, key: &str, value: &str) -> bool {
        self.labels.get(key).is_some_and(|v| v == value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_identity_owner_and_readiness() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "s", "namespace": "ns", "uid": "u", "resourceVersion": "7",
                "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"a": "b"},
                "ownerReferences": [{"apiVersion": "x/v1", "kind": "K", "name": "o", "uid": "ou", "controller": true}]},
            "status": {"podIPs": ["10.0.0.1"], "conditions": [{"type": "Ready", "status": "True", "reason": "DependenciesReady"}]}
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let view = SandboxView::from_dynamic(&obj).unwrap_or_else(|| panic!("complete"));
        assert!(view.is_ready() && view.controlled_by("ou") && view.has_label("a", "b"));
        assert_eq!(view.pod_ips(), ["10.0.0.1"]);
        assert_eq!(view.resource_version, "7");
        let mut nameless = obj.clone();
        nameless.metadata.name = None;
        assert!(SandboxView::from_dynamic(&nameless).is_none());
    }
}
