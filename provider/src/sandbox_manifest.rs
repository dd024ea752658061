//! The agent-sandbox `Sandbox` object (v1beta1, or v1alpha1 where a cluster serves only that),
//! with its leak guard: `shutdownTime` at the lease's expiry and `shutdownPolicy: Delete`, so
//! the cluster deletes it whatever happens to the host. Also the patches that renew, suspend
//! and resume it.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Value, json};

use crate::api_versions::SandboxVersion;
use crate::config::WorkspaceVolume;
use crate::errors::ProviderError;
use crate::k8s_types::{ObjectMeta, PersistentVolumeClaimSpec, PodTemplateSpec, VolumeResourceRequirements};
use crate::naming::WORKSPACE_VOLUME;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Sandbox<'a> {
    api_version: String,
    kind: &'static str,
    metadata: ObjectMeta,
    spec: SandboxSpec<'a>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SandboxSpec<'a> {
    pod_template: &'a PodTemplateSpec,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    volume_claim_templates: Vec<ClaimTemplate>,
    shutdown_time: &'a str,
    shutdown_policy: &'static str,
    /// v1beta1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    operating_mode: Option<&'static str>,
    /// v1alpha1 only.
    #[serde(skip_serializing_if = "Option::is_none")]
    replicas: Option<i32>,
}

#[derive(Serialize)]
struct ClaimTemplate {
    metadata: ClaimMeta,
    spec: PersistentVolumeClaimSpec,
}

#[derive(Serialize)]
struct ClaimMeta {
    name: &'static str,
    labels: BTreeMap<String, String>,
}

/// Everything a Sandbox is made of.
pub struct SandboxParams<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub version: SandboxVersion,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    pub template: &'a PodTemplateSpec,
    /// RFC 3339, whole seconds.
    pub shutdown_time: &'a str,
    pub workspace: Option<&'a WorkspaceVolume>,
}

/// The Sandbox manifest.
pub fn sandbox(p: &SandboxParams<'_>) -> Result<Value, ProviderError> {
    let claims = p
        .workspace
        .map(|w| ClaimTemplate {
            metadata: ClaimMeta { name: WORKSPACE_VOLUME, labels: p.labels.clone() },
            spec: PersistentVolumeClaimSpec {
                access_modes: vec!["ReadWriteOnce".to_string()],
                resources: VolumeResourceRequirements {
                    requests: BTreeMap::from([("storage".to_string(), w.size.clone())]),
                },
                storage_class_name: w.storage_class_name.clone(),
            },
        })
        .into_iter()
        .collect();
    let (operating_mode, replicas) = match p.version {
        SandboxVersion::V1beta1 => (Some("Running"), None),
        SandboxVersion::V1alpha1 => (None, Some(1)),
    };
    let manifest = Sandbox {
        api_version: p.version.resource().api_version(),
        kind: "Sandbox",
        metadata: crate::naming::object_meta(p.name, p.namespace, p.labels, p.annotations),
        spec: SandboxSpec {
            pod_template: p.template,
            volume_claim_templates: claims,
            shutdown_time: p.shutdown_time,
            shutdown_policy: "Delete",
            operating_mode,
            replicas,
        },
    };
    serde_json::to_value(&manifest).map_err(|e| ProviderError::internal(format!("could not encode the Sandbox: {e}")))
}

/// Moves the leak guard (renew).
pub fn shutdown_patch(shutdown_time: &str) -> Value {
    json!({"spec": {"shutdownTime": shutdown_time}})
}

/// Suspends: the pod is deleted, claims are kept.
pub fn suspend_patch(version: SandboxVersion) -> Value {
    match version {
        SandboxVersion::V1beta1 => json!({"spec": {"operatingMode": "Suspended"}}),
        SandboxVersion::V1alpha1 => json!({"spec": {"replicas": 0}}),
    }
}

/// Resumes: the controller creates the pod again.
pub fn resume_patch(version: SandboxVersion) -> Value {
    match version {
        SandboxVersion::V1beta1 => json!({"spec": {"operatingMode": "Running"}}),
        SandboxVersion::V1alpha1 => json!({"spec": {"replicas": 1}}),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s_types::PodSpec;

    fn render(version: SandboxVersion, workspace: Option<&WorkspaceVolume>) -> Value {
        let labels = BTreeMap::from([("app.kubernetes.io/managed-by".to_string(), "x".to_string())]);
        let annotations = BTreeMap::from([("a".to_string(), "b".to_string())]);
        let template = PodTemplateSpec { metadata: None, spec: Some(PodSpec::default()) };
        sandbox(&SandboxParams {
            name: "pc-1",
            namespace: "ns",
            version,
            labels: &labels,
            annotations: &annotations,
            template: &template,
            shutdown_time: "2026-11-29T10:00:00Z",
            workspace,
        })
        .unwrap()
    }

    #[test]
    fn v1beta1_has_the_leak_guard_and_operating_mode() {
        let s = render(SandboxVersion::V1beta1, None);
        assert_eq!(s["apiVersion"], "agents.x-k8s.io/v1beta1");
        assert_eq!(s["kind"], "Sandbox");
        assert_eq!(s["spec"]["shutdownTime"], "2026-11-29T10:00:00Z");
        assert_eq!(s["spec"]["shutdownPolicy"], "Delete");
        assert_eq!(s["spec"]["operatingMode"], "Running");
        assert!(s["spec"].get("replicas").is_none());
        assert!(s["spec"].get("volumeClaimTemplates").is_none());
        assert_eq!(s["metadata"]["annotations"]["a"], "b");
    }

    #[test]
    fn v1alpha1_uses_replicas() {
        let s = render(SandboxVersion::V1alpha1, None);
        assert_eq!(s["apiVersion"], "agents.x-k8s.io/v1alpha1");
        assert_eq!(s["spec"]["replicas"], 1);
        assert!(s["spec"].get("operatingMode").is_none());
        assert_eq!(s["spec"]["shutdownPolicy"], "Delete");
        assert_eq!(suspend_patch(SandboxVersion::V1alpha1), json!({"spec": {"replicas": 0}}));
        assert_eq!(resume_patch(SandboxVersion::V1beta1), json!({"spec": {"operatingMode": "Running"}}));
    }

    #[test]
    fn a_workspace_volume_becomes_a_claim_template() {
        let w = WorkspaceVolume { size: "10Gi".into(), storage_class_name: Some("fast".into()) };
        let s = render(SandboxVersion::V1beta1, Some(&w));
        let claim = &s["spec"]["volumeClaimTemplates"][0];
        assert_eq!(claim["metadata"]["name"], "workspace");
        assert_eq!(claim["spec"]["resources"]["requests"]["storage"], "10Gi");
        assert_eq!(claim["spec"]["storageClassName"], "fast");
    }
}
