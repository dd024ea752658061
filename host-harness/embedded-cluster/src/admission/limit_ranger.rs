//! The `LimitRanger` admission plugin for pods: `type: Container` items of the namespace's
//! LimitRanges default each container's limits (`default`) and requests (`defaultRequest`),
//! then bound them (`min`, `max`), with the plugin's 403 wording.
//!
//! Upstream: `plugin/pkg/admission/limitranger/admission.go`; the LimitRange defaults
//! (defaultRequest from default or min, default from max) are `SetDefaults_LimitRangeItem`.

use serde_json::{Value, json};

use crate::quantity::{format_nanos, is_binary, parse_nanos, value_nanos};
use crate::status::ApiError;
use crate::store::Objects;

/// The `type: Container` items of a namespace's LimitRanges, defaulted as the API server
/// defaults them on write.
fn container_items(store: &dyn Objects, namespace: &str) -> Vec<Value> {
    let mut items = Vec::new();
    for lr in store.objects("limitranges", Some(namespace)) {
        for item in lr.pointer("/spec/limits").and_then(Value::as_array).into_iter().flatten() {
            if item["type"] == "Container" {
                items.push(defaulted(item));
            }
        }
    }
    items
}

/// `SetDefaults_LimitRangeItem`: a missing default limit is the max, a missing default request
/// the default limit, else the min.
fn defaulted(item: &Value) -> Value {
    let mut item = item.clone();
    for key in ["max", "min", "default", "defaultRequest"] {
        if !item[key].is_object() {
            item[key] = json!({});
        }
    }
    let resources: Vec<(String, Value)> =
        item["max"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()).unwrap_or_default();
    for (k, v) in resources {
        if item["default"].get(&k).is_none() {
            item["default"][&k] = v;
        }
    }
    for source in ["default", "min"] {
        let resources: Vec<(String, Value)> = item[source]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default();
        for (k, v) in resources {
            if item["defaultRequest"].get(&k).is_none() {
                item["defaultRequest"][&k] = v;
            }
        }
    }
    item
}

/// Applies the namespace's container defaults to a new pod (before validation).
pub fn default_pod(store: &dyn Objects, namespace: &str, pod: &mut Value) {
    let items = container_items(store, namespace);
    if items.is_empty() {
        return;
    }
    for list in ["containers", "initContainers"] {
        let Some(containers) = pod.pointer_mut(&format!("/spec/{list}")).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in containers {
            for item in &items {
                for (field, source) in [("limits", "default"), ("requests", "defaultRequest")] {
                    for (resource, value) in item[source].as_object().into_iter().flatten() {
                        if !c["resources"].is_object() {
                            c["resources"] = json!({});
                        }
                        if !c["resources"][field].is_object() {
                            c["resources"][field] = json!({});
                        }
                        if c["resources"][field].get(resource).is_none() {
                            c["resources"][field][resource] = value.clone();
                        }
                    }
                }
            }
        }
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => format_nanos(parse_nanos(s).unwrap_or_default(), is_binary(s)),
        other => other.to_string(),
    }
}

/// Enforces the namespace's container min/max on a new pod (after validation).
pub fn check_pod(store: &dyn Objects, namespace: &str, pod: &Value, name: &str) -> Result<(), ApiError> {
    let items = container_items(store, namespace);
    let mut errors = Vec::new();
    for c in ["containers", "initContainers"]
        .iter()
        .filter_map(|l| pod.pointer(&format!("/spec/{l}")).and_then(Value::as_array))
        .flatten()
    {
        for item in &items {
            for (resource, max) in item["max"].as_object().into_iter().flatten() {
                let limit = &c["resources"]["limits"][resource];
                match (value_nanos(limit), value_nanos(max)) {
                    (None, _) => errors.push(format!(
                        "maximum {resource} usage per Container is {}.  No limit is specified",
                        text(max)
                    )),
                    (Some(l), Some(m)) if l > m => errors.push(format!(
                        "maximum {resource} usage per Container is {}, but limit is {}",
                        text(max),
                        text(limit)
                    )),
                    _ => {}
                }
            }
            for (resource, min) in item["min"].as_object().into_iter().flatten() {
                let request = &c["resources"]["requests"][resource];
                match (value_nanos(request), value_nanos(min)) {
                    (None, _) => errors.push(format!(
                        "minimum {resource} usage per Container is {}.  No request is specified",
                        text(min)
                    )),
                    (Some(r), Some(m)) if r < m => errors.push(format!(
                        "minimum {resource} usage per Container is {}, but request is {}",
                        text(min),
                        text(request)
                    )),
                    _ => {}
                }
            }
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    Err(ApiError::forbidden_object("", "pods", name, &crate::status::aggregate(errors)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_default_limit_also_defaults_the_request() {
        let item = defaulted(&json!({"type": "Container", "default": {"cpu": "500m"}, "max": {"memory": "1Gi"}}));
        assert_eq!(item["defaultRequest"], json!({"cpu": "500m", "memory": "1Gi"}));
        assert_eq!(item["default"], json!({"cpu": "500m", "memory": "1Gi"}));
    }
}
