//! The `SandboxWarmPool` as the controller sees it; v1beta1 and v1alpha1 read the same way
//! (v1alpha1 requires `spec.replicas`, v1beta1 defaults it to 1).

use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::controllers::extensions;

/// One warm pool.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pool {
    /// Object name (members are named `<pool>-<random>`).
    pub name: String,
    /// Namespace of the pool, its template and its members.
    pub namespace: String,
    /// UID: members are the pool's only if their controller reference carries it.
    pub uid: String,
    /// `metadata.generation`, reported back as `status.observedGeneration`.
    pub generation: i64,
    /// `metadata.deletionTimestamp` is set: garbage collection takes the members.
    pub deleting: bool,
    /// `spec.replicas`.
    pub replicas: usize,
    /// `spec.sandboxTemplateRef.name`.
    pub template: String,
    /// `spec.updateStrategy.type` is `Recreate` (members of an older template are replaced);
    /// otherwise `OnReplenish` (they stay until adopted or deleted).
    pub recreate: bool,
    /// The status as stored.
    pub status: PoolStatus,
}

/// `status` of a warm pool.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolStatus {
    /// Members (Ready or not).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// Members whose Ready condition is True.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i64>,
    /// The label selector of the members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The generation the counts were computed for (v1beta1; a CRD without the field prunes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Pool {
    /// Reads a pool; fails only without the identity the controller needs.
    pub fn from_dynamic(obj: &DynamicObject) -> anyhow::Result<Self> {
        let meta = &obj.metadata;
        let (name, namespace, uid) = extensions::identity(obj, "SandboxWarmPool")?;
        let spec = obj.data.get("spec").cloned().unwrap_or(Value::Null);
        let replicas = spec.get("replicas").and_then(Value::as_i64).unwrap_or(1).max(0);
        let status = extensions::status(obj);
        Ok(Self {
            name,
            namespace,
            uid,
            generation: meta.generation.unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            replicas: usize::try_from(replicas).unwrap_or_default(),
            template: spec.pointer("/sandboxTemplateRef/name").and_then(Value::as_str).unwrap_or_default().to_string(),
            recreate: spec.pointer("/updateStrategy/type").and_then(Value::as_str) == Some("Recreate"),
            status,
        })
    }
}
