//! batch/v1 Jobs: the spec, the generated selector and labels, and updates.

use super::*;

pub(super) fn validate_job(obj: &Value, require_prefixed: bool, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Job", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    generated_selector(obj, spec, require_prefixed, errs);
    job_spec(spec, errs);
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if str_at(spec, "completionMode") == Some("Indexed")
        && let Some(completions) = int_at(spec, "completions").filter(|c| *c > 0)
    {
        let hostname = format!("{name}-{}", completions - 1);
        if !names::dns1123_label(&hostname).is_empty() {
            errs.push(invalid_str(
                "metadata.name",
                name,
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
}

pub(super) fn generated_selector(obj: &Value, spec: &Value, require_prefixed: bool, errs: &mut Vec<FieldError>) {
    if bool_at(spec, "manualSelector") == Some(true) {
        return;
    }
    let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) else { return };
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let empty = Map::new();
    let labels = spec.pointer("/template/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
    let mut expected = vec![(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)];
    if require_prefixed {
        expected.extend([(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]);
    }
    for (k, want) in &expected {
        let path = format!("spec.template.metadata.labels[{k}]");
        match labels.get(*k).and_then(Value::as_str) {
            None => errs.push(FieldError::required(path, format!("must be '{want}'"))),
            Some(v) if v != *want => {
                errs.push(FieldError::invalid(
                    path,
                    shown(&Value::Object(labels.clone())),
                    format!("must be '{want}'"),
                ));
            }
            Some(_) => {}
        }
    }
    let expected_labels: Map<String, Value> = expected.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
    if selector_matches(Some(selector), &expected_labels) == Some(false) {
        errs.push(FieldError::invalid("spec.selector", shown(selector), "`selector` not auto-generated"));
    }
}

pub(super) fn job_spec(spec: &Value, errs: &mut Vec<FieldError>) {
    let path = "spec";
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        non_negative(spec, field, path, errs);
    }
    if let Some(mode) = t_str(spec, "completionMode", path, errs) {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(not_supported("spec.completionMode", mode, &["NonIndexed", "Indexed"]));
        }
        if mode == "Indexed" {
            if !present(spec, "completions") {
                errs.push(FieldError::required("spec.completions", "when completion mode is Indexed"));
            }
            if let Some(p) = int_at(spec, "parallelism").filter(|p| *p > 100_000) {
                errs.push(invalid_int(
                    "spec.parallelism",
                    p,
                    "must be less than or equal to 100000 when completion mode is Indexed",
                ));
            }
        }
    }
    let has_failure_policy = present(spec, "podFailurePolicy");
    if let Some(policy) = t_str(spec, "podReplacementPolicy", path, errs) {
        if has_failure_policy {
            if policy != "Failed" {
                errs.push(not_supported("spec.podReplacementPolicy", policy, &["Failed"]));
            }
        } else if policy != "Failed" && policy != "TerminatingOrFailed" {
            errs.push(not_supported("spec.podReplacementPolicy", policy, &["Failed", "TerminatingOrFailed"]));
        }
    }
    let template = t_obj(spec, "template", path, errs).unwrap_or(&Value::Null);
    let template_meta = t_obj(template, "metadata", "spec.template", errs).unwrap_or(&Value::Null);
    let labels = t_str_map(template_meta, "labels", "spec.template.metadata", errs);
    validate_labels(&labels, "spec.template.labels", errs);
    let annotations = t_str_map(template_meta, "annotations", "spec.template.metadata", errs);
    validate_annotations(&annotations, "spec.template.annotations", errs);
    let pod = t_obj(template, "spec", "spec.template", errs).unwrap_or(&Value::Null);
    pod_spec(pod, "spec.template.spec", false, errs);
    if !arr_at(pod, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            "spec.template.spec.ephemeralContainers",
            "ephemeral containers not allowed in pod template",
        ));
    }
    let restart_path = "spec.template.spec.restartPolicy";
    match str_at(pod, "restartPolicy").unwrap_or("") {
        "Always" | "" => errs.push(FieldError::required(restart_path, "valid values: \"OnFailure\", \"Never\"")),
        "OnFailure" if has_failure_policy => {
            errs.push(invalid_str(
                restart_path,
                "OnFailure",
                "only \"Never\" is supported when podFailurePolicy is specified",
            ));
        }
        "OnFailure" | "Never" => {}
        other => errs.push(not_supported(restart_path, other, &["OnFailure", "Never"])),
    }
    let selector = t_obj(spec, "selector", path, errs);
    match selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => label_selector(sel, "spec.selector", errs),
    }
    let empty = Map::new();
    let template_labels = template_meta.get("labels").and_then(Value::as_object).unwrap_or(&empty);
    if selector_matches(selector, template_labels) == Some(false) {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            shown(template_meta.get("labels").unwrap_or(&Value::Null)),
            "`selector` does not match template `labels`",
        ));
    }
}

pub(super) fn job_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    if !semantic_eq(ns.get("completions"), os.get("completions")) {
        if str_at(ns, "completionMode") != Some("Indexed") {
            errs.push(FieldError::invalid(
                "spec.completions",
                shown(ns.get("completions").unwrap_or(&null)),
                IMMUTABLE,
            ));
        } else if let Some(c) = int_at(ns, "completions")
            && Some(c) != int_at(ns, "parallelism")
        {
            errs.push(invalid_int("spec.completions", c, "can only be modified in tandem with spec.parallelism"));
        }
    }
    if !semantic_eq(ns.get("selector"), os.get("selector")) {
        errs.push(FieldError::invalid("spec.selector", shown(ns.get("selector").unwrap_or(&null)), IMMUTABLE));
    }
    let mut old_template = os.get("template").cloned().unwrap_or(Value::Null);
    let suspended_never_started =
        bool_at(os, "suspend") == Some(true) && old.pointer("/status/startTime").is_none_or(Value::is_null);
    if suspended_never_started {
        for pointer in [
            "/spec/nodeSelector",
            "/spec/tolerations",
            "/metadata/annotations",
            "/metadata/labels",
            "/spec/schedulingGates",
            "/spec/affinity/nodeAffinity",
        ] {
            let replacement = ns.get("template").and_then(|t| t.pointer(pointer)).cloned();
            set_pointer(&mut old_template, pointer, replacement);
        }
    }
    if !semantic_eq(ns.get("template"), Some(&old_template)) {
        errs.push(FieldError::invalid("spec.template", shown(ns.get("template").unwrap_or(&null)), IMMUTABLE));
    }
    for field in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"] {
        if !semantic_eq(ns.get(field), os.get(field)) {
            errs.push(FieldError::invalid(format!("spec.{field}"), shown(ns.get(field).unwrap_or(&null)), IMMUTABLE));
        }
    }
}

/// Sets (or removes, with None) the value at a JSON pointer, creating parent objects where
/// nothing is; existing list items are addressed by index.
pub(super) fn set_pointer(target: &mut Value, pointer: &str, value: Option<Value>) {
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    let Some((last, parents)) = parts.split_last() else { return };
    let mut cur = target;
    for part in parents {
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        cur = match cur {
            Value::Object(map) => map.entry(part.to_string()).or_insert(Value::Null),
            Value::Array(items) => match part.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(item) => item,
                None => return,
            },
            _ => return,
        };
    }
    if cur.is_null() {
        *cur = Value::Object(Map::new());
    }
    match (cur, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(last.to_string(), v);
        }
        (Value::Object(map), None) => {
            map.remove(*last);
        }
        (Value::Array(items), Some(v)) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = v;
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Secrets and ConfigMaps.
