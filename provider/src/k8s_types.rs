//! The Kubernetes objects the provider writes, as the fields it sets and no others: a Job, a
//! Secret, the pod template of a Sandbox or Job, a workspace claim's spec, and the metadata
//! they start from. Serialize-only: the provider reads objects as JSON, never into these.
//!
//! Why not k8s-openapi's types, which the host uses: its `ObjectMeta` (inside every template,
//! down to an ephemeral volume's claim template) and `JobStatus` hold `Time`, whose serializer
//! formats with jiff's `strftime`. The component then carried jiff's formatter, parser and time
//! zone code and every unused field's serializer and drop glue, about an eighth of its bytes,
//! for fields it never sets. The shapes here are held to k8s-openapi's in this module's tests:
//! each object, with every field set, goes through k8s-openapi's type and back unchanged, so a
//! misspelt or misplaced field fails there (k8s-openapi, generated from the API server's OpenAPI
//! document, drops a field it does not know).
//!
//! Field names follow k8s-openapi's (and so the API's), so code reads the same with either.

use std::collections::BTreeMap;

use serde::Serialize;

pub use crate::config::Toleration;

/// `metadata` of the objects a lease owns.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// A `batch/v1` Job.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Job {
    api_version: &'static str,
    kind: &'static str,
    pub metadata: ObjectMeta,
    pub spec: JobSpec,
}

impl Job {
    /// A Job of `metadata` and `spec`, with its apiVersion and kind.
    pub fn new(metadata: ObjectMeta, spec: JobSpec) -> Self {
        Self { api_version: "batch/v1", kind: "Job", metadata, spec }
    }
}

/// A Job's `spec`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    pub backoff_limit: i32,
    pub ttl_seconds_after_finished: i32,
    pub active_deadline_seconds: i64,
    pub completions: i32,
    pub parallelism: i32,
    pub template: PodTemplateSpec,
}

/// A `v1` Secret.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    api_version: &'static str,
    kind: &'static str,
    pub metadata: ObjectMeta,
    /// Values as text; the API server stores them base64-encoded as `data`.
    pub string_data: BTreeMap<String, String>,
    #[serde(rename = "type")]
    pub type_: &'static str,
}

impl Secret {
    /// An `Opaque` Secret of `metadata` holding `string_data`.
    pub fn opaque(metadata: ObjectMeta, string_data: BTreeMap<String, String>) -> Self {
        Self { api_version: "v1", kind: "Secret", metadata, string_data, type_: "Opaque" }
    }
}

/// A pod template: the pod's metadata and spec.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PodTemplateSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
}

/// A pod's `spec`.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    pub containers: Vec<Container>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub automount_service_account_token: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime_class_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub share_process_namespace: Option<bool>,
}

/// A container of a pod.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_pull_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub security_context: Option<SecurityContext>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_mounts: Option<Vec<VolumeMount>>,
}

/// A container's environment variable: a value, or a reference to a Secret's key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVar {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value_from: Option<EnvVarSource>,
}

/// Where an environment variable's value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EnvVarSource {
    pub secret_key_ref: SecretKeySelector,
}

/// A key of a Secret in the pod's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SecretKeySelector {
    pub name: String,
    pub key: String,
    pub optional: bool,
}

/// A container's requests and limits (quantities as written, e.g. `250m`, `4Gi`).
#[derive(Debug, Clone, Serialize)]
pub struct ResourceRequirements {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, String>>,
}

/// A container's security context.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SecurityContext {
    pub run_as_non_root: bool,
    pub run_as_user: i64,
    pub run_as_group: i64,
    pub allow_privilege_escalation: bool,
    pub read_only_root_filesystem: bool,
    pub capabilities: Capabilities,
}

/// Capabilities dropped from and added to a container's default set.
#[derive(Debug, Clone, Serialize)]
pub struct Capabilities {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub add: Option<Vec<String>>,
}

/// The pod's security context.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSecurityContext {
    pub run_as_non_root: bool,
    pub run_as_user: i64,
    pub run_as_group: i64,
    pub fs_group: i64,
    pub seccomp_profile: SeccompProfile,
}

/// The pod's seccomp profile (`RuntimeDefault`, `Unconfined`).
#[derive(Debug, Clone, Serialize)]
pub struct SeccompProfile {
    #[serde(rename = "type")]
    pub type_: String,
}

/// An object named in the pod's namespace (an image pull Secret).
#[derive(Debug, Clone, Serialize)]
pub struct LocalObjectReference {
    pub name: String,
}

/// An emptyDir volume: the only kind the provider puts in a pod itself.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    pub empty_dir: EmptyDirVolumeSource,
}

impl Volume {
    /// An emptyDir volume named `name`.
    pub fn empty_dir(name: &str) -> Self {
        Self { name: name.to_string(), empty_dir: EmptyDirVolumeSource {} }
    }
}

/// An emptyDir on the node's default medium, unbounded (`{}`).
#[derive(Debug, Clone, Serialize)]
pub struct EmptyDirVolumeSource {}

/// Where a volume is mounted in the container.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    pub name: String,
    pub mount_path: String,
}

/// A workspace claim's spec: one node's storage of `requests.storage`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistentVolumeClaimSpec {
    pub access_modes: Vec<String>,
    pub resources: VolumeResourceRequirements,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// A claim's requested storage.
#[derive(Debug, Clone, Serialize)]
pub struct VolumeResourceRequirements {
    pub requests: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    //! Each shape through k8s-openapi's type of the same object and back: equal only if every
    //! field is one k8s-openapi (so the API) knows, under its name, with a value of its type.

    use serde::Serialize;
    use serde::de::DeserializeOwned;
    use serde_json::Value;

    use super::*;

    /// `ours` as JSON, and the same JSON after k8s-openapi's `T` read and wrote it.
    fn through_k8s_openapi<T: DeserializeOwned + Serialize>(ours: &impl Serialize) -> (Value, Value) {
        let json = serde_json::to_value(ours).unwrap();
        let typed: T =
            serde_json::from_value(json.clone()).unwrap_or_else(|e| panic!("k8s-openapi refused {json}: {e}"));
        (json, serde_json::to_value(typed).unwrap())
    }

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("pc-1".into()),
            namespace: Some("ns".into()),
            labels: Some(map(&[("a", "b")])),
            annotations: Some(map(&[("c", "d")])),
        }
    }

    /// A template with every field set and every optional one present.
    fn template() -> PodTemplateSpec {
        let strings = |items: &[&str]| Some(items.iter().map(|s| s.to_string()).collect());
        PodTemplateSpec {
            metadata: Some(meta()),
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "sandbox".into(),
                    image: Some("img:1".into()),
                    image_pull_policy: Some("IfNotPresent".into()),
                    command: strings(&["sleep", "infinity"]),
                    args: strings(&["--serve"]),
                    working_dir: Some("/workspace".into()),
                    env: Some(vec![
                        EnvVar { name: "HOME".into(), value: Some("/home/sandbox".into()), value_from: None },
                        EnvVar {
                            name: "TOKEN".into(),
                            value: None,
                            value_from: Some(EnvVarSource {
                                secret_key_ref: SecretKeySelector {
                                    name: "pc-1-env".into(),
                                    key: "TOKEN".into(),
                                    optional: false,
                                },
                            }),
                        },
                    ]),
                    resources: Some(ResourceRequirements {
                        requests: Some(map(&[("cpu", "250m"), ("memory", "512Mi")])),
                        limits: Some(map(&[("cpu", "2"), ("memory", "4Gi")])),
                    }),
                    security_context: Some(SecurityContext {
                        run_as_non_root: true,
                        run_as_user: 1000,
                        run_as_group: 1000,
                        allow_privilege_escalation: false,
                        read_only_root_filesystem: true,
                        capabilities: Capabilities { drop: strings(&["ALL"]), add: strings(&["NET_BIND_SERVICE"]) },
                    }),
                    volume_mounts: Some(vec![VolumeMount {
                        name: "workspace".into(),
                        mount_path: "/workspace".into(),
                    }]),
                }],
                restart_policy: Some("Never".into()),
                automount_service_account_token: Some(false),
                service_account_name: Some("runner".into()),
                runtime_class_name: Some("gvisor".into()),
                node_selector: Some(map(&[("pool", "sbx")])),
                tolerations: Some(vec![Toleration {
                    key: Some("dedicated".into()),
                    operator: Some("Equal".into()),
                    value: Some("sbx".into()),
                    effect: Some("NoExecute".into()),
                    toleration_seconds: Some(30),
                }]),
                image_pull_secrets: Some(vec![LocalObjectReference { name: "regcred".into() }]),
                security_context: Some(PodSecurityContext {
                    run_as_non_root: true,
                    run_as_user: 1000,
                    run_as_group: 1000,
                    fs_group: 1000,
                    seccomp_profile: SeccompProfile { type_: "RuntimeDefault".into() },
                }),
                volumes: Some(vec![Volume::empty_dir("workspace")]),
                share_process_namespace: Some(true),
            }),
        }
    }

    #[test]
    fn a_pod_template_is_k8s_openapi_s() {
        let (ours, theirs) = through_k8s_openapi::<k8s_openapi::api::core::v1::PodTemplateSpec>(&template());
        assert_eq!(ours, theirs);
        assert_eq!(ours["spec"]["volumes"][0]["emptyDir"], serde_json::json!({}));
    }

    #[test]
    fn a_job_is_k8s_openapi_s() {
        let spec = JobSpec {
            backoff_limit: 0,
            ttl_seconds_after_finished: 900,
            active_deadline_seconds: 3600,
            completions: 1,
            parallelism: 1,
            template: template(),
        };
        let (ours, theirs) = through_k8s_openapi::<k8s_openapi::api::batch::v1::Job>(&Job::new(meta(), spec));
        assert_eq!(ours, theirs);
        assert_eq!((ours["apiVersion"].as_str(), ours["kind"].as_str()), (Some("batch/v1"), Some("Job")));
    }

    #[test]
    fn a_secret_is_k8s_openapi_s() {
        let secret = Secret::opaque(meta(), map(&[("TOKEN", "value")]));
        let (ours, theirs) = through_k8s_openapi::<k8s_openapi::api::core::v1::Secret>(&secret);
        assert_eq!(ours, theirs);
        assert_eq!((ours["apiVersion"].as_str(), ours["kind"].as_str()), (Some("v1"), Some("Secret")));
    }

    #[test]
    fn a_workspace_claim_spec_is_k8s_openapi_s() {
        let spec = PersistentVolumeClaimSpec {
            access_modes: vec!["ReadWriteOnce".into()],
            resources: VolumeResourceRequirements { requests: map(&[("storage", "10Gi")]) },
            storage_class_name: Some("fast".into()),
        };
        let (ours, theirs) = through_k8s_openapi::<k8s_openapi::api::core::v1::PersistentVolumeClaimSpec>(&spec);
        assert_eq!(ours, theirs);
    }
}
