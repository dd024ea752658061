//! Pods: the spec, volumes, DNS, tolerations, and what an update may change.

use super::*;

pub(super) fn validate_pod(obj: &Value, mode: Mode, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Pod", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    pod_spec(spec, "spec", true, errs);
    if mode == Mode::Create && !arr_at(spec, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
}

/// `ValidatePodSpec`; `is_pod` adds the checks that apply to Pods but not pod templates.
pub(super) fn pod_spec(spec: &Value, path: &str, is_pod: bool, errs: &mut Vec<FieldError>) {
    match t_int(spec, "terminationGracePeriodSeconds", path, errs) {
        None => errs.push(FieldError::required(child(path, "terminationGracePeriodSeconds"), "")),
        Some(n) if n < 0 => errs.push(invalid_int(child(path, "terminationGracePeriodSeconds"), n, NON_NEGATIVE)),
        Some(_) => {}
    }
    let volumes = pod_volumes(spec, path, errs);
    let mut container_names = HashSet::new();
    containers(spec, path, "containers", &volumes, is_pod, &mut container_names, errs);
    containers(spec, path, "initContainers", &volumes, is_pod, &mut container_names, errs);
    let restart_policy = t_str(spec, "restartPolicy", path, errs);
    one_of(errs, &child(path, "restartPolicy"), restart_policy, &["Always", "OnFailure", "Never"]);
    let dns_policy = t_str(spec, "dnsPolicy", path, errs);
    one_of(
        errs,
        &child(path, "dnsPolicy"),
        dns_policy,
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    let node_selector = t_str_map(spec, "nodeSelector", path, errs);
    validate_labels(&node_selector, &child(path, "nodeSelector"), errs);
    if let Some(sc) = t_obj(spec, "securityContext", path, errs) {
        pod_security_context(sc, &child(path, "securityContext"), errs);
    }
    dns_config(spec, path, dns_policy, errs);
    for field in ["serviceAccountName", "nodeName", "priorityClassName"] {
        if let Some(v) = t_str(spec, field, path, errs).filter(|v| !v.is_empty()) {
            msgs_invalid(errs, &child(path, field), v, names::dns1123_subdomain(v));
        }
    }
    if let Some(n) = t_int(spec, "activeDeadlineSeconds", path, errs).filter(|n| !(1..=MAX_INT32).contains(n)) {
        errs.push(invalid_int(child(path, "activeDeadlineSeconds"), n, names::inclusive_range_error(1, MAX_INT32)));
    }
    for field in ["hostname", "subdomain"] {
        if let Some(v) = t_str(spec, field, path, errs).filter(|v| !v.is_empty()) {
            msgs_invalid(errs, &child(path, field), v, names::dns1123_label(v));
        }
    }
    tolerations(spec, path, errs);
    if let Some(p) = t_str(spec, "preemptionPolicy", path, errs) {
        one_of(errs, &child(path, "preemptionPolicy"), Some(p), &["PreemptLowerPriority", "Never"]);
    }
    // imagePullSecrets: the real server accepts any names here (at most a warning), so only the
    // JSON shape is checked.
    let _ = t_arr(spec, "imagePullSecrets", path, errs);
}

/// `ValidateVolumes`: returns the names of the volumes that passed, which mounts may use.
pub(super) fn pod_volumes(spec: &Value, path: &str, errs: &mut Vec<FieldError>) -> HashSet<String> {
    let mut valid = HashSet::new();
    for (_, vol, vp) in t_obj_list(spec, "volumes", path, errs) {
        let mut el = Vec::new();
        volume_source(vol, &vp, &mut el);
        let name = t_str(vol, "name", &vp, &mut el).unwrap_or("");
        if name.is_empty() {
            el.push(FieldError::required(child(&vp, "name"), ""));
        } else {
            msgs_invalid(&mut el, &child(&vp, "name"), name, names::dns1123_label(name));
        }
        if valid.contains(name) {
            el.push(FieldError::duplicate(child(&vp, "name"), quoted(name)));
        }
        if el.is_empty() {
            valid.insert(name.to_string());
        } else {
            errs.extend(el);
        }
    }
    valid
}

pub(super) fn volume_source(vol: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let sources: Vec<&str> = vol
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| k.as_str() != "name" && !v.is_null())
        .map(|(k, _)| k.as_str())
        .collect();
    match sources.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a volume type")),
        [_] => {}
        [_, second, ..] => {
            errs.push(FieldError::forbidden(child(path, second), "may not specify more than 1 volume type"));
        }
    }
    let required_name = |src: &str, field: &str, errs: &mut Vec<FieldError>| {
        if let Some(s) = t_obj(vol, src, path, errs) {
            let sp = child(path, src);
            if t_str(s, field, &sp, errs).unwrap_or("").is_empty() {
                errs.push(FieldError::required(child(&sp, field), ""));
            }
            if let Some(mode) = t_int(s, "defaultMode", &sp, errs).filter(|m| !(0..=0o777).contains(m)) {
                errs.push(invalid_int(
                    child(&sp, "defaultMode"),
                    mode,
                    "must be a number between 0 and 0777 (octal), both inclusive",
                ));
            }
        }
    };
    required_name("secret", "secretName", errs);
    required_name("configMap", "name", errs);
    required_name("persistentVolumeClaim", "claimName", errs);
    required_name("hostPath", "path", errs);
}

pub(super) fn dns_config(spec: &Value, path: &str, dns_policy: Option<&str>, errs: &mut Vec<FieldError>) {
    let cp = child(path, "dnsConfig");
    let config = t_obj(spec, "dnsConfig", path, errs);
    if dns_policy == Some("None") {
        match config {
            None => {
                errs.push(FieldError::required(&cp, "must provide `dnsConfig` when `dnsPolicy` is None"));
                return;
            }
            Some(c) if arr_at(c, "nameservers").is_empty() => errs.push(FieldError::required(
                child(&cp, "nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )),
            Some(_) => {}
        }
    }
    let Some(config) = config else { return };
    let servers = t_str_list(config, "nameservers", &cp, errs);
    if servers.len() > 3 {
        errs.push(FieldError::too_many(child(&cp, "nameservers"), 3));
    }
    for (i, ip) in servers.iter().enumerate() {
        if !names::ip_address(ip).is_empty() {
            errs.push(invalid_str(idx(&child(&cp, "nameservers"), i), ip, "must be valid IP address"));
        }
    }
}

/// `ValidateTolerations`.
pub(super) fn tolerations(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (_, t, tp) in t_obj_list(spec, "tolerations", path, errs) {
        let k = t_str(t, "key", &tp, errs).unwrap_or("");
        if !k.is_empty() {
            msgs_invalid(errs, &child(&tp, "key"), k, names::qualified_name(k));
        }
        let op = t_str(t, "operator", &tp, errs).unwrap_or("");
        let effect = t_str(t, "effect", &tp, errs).unwrap_or("");
        let value = t_str(t, "value", &tp, errs).unwrap_or("");
        if k.is_empty() && op != "Exists" {
            errs.push(invalid_str(
                child(&tp, "operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t_int(t, "tolerationSeconds", &tp, errs).is_some() && effect != "NoExecute" {
            errs.push(invalid_str(
                child(&tp, "effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(invalid_str(child(&tp, "operator"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        child(&tp, "operator"),
                        shown(t),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(not_supported(child(&tp, "operator"), other, &["Equal", "Exists"])),
        }
        if !effect.is_empty() {
            taint_effect(effect, &child(&tp, "effect"), errs);
        }
    }
}

pub(super) fn taint_effect(effect: &str, path: &str, errs: &mut Vec<FieldError>) {
    one_of(errs, path, Some(effect), &["NoSchedule", "PreferNoSchedule", "NoExecute"]);
}

pub(super) fn pod_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    for list in ["containers", "initContainers"] {
        if arr_at(ns, list).len() != arr_at(os, list).len() {
            errs.push(FieldError::forbidden(format!("spec.{list}"), "pod updates may not add or remove containers"));
            return;
        }
    }
    let deadline_path = "spec.activeDeadlineSeconds";
    match (int_at(ns, "activeDeadlineSeconds"), int_at(os, "activeDeadlineSeconds")) {
        (Some(n), _) if !(0..=MAX_INT32).contains(&n) => {
            errs.push(invalid_int(deadline_path, n, names::inclusive_range_error(0, MAX_INT32)));
            return;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(invalid_int(deadline_path, n, "must be less than or equal to previous value"));
            return;
        }
        (None, Some(_)) => {
            errs.push(FieldError::invalid(
                deadline_path,
                "null",
                "must not update from a positive integer to nil value",
            ));
        }
        _ => {}
    }
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_tolerations: Vec<Value> = arr_at(ns, "tolerations").iter().map(without_seconds).collect();
    for old_t in arr_at(os, "tolerations") {
        let old_t = without_seconds(old_t);
        if !new_tolerations.iter().any(|n| semantic_eq(Some(n), Some(&old_t))) {
            errs.push(FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    let old_gates: HashSet<&str> = arr_at(os, "schedulingGates").iter().filter_map(|g| str_at(g, "name")).collect();
    for (i, gate) in arr_at(ns, "schedulingGates").iter().enumerate() {
        let name = str_at(gate, "name").unwrap_or("");
        if !old_gates.contains(name) {
            errs.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
    let mut munged = ns.clone();
    for list in ["containers", "initContainers"] {
        let old_items = arr_at(os, list);
        if let Some(items) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (c, o) in items.iter_mut().zip(old_items) {
                if let Some(m) = c.as_object_mut() {
                    match o.get("image") {
                        Some(image) => m.insert("image".into(), image.clone()),
                        None => m.remove("image"),
                    };
                }
            }
        }
    }
    if let Some(m) = munged.as_object_mut() {
        for field in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
            match os.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        let old_grace = int_at(os, "terminationGracePeriodSeconds");
        if old_grace.is_some_and(|g| g < 0) && int_at(ns, "terminationGracePeriodSeconds") == Some(1) {
            m.insert("terminationGracePeriodSeconds".into(), Value::from(old_grace));
        }
    }
    if !semantic_eq(Some(&munged), Some(os)) {
        errs.push(FieldError::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
}

// ---------------------------------------------------------------------------------------------
// Jobs.
