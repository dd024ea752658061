//! ObjectMeta rules.

use super::*;

#[test]
fn name_rules_per_kind() {
    assert_eq!(name_rule("Pod"), NameRule::Dns1123Subdomain);
    assert_eq!(name_rule("Service"), NameRule::Dns1035Label);
    assert_eq!(name_rule("Namespace"), NameRule::Dns1123Label);
    assert_eq!(name_rule("Node"), NameRule::Dns1123Subdomain);
    assert_eq!(name_rule("Widget"), NameRule::PathSegment);
}

#[test]
fn meta_requires_name_or_generate_name() {
    let errs = validate_object_meta(&json!({}), NameRule::Dns1123Subdomain);
    let e = find(&errs, "metadata.name", "FieldValueRequired");
    assert_eq!(e.to_string(), "metadata.name: Required value: name or generateName is required");
    assert_clean(&validate_object_meta(&json!({"generateName": "web-"}), NameRule::Dns1123Subdomain));
    let errs = validate_object_meta(&json!({"generateName": "Web-"}), NameRule::Dns1123Subdomain);
    find(&errs, "metadata.generateName", "FieldValueInvalid");
    let errs = validate_create("Pod", &json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
    find(&errs, "metadata.name", "FieldValueRequired");
}

#[test]
fn meta_name_message_is_the_apiserver_one() {
    let errs = validate_object_meta(&json!({"name": "Foo_bar"}), NameRule::Dns1123Subdomain);
    assert_eq!(
        find(&errs, "metadata.name", "FieldValueInvalid").to_string(),
        "metadata.name: Invalid value: \"Foo_bar\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    );
    assert_clean(&validate_object_meta(&json!({"name": "a:b"}), NameRule::PathSegment));
    let errs = validate_object_meta(&json!({"name": "a/b"}), NameRule::PathSegment);
    assert_eq!(find(&errs, "metadata.name", "FieldValueInvalid").detail, "may not contain '/'");
}

#[test]
fn meta_namespace_generation_labels_annotations() {
    let meta = json!({
        "name": "ok", "namespace": "Bad.NS", "generation": -1,
        "labels": {"good": "v", "bad key!": "v", "k": "-bad-value"},
        "annotations": {"Example.COM/Mixed_Case": "fine", "no//good": "x"}
    });
    let errs = validate_object_meta(&meta, NameRule::Dns1123Subdomain);
    find(&errs, "metadata.namespace", "FieldValueInvalid");
    assert_eq!(
        find(&errs, "metadata.generation", "FieldValueInvalid").message(),
        "Invalid value: -1: must be greater than or equal to 0"
    );
    let label_errs: Vec<&FieldError> = errs.iter().filter(|e| e.field == "metadata.labels").collect();
    assert_eq!(label_errs.len(), 2);
    assert!(label_errs.iter().any(|e| e.kind == FieldErrorKind::Invalid("\"bad key!\"".into())));
    assert!(label_errs.iter().any(|e| e.kind == FieldErrorKind::Invalid("\"-bad-value\"".into())));
    let ann = find(&errs, "metadata.annotations", "FieldValueInvalid");
    assert_eq!(ann.kind, FieldErrorKind::Invalid("\"no//good\"".into()));
}

#[test]
fn meta_annotations_total_size_limit() {
    let big = "x".repeat(256 * 1024);
    let errs = validate_object_meta(&json!({"name": "a", "annotations": {"k": big}}), NameRule::Dns1123Subdomain);
    let e = find(&errs, "metadata.annotations", "FieldValueTooLong");
    assert_eq!(e.kind, FieldErrorKind::TooLong { max: 262144 });
    let fits = "x".repeat(256 * 1024 - 1);
    assert_clean(&validate_object_meta(&json!({"name": "a", "annotations": {"k": fits}}), NameRule::Dns1123Subdomain));
}

#[test]
fn meta_finalizers() {
    let errs = validate_object_meta(
        &json!({"name": "a", "finalizers": ["example.com/x", "-bad"]}),
        NameRule::Dns1123Subdomain,
    );
    find(&errs, "metadata.finalizers", "FieldValueInvalid");
    let errs = validate_object_meta(
        &json!({"name": "a", "finalizers": ["orphan", "foregroundDeletion"]}),
        NameRule::Dns1123Subdomain,
    );
    assert_eq!(
        find(&errs, "metadata.finalizers", "FieldValueInvalid").message(),
        "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
    );
    assert_clean(&validate_object_meta(&json!({"name": "a", "finalizers": ["custom"]}), NameRule::Dns1123Subdomain));
    let errs =
        validate_create("ConfigMap", &json!({"metadata": {"name": "a", "finalizers": ["kubernetes", "custom"]}}));
    assert_eq!(
        find(&errs, "metadata.finalizers[1]", "FieldValueInvalid").detail,
        "name is neither a standard finalizer name nor is it fully qualified"
    );
    assert_eq!(errs.len(), 1);
}

#[test]
fn meta_owner_references() {
    let meta = json!({"name": "a", "ownerReferences": [
        {"apiVersion": "", "kind": "", "name": "", "uid": ""},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "u1", "controller": true},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j1", "uid": "u2", "controller": true}
    ]});
    let errs = validate_object_meta(&meta, NameRule::Dns1123Subdomain);
    assert_eq!(
        find(&errs, "metadata.ownerReferences.apiVersion", "FieldValueInvalid").detail,
        "version must not be empty"
    );
    assert_eq!(find(&errs, "metadata.ownerReferences.kind", "FieldValueInvalid").detail, "must not be empty");
    find(&errs, "metadata.ownerReferences.name", "FieldValueInvalid");
    find(&errs, "metadata.ownerReferences.uid", "FieldValueInvalid");
    assert_eq!(
        find(&errs, "metadata.ownerReferences", "FieldValueInvalid").detail,
        "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/rs1 and Job/j1"
    );
    let errs = validate_object_meta(
        &json!({"name": "a", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]}),
        NameRule::Dns1123Subdomain,
    );
    assert_eq!(
        find(&errs, "metadata.ownerReferences", "FieldValueInvalid").detail,
        "/v1, Kind=Event is disallowed from being an owner"
    );
}

#[test]
fn wrong_json_types_are_type_errors() {
    let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": "80"}]}]}));
    let e = find(&errs, "spec.containers[0].ports[0].containerPort", "FieldValueTypeInvalid");
    assert_eq!(e.kind, FieldErrorKind::TypeInvalid { value: "\"string\"".into(), expected: "integer".into() });
    let errs = validate_object_meta(&json!({"name": "a", "labels": {"k": 1}}), NameRule::Dns1123Subdomain);
    find(&errs, "metadata.labels[k]", "FieldValueTypeInvalid");
    let errs = validate_create("Pod", &json!("not an object"));
    find(&errs, "", "FieldValueTypeInvalid");
}

#[test]
fn unknown_kinds_get_metadata_validation_only() {
    assert_clean(&validate_create("Widget", &json!({"metadata": {"name": "Any_Name:1"}, "spec": {"x": 1}})));
    let errs = validate_create("Widget", &json!({"metadata": {"name": ".."}}));
    assert_eq!(find(&errs, "metadata.name", "FieldValueInvalid").detail, "may not be '..'");
}
