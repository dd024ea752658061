//! Decoding: pruning, nulls, embedded metadata and defaults.

use super::*;

#[test]
fn unknown_fields_are_pruned_and_reported() {
    let mut spec = minimal_spec();
    spec["podTemplate"]["spec"]["foo"] = json!({"bar": 1});
    spec["podTemplate"]["spec"]["containers"][0]["bogus"] = json!(true);
    let mut obj = sandbox(spec);
    obj["extra"] = json!("x");
    obj["metadata"]["unknownMetaField"] = json!("kept: the root metadata is the server's business");
    let (obj, pruned, errs) = admit(&sandbox_schema(), obj);
    assert_eq!(pruned, vec!["extra", "spec.podTemplate.spec.containers[0].bogus", "spec.podTemplate.spec.foo"]);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(obj.get("extra").is_none());
    assert!(obj["spec"]["podTemplate"]["spec"].get("foo").is_none());
    assert!(obj["spec"]["podTemplate"]["spec"]["containers"][0].get("bogus").is_none());
    assert_eq!(obj["apiVersion"], "agents.x-k8s.io/v1beta1");
    assert_eq!(obj["metadata"]["unknownMetaField"], json!("kept: the root metadata is the server's business"));
}

#[test]
fn unknown_field_is_pruned_on_the_real_schema() {
    let mut spec = minimal_spec();
    spec["podTemplate"]["spec"]["foo"] = json!("bar");
    let (obj, pruned, errs) = admit(&v1beta1(), sandbox(spec));
    assert_eq!(pruned, vec!["spec.podTemplate.spec.foo"]);
    assert!(errs.is_empty(), "{errs:?}");
    assert!(obj["spec"]["podTemplate"]["spec"].get("foo").is_none());
}

#[test]
fn apiversion_kind_metadata_survive_at_the_root_even_without_a_schema() {
    let schema = CrdSchema::new(json!({"type": "object", "properties": {"spec": {"type": "object"}}}));
    let mut obj = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "x": 1}, "spec": {}, "other": 1});
    assert_eq!(schema.default_and_prune(&mut obj), vec!["other"]);
    assert_eq!(obj, json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "x": 1}, "spec": {}}));
}

#[test]
fn root_metadata_is_not_validated_here() {
    let mut obj = sandbox(minimal_spec());
    obj["metadata"] = json!({"name": 5, "labels": "not-a-map"});
    assert!(sandbox_schema().validate(&obj).is_empty());
}

#[test]
fn defaults_apply_only_where_the_parent_exists() {
    let mut spec = minimal_spec();
    spec["podTemplate"]["spec"]["containers"][0]["ports"] =
        json!([{"containerPort": 80}, {"containerPort": 53, "protocol": "UDP"}]);
    let (obj, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["spec"]["operatingMode"], "Running");
    assert_eq!(obj["spec"]["shutdownPolicy"], "Retain");
    assert_eq!(obj["spec"]["replicas"], 1);
    let ports = &obj["spec"]["podTemplate"]["spec"]["containers"][0]["ports"];
    assert_eq!(ports, &json!([{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 53, "protocol": "UDP"}]));

    let (obj, _, _) = admit(&sandbox_schema(), sandbox(json!({})));
    assert_eq!(obj["spec"], json!({"operatingMode": "Running", "shutdownPolicy": "Retain", "replicas": 1}));
    let (obj, _, _) = admit(&sandbox_schema(), json!({"apiVersion": "v", "kind": "Sandbox"}));
    assert!(obj.get("spec").is_none(), "no spec is invented to hold defaults");
}

#[test]
fn defaults_reach_into_defaulted_objects_map_values_and_items() {
    let schema = CrdSchema::new(json!({"type": "object", "properties": {
        "outer": {"type": "object", "default": {}, "properties": {"inner": {"type": "string", "default": "d"}}},
        "byName": {"type": "object", "additionalProperties": {"type": "object", "properties": {"v": {"type": "integer", "default": 7}}}},
        "list": {"type": "array", "items": {"type": "object", "properties": {"w": {"type": "boolean", "default": false}}}}
    }}));
    let mut obj = json!({"byName": {"a": {}, "b": {"v": 1}}, "list": [{}, {"w": true}]});
    assert!(schema.default_and_prune(&mut obj).is_empty());
    assert_eq!(
        obj,
        json!({
            "outer": {"inner": "d"},
            "byName": {"a": {"v": 7}, "b": {"v": 1}},
            "list": [{"w": false}, {"w": true}]
        })
    );
}

#[test]
fn operating_mode_defaults_to_running_on_the_real_schema() {
    let (obj, pruned, errs) = admit(&v1beta1(), sandbox(minimal_spec()));
    assert!(pruned.is_empty() && errs.is_empty(), "{pruned:?} {errs:?}");
    assert_eq!(obj["spec"]["operatingMode"], "Running");
    assert_eq!(obj["spec"]["shutdownPolicy"], "Retain");
    assert!(obj["spec"].get("replicas").is_none(), "v1beta1 has no replicas");
}

#[test]
fn non_nullable_nulls_are_dropped_or_defaulted_on_decode() {
    let mut spec = minimal_spec();
    spec["shutdownTime"] = Value::Null;
    spec["operatingMode"] = Value::Null;
    let (obj, pruned, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert!(pruned.is_empty() && errs.is_empty(), "{pruned:?} {errs:?}");
    assert!(obj["spec"].get("shutdownTime").is_none());
    assert_eq!(obj["spec"]["operatingMode"], "Running");
}

#[test]
fn real_v1alpha1_bounds_and_defaults_replicas() {
    let (obj, _, errs) = admit(&v1alpha1(), sandbox(minimal_spec()));
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(obj["spec"]["replicas"], 1);
    assert!(obj["spec"].get("operatingMode").is_none(), "v1alpha1 has no operatingMode");
    let mut spec = minimal_spec();
    spec["replicas"] = json!(3);
    let (_, _, errs) = admit(&v1alpha1(), sandbox(spec));
    assert_eq!(
        errs,
        vec![FieldError::invalid("spec.replicas", "3", "spec.replicas in body should be less than or equal to 1")]
    );
}

#[test]
fn list_type_map_compares_keys_after_defaulting() {
    let mut spec = minimal_spec();
    spec["podTemplate"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}, {"containerPort": 80, "protocol": "UDP"}, {"containerPort": 80, "protocol": "TCP"}]);
    let (_, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert_eq!(
        errs,
        vec![FieldError::duplicate(
            "spec.podTemplate.spec.containers[0].ports[2]",
            r#"map[string]interface {}{"containerPort":80, "protocol":"TCP"}"#
        )]
    );
    assert_eq!(
        errs[0].to_string(),
        r#"spec.podTemplate.spec.containers[0].ports[2]: Duplicate value: map[string]interface {}{"containerPort":80, "protocol":"TCP"}"#
    );
    let x = json!({"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]});
    assert_eq!(
        errors_for(x.clone(), json!([{}, {"v": 1}])),
        vec![FieldError::duplicate("x[1]", "map[string]interface {}{}")]
    );
    assert_eq!(
        errors_for(x, json!([{"name": "a"}, "b"])),
        vec![FieldError::invalid("x[1]", "\"b\"", "must be an object for an array of list-type map")]
    );
}

#[test]
fn preserve_unknown_fields_keeps_unknown_but_prunes_known_children() {
    let schema = one_field(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {
        "known": {"type": "object", "properties": {"a": {"type": "string"}}}
    }}));
    let mut obj = json!({"x": {"free": {"deep": [1, {"z": 2}]}, "known": {"a": "1", "b": "2"}}});
    assert_eq!(schema.default_and_prune(&mut obj), vec!["x.known.b"]);
    assert_eq!(obj, json!({"x": {"free": {"deep": [1, {"z": 2}]}, "known": {"a": "1"}}}));
}

#[test]
fn embedded_resources_keep_type_meta_and_an_object_meta() {
    let schema = one_field(json!({"type": "object", "x-kubernetes-embedded-resource": true,
        "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}}}));
    let mut obj = json!({"x": {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "cm",
            "namespace": "",
            "labels": {"a": "b"},
            "annotations": {},
            "finalizers": ["f"],
            "uid": "u-1",
            "generation": 0,
            "creationTimestamp": "2024-05-06T07:08:09.5+02:00",
            "bogus": {"x": 1}
        },
        "spec": {"n": 1, "m": 2},
        "data": {}
    }});
    let pruned = schema.default_and_prune(&mut obj);
    assert_eq!(pruned, vec!["x.data", "x.spec.m", "x.metadata.bogus"]);
    assert_eq!(
        obj["x"]["metadata"],
        json!({"name": "cm", "labels": {"a": "b"}, "finalizers": ["f"], "uid": "u-1", "creationTimestamp": "2024-05-06T05:08:09Z"})
    );
    assert_eq!(obj["x"]["apiVersion"], "v1");
    assert!(schema.validate(&obj).is_empty());

    let mut malformed = json!({"x": {"apiVersion": 1, "kind": "K", "metadata": {"name": 5, "other": 1}}});
    assert!(schema.default_and_prune(&mut malformed).is_empty(), "malformed metadata hides unknown fields");
    assert_eq!(malformed, json!({"x": {"kind": "K", "metadata": {}}}));
}

#[test]
fn decoding_twice_changes_nothing() {
    let schema = v1beta1();
    let mut obj = realistic_sandbox();
    obj["spec"]["junk"] = json!(1);
    assert_eq!(schema.default_and_prune(&mut obj), vec!["spec.junk"]);
    let once = obj.clone();
    assert!(schema.default_and_prune(&mut obj).is_empty());
    assert_eq!(obj, once);
}
