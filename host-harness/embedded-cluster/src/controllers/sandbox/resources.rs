//! The dependents of a Sandbox (pod, PVCs, headless Service) as the controller builds them,
//! and how it tells whether an existing object belongs to a Sandbox.

use std::collections::BTreeMap;

use contract::k8s::agent_sandbox;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Service, ServiceSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Map, Value, json};

use super::model::{Sandbox, Spec, VolumeClaimTemplate};
use super::{CLUSTER_DOMAIN, KIND, NAME_HASH_LABEL};

/// Prefixes a user template may not set: they carry the controller's own bookkeeping (the
/// Service selects pods by the hash label, so letting a template set it would hijack traffic).
const RESERVED_PREFIXES: [&str; 2] = ["agents.x-k8s.io/", "extensions.agents.x-k8s.io/"];

/// Whether a label or annotation key is reserved for the controller.
pub fn is_reserved_key(key: &str) -> bool {
    RESERVED_PREFIXES.iter().any(|p| key.starts_with(p))
}

/// `status.selector` of a Sandbox with that name hash.
pub fn selector(hash: &str) -> String {
    format!("{NAME_HASH_LABEL}={hash}")
}

/// `status.serviceFQDN` of a Service.
pub fn service_fqdn(name: &str, namespace: &str) -> String {
    format!("{name}.{namespace}.svc.{CLUSTER_DOMAIN}")
}

/// The controller reference every dependent carries, so garbage collection removes it with
/// the Sandbox and foreground deletion waits for it.
pub fn owner_reference(sandbox: &Sandbox) -> OwnerReference {
    OwnerReference {
        api_version: sandbox.version.api_version(),
        kind: KIND.to_string(),
        name: sandbox.name.clone(),
        uid: sandbox.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// Who controls an object, relative to one Sandbox.
#[derive(Debug, PartialEq)]
pub enum Ownership<'a> {
    /// Its controller reference points at this Sandbox.
    Ours,
    /// It has no controller reference.
    Unowned,
    /// Another controller owns it.
    Other(&'a OwnerReference),
}

/// Classifies an object by its controller reference (the UID is authoritative, not the name).
pub fn ownership<'a>(meta: &'a ObjectMeta, sandbox_uid: &str) -> Ownership<'a> {
    let controller = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true));
    match controller {
        None => Ownership::Unowned,
        Some(r) if r.uid == sandbox_uid => Ownership::Ours,
        Some(r) => Ownership::Other(r),
    }
}

/// Whether an object carries this Sandbox's hash label, the only permission to adopt it.
pub fn has_hash_label(meta: &ObjectMeta, hash: &str) -> bool {
    meta.labels.as_ref().and_then(|l| l.get(NAME_HASH_LABEL)).is_some_and(|v| v == hash)
}

/// Describes a foreign controller reference for error messages.
pub fn describe_owner(owner: &OwnerReference) -> String {
    format!("{}/{} (UID: {})", owner.kind, owner.name, owner.uid)
}

fn without_reserved(map: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    map.iter().filter(|(k, _)| !is_reserved_key(k)).map(|(k, v)| (k.clone(), v.clone())).collect()
}

/// The pod a Sandbox runs: named like it, from its template without reserved keys, with the
/// hash label, the controller reference and one PVC volume per claim template (replacing any
/// template volume of the same name, as a StatefulSet does).
pub fn desired_pod(sandbox: &Sandbox, spec: &Spec, hash: &str) -> Pod {
    let template = &spec.pod_template;
    let mut labels = without_reserved(&template.metadata.labels);
    labels.insert(NAME_HASH_LABEL.to_string(), hash.to_string());
    let annotations = without_reserved(&template.metadata.annotations);

    let mut pod_spec = template.spec.clone();
    if !spec.volume_claim_templates.is_empty() {
        let claim_volumes: Vec<Volume> = spec
            .volume_claim_templates
            .iter()
            .map(|t| Volume {
                name: t.metadata.name.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: agent_sandbox::volume_claim_name(&t.metadata.name, &sandbox.name),
                    read_only: None,
                }),
                ..Volume::default()
            })
            .collect();
        let mut volumes: Vec<Volume> = pod_spec
            .volumes
            .take()
            .unwrap_or_default()
            .into_iter()
            .filter(|v| !claim_volumes.iter().any(|c| c.name == v.name))
            .collect();
        volumes.extend(claim_volumes);
        pod_spec.volumes = Some(volumes);
    }

    Pod {
        metadata: ObjectMeta {
            name: Some(sandbox.name.clone()),
            namespace: Some(sandbox.namespace.clone()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner_reference(sandbox)]),
            ..ObjectMeta::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

/// The PVC for one claim template. It is owned by the Sandbox, so only garbage collection
/// removes it: the controller never deletes it, and suspend or expiry keep the data.
pub fn desired_pvc(sandbox: &Sandbox, template: &VolumeClaimTemplate, hash: &str) -> PersistentVolumeClaim {
    let mut labels = template.metadata.labels.clone();
    labels.insert(NAME_HASH_LABEL.to_string(), hash.to_string());
    let annotations = template.metadata.annotations.clone();
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(agent_sandbox::volume_claim_name(&template.metadata.name, &sandbox.name)),
            namespace: Some(sandbox.namespace.clone()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![owner_reference(sandbox)]),
            ..ObjectMeta::default()
        },
        spec: Some(template.spec.clone()),
        status: None,
    }
}

fn hash_map(hash: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(NAME_HASH_LABEL.to_string(), hash.to_string())])
}

/// The headless Service giving the pod a stable DNS name; it selects the pod by hash label.
pub fn desired_service(sandbox: &Sandbox, hash: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(sandbox.name.clone()),
            namespace: Some(sandbox.namespace.clone()),
            labels: Some(hash_map(hash)),
            owner_references: Some(vec![owner_reference(sandbox)]),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            selector: Some(hash_map(hash)),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Merge patch that makes this Sandbox the controller of an unowned object and puts the hash
/// label on it. The whole owner list is sent because merge patches replace lists.
pub fn adopt_patch(meta: &ObjectMeta, sandbox: &Sandbox, hash: &str) -> Value {
    let mut owners: Vec<OwnerReference> = meta.owner_references.clone().unwrap_or_default();
    owners.push(owner_reference(sandbox));
    json!({
        "metadata": {
            "ownerReferences": owners,
            "labels": { NAME_HASH_LABEL: hash },
        }
    })
}

/// Merge patch adopting an unowned Service: owner, hash label and a selector of exactly the
/// hash label.
pub fn adopt_service_patch(service: &Service, sandbox: &Sandbox, hash: &str) -> Value {
    let mut patch = adopt_patch(&service.metadata, sandbox, hash);
    let mut selector = service_selector_patch(service, hash);
    patch["spec"] = selector["spec"].take();
    patch
}

/// Merge patch that puts back a missing or wrong hash label.
pub fn hash_label_patch(hash: &str) -> Value {
    json!({ "metadata": { "labels": { NAME_HASH_LABEL: hash } } })
}

/// Merge patch setting a Service's selector to exactly the hash label: other keys are
/// nulled, since a merge patch would otherwise keep them.
pub fn service_selector_patch(service: &Service, hash: &str) -> Value {
    let mut selector: Map<String, Value> = service
        .spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .into_iter()
        .flatten()
        .map(|(k, _)| (k.clone(), Value::Null))
        .collect();
    selector.insert(NAME_HASH_LABEL.to_string(), Value::String(hash.to_string()));
    json!({
        "metadata": { "labels": { NAME_HASH_LABEL: hash } },
        "spec": { "selector": selector },
    })
}

/// Whether an owned Service still has the hash label and selects exactly the hash label.
pub fn service_in_shape(service: &Service, hash: &str) -> bool {
    let selector_ok = service.spec.as_ref().and_then(|s| s.selector.as_ref()).is_some_and(|s| *s == hash_map(hash));
    selector_ok && has_hash_label(&service.metadata, hash)
}

/// Whether a Service could become this Sandbox's headless Service (cluster IP is immutable).
pub fn service_is_headless(service: &Service) -> bool {
    matches!(service.spec.as_ref().and_then(|s| s.cluster_ip.as_deref()), None | Some("") | Some("None"))
}
