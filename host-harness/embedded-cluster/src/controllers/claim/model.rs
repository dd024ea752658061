//! The `SandboxClaim` as the controller sees it: both API versions parsed into one shape.
//!
//! v1beta1 names a warm pool (whose template the claim uses); v1alpha1 names a template and a
//! warm pool policy (`none`, `default`: any pool of that template, or one pool's name).

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::api::DynamicObject;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::clock::parse_time;
use crate::controllers::extensions;
use crate::controllers::sandbox::model::Condition;

/// Where a claim's Sandbox comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// v1beta1 `spec.warmPoolRef.name`: adopt from this pool, or start its template cold.
    Pool(String),
    /// v1alpha1 `spec.sandboxTemplateRef.name` and `spec.warmpool`.
    Template {
        /// The template's name.
        template: String,
        /// Which pools may give a warm Sandbox.
        warm_pool: WarmPoolPolicy,
    },
}

/// v1alpha1 `spec.warmpool`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WarmPoolPolicy {
    /// `none`: always start cold.
    None,
    /// `default` (or unset): any pool in the namespace with the claim's template.
    Default,
    /// One pool, by name.
    Named(String),
}

/// One `spec.env` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Its value.
    #[serde(default)]
    pub value: String,
    /// The container to set it in (default: the first one).
    #[serde(default)]
    pub container_name: Option<String>,
}

/// `spec.additionalPodMetadata`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct PodMetadata {
    /// Labels to add to the pod template.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Annotations to add to the pod template.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

impl PodMetadata {
    /// Whether the claim asks for any.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// `spec.lifecycle.shutdownPolicy`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShutdownPolicy {
    /// Delete the claim (its Sandbox goes by garbage collection).
    Delete,
    /// Delete the claim in the foreground: it stays, terminating, until its Sandbox is gone.
    DeleteForeground,
    /// Keep the claim, delete its Sandbox (the CRD default).
    #[default]
    Retain,
}

/// `spec.lifecycle`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Lifecycle {
    /// When the claim expires.
    pub shutdown_time: Option<Timestamp>,
    /// What expiry does.
    pub shutdown_policy: ShutdownPolicy,
    /// Expiry this long after the Sandbox finished.
    pub ttl_seconds_after_finished: Option<i64>,
}

/// A usable claim spec.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    /// Pool or template.
    pub source: Source,
    /// `spec.env`.
    pub env: Vec<EnvVar>,
    /// `spec.additionalPodMetadata`.
    pub additional_pod_metadata: PodMetadata,
    /// `spec.volumeClaimTemplates` (v1beta1).
    pub volume_claim_templates: Vec<Value>,
    /// `spec.lifecycle`.
    pub lifecycle: Lifecycle,
}

impl Spec {
    /// Whether the claim must start cold: its own env or volumes make a warm Sandbox unfit, as
    /// does a v1alpha1 `warmpool: none`.
    pub fn needs_cold_start(&self) -> bool {
        !self.env.is_empty()
            || !self.volume_claim_templates.is_empty()
            || matches!(self.source, Source::Template { warm_pool: WarmPoolPolicy::None, .. })
    }
}

/// `status.sandbox`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxRef {
    /// The Sandbox's name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Its pod IPs.
    #[serde(default, rename = "podIPs", skip_serializing_if = "Vec::is_empty")]
    pub pod_ips: Vec<String>,
}

/// `status` of a claim. Empty values stay out, so an observed status compares equal to a
/// computed one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimStatus {
    /// `Ready`, and `Finished` mirrored from the Sandbox.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The claim's Sandbox.
    #[serde(default)]
    pub sandbox: SandboxRef,
}

impl ClaimStatus {
    /// The condition of that type, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// A claim read from the cluster.
#[derive(Clone, Debug)]
pub struct Claim {
    /// Object name (a cold Sandbox gets the same).
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID (the key of ownership).
    pub uid: String,
    /// resourceVersion as read, the optimistic lock of the adoption annotation.
    pub resource_version: String,
    /// `metadata.generation`, copied into every condition.
    pub generation: i64,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Object annotations (the assigned warm Sandbox).
    pub annotations: BTreeMap<String, String>,
    /// The spec, or why it cannot be used (reported as `ReconcilerError`).
    pub spec: Result<Spec, String>,
    /// The status as stored.
    pub status: ClaimStatus,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawLifecycle {
    shutdown_time: Option<String>,
    shutdown_policy: Option<String>,
    ttl_seconds_after_finished: Option<i64>,
}

impl Claim {
    /// Reads a claim served as `v1beta1` (`alpha` false) or `v1alpha1`. Fails only without the
    /// identity the controller needs; a bad spec is kept as an error value to report.
    pub fn from_dynamic(obj: &DynamicObject, alpha: bool) -> anyhow::Result<Self> {
        let meta = &obj.metadata;
        let (name, namespace, uid) = extensions::identity(obj, "SandboxClaim")?;
        let status = extensions::status(obj);
        Ok(Self {
            name,
            namespace,
            uid,
            resource_version: meta.resource_version.clone().unwrap_or_default(),
            generation: meta.generation.unwrap_or_default(),
            created: meta.creation_timestamp.as_ref().map(|t| t.0),
            deleting: meta.deletion_timestamp.is_some(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            spec: parse_spec(obj.data.get("spec"), alpha),
            status,
        })
    }
}

fn field<T: serde::de::DeserializeOwned + Default>(spec: &Value, key: &str) -> Result<T, String> {
    match spec.get(key).filter(|v| !v.is_null()) {
        None => Ok(T::default()),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| format!("invalid spec.{key}: {e}")),
    }
}

/// Interprets `spec` for one API version.
pub fn parse_spec(spec: Option<&Value>, alpha: bool) -> Result<Spec, String> {
    let spec = spec.filter(|v| v.is_object()).ok_or("spec is missing")?;
    let text = |pointer: &str| spec.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string();
    let source = if alpha {
        let template = text("/sandboxTemplateRef/name");
        if template.is_empty() {
            return Err("spec.sandboxTemplateRef.name is required".into());
        }
        let warm_pool = match text("/warmpool").as_str() {
            "none" => WarmPoolPolicy::None,
            "" | "default" => WarmPoolPolicy::Default,
            pool => WarmPoolPolicy::Named(pool.to_string()),
        };
        Source::Template { template, warm_pool }
    } else {
        let pool = text("/warmPoolRef/name");
        if pool.is_empty() {
            return Err("spec.warmPoolRef.name is required".into());
        }
        Source::Pool(pool)
    };
    let lifecycle = match spec.get("lifecycle").filter(|v| !v.is_null()) {
        None => Lifecycle::default(),
        Some(raw) => {
            let raw: RawLifecycle =
                serde_json::from_value(raw.clone()).map_err(|e| format!("invalid spec.lifecycle: {e}"))?;
            let shutdown_time = raw
                .shutdown_time
                .filter(|s| !s.is_empty())
                .map(|s| parse_time(&s).ok_or_else(|| format!("invalid spec.lifecycle.shutdownTime {s:?}")))
                .transpose()?;
            let shutdown_policy = match raw.shutdown_policy.as_deref() {
                None | Some("") | Some("Retain") => ShutdownPolicy::Retain,
                Some("Delete") => ShutdownPolicy::Delete,
                Some("DeleteForeground") => ShutdownPolicy::DeleteForeground,
                Some(other) => return Err(format!("unsupported spec.lifecycle.shutdownPolicy {other:?}")),
            };
            Lifecycle { shutdown_time, shutdown_policy, ttl_seconds_after_finished: raw.ttl_seconds_after_finished }
        }
    };
    Ok(Spec {
        source,
        env: field(spec, "env")?,
        additional_pod_metadata: field(spec, "additionalPodMetadata")?,
        volume_claim_templates: field(spec, "volumeClaimTemplates")?,
        lifecycle,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn both_versions_read_into_one_shape() {
        let beta = parse_spec(
            Some(&json!({"warmPoolRef": {"name": "p"}, "env": [{"name": "A", "value": "1"}],
                "lifecycle": {"shutdownTime": "2026-01-01T00:00:00Z", "shutdownPolicy": "DeleteForeground"}})),
            false,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(beta.source, Source::Pool("p".into()));
        assert_eq!(beta.lifecycle.shutdown_policy, ShutdownPolicy::DeleteForeground);
        assert!(beta.lifecycle.shutdown_time.is_some());
        assert!(beta.needs_cold_start(), "env forces a cold start");

        let alpha = |warmpool: &str| {
            parse_spec(Some(&json!({"sandboxTemplateRef": {"name": "t"}, "warmpool": warmpool})), true)
                .unwrap_or_else(|e| panic!("{e}"))
        };
        assert_eq!(
            alpha("default").source,
            Source::Template { template: "t".into(), warm_pool: WarmPoolPolicy::Default }
        );
        assert!(
            matches!(alpha("fast").source, Source::Template { warm_pool: WarmPoolPolicy::Named(ref p), .. } if p == "fast")
        );
        assert!(alpha("none").needs_cold_start());
        assert!(!alpha("default").needs_cold_start());
        assert!(parse_spec(Some(&json!({"sandboxTemplateRef": {}})), true).is_err());
        assert!(
            parse_spec(Some(&json!({"warmPoolRef": {"name": "p"}, "lifecycle": {"shutdownPolicy": "Later"}})), false)
                .is_err()
        );
    }

    #[test]
    fn an_empty_status_round_trips_as_empty() {
        let status = ClaimStatus::default();
        assert_eq!(serde_json::to_value(&status).unwrap_or_default(), json!({"conditions": [], "sandbox": {}}));
    }
}
