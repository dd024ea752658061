//! Jobs.

use super::*;

#[test]
fn created_job_is_valid() {
    assert_clean(&validate_create("Job", &simple_job()));
}

#[test]
fn job_restart_policy_must_be_on_failure_or_never() {
    let errs = validate_create("Job", &created("Job", job(json!({"containers": [{"name": "a", "image": "x"}]}))));
    assert_eq!(
        find(&errs, "spec.template.spec.restartPolicy", "FieldValueRequired").to_string(),
        "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
    );
    let errs = validate_create("Job", &with(simple_job(), "/spec/template/spec/restartPolicy", json!("Sometimes")));
    let unsupported: Vec<&FieldError> = errs
        .iter()
        .filter(|e| e.field == "spec.template.spec.restartPolicy" && e.reason() == "FieldValueNotSupported")
        .collect();
    assert_eq!(unsupported.len(), 2);
    assert!(
        unsupported
            .iter()
            .any(|e| e.message() == "Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"")
    );
}

#[test]
fn job_counts_must_not_be_negative() {
    for field in ["backoffLimit", "parallelism", "completions", "activeDeadlineSeconds", "ttlSecondsAfterFinished"] {
        let errs = validate_create("Job", &with(simple_job(), &format!("/spec/{field}"), json!(-1)));
        let e = find(&errs, &format!("spec.{field}"), "FieldValueInvalid");
        assert_eq!(e.message(), "Invalid value: -1: must be greater than or equal to 0");
    }
    let errs = validate_create("Job", &with(simple_job(), "/spec/completionMode", json!("Sometimes")));
    assert_eq!(
        find(&errs, "spec.completionMode", "FieldValueNotSupported").message(),
        "Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
    );
}

#[test]
fn job_template_is_a_pod_spec_with_template_paths() {
    let errs =
        validate_create("Job", &created("Job", job(json!({"restartPolicy": "Never", "containers": [{"name": "a"}]}))));
    find(&errs, "spec.template.spec.containers[0].image", "FieldValueRequired");
    let errs = validate_create("Job", &with(simple_job(), "/spec/template/metadata/labels/bad key", json!("v")));
    assert!(errs.iter().any(|e| e.field == "spec.template.labels" && e.reason() == "FieldValueInvalid"));
    let errs = validate_create("Job", &with(simple_job(), "/spec/template/spec/containers/0/image", json!(" x")));
    assert!(!errs.iter().any(|e| e.field.ends_with(".image")), "whitespace in template images is a Pod-only rule");
}

#[test]
fn job_selector_must_match_template_labels() {
    let manual = json!({"metadata": {"name": "m", "namespace": "default", "uid": "u"}, "spec": {
        "manualSelector": true, "selector": {"matchLabels": {"app": "a"}},
        "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
    let errs = validate_create("Job", &manual);
    let e = find(&errs, "spec.template.metadata.labels", "FieldValueInvalid");
    assert_eq!(
        e.message(),
        "Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
    );
    assert_eq!(errs.len(), 1);
    let matching = with(manual.clone(), "/spec/template/metadata/labels/app", json!("a"));
    assert_clean(&validate_create("Job", &matching));
    let errs = validate_create(
        "Job",
        &with(matching, "/spec/selector", json!({"matchExpressions": [{"key": "app", "operator": "In"}]})),
    );
    assert_eq!(
        find(&errs, "spec.selector.matchExpressions[0].values", "FieldValueRequired").detail,
        "must be specified when `operator` is 'In' or 'NotIn'"
    );
}

#[test]
fn job_generated_selector_is_checked() {
    let mut no_uid = simple_job();
    if let Some(meta) = no_uid.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("uid");
    }
    find(&validate_create("Job", &no_uid), "metadata.uid", "FieldValueRequired");
    let foreign = with(simple_job(), "/spec/selector", json!({"matchLabels": {"app": "other"}}));
    let errs = validate_create("Job", &foreign);
    assert_eq!(find(&errs, "spec.selector", "FieldValueInvalid").detail, "`selector` not auto-generated");
    let raw = job(json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}));
    let errs = validate_create("Job", &with(raw, "/metadata/uid", json!("u")));
    find(&errs, "spec.selector", "FieldValueRequired");
    find(&errs, "spec.template.metadata.labels", "FieldValueInvalid");
}

#[test]
fn indexed_job_names_must_leave_room_for_the_index() {
    let name = "a".repeat(62);
    let mut j = job(json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}));
    j = with(j, "/metadata/name", json!(name));
    j = with(j, "/spec/completionMode", json!("Indexed"));
    j = with(j, "/spec/completions", json!(10));
    let errs = validate_create("Job", &created("Job", j));
    assert_eq!(
        find(&errs, "metadata.name", "FieldValueInvalid").detail,
        format!("will not able to create pod with invalid DNS label: {name}-9")
    );
}

#[test]
fn job_update_immutability() {
    let old = simple_job();
    let errs =
        validate_update("Job", &with(old.clone(), "/spec/template/spec/containers/0/image", json!("perl:6")), &old);
    let e = find(&errs, "spec.template", "FieldValueInvalid");
    assert_eq!(e.detail, "field is immutable");
    assert_eq!(errs.len(), 1);
    let errs = validate_update("Job", &with(old.clone(), "/spec/completions", json!(3)), &old);
    assert_eq!(find(&errs, "spec.completions", "FieldValueInvalid").message(), "Invalid value: 3: field is immutable");
    let errs = validate_update("Job", &with(old.clone(), "/spec/selector/matchLabels/x", json!("y")), &old);
    assert!(errs.iter().any(|e| e.field == "spec.selector" && e.detail == "field is immutable"));
    assert!(errs.iter().any(|e| e.field == "spec.selector" && e.detail == "`selector` not auto-generated"));
    assert_clean(&validate_update("Job", &with(old.clone(), "/spec/parallelism", json!(4)), &old));
    assert_clean(&validate_update("Job", &with(old.clone(), "/spec/suspend", json!(true)), &old));
}

#[test]
fn suspended_unstarted_job_may_change_scheduling_directives() {
    let old = with(simple_job(), "/spec/suspend", json!(true));
    let new = with(old.clone(), "/spec/template/spec/nodeSelector", json!({"zone": "a"}));
    assert_clean(&validate_update("Job", &new, &old));
    let started = with(old.clone(), "/status/startTime", json!("2024-01-01T00:00:00Z"));
    find(&validate_update("Job", &new, &started), "spec.template", "FieldValueInvalid");
}

#[test]
fn indexed_job_completions_change_with_parallelism() {
    let mut j = job(json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}));
    j = with(j, "/spec/completionMode", json!("Indexed"));
    j = with(j, "/spec/completions", json!(2));
    j = with(j, "/spec/parallelism", json!(2));
    let old = created("Job", j);
    let both = with(with(old.clone(), "/spec/completions", json!(4)), "/spec/parallelism", json!(4));
    assert_clean(&validate_update("Job", &both, &old));
    let errs = validate_update("Job", &with(old.clone(), "/spec/completions", json!(4)), &old);
    assert_eq!(
        find(&errs, "spec.completions", "FieldValueInvalid").detail,
        "can only be modified in tandem with spec.parallelism"
    );
}
