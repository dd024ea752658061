//! PersistentVolumeClaims: access modes, storage requests and resizes.

use super::*;

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

pub(super) fn validate_pvc(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "PersistentVolumeClaim", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    let path = "spec";
    let modes = t_str_list(spec, "accessModes", path, errs);
    if modes.is_empty() {
        errs.push(FieldError::required("spec.accessModes", "at least 1 access mode is required"));
    }
    let (mut rwop, mut others) = (false, false);
    for mode in &modes {
        if !ACCESS_MODES.contains(mode) {
            errs.push(not_supported("spec.accessModes", mode, ACCESS_MODES));
        } else if *mode == "ReadWriteOncePod" {
            rwop = true;
        } else {
            others = true;
        }
    }
    if rwop && others {
        errs.push(FieldError::forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"));
    }
    if let Some(sel) = t_obj(spec, "selector", path, errs) {
        label_selector(sel, "spec.selector", errs);
    }
    let storage_path = "spec.resources[storage]";
    let resources = t_obj(spec, "resources", path, errs).unwrap_or(&Value::Null);
    let requests = t_obj(resources, "requests", "spec.resources", errs).unwrap_or(&Value::Null);
    match requests.get("storage").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(storage_path, "")),
        Some(q) => {
            if let Some((n, text)) = t_quantity(q, storage_path, errs)
                && n <= 0
            {
                errs.push(invalid_str(storage_path, &text, "must be greater than zero"));
            }
        }
    }
    if let Some(class) = t_str(spec, "storageClassName", path, errs).filter(|c| !c.is_empty()) {
        msgs_invalid(errs, "spec.storageClassName", class, names::dns1123_subdomain(class));
    }
    if let Some(mode) = t_str(spec, "volumeMode", path, errs) {
        one_of(errs, "spec.volumeMode", Some(mode), &["Block", "Filesystem"]);
    }
}

pub(super) fn storage_request(pvc: &Value, pointer: &str) -> i128 {
    pvc.pointer(pointer).and_then(quantity::value_nanos).unwrap_or(0)
}

pub(super) fn pvc_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let mut new_spec = new.get("spec").cloned().unwrap_or(Value::Null);
    let mut old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
    if nonempty_str_at(&old_spec, "volumeName").is_none() {
        set_pointer(&mut old_spec, "/volumeName", new_spec.get("volumeName").cloned());
    }
    let old_class_annotation =
        old.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").is_some_and(|v| !v.is_null());
    if !present(&old_spec, "storageClassName") && !old_class_annotation {
        set_pointer(&mut new_spec, "/storageClassName", None);
    }
    let bound = old.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound && new_spec.pointer("/resources/requests").is_some_and(Value::is_object) {
        set_pointer(
            &mut new_spec,
            "/resources/requests/storage",
            old_spec.pointer("/resources/requests/storage").cloned(),
        );
    }
    if !semantic_eq(Some(&new_spec), Some(&old_spec)) {
        errs.push(FieldError::forbidden("spec", PVC_UPDATE_FORBIDDEN));
    }
    let new_size = storage_request(new, "/spec/resources/requests/storage");
    let old_size = storage_request(old, "/spec/resources/requests/storage");
    let status_size = storage_request(old, "/status/capacity/storage");
    if new_size < old_size && new_size <= status_size {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    let new_mode = new.pointer("/spec/volumeMode").unwrap_or(&null);
    if !semantic_eq(Some(new_mode), old.pointer("/spec/volumeMode")) {
        errs.push(FieldError::invalid("volumeMode", shown(new_mode), IMMUTABLE));
    }
}
