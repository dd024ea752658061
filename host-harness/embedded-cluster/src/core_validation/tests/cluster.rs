//! Namespaces, Nodes, PersistentVolumeClaims and Events.

use super::*;

#[test]
fn namespaces() {
    assert_clean(&validate_create("Namespace", &created("Namespace", json!({"metadata": {"name": "team-a"}}))));
    let errs = validate_create("Namespace", &json!({"metadata": {"name": "team.a"}}));
    assert_eq!(find(&errs, "metadata.name", "FieldValueInvalid").detail, "must not contain dots");
    let errs = validate_create("Namespace", &json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["custom"]}}));
    assert_eq!(
        find(&errs, "spec.finalizers", "FieldValueInvalid").detail,
        "name is neither a standard finalizer name nor is it fully qualified"
    );
}

#[test]
fn nodes() {
    assert_clean(&validate_create(
        "Node",
        &json!({"metadata": {"name": "worker-1.example.com"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
    ));
    let errs = validate_create(
        "Node",
        &json!({"metadata": {"name": "n"}, "spec": {"taints": [
            {"key": "a", "effect": "Never"}, {"key": "b", "value": "x", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}, {"key": "c"}
        ]}}),
    );
    find(&errs, "metadata.taints[0].effect", "FieldValueNotSupported");
    let dup = find(&errs, "metadata.taints[2]", "FieldValueDuplicate");
    assert_eq!(dup.detail, "taints must be unique by key and effect pair");
    find(&errs, "metadata.taints[3].effect", "FieldValueRequired");
    let old = json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.244.0.0/24", "providerID": "kind://n"}});
    let new = json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.244.1.0/24", "providerID": "kind://m", "unschedulable": true}});
    let errs = validate_update("Node", &new, &old);
    find(&errs, "spec.podCIDRs[0]", "FieldValueForbidden");
    find(&errs, "spec.providerID", "FieldValueForbidden");
    assert_clean(&validate_update("Node", &with(old.clone(), "/spec/unschedulable", json!(true)), &old));
}

fn pvc(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"}, "spec": spec})
}

fn simple_pvc() -> Value {
    created(
        "PersistentVolumeClaim",
        pvc(json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})),
    )
}

#[test]
fn pvc_create_rules() {
    assert_clean(&validate_create("PersistentVolumeClaim", &simple_pvc()));
    let errs = validate_create("PersistentVolumeClaim", &pvc(json!({})));
    assert_eq!(find(&errs, "spec.accessModes", "FieldValueRequired").detail, "at least 1 access mode is required");
    find(&errs, "spec.resources[storage]", "FieldValueRequired");
    let errs = validate_create(
        "PersistentVolumeClaim",
        &pvc(
            json!({"accessModes": ["ReadWriteSometimes", "ReadWriteOncePod", "ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}),
        ),
    );
    assert_eq!(
        find(&errs, "spec.accessModes", "FieldValueNotSupported").message(),
        "Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""
    );
    find(&errs, "spec.accessModes", "FieldValueForbidden");
    assert_eq!(
        find(&errs, "spec.resources[storage]", "FieldValueInvalid").message(),
        "Invalid value: \"0\": must be greater than zero"
    );
}

#[test]
fn pvc_update_rules() {
    let old = simple_pvc();
    let errs = validate_update(
        "PersistentVolumeClaim",
        &with(old.clone(), "/spec/accessModes", json!(["ReadWriteMany"])),
        &old,
    );
    assert_eq!(find(&errs, "spec", "FieldValueForbidden").detail, PVC_UPDATE_FORBIDDEN);
    let grown = with(old.clone(), "/spec/resources/requests/storage", json!("2Gi"));
    find(&validate_update("PersistentVolumeClaim", &grown, &old), "spec", "FieldValueForbidden");
    let bound = with(with(old.clone(), "/status/phase", json!("Bound")), "/status/capacity", json!({"storage": "1Gi"}));
    assert_clean(&validate_update("PersistentVolumeClaim", &grown, &bound));
    let bound_big = with(
        with(bound.clone(), "/spec/resources/requests/storage", json!("2Gi")),
        "/status/capacity/storage",
        json!("2Gi"),
    );
    let errs = validate_update(
        "PersistentVolumeClaim",
        &with(bound_big.clone(), "/spec/resources/requests/storage", json!("1Gi")),
        &bound_big,
    );
    assert_eq!(
        find(&errs, "spec.resources.requests.storage", "FieldValueForbidden").detail,
        "field can not be less than status.capacity"
    );
    assert_clean(&validate_update(
        "PersistentVolumeClaim",
        &with(old.clone(), "/spec/volumeName", json!("pv-1")),
        &old,
    ));
    let errs = validate_update("PersistentVolumeClaim", &with(old.clone(), "/spec/volumeMode", json!("Block")), &old);
    find(&errs, "volumeMode", "FieldValueInvalid");
    find(&errs, "spec", "FieldValueForbidden");
}

#[test]
fn events() {
    let event = json!({"metadata": {"name": "web.1", "namespace": "default"}, "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}, "reason": "Started"});
    assert_clean(&validate_create("Event", &event));
    let errs = validate_create("Event", &with(event.clone(), "/involvedObject/namespace", json!("other")));
    assert_eq!(
        find(&errs, "involvedObject.namespace", "FieldValueInvalid").message(),
        "Invalid value: \"other\": does not match event.namespace"
    );
    let modern = with(event.clone(), "/eventTime", json!("2024-01-01T00:00:00.000000Z"));
    let errs = validate_create("Event", &modern);
    find(&errs, "reportingComponent", "FieldValueRequired");
    find(&errs, "reportingInstance", "FieldValueRequired");
    find(&errs, "action", "FieldValueRequired");
    let errs = validate_create("Event", &json!({"metadata": {"namespace": "default"}}));
    find(&errs, "metadata.name", "FieldValueRequired");
    assert_clean(&validate_update("Event", &event, &event));
}
