//! The Sandbox as the controller sees it: both API versions parsed into one shape.
//!
//! v1beta1 suspends with `spec.operatingMode`, v1alpha1 with `spec.replicas: 0`; everything
//! else the controller reads is shared, so the rest of the code only sees [`Spec::suspended`].

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{PersistentVolumeClaimSpec, PodSpec};
use kube::api::DynamicObject;
use serde::{Deserialize, Deserializer, Serialize};

use super::GROUP;
use crate::clock::parse_time;

/// The served API version the controller talks to; it decides the suspend field, the owner
/// references' `apiVersion` and which status fields exist.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SandboxVersion {
    /// Current API: `operatingMode`, `status.nodeName`.
    V1beta1,
    /// Last alpha-only API: `replicas`, `status.replicas`.
    V1alpha1,
}

impl SandboxVersion {
    /// Versions in order of preference, for discovery.
    pub const PREFERENCE: [SandboxVersion; 2] = [SandboxVersion::V1beta1, SandboxVersion::V1alpha1];

    /// The bare version (`v1beta1`).
    pub fn version(self) -> &'static str {
        match self {
            SandboxVersion::V1beta1 => "v1beta1",
            SandboxVersion::V1alpha1 => "v1alpha1",
        }
    }

    /// The `apiVersion` written into owner references (`agents.x-k8s.io/v1beta1`).
    pub fn api_version(self) -> String {
        format!("{GROUP}/{}", self.version())
    }

    /// Parses a bare version as listed by discovery.
    pub fn parse(version: &str) -> Option<Self> {
        Self::PREFERENCE.into_iter().find(|v| v.version() == version)
    }
}

/// What happens when `shutdownTime` is reached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ShutdownPolicy {
    /// Keep the Sandbox, drop its pod and Service (the CRD default).
    #[default]
    Retain,
    /// Delete the Sandbox object itself.
    Delete,
}

/// A validated Sandbox spec, with the version-specific suspend field already resolved.
#[derive(Clone, Debug, Default)]
pub struct Spec {
    /// Blueprint of the pod.
    pub pod_template: PodTemplate,
    /// PVCs to create next to the pod, one volume each.
    pub volume_claim_templates: Vec<VolumeClaimTemplate>,
    /// `spec.service`: `Some(true)` creates a headless Service, `Some(false)` removes one.
    pub service: Option<bool>,
    /// When the Sandbox expires, in cluster time.
    pub shutdown_at: Option<Timestamp>,
    /// What expiry does.
    pub shutdown_policy: ShutdownPolicy,
    /// `operatingMode: Suspended` (v1beta1) or `replicas: 0` (v1alpha1).
    pub suspended: bool,
}

/// `spec.podTemplate`: only labels and annotations of its metadata are used.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct PodTemplate {
    /// Labels and annotations for the pod.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: TemplateMetadata,
    /// The pod spec, copied verbatim apart from the claim volumes.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: PodSpec,
}

/// Metadata allowed in a template.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TemplateMetadata {
    /// Template name (only meaningful for volume claim templates).
    #[serde(default, deserialize_with = "null_as_default")]
    pub name: String,
    /// Labels to copy.
    #[serde(default, deserialize_with = "null_as_default")]
    pub labels: BTreeMap<String, String>,
    /// Annotations to copy.
    #[serde(default, deserialize_with = "null_as_default")]
    pub annotations: BTreeMap<String, String>,
}

/// One entry of `spec.volumeClaimTemplates`.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VolumeClaimTemplate {
    /// Name (the volume name in the pod) plus labels and annotations for the PVC.
    #[serde(default, deserialize_with = "null_as_default")]
    pub metadata: TemplateMetadata,
    /// The PVC spec.
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: PersistentVolumeClaimSpec,
}

/// The spec exactly as stored, before version-specific interpretation.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawSpec {
    pod_template: Option<PodTemplate>,
    #[serde(default, deserialize_with = "null_as_default")]
    volume_claim_templates: Vec<VolumeClaimTemplate>,
    service: Option<bool>,
    shutdown_time: Option<String>,
    shutdown_policy: Option<String>,
    operating_mode: Option<String>,
    replicas: Option<i64>,
}

/// Sandbox status, the union of both versions' fields. Empty strings and lists are kept as
/// `None` so an observed status compares equal to a computed one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxStatus {
    /// Ready, Suspended, Finished, PodScheduled.
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<Condition>,
    /// `agents.x-k8s.io/sandbox-name-hash=<hash>`.
    #[serde(default)]
    pub selector: Option<String>,
    /// The pod's IPs.
    #[serde(default, rename = "podIPs")]
    pub pod_ips: Option<Vec<String>>,
    /// The pod's node (v1beta1 only).
    #[serde(default)]
    pub node_name: Option<String>,
    /// The headless Service's name.
    #[serde(default)]
    pub service: Option<String>,
    /// `<name>.<namespace>.svc.cluster.local`.
    #[serde(default, rename = "serviceFQDN")]
    pub service_fqdn: Option<String>,
    /// 1 while the pod exists, else 0 (v1alpha1 only, for the scale subresource).
    #[serde(default)]
    pub replicas: Option<i32>,
}

impl SandboxStatus {
    /// Parses a stored status leniently: an unreadable status counts as empty, which only
    /// makes the controller write a fresh one.
    pub fn from_value(value: Option<&serde_json::Value>) -> Self {
        let parsed = value
            .filter(|v| !v.is_null())
            .and_then(|v| serde_json::from_value::<SandboxStatus>(v.clone()).ok())
            .unwrap_or_default();
        parsed.normalized()
    }

    fn normalized(mut self) -> Self {
        fn non_empty(s: Option<String>) -> Option<String> {
            s.filter(|s| !s.is_empty())
        }
        self.selector = non_empty(self.selector);
        self.node_name = non_empty(self.node_name);
        self.service = non_empty(self.service);
        self.service_fqdn = non_empty(self.service_fqdn);
        self.pod_ips = self.pod_ips.filter(|ips| !ips.is_empty());
        self
    }

    /// The condition of that type, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

/// A `metav1.Condition`. `lastTransitionTime` stays a string so an unchanged condition is
/// written back byte for byte.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// The Sandbox generation this condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// When `status` last changed.
    #[serde(default, deserialize_with = "null_as_default")]
    pub last_transition_time: String,
    /// Machine-readable reason.
    #[serde(default, deserialize_with = "null_as_default")]
    pub reason: String,
    /// Human-readable detail.
    #[serde(default, deserialize_with = "null_as_default")]
    pub message: String,
}

/// A Sandbox read from the cluster.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// The API version it was read through.
    pub version: SandboxVersion,
    /// Object name.
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// UID, the key of ownership.
    pub uid: String,
    /// `metadata.generation`, copied into every condition.
    pub generation: i64,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Object annotations (for `agents.x-k8s.io/pod-name`).
    pub annotations: BTreeMap<String, String>,
    /// The spec, or why it cannot be used (reported as `ReconcilerError`).
    pub spec: Result<Spec, String>,
    /// The status as stored.
    pub status: SandboxStatus,
}

impl Sandbox {
    /// Reads a Sandbox from a dynamic object. Fails only when the object lacks the identity
    /// the controller needs (name, namespace, uid); a bad spec is kept as an error value so it
    /// can be reported in the status.
    pub fn from_dynamic(obj: &DynamicObject, version: SandboxVersion) -> anyhow::Result<Self> {
        let meta = &obj.metadata;
        let name = meta.name.clone().ok_or_else(|| anyhow::anyhow!("Sandbox without metadata.name"))?;
        let namespace =
            meta.namespace.clone().ok_or_else(|| anyhow::anyhow!("Sandbox {name} without metadata.namespace"))?;
        let uid = meta.uid.clone().ok_or_else(|| anyhow::anyhow!("Sandbox {namespace}/{name} without metadata.uid"))?;
        Ok(Self {
            version,
            name,
            namespace,
            uid,
            generation: meta.generation.unwrap_or_default(),
            deleting: meta.deletion_timestamp.is_some(),
            annotations: meta.annotations.clone().unwrap_or_default(),
            spec: parse_spec(obj.data.get("spec"), version),
            status: SandboxStatus::from_value(obj.data.get("status")),
        })
    }

    /// The value of the `agents.x-k8s.io/pod-name` annotation, if non-empty.
    pub fn pod_name_annotation(&self) -> Option<&str> {
        self.annotations.get(super::POD_NAME_ANNOTATION).map(String::as_str).filter(|s| !s.is_empty())
    }

    /// The pod this Sandbox tracks: the annotation if set, else its own name.
    pub fn tracked_pod_name(&self) -> &str {
        self.pod_name_annotation().unwrap_or(&self.name)
    }
}

/// Interprets `spec` for one API version.
pub fn parse_spec(value: Option<&serde_json::Value>, version: SandboxVersion) -> Result<Spec, String> {
    let value = value.filter(|v| !v.is_null()).ok_or_else(|| "spec is missing".to_string())?;
    let raw: RawSpec = serde_json::from_value(value.clone()).map_err(|e| format!("invalid spec: {e}"))?;
    let pod_template = raw.pod_template.ok_or_else(|| "spec.podTemplate is required".to_string())?;
    let shutdown_at = raw
        .shutdown_time
        .filter(|s| !s.is_empty())
        .map(|s| parse_time(&s).ok_or_else(|| format!("invalid spec.shutdownTime {s:?}")))
        .transpose()?;
    let shutdown_policy = match raw.shutdown_policy.as_deref() {
        None | Some("") | Some("Retain") => ShutdownPolicy::Retain,
        Some("Delete") => ShutdownPolicy::Delete,
        Some(other) => return Err(format!("unsupported spec.shutdownPolicy {other:?}")),
    };
    let suspended = match version {
        SandboxVersion::V1beta1 => match raw.operating_mode.as_deref() {
            None | Some("") | Some("Running") => false,
            Some("Suspended") => true,
            Some(other) => return Err(format!("unsupported spec.operatingMode {other:?}")),
        },
        SandboxVersion::V1alpha1 => match raw.replicas {
            None | Some(1) => false,
            Some(0) => true,
            Some(other) => return Err(format!("spec.replicas must be 0 or 1, not {other}")),
        },
    };
    Ok(Spec {
        pod_template,
        volume_claim_templates: raw.volume_claim_templates,
        service: raw.service,
        shutdown_at,
        shutdown_policy,
        suspended,
    })
}

/// Treats an explicit JSON `null` like an absent field.
fn null_as_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}
