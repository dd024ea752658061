//! What a pod update may change.

use super::*;

#[test]
fn pod_update_allows_image_changes() {
    let old = created("Pod", simple_pod());
    let new = with(old.clone(), "/spec/containers/0/image", json!("nginx:1.28"));
    assert_clean(&validate_update("Pod", &new, &old));
}

#[test]
fn pod_update_accepts_a_put_without_server_set_fields() {
    let old = with(created("Pod", simple_pod()), "/status/phase", json!("Running"));
    let new = with(simple_pod(), "/spec/containers/0/image", json!("nginx:1.28"));
    assert_clean(&validate_update("Pod", &new, &old));
}

#[test]
fn pod_update_forbids_other_spec_changes() {
    let old = created("Pod", simple_pod());
    for (pointer, value) in [
        ("/spec/containers/0/command", json!(["sleep", "1"])),
        ("/spec/nodeName", json!("node-2")),
        ("/spec/terminationGracePeriodSeconds", json!(10)),
        ("/spec/restartPolicy", json!("Never")),
    ] {
        let new = with(old.clone(), pointer, value);
        let errs = validate_update("Pod", &new, &old);
        let e = find(&errs, "spec", "FieldValueForbidden");
        assert_eq!(e.detail, POD_UPDATE_FORBIDDEN, "{pointer}");
        assert_eq!(errs.len(), 1, "{pointer}");
    }
    let e = find(
        &validate_update("Pod", &with(old.clone(), "/spec/nodeName", json!("n")), &old),
        "spec",
        "FieldValueForbidden",
    )
    .to_string();
    assert!(e.starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`"));
}

#[test]
fn pod_update_container_count_and_names() {
    let old = created("Pod", simple_pod());
    let mut new = old.clone();
    if let Some(list) = new.pointer_mut("/spec/containers").and_then(Value::as_array_mut) {
        list.push(json!({"name": "two", "image": "x"}));
    }
    let errs = validate_update("Pod", &new, &old);
    assert_eq!(
        find(&errs, "spec.containers", "FieldValueForbidden").detail,
        "pod updates may not add or remove containers"
    );
    let errs = validate_update("Pod", &with(old.clone(), "/metadata/name", json!("other")), &old);
    assert_eq!(
        find(&errs, "metadata.name", "FieldValueInvalid").message(),
        "Invalid value: \"other\": field is immutable"
    );
}

#[test]
fn pod_update_active_deadline_rules() {
    let old = created("Pod", simple_pod());
    let with_deadline = with(old.clone(), "/spec/activeDeadlineSeconds", json!(100));
    assert_clean(&validate_update("Pod", &with_deadline, &old));
    assert_clean(&validate_update("Pod", &with(old.clone(), "/spec/activeDeadlineSeconds", json!(50)), &with_deadline));
    let errs = validate_update("Pod", &with(old.clone(), "/spec/activeDeadlineSeconds", json!(200)), &with_deadline);
    assert_eq!(
        find(&errs, "spec.activeDeadlineSeconds", "FieldValueInvalid").detail,
        "must be less than or equal to previous value"
    );
    let errs = validate_update("Pod", &old, &with_deadline);
    assert_eq!(
        find(&errs, "spec.activeDeadlineSeconds", "FieldValueInvalid").message(),
        "Invalid value: null: must not update from a positive integer to nil value"
    );
}

#[test]
fn pod_update_tolerations_only_grow() {
    let old = created("Pod", with(simple_pod(), "/spec/tolerations", json!([{"key": "a", "operator": "Exists"}])));
    let mut grown = old.clone();
    if let Some(list) = grown.pointer_mut("/spec/tolerations").and_then(Value::as_array_mut) {
        list.push(json!({"key": "b", "operator": "Exists", "effect": "NoSchedule"}));
    }
    assert_clean(&validate_update("Pod", &grown, &old));
    let changed = with(old.clone(), "/spec/tolerations/0/key", json!("z"));
    let errs = validate_update("Pod", &changed, &old);
    assert_eq!(
        find(&errs, "spec.tolerations", "FieldValueForbidden").detail,
        "existing toleration can not be modified except its tolerationSeconds"
    );
    let seconds = with(old.clone(), "/spec/tolerations/1/tolerationSeconds", json!(60));
    assert_clean(&validate_update("Pod", &seconds, &old));
}

#[test]
fn pod_update_grace_period_may_go_from_negative_to_one() {
    let old = with(created("Pod", simple_pod()), "/spec/terminationGracePeriodSeconds", json!(-5));
    let new = with(old.clone(), "/spec/terminationGracePeriodSeconds", json!(1));
    assert!(!validate_update("Pod", &new, &old).iter().any(|e| e.field == "spec"));
    let new = with(old.clone(), "/spec/terminationGracePeriodSeconds", json!(2));
    find(&validate_update("Pod", &new, &old), "spec", "FieldValueForbidden");
}
