//! ObjectMeta: names, generateName, labels, annotations, owner references and finalizers, and label selectors.

use super::*;

pub(super) fn object_meta(meta: &Value, rule: NameRule, errs: &mut Vec<FieldError>) {
    let path = "metadata";
    if meta.is_null() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        return;
    }
    if !meta.is_object() {
        errs.push(type_error(path.to_string(), meta, "object"));
        return;
    }
    let generate_name = t_str(meta, "generateName", path, errs).unwrap_or("");
    if !generate_name.is_empty() {
        msgs_invalid(errs, "metadata.generateName", generate_name, rule.check(generate_name, true));
    }
    let name = t_str(meta, "name", path, errs).unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        msgs_invalid(errs, "metadata.name", name, rule.check(name, false));
    }
    if let Some(ns) = t_str(meta, "namespace", path, errs).filter(|n| !n.is_empty()) {
        msgs_invalid(errs, "metadata.namespace", ns, names::dns1123_label(ns));
    }
    non_negative(meta, "generation", path, errs);
    let labels = t_str_map(meta, "labels", path, errs);
    validate_labels(&labels, "metadata.labels", errs);
    let annotations = t_str_map(meta, "annotations", path, errs);
    validate_annotations(&annotations, "metadata.annotations", errs);
    owner_references(meta, errs);
    let finalizers = t_str_list(meta, "finalizers", path, errs);
    for f in &finalizers {
        msgs_invalid(errs, "metadata.finalizers", f, names::qualified_name(f));
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        let list = Value::from(finalizers.iter().map(|f| Value::from(*f)).collect::<Vec<_>>());
        errs.push(FieldError::invalid(
            "metadata.finalizers",
            shown(&list),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

pub(super) fn owner_references(meta: &Value, errs: &mut Vec<FieldError>) {
    let path = "metadata.ownerReferences";
    let mut first_controller: Option<String> = None;
    for (_, r, _) in t_obj_list(meta, "ownerReferences", "metadata", errs) {
        let api_version = t_str(r, "apiVersion", path, errs).unwrap_or("");
        let kind = t_str(r, "kind", path, errs).unwrap_or("");
        let name = t_str(r, "name", path, errs).unwrap_or("");
        let uid = t_str(r, "uid", path, errs).unwrap_or("");
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => ("", *v),
            [g, v] => (*g, *v),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.apiVersion", api_version, "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.kind", kind, "must not be empty"));
        }
        if name.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.name", name, "must not be empty"));
        }
        if uid.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.uid", uid, "must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(path, shown(r), "/v1, Kind=Event is disallowed from being an owner"));
        }
        if t_bool(r, "controller", path, errs) == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    shown(meta.get("ownerReferences").unwrap_or(&Value::Null)),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

pub(super) fn validate_labels(labels: &[(&str, &str)], path: &str, errs: &mut Vec<FieldError>) {
    for (k, v) in labels {
        msgs_invalid(errs, path, k, names::qualified_name(k));
        msgs_invalid(errs, path, v, names::label_value(v));
    }
}

pub(super) fn validate_annotations(annotations: &[(&str, &str)], path: &str, errs: &mut Vec<FieldError>) {
    let mut total = 0usize;
    for (k, v) in annotations {
        msgs_invalid(errs, path, k, names::qualified_name(&k.to_lowercase()));
        total += k.len() + v.len();
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::too_long(path, ANNOTATIONS_MAX_BYTES));
    }
}

/// `core/validation.ValidateObjectMeta`: the generic rules plus core's finalizer-name rule.
pub(super) fn core_meta(obj: &Value, kind: &str, errs: &mut Vec<FieldError>) {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    object_meta(meta, name_rule(kind), errs);
    kube_finalizer_names(arr_at(meta, "finalizers"), "metadata.finalizers", true, errs);
}

/// `validateKubeFinalizerName`: a finalizer without a domain must be one Kubernetes defines.
pub(super) fn kube_finalizer_names(list: &[Value], path: &str, indexed: bool, errs: &mut Vec<FieldError>) {
    for (i, f) in list.iter().enumerate() {
        let Some(f) = f.as_str() else { continue };
        if !f.contains('/') && !matches!(f, "kubernetes" | "orphan" | "foregroundDeletion") {
            let at = if indexed { idx(path, i) } else { path.to_string() };
            errs.push(invalid_str(at, f, "name is neither a standard finalizer name nor is it fully qualified"));
        }
    }
}

pub(super) fn object_meta_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    for field in ["name", "namespace"] {
        let n = new.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("");
        let o = old.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("");
        if n != o {
            errs.push(invalid_str(format!("metadata.{field}"), n, IMMUTABLE));
        }
    }
}

/// `ValidateLabelSelector` for `matchLabels`/`matchExpressions` selectors.
pub(crate) fn label_selector(sel: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let labels = t_str_map(sel, "matchLabels", path, errs);
    validate_labels(&labels, &child(path, "matchLabels"), errs);
    for (_, req, rp) in t_obj_list(sel, "matchExpressions", path, errs) {
        let op = t_str(req, "operator", &rp, errs).unwrap_or("");
        let values = t_str_list(req, "values", &rp, errs);
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        child(&rp, "values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        child(&rp, "values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(invalid_str(child(&rp, "operator"), other, "not a valid selector operator")),
        }
        let k = t_str(req, "key", &rp, errs).unwrap_or("");
        msgs_invalid(errs, &child(&rp, "key"), k, names::qualified_name(k));
    }
}

/// Whether a `LabelSelector` selects `labels`; None when the selector cannot be converted (the
/// server then skips the match check). An absent selector matches nothing; `{}` matches all.
pub(super) fn selector_matches(sel: Option<&Value>, labels: &Map<String, Value>) -> Option<bool> {
    let Some(sel) = sel else { return Some(false) };
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    for (k, v) in obj_at(sel, "matchLabels").into_iter().flatten() {
        if get(k) != Some(v.as_str()?) {
            return Some(false);
        }
    }
    for req in arr_at(sel, "matchExpressions") {
        let k = str_at(req, "key")?;
        let values: Vec<&str> = arr_at(req, "values").iter().filter_map(Value::as_str).collect();
        let ok = match str_at(req, "operator")? {
            "In" if !values.is_empty() => get(k).is_some_and(|v| values.contains(&v)),
            "NotIn" if !values.is_empty() => get(k).is_none_or(|v| !values.contains(&v)),
            "Exists" if values.is_empty() => get(k).is_some(),
            "DoesNotExist" if values.is_empty() => get(k).is_none(),
            _ => return None,
        };
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

// ---------------------------------------------------------------------------------------------
// Pods.
