//! The Sandboxes a claim makes: a cold one from the template (with the claim's env, volumes and
//! pod metadata), or the merge patch that moves a warm pool member to the claim. Pure functions
//! over JSON; the API server validates what they produce.

use std::collections::BTreeMap;

use contract::k8s::agent_sandbox::{
    ALLOWED_POD_LABEL_DOMAINS, CLAIM_KIND, CLAIM_UID_LABEL, EXEMPT_POD_ANNOTATIONS, LAUNCH_COLD, LAUNCH_TYPE_LABEL,
    LAUNCH_WARM, POD_NAME_ANNOTATION, RESTRICTED_POD_ANNOTATION_DOMAINS, TEMPLATE_REF_ANNOTATION,
    TEMPLATE_REF_HASH_LABEL, WARM_POOL_LABEL, claim_reason,
};
use serde_json::{Map, Value, json};

use super::model::{Claim, EnvVar, PodMetadata, Spec};
use crate::controllers::extensions::blueprint::{
    EnvPolicy, Template, VolumePolicy, pod_template_annotations, pod_template_labels,
};
use crate::controllers::extensions::discovery::Apis;
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::{TEMPLATE_HASH_LABEL, controller_reference, name_hash};
use crate::names;

/// Why a claim's Sandbox cannot be made; each is one reason of the claim's `Ready`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// `additionalPodMetadata` uses a key or value the controller refuses.
    #[error("invalid additionalPodMetadata: {0}")]
    InvalidMetadata(String),
    /// `env` conflicts with the template's `envVarsInjectionPolicy`.
    #[error("environment variable injection rejected: {0}")]
    EnvVarsInjectionRejected(String),
    /// `volumeClaimTemplates` conflict with the template's policy or are malformed.
    #[error("{0}")]
    VolumeClaimTemplates(String),
    /// Anything else (reported as `ReconcilerError`).
    #[error("{0}")]
    Other(String),
}

impl Refusal {
    /// The `Ready` reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Refusal::InvalidMetadata(_) => claim_reason::INVALID_METADATA,
            Refusal::EnvVarsInjectionRejected(_) => claim_reason::ENV_VARS_INJECTION_REJECTED,
            Refusal::VolumeClaimTemplates(_) => claim_reason::VOLUME_CLAIM_TEMPLATES_ERROR,
            Refusal::Other(_) => claim_reason::RECONCILER_ERROR,
        }
    }

    /// The `Ready` message.
    pub fn message(&self) -> String {
        match self {
            Refusal::Other(why) => format!("Error seen: {why}"),
            other => other.to_string(),
        }
    }
}

fn domain_of(key: &str) -> Option<String> {
    key.split_once('/').map(|(domain, _)| domain.to_ascii_lowercase())
}

fn in_domain(domain: &str, parent: &str) -> bool {
    domain == parent || domain.ends_with(&format!(".{parent}"))
}

/// upstream's `validateAdditionalPodMetadata`: label keys need a prefix in the allowlist (so a
/// claim cannot opt its pod into someone's NetworkPolicy or Service), annotations may not use
/// the system's domains, and everything must be a valid key and value.
pub fn validate_pod_metadata(metadata: &PodMetadata) -> Result<(), Refusal> {
    let invalid = |what: &str, key: &str, why: String| {
        Refusal::InvalidMetadata(format!("failed to validate {what} {key:?}: {why}"))
    };
    for (key, value) in &metadata.labels {
        let errors = names::qualified_name(key);
        if !errors.is_empty() {
            return Err(invalid("label", key, format!("invalid label key: {key:?}: {}", errors.join("; "))));
        }
        if key.eq_ignore_ascii_case("app") && value.eq_ignore_ascii_case("sandbox-router") {
            return Err(invalid(
                "label",
                key,
                format!("restricted system label value: {key:?}={value:?} is not allowed"),
            ));
        }
        let Some(domain) = domain_of(key) else {
            return Err(invalid(
                "label",
                key,
                format!("label {key:?} must have a domain prefix (e.g. 'sandbox.users.io/my-label')"),
            ));
        };
        if !ALLOWED_POD_LABEL_DOMAINS.iter().any(|d| in_domain(&domain, d)) {
            return Err(invalid("label", key, format!("label domain {domain:?} is not in the allowlist")));
        }
        let errors = names::label_value(value);
        if !errors.is_empty() {
            return Err(invalid("label", key, format!("invalid label value: {value:?}: {}", errors.join("; "))));
        }
    }
    for key in metadata.annotations.keys() {
        let errors = names::qualified_name(key);
        if !errors.is_empty() {
            return Err(invalid("annotation", key, format!("invalid annotation key: {key:?}: {}", errors.join("; "))));
        }
        let restricted =
            domain_of(key).is_some_and(|d| RESTRICTED_POD_ANNOTATION_DOMAINS.iter().any(|r| in_domain(&d, r)));
        if restricted && !EXEMPT_POD_ANNOTATIONS.contains(&key.as_str()) {
            return Err(invalid("annotation", key, format!("restricted system domain: {key:?} is not allowed")));
        }
    }
    Ok(())
}

/// Checks that the claim's pod metadata sets no key the template sets to another value.
fn check_no_override(template: &Template, metadata: &PodMetadata) -> Result<(), Refusal> {
    let existing = |kind: &str| -> BTreeMap<String, String> {
        template
            .pod_template
            .pointer(&format!("/metadata/{kind}"))
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default()
    };
    for (kind, wanted) in [("labels", &metadata.labels), ("annotations", &metadata.annotations)] {
        let template_values = existing(kind);
        for (key, value) in wanted {
            if let Some(template_value) = template_values.get(key).filter(|v| *v != value) {
                let what = kind.trim_end_matches('s');
                return Err(Refusal::Other(format!(
                    "metadata override conflict: {what} {key:?} is defined in template with value {template_value:?}, but claim requests {value:?}"
                )));
            }
        }
    }
    Ok(())
}

/// Sets one environment variable in a container's JSON, as the policy allows.
fn set_env(container: &mut Value, env: &EnvVar, policy: EnvPolicy) -> Result<(), Refusal> {
    let name = container["name"].as_str().unwrap_or_default().to_string();
    if policy == EnvPolicy::Allowed && container["envFrom"].as_array().is_some_and(|f| !f.is_empty()) {
        return Err(Refusal::EnvVarsInjectionRejected(format!(
            "container {name:?} uses EnvFrom sources; Allowed policy cannot safely prevent overriding EnvFrom-provided variables"
        )));
    }
    let Some(object) = container.as_object_mut() else {
        return Err(Refusal::Other(format!("container {name:?} is not an object")));
    };
    let list = object.entry("env").or_insert_with(|| json!([]));
    if !list.is_array() {
        *list = json!([]);
    }
    let Some(list) = list.as_array_mut() else {
        return Err(Refusal::Other(format!("container {name:?} has a malformed env")));
    };
    let entry = json!({"name": env.name, "value": env.value});
    match list.iter_mut().find(|e| e["name"] == env.name.as_str()) {
        Some(_) if policy != EnvPolicy::Overrides => Err(Refusal::EnvVarsInjectionRejected(format!(
            "environment variable override is not allowed by the template policy for variable {:?}",
            env.name
        ))),
        Some(existing) => {
            *existing = entry;
            Ok(())
        }
        None => {
            list.push(entry);
            Ok(())
        }
    }
}

/// upstream's env injection: variables without a container go to the first container, the
/// others to the (init) container they name; the template's policy decides what may change.
pub fn inject_env(spec: &mut Map<String, Value>, env: &[EnvVar], policy: EnvPolicy) -> Result<(), Refusal> {
    if env.is_empty() {
        return Ok(());
    }
    if policy == EnvPolicy::Disallowed {
        return Err(Refusal::EnvVarsInjectionRejected(
            "environment variable injection is not allowed by the template policy".into(),
        ));
    }
    let Some(pod_spec) = spec.get_mut("podTemplate").and_then(|t| t.get_mut("spec")) else {
        return Err(Refusal::Other("the template has no pod spec".into()));
    };
    let names_of = |list: &Value| -> Vec<String> {
        list.as_array().into_iter().flatten().filter_map(|c| c["name"].as_str().map(String::from)).collect()
    };
    let known: Vec<String> =
        names_of(&pod_spec["initContainers"]).into_iter().chain(names_of(&pod_spec["containers"])).collect();
    for e in env {
        if let Some(target) = e.container_name.as_deref().filter(|c| !c.is_empty())
            && !known.iter().any(|k| k == target)
        {
            return Err(Refusal::Other(format!(
                "target container {target:?} not found in template for environment variable {:?}",
                e.name
            )));
        }
    }
    for list in ["initContainers", "containers"] {
        let Some(containers) = pod_spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for (index, container) in containers.iter_mut().enumerate() {
            let name = container["name"].as_str().unwrap_or_default().to_string();
            let first_main = list == "containers" && index == 0;
            let wanted = env.iter().filter(|e| match e.container_name.as_deref().filter(|c| !c.is_empty()) {
                Some(target) => target == name,
                None => first_main,
            });
            for e in wanted {
                set_env(container, e, policy)?;
            }
        }
    }
    Ok(())
}

fn template_name_of(vct: &Value) -> &str {
    vct.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default()
}

fn validate_volumes(vcts: &[Value], whose: &str) -> Result<(), Refusal> {
    let mut seen = Vec::new();
    for (index, vct) in vcts.iter().enumerate() {
        let name = template_name_of(vct);
        if name.is_empty() {
            return Err(Refusal::VolumeClaimTemplates(format!(
                "{whose}: invalid volume claim templates: name at index {index} is empty"
            )));
        }
        if seen.contains(&name) {
            return Err(Refusal::VolumeClaimTemplates(format!(
                "{whose}: invalid volume claim templates: duplicate name {name:?}"
            )));
        }
        seen.push(name);
    }
    Ok(())
}

/// upstream's `mergeVolumeClaimTemplates`: the claim's templates join the template's as its
/// `volumeClaimTemplatesPolicy` allows (none, new names only, or replacing by name).
pub fn merge_volumes(template: &[Value], claim: &[Value], policy: VolumePolicy) -> Result<Vec<Value>, Refusal> {
    validate_volumes(template, "template")?;
    if claim.is_empty() {
        return Ok(template.to_vec());
    }
    validate_volumes(claim, "claim")?;
    match policy {
        VolumePolicy::Disallowed => {
            Err(Refusal::VolumeClaimTemplates("volume claim templates are disallowed by the template".into()))
        }
        VolumePolicy::Allowed => {
            if let Some(clash) =
                claim.iter().find(|c| template.iter().any(|t| template_name_of(t) == template_name_of(c)))
            {
                return Err(Refusal::VolumeClaimTemplates(format!(
                    "overriding volume claim templates is forbidden by the template: cannot override template volume {:?}",
                    template_name_of(clash)
                )));
            }
            Ok(template.iter().chain(claim).cloned().collect())
        }
        VolumePolicy::Overrides => {
            let mut merged: Vec<Value> = template
                .iter()
                .map(|t| claim.iter().find(|c| template_name_of(c) == template_name_of(t)).unwrap_or(t).clone())
                .collect();
            merged.extend(
                claim.iter().filter(|c| !template.iter().any(|t| template_name_of(t) == template_name_of(c))).cloned(),
            );
            Ok(merged)
        }
    }
}

fn insert_all(map: &mut Map<String, Value>, values: &BTreeMap<String, String>) {
    map.extend(values.iter().map(|(k, v)| (k.clone(), json!(v))));
}

/// The Sandbox a claim starts cold: named like the claim, controlled by it, the template's
/// blueprint with the claim's volumes, env and pod metadata.
pub fn cold_sandbox(claim: &Claim, spec: &Spec, template: &Template, apis: &Apis) -> Result<Value, Refusal> {
    let mut sandbox_spec = template.sandbox_spec();
    let volumes =
        merge_volumes(&template.volume_claim_templates, &spec.volume_claim_templates, template.volume_policy)?;
    if !volumes.is_empty() {
        sandbox_spec.insert("volumeClaimTemplates".into(), Value::Array(volumes));
    }
    let template_hash = name_hash(&template.name);
    validate_pod_metadata(&spec.additional_pod_metadata)?;
    check_no_override(template, &spec.additional_pod_metadata)?;
    let labels = pod_template_labels(&mut sandbox_spec);
    labels.insert(CLAIM_UID_LABEL.into(), json!(claim.uid));
    labels.insert(TEMPLATE_REF_HASH_LABEL.into(), json!(template_hash));
    insert_all(labels, &spec.additional_pod_metadata.labels);
    if !spec.additional_pod_metadata.annotations.is_empty() {
        insert_all(pod_template_annotations(&mut sandbox_spec), &spec.additional_pod_metadata.annotations);
    }
    inject_env(&mut sandbox_spec, &spec.env, template.env_policy)?;
    let owner = controller_reference(&apis.version.api_version(), CLAIM_KIND, &claim.name, &claim.uid);
    Ok(json!({
        "apiVersion": apis.sandboxes.api_version,
        "kind": apis.sandboxes.kind,
        "metadata": {
            "name": claim.name,
            "namespace": claim.namespace,
            "labels": {
                CLAIM_UID_LABEL: claim.uid,
                LAUNCH_TYPE_LABEL: LAUNCH_COLD,
                TEMPLATE_REF_HASH_LABEL: template_hash,
            },
            "annotations": {TEMPLATE_REF_ANNOTATION: template.name},
            "ownerReferences": [owner],
        },
        "spec": sandbox_spec,
    }))
}

/// The merge patch that moves a ready pool member to the claim, locked on the member's
/// resourceVersion so that two claims can never both move it: the pool label and blueprint
/// hash go (the pool stops counting it and replenishes), the claim becomes the only owner,
/// and the claim's identity and pod metadata join the pod template. The pod itself is left
/// alone: the Sandbox controller never changes a running pod, so nothing restarts.
pub fn adoption_patch(
    claim: &Claim,
    spec: &Spec,
    member: &SandboxView,
    template: &Template,
    apis: &Apis,
) -> Result<Value, Refusal> {
    validate_pod_metadata(&spec.additional_pod_metadata)?;
    check_no_override(template, &spec.additional_pod_metadata)?;
    let template_hash =
        member.labels.get(TEMPLATE_REF_HASH_LABEL).cloned().unwrap_or_else(|| name_hash(&template.name));
    let pod_name = member.annotations.get(POD_NAME_ANNOTATION).filter(|n| !n.is_empty()).unwrap_or(&member.name);
    let owner = controller_reference(&apis.version.api_version(), CLAIM_KIND, &claim.name, &claim.uid);
    let mut pod_labels = Map::new();
    pod_labels.insert(WARM_POOL_LABEL.into(), Value::Null);
    pod_labels.insert(TEMPLATE_HASH_LABEL.into(), Value::Null);
    pod_labels.insert(CLAIM_UID_LABEL.into(), json!(claim.uid));
    pod_labels.insert(TEMPLATE_REF_HASH_LABEL.into(), json!(template_hash));
    insert_all(&mut pod_labels, &spec.additional_pod_metadata.labels);
    let mut pod_metadata = json!({"labels": pod_labels});
    if !spec.additional_pod_metadata.annotations.is_empty() {
        let mut annotations = Map::new();
        insert_all(&mut annotations, &spec.additional_pod_metadata.annotations);
        pod_metadata["annotations"] = Value::Object(annotations);
    }
    Ok(json!({
        "metadata": {
            "resourceVersion": member.resource_version,
            "labels": {
                WARM_POOL_LABEL: null,
                TEMPLATE_HASH_LABEL: null,
                LAUNCH_TYPE_LABEL: LAUNCH_WARM,
                CLAIM_UID_LABEL: claim.uid,
                TEMPLATE_REF_HASH_LABEL: template_hash,
            },
            "annotations": {POD_NAME_ANNOTATION: pod_name},
            "ownerReferences": [owner],
        },
        "spec": {"podTemplate": {"metadata": pod_metadata}},
    }))
}
