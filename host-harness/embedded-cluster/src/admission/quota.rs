//! ResourceQuota: the `ResourceQuota` admission plugin (a create that would take a namespace
//! past a quota's `hard` is a 403 with the plugin's "exceeded quota" body) and the quota
//! controller's `status` (`hard` copied from the spec, `used` recomputed whenever an object in
//! the namespace is created or removed, or a pod, claim or quota changes).
//!
//! Usage is counted as upstream's evaluators count it (`pkg/quota/v1/evaluator/core`): object
//! counts (`count/<resource>[.<group>]` and the legacy names `pods`, `secrets`, `configmaps`,
//! `services`, `persistentvolumeclaims`, `resourcequotas`), the compute resources of pods that
//! are not terminal (`requests.*`, `limits.*`, and `cpu`/`memory` for requests), and
//! `requests.storage` of claims. A pod that lacks a request or limit a quota tracks is refused
//! with the plugin's "must specify" message.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::quantity::{format_nanos, is_binary, value_nanos};
use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::store::{Objects, Txn};

const NANO: i128 = 1_000_000_000;
const STORAGE: &str = "resourcequotas";

/// The legacy (unprefixed) object-count names and the storage they count.
const LEGACY_COUNTS: &[(&str, &str)] = &[
    ("pods", "pods"),
    ("secrets", "secrets"),
    ("configmaps", "configmaps"),
    ("services", "services"),
    ("persistentvolumeclaims", "persistentvolumeclaims"),
    ("resourcequotas", "resourcequotas"),
];

/// The storage key an object-count resource name counts (`count/jobs.batch` -> `jobs.batch`).
fn counted_storage<'a>(resource: &'a str, types: &'a [ResourceType]) -> Option<&'a str> {
    if let Some((_, storage)) = LEGACY_COUNTS.iter().find(|(name, _)| *name == resource) {
        return Some(storage);
    }
    let counted = resource.strip_prefix("count/")?;
    let (plural, group) = counted.split_once('.').unwrap_or((counted, ""));
    types.iter().find(|t| t.plural == plural && t.group == group).map(|t| t.storage)
}

fn is_terminal(pod: &Value) -> bool {
    matches!(pod.pointer("/status/phase").and_then(Value::as_str), Some("Succeeded" | "Failed"))
}

/// A container-level compute resource a quota name tracks: (`requests`|`limits`, resource).
fn compute(resource: &str) -> Option<(&'static str, &str)> {
    match resource {
        "cpu" | "memory" | "ephemeral-storage" => Some(("requests", resource)),
        _ => {
            if let Some(r) = resource.strip_prefix("requests.").filter(|r| *r != "storage") {
                Some(("requests", r))
            } else {
                resource.strip_prefix("limits.").map(|r| ("limits", r))
            }
        }
    }
}

/// A pod's request or limit of one resource: the sum over its containers, or the largest init
/// container's if that is more, as the pod's effective value.
fn pod_value(pod: &Value, field: &str, resource: &str) -> i128 {
    let sum_of = |list: &str| -> Vec<i128> {
        pod.pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|c| value_nanos(&c["resources"][field][resource]).unwrap_or(0))
            .collect()
    };
    let containers: i128 = sum_of("containers").iter().sum();
    let init = sum_of("initContainers").into_iter().max().unwrap_or(0);
    containers.max(init)
}

/// What one object adds to a quota resource, in nano-units (counts are whole units).
fn usage_of(resource: &str, storage: &str, obj: &Value, types: &[ResourceType]) -> i128 {
    if counted_storage(resource, types) == Some(storage) {
        if storage == "pods" && is_terminal(obj) {
            return 0;
        }
        return NANO;
    }
    match (storage, compute(resource)) {
        ("pods", Some((field, r))) if !is_terminal(obj) => pod_value(obj, field, r),
        ("persistentvolumeclaims", None) if resource == "requests.storage" => {
            value_nanos(&obj["spec"]["resources"]["requests"]["storage"]).unwrap_or(0)
        }
        _ => 0,
    }
}

/// The storages whose objects a quota resource name sums over.
fn sources<'a>(resource: &'a str, types: &'a [ResourceType]) -> Vec<&'a str> {
    if let Some(storage) = counted_storage(resource, types) {
        return vec![storage];
    }
    if compute(resource).is_some() {
        return vec!["pods"];
    }
    if resource == "requests.storage" {
        return vec!["persistentvolumeclaims"];
    }
    Vec::new()
}

fn used_in(store: &dyn Objects, namespace: &str, resource: &str, types: &[ResourceType]) -> i128 {
    sources(resource, types)
        .into_iter()
        .flat_map(|storage| {
            store.objects(storage, Some(namespace)).into_iter().map(move |o| usage_of(resource, storage, &o, types))
        })
        .sum()
}

fn hard_of(quota: &Value) -> BTreeMap<String, Value> {
    quota.pointer("/spec/hard").and_then(Value::as_object).map(|m| m.clone().into_iter().collect()).unwrap_or_default()
}

/// The canonical text of a value of a quota resource, in the format its `hard` was given in.
fn shown(nanos: i128, hard: &Value) -> String {
    format_nanos(nanos, hard.as_str().is_some_and(is_binary))
}

/// Refuses a create that a quota of its namespace does not allow, with the plugin's wording;
/// runs after validation, before anything is written.
pub fn admit(
    txn: &Txn<'_>,
    types: &[ResourceType],
    rt: &ResourceType,
    namespace: &str,
    name: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    if namespace.is_empty() {
        return Ok(());
    }
    for quota in txn.objects(STORAGE, Some(namespace)) {
        let quota_name = quota.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
        let hard = hard_of(&quota);
        if rt.storage == "pods" && !is_terminal(obj) {
            let mut missing: Vec<String> = Vec::new();
            for resource in hard.keys() {
                let Some((field, r)) = compute(resource) else {
                    continue;
                };
                let lacking: Vec<&str> = obj
                    .pointer("/spec/containers")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter(|c| c["resources"][field].get(r).is_none())
                    .filter_map(|c| c["name"].as_str())
                    .collect();
                if !lacking.is_empty() {
                    missing.push(format!("{resource} for: {}", lacking.join(",")));
                }
            }
            if !missing.is_empty() {
                missing.sort();
                let why = format!("failed quota: {quota_name}: must specify {}", missing.join("; "));
                return Err(ApiError::forbidden_object(rt.group, rt.plural, name, &why));
            }
        }
        let mut exceeded = Vec::new();
        for (resource, limit) in &hard {
            let delta = usage_of(resource, rt.storage, obj, types);
            if delta == 0 {
                continue;
            }
            let used = used_in(txn, namespace, resource, types);
            let Some(limit_nanos) = value_nanos(limit) else {
                continue;
            };
            if used + delta > limit_nanos {
                exceeded.push((resource.clone(), shown(delta, limit), shown(used, limit), shown(limit_nanos, limit)));
            }
        }
        if !exceeded.is_empty() {
            let part = |f: fn(&(String, String, String, String)) -> String| {
                exceeded.iter().map(f).collect::<Vec<_>>().join(",")
            };
            let why = format!(
                "exceeded quota: {quota_name}, requested: {}, used: {}, limited: {}",
                part(|e| format!("{}={}", e.0, e.1)),
                part(|e| format!("{}={}", e.0, e.2)),
                part(|e| format!("{}={}", e.0, e.3)),
            );
            return Err(ApiError::forbidden_object(rt.group, rt.plural, name, &why));
        }
    }
    Ok(())
}

/// A quota's status as the quota controller writes it: `hard` from the spec, `used` now.
pub fn with_status(store: &dyn Objects, types: &[ResourceType], namespace: &str, quota: &Value) -> Value {
    let hard = hard_of(quota);
    let used: serde_json::Map<String, Value> = hard
        .iter()
        .map(|(resource, limit)| (resource.clone(), json!(shown(used_in(store, namespace, resource, types), limit))))
        .collect();
    let mut out = quota.clone();
    out["status"] = json!({"hard": hard, "used": used});
    out
}

/// Brings every quota of a namespace up to date after a change in it (only quotas whose
/// status differs are written, so an unchanged quota sends no watch event).
pub fn refresh(txn: &mut Txn<'_>, types: &[ResourceType], namespace: &str) {
    if namespace.is_empty() {
        return;
    }
    for quota in txn.objects(STORAGE, Some(namespace)) {
        let updated = with_status(&*txn, types, namespace, &quota);
        if updated["status"] != quota["status"] {
            txn.put(STORAGE, updated);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_names_map_to_what_they_count() {
        let types = crate::resources::served(crate::resources::SandboxVersions::Both);
        assert_eq!(counted_storage("count/secrets", &types), Some("secrets"));
        assert_eq!(counted_storage("count/jobs.batch", &types), Some("jobs.batch"));
        assert_eq!(counted_storage("secrets", &types), Some("secrets"));
        assert_eq!(counted_storage("count/widgets.example.com", &types), None);
        assert_eq!(compute("cpu"), Some(("requests", "cpu")));
        assert_eq!(compute("limits.memory"), Some(("limits", "memory")));
        assert_eq!(compute("requests.storage"), None);
    }

    #[test]
    fn a_pods_value_is_its_containers_sum_or_its_largest_init_container() {
        let pod = json!({"spec": {
            "containers": [{"resources": {"requests": {"cpu": "250m"}}}, {"resources": {"requests": {"cpu": "250m"}}}],
            "initContainers": [{"resources": {"requests": {"cpu": "1"}}}]}});
        assert_eq!(pod_value(&pod, "requests", "cpu"), NANO);
        assert_eq!(usage_of("requests.cpu", "pods", &pod, &[]), NANO);
        let done = json!({"spec": pod["spec"], "status": {"phase": "Succeeded"}});
        assert_eq!(usage_of("requests.cpu", "pods", &done, &[]), 0, "terminal pods use nothing");
    }
}
