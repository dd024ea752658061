//! A `SandboxTemplate` and the Sandbox blueprint it holds: the pod template, volume claim
//! templates and Service switch that pools and claims copy into every Sandbox they create.
//!
//! The blueprint stays JSON: it is copied into Sandboxes verbatim (the API server validates
//! it there), so no field a typed round trip would drop is lost.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde_json::{Map, Value, json};

use super::name_hash;

/// How a claim's `env` may change the template's containers (`envVarsInjectionPolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EnvPolicy {
    /// A claim may set no environment variables (the CRD default).
    #[default]
    Disallowed,
    /// A claim may add variables, but not replace the template's.
    Allowed,
    /// A claim may add and replace variables.
    Overrides,
}

/// How a claim's `volumeClaimTemplates` combine with the template's (v1beta1 only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VolumePolicy {
    /// A claim may bring none (the CRD default).
    #[default]
    Disallowed,
    /// A claim may add templates of new names.
    Allowed,
    /// A claim may add templates and replace the template's by name.
    Overrides,
}

/// One `SandboxTemplate`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Template {
    /// Object name.
    pub name: String,
    /// UID, for the managed NetworkPolicy's owner reference.
    pub uid: String,
    /// Object labels (the template controller keeps its ref-hash label there).
    pub labels: BTreeMap<String, String>,
    /// `spec.podTemplate` as stored.
    pub pod_template: Value,
    /// `spec.volumeClaimTemplates` as stored.
    pub volume_claim_templates: Vec<Value>,
    /// `spec.service`.
    pub service: Option<bool>,
    /// `spec.envVarsInjectionPolicy`.
    pub env_policy: EnvPolicy,
    /// `spec.volumeClaimTemplatesPolicy`.
    pub volume_policy: VolumePolicy,
    /// `spec.networkPolicyManagement` is `Managed` (the default) rather than `Unmanaged`.
    pub network_policy_managed: bool,
    /// `spec.networkPolicy` (ingress and egress rules), when the template sets its own.
    pub network_policy: Option<Value>,
}

impl Template {
    /// Reads a template; a spec the controllers cannot use is an error to report.
    pub fn from_dynamic(obj: &DynamicObject) -> Result<Self, String> {
        let name = obj.metadata.name.clone().ok_or("SandboxTemplate without metadata.name")?;
        let spec = obj.data.get("spec").and_then(Value::as_object).ok_or("spec is missing")?;
        let pod_template =
            spec.get("podTemplate").filter(|v| v.is_object()).cloned().ok_or("spec.podTemplate is required")?;
        let text = |key: &str| spec.get(key).and_then(Value::as_str).unwrap_or_default();
        let env_policy = match text("envVarsInjectionPolicy") {
            "" | "Disallowed" => EnvPolicy::Disallowed,
            "Allowed" => EnvPolicy::Allowed,
            "Overrides" => EnvPolicy::Overrides,
            other => return Err(format!("unsupported spec.envVarsInjectionPolicy {other:?}")),
        };
        let volume_policy = match text("volumeClaimTemplatesPolicy") {
            "" | "Disallowed" => VolumePolicy::Disallowed,
            "Allowed" => VolumePolicy::Allowed,
            "Overrides" => VolumePolicy::Overrides,
            other => return Err(format!("unknown volume claim templates policy {other:?}")),
        };
        let network_policy_managed = match text("networkPolicyManagement") {
            "" | "Managed" => true,
            "Unmanaged" => false,
            other => return Err(format!("unsupported spec.networkPolicyManagement {other:?}")),
        };
        Ok(Self {
            name,
            uid: obj.metadata.uid.clone().unwrap_or_default(),
            labels: obj.metadata.labels.clone().unwrap_or_default(),
            pod_template,
            volume_claim_templates: spec
                .get("volumeClaimTemplates")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
            service: spec.get("service").and_then(Value::as_bool),
            env_policy,
            volume_policy,
            network_policy_managed,
            network_policy: spec.get("networkPolicy").filter(|v| v.is_object()).cloned(),
        })
    }

    /// `spec.podTemplate`, `spec.volumeClaimTemplates` and `spec.service`: what a Sandbox copies.
    pub fn blueprint(&self) -> Map<String, Value> {
        let mut blueprint = Map::new();
        blueprint.insert("podTemplate".into(), self.pod_template.clone());
        if !self.volume_claim_templates.is_empty() {
            blueprint.insert("volumeClaimTemplates".into(), Value::Array(self.volume_claim_templates.clone()));
        }
        if let Some(service) = self.service {
            blueprint.insert("service".into(), json!(service));
        }
        blueprint
    }

    /// A short hash of the blueprint (FNV-1a of its canonical JSON, keys sorted), the label that
    /// tells a pool member made from an older version of the template.
    pub fn blueprint_hash(&self) -> String {
        name_hash(&Value::Object(self.blueprint()).to_string())
    }

    /// Whether pods get the strict default policy: managed, with no rules of the template's own.
    pub fn secure_by_default(&self) -> bool {
        self.network_policy_managed && self.network_policy.is_none()
    }

    /// The Sandbox spec a pool member or a cold claim starts from: the blueprint with the
    /// secure pod defaults applied.
    pub fn sandbox_spec(&self) -> Map<String, Value> {
        let mut spec = self.blueprint();
        if let Some(pod_spec) = spec.get_mut("podTemplate").and_then(|t| t.get_mut("spec")) {
            apply_secure_defaults(self, pod_spec);
        }
        spec
    }
}

/// upstream's `ApplySandboxSecureDefaults`: no ServiceAccount token unless the template asks
/// for one, and under the strict default NetworkPolicy (which blocks cluster DNS) public
/// resolvers unless the template picks its own DNS policy.
pub fn apply_secure_defaults(template: &Template, pod_spec: &mut Value) {
    let Some(spec) = pod_spec.as_object_mut() else {
        return;
    };
    spec.entry("automountServiceAccountToken").or_insert(json!(false));
    let dns_unset = spec.get("dnsPolicy").and_then(Value::as_str).is_none_or(str::is_empty);
    if template.secure_by_default() && dns_unset {
        spec.insert("dnsPolicy".into(), json!("None"));
        spec.insert("dnsConfig".into(), json!({"nameservers": ["8.8.8.8", "1.1.1.1"]}));
    }
}

/// The labels of `spec.podTemplate.metadata` of a Sandbox spec, created if absent.
pub fn pod_template_labels(spec: &mut Map<String, Value>) -> &mut Map<String, Value> {
    metadata_map(spec, "labels")
}

/// The annotations of `spec.podTemplate.metadata` of a Sandbox spec, created if absent.
pub fn pod_template_annotations(spec: &mut Map<String, Value>) -> &mut Map<String, Value> {
    metadata_map(spec, "annotations")
}

fn metadata_map<'a>(spec: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let template = object_entry(spec, "podTemplate");
    let metadata = object_entry(template, "metadata");
    object_entry(metadata, key)
}

/// The object under `key`, replacing anything that is not an object.
fn object_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> &'a mut Map<String, Value> {
    let entry = map.entry(key.to_string()).or_insert_with(|| json!({}));
    if !entry.is_object() {
        *entry = json!({});
    }
    match entry {
        Value::Object(inner) => inner,
        _ => unreachable!("just made an object"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn template(spec: Value) -> Template {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
            "metadata": {"name": "t", "uid": "tu"}, "spec": spec
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        Template::from_dynamic(&obj).unwrap_or_else(|e| panic!("{e}"))
    }

    fn pod() -> Value {
        json!({"spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    }

    #[test]
    fn the_blueprint_hash_moves_with_the_pod_template_only() {
        let a = template(json!({"podTemplate": pod()}));
        let same = template(json!({"podTemplate": pod(), "envVarsInjectionPolicy": "Allowed"}));
        let other = template(json!({"podTemplate": {"spec": {"containers": [{"name": "c", "image": "alpine"}]}}}));
        assert_eq!(a.blueprint_hash(), same.blueprint_hash(), "policies are not part of the blueprint");
        assert_ne!(a.blueprint_hash(), other.blueprint_hash());
        assert_eq!(a.blueprint_hash().len(), 8);
    }

    #[test]
    fn secure_defaults_fill_only_what_the_template_left_open() {
        let strict = template(json!({"podTemplate": pod()}));
        let spec = strict.sandbox_spec();
        let pod_spec = &spec["podTemplate"]["spec"];
        assert_eq!(pod_spec["automountServiceAccountToken"], false);
        assert_eq!(pod_spec["dnsPolicy"], "None");
        assert_eq!(pod_spec["dnsConfig"]["nameservers"][0], "8.8.8.8");

        let own =
            template(json!({"podTemplate": {"spec": {"automountServiceAccountToken": true, "dnsPolicy": "Default",
            "containers": [{"name": "c", "image": "i"}]}}}));
        let spec = own.sandbox_spec();
        assert_eq!(spec["podTemplate"]["spec"]["automountServiceAccountToken"], true);
        assert_eq!(spec["podTemplate"]["spec"]["dnsPolicy"], "Default");

        let unmanaged = template(json!({"podTemplate": pod(), "networkPolicyManagement": "Unmanaged"}));
        assert!(unmanaged.sandbox_spec()["podTemplate"]["spec"].get("dnsPolicy").is_none());
    }

    #[test]
    fn pod_template_metadata_maps_are_created_on_demand() {
        let mut spec = template(json!({"podTemplate": pod()})).sandbox_spec();
        pod_template_labels(&mut spec).insert("k".into(), json!("v"));
        pod_template_annotations(&mut spec).insert("a".into(), json!("b"));
        assert_eq!(spec["podTemplate"]["metadata"], json!({"labels": {"k": "v"}, "annotations": {"a": "b"}}));
    }

    #[test]
    fn unusable_templates_say_why() {
        let obj: DynamicObject = serde_json::from_value(json!({"apiVersion": "x/v1", "kind": "SandboxTemplate",
            "metadata": {"name": "t"}, "spec": {"podTemplate": pod(), "envVarsInjectionPolicy": "Sometimes"}}))
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(Template::from_dynamic(&obj).is_err_and(|e| e.contains("envVarsInjectionPolicy")));
    }
}
