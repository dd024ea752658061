//! Namespaces and Nodes.

use super::*;

pub(super) fn validate_namespace(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Namespace", errs);
    let Some(spec) = t_obj(obj, "spec", "", errs) else { return };
    let finalizers = t_str_list(spec, "finalizers", "spec", errs);
    for f in &finalizers {
        msgs_invalid(errs, "spec.finalizers", f, names::qualified_name(f));
    }
    kube_finalizer_names(arr_at(spec, "finalizers"), "spec.finalizers", false, errs);
}

pub(super) fn validate_node(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Node", errs);
    let Some(spec) = t_obj(obj, "spec", "", errs) else { return };
    let mut unique: HashSet<(String, String)> = HashSet::new();
    for (_, taint, tp) in t_obj_list(spec, "taints", "metadata", errs) {
        let k = t_str(taint, "key", &tp, errs).unwrap_or("");
        msgs_invalid(errs, &child(&tp, "key"), k, names::qualified_name(k));
        let v = t_str(taint, "value", &tp, errs).unwrap_or("");
        let msgs = names::label_value(v);
        if !msgs.is_empty() {
            errs.push(invalid_str(child(&tp, "value"), v, msgs.join(";")));
        }
        let effect = t_str(taint, "effect", &tp, errs).unwrap_or("");
        one_of(errs, &child(&tp, "effect"), Some(effect), &["NoSchedule", "PreferNoSchedule", "NoExecute"]);
        if !unique.insert((effect.to_string(), k.to_string())) {
            errs.push(FieldError {
                kind: FieldErrorKind::Duplicate(shown(taint)),
                field: tp.clone(),
                detail: "taints must be unique by key and effect pair".to_string(),
            });
        }
    }
}

pub(super) fn node_pod_cidrs(spec: &Value) -> Vec<String> {
    let list: Vec<String> = arr_at(spec, "podCIDRs").iter().filter_map(Value::as_str).map(str::to_string).collect();
    if list.is_empty() {
        nonempty_str_at(spec, "podCIDR").map(|c| vec![c.to_string()]).unwrap_or_default()
    } else {
        list
    }
}

pub(super) fn node_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    let detail = "node updates may not change podCIDR except from \"\" to valid";
    let (new_cidrs, old_cidrs) = (node_pod_cidrs(ns), node_pod_cidrs(os));
    if !old_cidrs.is_empty() {
        if old_cidrs.len() != new_cidrs.len() {
            errs.push(FieldError::forbidden("spec.podCIDRs", detail));
        } else {
            for (i, (o, n)) in old_cidrs.iter().zip(&new_cidrs).enumerate() {
                if o != n {
                    errs.push(FieldError::forbidden(idx("spec.podCIDRs", i), detail));
                }
            }
        }
    }
    let old_provider = str_at(os, "providerID").unwrap_or("");
    if !old_provider.is_empty() && old_provider != str_at(ns, "providerID").unwrap_or("") {
        errs.push(FieldError::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
}
