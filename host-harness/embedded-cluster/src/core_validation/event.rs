//! core/v1 Events.

use super::*;

/// Legacy (core/v1) event validation: the v1 API checks only namespaces and, for events that
/// carry `eventTime`, the reporting fields; object metadata is not validated beyond a name.
pub(super) fn validate_event(obj: &Value, errs: &mut Vec<FieldError>) {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    if nonempty_str_at(meta, "name").is_none() && nonempty_str_at(meta, "generateName").is_none() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    }
    let namespace = str_at(meta, "namespace").unwrap_or("");
    let involved = t_obj(obj, "involvedObject", "", errs).unwrap_or(&Value::Null);
    let involved_ns = t_str(involved, "namespace", "involvedObject", errs).unwrap_or("");
    let mismatch = || invalid_str("involvedObject.namespace", involved_ns, "does not match event.namespace");
    let event_time_set = obj.get("eventTime").is_some_and(|t| !t.is_null() && t.as_str() != Some(""));
    if !event_time_set {
        if involved_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errs.push(mismatch());
            }
        } else if namespace != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(mismatch());
        }
        let component = t_str(obj, "reportingComponent", "", errs).unwrap_or("");
        if component.is_empty() {
            errs.push(FieldError::required("reportingComponent", ""));
        }
        msgs_invalid(errs, "reportingComponent", component, names::qualified_name(component));
        for (field, limit) in [("reportingInstance", 128), ("action", 128), ("reason", 128)] {
            let v = t_str(obj, field, "", errs).unwrap_or("");
            if v.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if v.len() > limit {
                errs.push(invalid_str(field, "", format!("can have at most {limit} characters")));
            }
        }
        if t_str(obj, "message", "", errs).unwrap_or("").len() > 1024 {
            errs.push(invalid_str("message", "", "can have at most 1024 characters"));
        }
    }
    if !namespace.is_empty() {
        msgs_invalid(errs, "namespace", namespace, names::dns1123_subdomain(namespace));
    }
}
