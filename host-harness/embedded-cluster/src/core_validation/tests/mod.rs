use super::*;
pub(super) use serde_json::json;

mod cluster;
mod config;
mod job;
mod meta;
mod pod;
mod pod_update;
mod service;

/// The single error at `field` with `reason`; fails listing every error otherwise.
pub(super) fn find<'a>(errs: &'a [FieldError], field: &str, reason: &str) -> &'a FieldError {
    let hits: Vec<&FieldError> = errs.iter().filter(|e| e.field == field && e.reason() == reason).collect();
    match hits.as_slice() {
        [one] => one,
        _ => panic!(
            "expected one {reason} at {field}, got: {:#?}",
            errs.iter().map(ToString::to_string).collect::<Vec<_>>()
        ),
    }
}

pub(super) fn assert_clean(errs: &[FieldError]) {
    assert!(errs.is_empty(), "unexpected errors: {:#?}", errs.iter().map(ToString::to_string).collect::<Vec<_>>());
}

pub(super) fn created(kind: &str, mut obj: Value) -> Value {
    let mut alloc = || "10.96.0.10".to_string();
    defaults::apply_create_defaults(kind, &mut obj, "uid-1", &mut alloc);
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("uid".into(), json!("uid-1"));
    }
    obj
}

pub(super) fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
}

pub(super) fn simple_pod() -> Value {
    pod(json!({"containers": [{"name": "app", "image": "nginx:1.27"}]}))
}

pub(super) fn with(mut obj: Value, pointer: &str, value: Value) -> Value {
    set_pointer(&mut obj, pointer, Some(value));
    obj
}

pub(super) fn pod_errs(spec: Value) -> Vec<FieldError> {
    validate_create("Pod", &pod(spec))
}

pub(super) fn job(template_spec: Value) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "default"},
           "spec": {"template": {"spec": template_spec}}})
}

pub(super) fn simple_job() -> Value {
    created("Job", job(json!({"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5"}]})))
}
