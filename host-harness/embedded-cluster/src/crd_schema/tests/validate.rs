//! Schema validation: types, bounds, enums, lists, combinators and embedded resources.

use super::*;

#[test]
fn missing_pod_template_is_one_required_cause() {
    for schema in [sandbox_schema(), v1beta1()] {
        let (_, pruned, errs) = admit(&schema, sandbox(json!({})));
        assert!(pruned.is_empty());
        assert_eq!(errs, vec![FieldError::required("spec.podTemplate", "")]);
        assert_eq!(errs[0].to_string(), "spec.podTemplate: Required value");
    }
}

#[test]
fn missing_spec_is_required_at_the_root() {
    let obj = json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "s"}});
    assert_eq!(sandbox_schema().validate(&obj), vec![FieldError::required("spec", "")]);
}

#[test]
fn enum_value_outside_the_list_is_not_supported() {
    for schema in [sandbox_schema(), v1beta1()] {
        let mut spec = minimal_spec();
        spec["shutdownPolicy"] = json!("Foo");
        let (_, _, errs) = admit(&schema, sandbox(spec));
        assert_eq!(errs, vec![FieldError::not_supported("spec.shutdownPolicy", "\"Foo\"", &["Delete", "Retain"])]);
        assert_eq!(
            errs[0].to_string(),
            r#"spec.shutdownPolicy: Unsupported value: "Foo": supported values: "Delete", "Retain""#
        );
    }
}

#[test]
fn enum_of_numbers_lists_them_as_json_and_compares_numerically() {
    let x = json!({"type": "number", "enum": [1, 2.5]});
    assert!(errors_for(x.clone(), json!(1.0)).is_empty(), "1.0 converts to the int64 1 before comparing");
    assert!(errors_for(x.clone(), json!(2.5)).is_empty());
    assert_eq!(errors_for(x, json!(3)), vec![FieldError::not_supported("x", "3", &["1", "2.5"])]);
}

#[test]
fn real_schema_accepts_a_realistic_sandbox() {
    let (obj, pruned, errs) = admit(&v1beta1(), realistic_sandbox());
    assert!(pruned.is_empty(), "{pruned:?}");
    assert!(errs.is_empty(), "{errs:?}");
    let container = &obj["spec"]["podTemplate"]["spec"]["containers"][0];
    assert_eq!(container["ports"][0]["protocol"], "TCP");
    assert_eq!(container["resources"]["limits"]["cpu"], 1);
    assert_eq!(obj["spec"]["shutdownPolicy"], "Delete");
}

#[test]
fn real_schema_reports_every_problem_at_the_servers_paths() {
    let mut obj = realistic_sandbox();
    let spec = &mut obj["spec"];
    spec["podTemplate"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}, {"containerPort": "81"}]);
    spec["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = json!("lots");
    spec["podTemplate"]["spec"]["containers"].as_array_mut().expect("containers").push(json!({"name": "agent"}));
    spec["operatingMode"] = json!("Paused");
    let (_, _, errs) = admit(&v1beta1(), obj);
    let containers = "spec.podTemplate.spec.containers";
    assert_eq!(
        errs,
        vec![
            FieldError::not_supported("spec.operatingMode", "\"Paused\"", &["Running", "Suspended"]),
            FieldError::type_invalid(format!("{containers}[0].ports[1].containerPort"), "\"string\"", "integer"),
            FieldError::invalid(
                format!("{containers}[0].resources.limits.cpu"),
                "\"lots\"",
                format!("{containers}[0].resources.limits.cpu in body should match '{QUANTITY}'")
            ),
            FieldError::duplicate(format!("{containers}[1]"), r#"map[string]interface {}{"name":"agent"}"#),
        ]
    );
}

#[test]
fn wrong_types_carry_the_json_type_found() {
    let mut spec = minimal_spec();
    spec["replicas"] = json!("one");
    spec["service"] = json!("yes");
    let (_, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert_eq!(
        errs,
        vec![
            FieldError::type_invalid("spec.replicas", "\"string\"", "integer"),
            FieldError::type_invalid("spec.service", "\"string\"", "boolean"),
        ]
    );
    assert_eq!(
        errs[0].to_string(),
        r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer"#
    );
    assert_eq!(errs[0].reason(), "FieldValueTypeInvalid");
}

#[test]
fn integers_reject_fractions_but_accept_integral_floats() {
    let int = json!({"type": "integer"});
    assert!(errors_for(int.clone(), json!(2.0)).is_empty());
    assert!(errors_for(int.clone(), json!(-3.0)).is_empty());
    assert_eq!(errors_for(int.clone(), json!(1.5)), vec![FieldError::type_invalid("x", "\"number\"", "integer")]);
    assert_eq!(
        errors_for(int, json!(9_223_372_036_854_775_808_u64)),
        vec![FieldError::type_invalid("x", "\"number\"", "integer")],
        "past int64 the server decodes a float64, beyond 2^53 not an integer"
    );
    let int32 = json!({"type": "integer", "format": "int32"});
    assert_eq!(errors_for(int32.clone(), json!(1.5)), vec![FieldError::type_invalid("x", "\"float64\"", "int32")]);
    assert_eq!(errors_for(int32.clone(), json!(true)), vec![FieldError::type_invalid("x", "\"\"", "int32")]);
    assert!(
        errors_for(int32, json!(1_i64 << 40)).is_empty(),
        "kube-openapi does not range-check int32, so neither does the server"
    );
    let number = json!({"type": "number"});
    assert!(errors_for(number.clone(), json!(3)).is_empty());
    assert_eq!(errors_for(number, json!("3")), vec![FieldError::type_invalid("x", "\"string\"", "number")]);
    assert_eq!(
        errors_for(json!({"type": "array"}), json!({})),
        vec![FieldError::type_invalid("x", "\"object\"", "array")]
    );
}

#[test]
fn nullable_fields_keep_null_and_others_reject_it() {
    let schema = CrdSchema::new(json!({"type": "object", "properties": {
        "a": {"type": "string", "nullable": true},
        "b": {"type": "string"},
        "c": {"type": "array", "items": {"type": "string"}}
    }}));
    let mut obj = json!({"a": null, "b": null, "c": ["x", null]});
    schema.default_and_prune(&mut obj);
    assert_eq!(obj, json!({"a": null, "c": ["x", null]}), "nulls in lists are not dropped, as in the server");
    assert_eq!(schema.validate(&obj), vec![FieldError::type_invalid("c[1]", "\"null\"", "string")]);
    assert_eq!(
        schema.validate(&json!({"b": null})),
        vec![FieldError::type_invalid("b", "\"null\"", "string")],
        "validating without decoding still reports the null"
    );
}

#[test]
fn int_or_string_accepts_both_and_checks_the_pattern_of_strings() {
    let schema = sandbox_schema();
    let with_limit = |v: Value| {
        let mut spec = minimal_spec();
        spec["podTemplate"]["spec"]["containers"][0]["resources"] = json!({"limits": {"cpu": v}});
        admit(&schema, sandbox(spec)).2
    };
    assert!(with_limit(json!(2)).is_empty());
    assert!(with_limit(json!("500m")).is_empty());
    assert!(with_limit(json!("1.5Gi")).is_empty());
    let path = "spec.podTemplate.spec.containers[0].resources.limits.cpu";
    assert_eq!(
        with_limit(json!("abc")),
        vec![FieldError::invalid(path, "\"abc\"", format!("{path} in body should match '{QUANTITY}'"))]
    );
    assert_eq!(
        with_limit(json!(true)),
        vec![
            FieldError::type_invalid(path, "\"boolean\"", "integer,string"),
            FieldError::invalid("<nil>", "\"\"", format!("\"{path}\" must validate at least one schema (anyOf)")),
            FieldError::type_invalid(path, "\"boolean\"", "integer"),
        ],
        "the server's three causes for a value matching no branch"
    );
}

#[test]
fn array_indices_and_fields_make_the_path() {
    let mut spec = minimal_spec();
    spec["podTemplate"]["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80}, {"containerPort": "x"}, {}]);
    let (_, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert_eq!(
        errs,
        vec![
            FieldError::type_invalid(
                "spec.podTemplate.spec.containers[0].ports[1].containerPort",
                "\"string\"",
                "integer"
            ),
            FieldError::required("spec.podTemplate.spec.containers[0].ports[2].containerPort", ""),
        ]
    );
}

#[test]
fn map_values_use_dots_for_schema_errors_and_brackets_for_list_errors() {
    let mut spec = minimal_spec();
    spec["podTemplate"]["metadata"] = json!({"labels": {"app": 5}});
    let (_, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert_eq!(errs, vec![FieldError::type_invalid("spec.podTemplate.metadata.labels.app", "\"integer\"", "string")]);

    let schema = one_field(json!({"type": "object", "additionalProperties": {
        "type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}
    }}));
    assert_eq!(
        schema.validate(&json!({"x": {"admins": ["a", "b", "a"]}})),
        vec![FieldError::duplicate("x[admins][2]", "\"a\"")]
    );
}

#[test]
fn minimum_and_maximum_with_exclusive_bounds() {
    let mut spec = minimal_spec();
    spec["replicas"] = json!(2);
    let (_, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert_eq!(
        errs,
        vec![FieldError::invalid("spec.replicas", "2", "spec.replicas in body should be less than or equal to 1")]
    );
    let mut spec = minimal_spec();
    spec["replicas"] = json!(-1);
    let (_, _, errs) = admit(&sandbox_schema(), sandbox(spec));
    assert_eq!(
        errs,
        vec![FieldError::invalid("spec.replicas", "-1", "spec.replicas in body should be greater than or equal to 0")]
    );

    let x = json!({"type": "number", "minimum": 0.5, "exclusiveMinimum": true, "maximum": 1_000_000.0, "exclusiveMaximum": true});
    assert!(errors_for(x.clone(), json!(0.75)).is_empty());
    assert_eq!(
        errors_for(x.clone(), json!(0.5)),
        vec![FieldError::invalid("x", "0.5", "x in body should be greater than 0.5")]
    );
    assert_eq!(
        errors_for(x.clone(), json!(2e6)),
        vec![FieldError::invalid("x", "2e+06", "x in body should be less than 1e+06")],
        "floats print like Go's %v"
    );
    assert_eq!(
        errors_for(x, json!(1_000_000)),
        vec![FieldError::invalid("x", "1000000", "x in body should be less than 1000000")],
        "integers are compared with the bound as an int64"
    );
}

#[test]
fn multiple_of() {
    assert!(errors_for(json!({"type": "integer", "multipleOf": 5}), json!(15)).is_empty());
    assert_eq!(
        errors_for(json!({"type": "integer", "multipleOf": 5}), json!(7)),
        vec![FieldError::invalid("x", "7", "x in body should be a multiple of 5")]
    );
    assert!(errors_for(json!({"type": "number", "multipleOf": 0.5}), json!(1.5)).is_empty());
    assert_eq!(
        errors_for(json!({"type": "number", "multipleOf": 0.5}), json!(1.2)),
        vec![FieldError::invalid("x", "1.2", "x in body should be a multiple of 0.5")]
    );
}

#[test]
fn string_lengths_count_characters_and_stop_at_the_first_failure() {
    let x = json!({"type": "string", "minLength": 2, "maxLength": 3, "pattern": "^[a-zé]+$"});
    assert!(errors_for(x.clone(), json!("ééé")).is_empty(), "3 characters, 6 bytes");
    let too_long = errors_for(x.clone(), json!("ÉÉÉÉ"));
    assert_eq!(too_long, vec![FieldError::too_long("x", 3)], "the pattern is not checked once too long");
    assert_eq!(too_long[0].kind, FieldErrorKind::TooLong { max: 3 });
    assert_eq!(
        errors_for(x.clone(), json!("a")),
        vec![FieldError::invalid("x", "\"a\"", "x in body should be at least 2 chars long")]
    );
    assert_eq!(
        errors_for(x, json!("AB")),
        vec![FieldError::invalid("x", "\"AB\"", "x in body should match '^[a-zé]+$'")]
    );
}

#[test]
fn item_counts() {
    let x = json!({"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "integer"}});
    assert!(errors_for(x.clone(), json!([1, 2])).is_empty());
    assert_eq!(
        errors_for(x.clone(), json!([])),
        vec![FieldError::invalid("x", "0", "x in body should have at least 1 items")]
    );
    let too_many = errors_for(x, json!([1, 2, "3"]));
    assert_eq!(
        too_many,
        vec![FieldError::type_invalid("x[2]", "\"string\"", "integer"), FieldError::too_many("x", 2)],
        "items are checked before the count"
    );
}

#[test]
fn property_counts_end_the_objects_checks() {
    let x = json!({"type": "object", "minProperties": 1, "maxProperties": 2, "required": ["a"],
        "additionalProperties": {"type": "string"}});
    assert!(errors_for(x.clone(), json!({"a": "1"})).is_empty());
    assert_eq!(
        errors_for(x.clone(), json!({})),
        vec![FieldError::invalid("x", "0", "x in body should have at least 1 properties")],
        "no Required once the count fails"
    );
    assert_eq!(errors_for(x, json!({"a": "1", "b": 2, "c": "3"})), vec![FieldError::too_many("x", 2)]);
}

#[test]
fn additional_properties_false_forbids_other_fields() {
    let x = json!({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false});
    assert_eq!(
        errors_for(x, json!({"a": "1", "b": 2})),
        vec![FieldError::invalid("x", "\"b\"", "x.b in body is a forbidden property")]
    );
}

#[test]
fn list_type_set_reports_each_repeat_once() {
    let x = json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}});
    assert_eq!(
        errors_for(x, json!(["a", "b", "a", "a", "b"])),
        vec![FieldError::duplicate("x[2]", "\"a\""), FieldError::duplicate("x[4]", "\"b\""),]
    );
    let objects = json!({"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}});
    let errs = errors_for(objects, json!([{"k": 1, "j": [true]}, {"j": [true], "k": 1}, {"k": 1.5}]));
    assert_eq!(
        errs,
        vec![FieldError::duplicate("x[1]", r#"map[string]interface {}{"j":[]interface {}{true}, "k":1}"#)]
    );
    assert!(errors_for(json!({"type": "array", "x-kubernetes-list-type": "set"}), json!([1, 1.5, "1"])).is_empty());
}

#[test]
fn embedded_resources_need_apiversion_and_a_valid_kind() {
    let schema = one_field(json!({"type": "object", "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true}));
    assert_eq!(
        schema.validate(&json!({"x": {"metadata": {}}})),
        vec![FieldError::required("x.apiVersion", ""), FieldError::required("x.kind", "")]
    );
    let errs = schema.validate(&json!({"x": {"apiVersion": "a/b/c", "kind": "Bad_Kind", "metadata": {"labels": "x"}}}));
    assert_eq!(
        errs,
        vec![
            FieldError::invalid("x.apiVersion", "\"a/b/c\"", "unexpected GroupVersion string: a/b/c"),
            FieldError::invalid(
                "x.kind",
                "\"Bad_Kind\"",
                "may have mixed case, but should otherwise match: a DNS-1035 label must consist of lower case \
                 alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric \
                 character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
            ),
            FieldError::invalid(
                "x.metadata",
                r#"map[string]interface {}{"labels":"x"}"#,
                "json: cannot unmarshal string into Go struct field ObjectMeta.labels of type map[string]string"
            ),
        ]
    );
    assert!(schema.validate(&json!({"x": {"apiVersion": "apps/v1", "kind": "Deployment"}})).is_empty());
}

#[test]
fn any_all_one_of_and_not() {
    let any = json!({"anyOf": [{"type": "string", "maxLength": 1}, {"type": "string", "pattern": "^a"}]});
    assert!(errors_for(any.clone(), json!("abc")).is_empty());
    assert_eq!(
        errors_for(any, json!("bc")),
        vec![
            FieldError::invalid("<nil>", "\"\"", "\"x\" must validate at least one schema (anyOf)"),
            FieldError::too_long("x", 1),
        ]
    );
    let all = json!({"allOf": [{"minLength": 2}, {"pattern": "^a"}]});
    assert_eq!(
        errors_for(all, json!("b")),
        vec![
            FieldError::invalid("x", "\"b\"", "x in body should be at least 2 chars long"),
            FieldError::invalid("x", "\"b\"", "x in body should match '^a'"),
            FieldError::invalid("<nil>", "\"\"", "\"x\" must validate all the schemas (allOf). None validated"),
        ]
    );
    let one = json!({"oneOf": [{"pattern": "^a"}, {"pattern": "b$"}]});
    assert!(errors_for(one.clone(), json!("ac")).is_empty());
    assert_eq!(
        errors_for(one, json!("ab")),
        vec![FieldError::invalid(
            "<nil>",
            "\"\"",
            "\"x\" must validate one and only one schema (oneOf). Found 2 valid alternatives"
        )]
    );
    let not = json!({"not": {"enum": ["forbidden"]}});
    assert!(errors_for(not.clone(), json!("fine")).is_empty());
    assert_eq!(
        errors_for(not, json!("forbidden")),
        vec![FieldError::invalid("<nil>", "\"\"", "\"x\" must not validate the schema (not)")]
    );
}

#[test]
fn a_schema_can_be_shared_between_request_threads() {
    fn shareable<T: Send + Sync>(_: &T) {}
    let schema = sandbox_schema();
    shareable(&schema);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| assert!(admit(&schema, sandbox(minimal_spec())).2.is_empty()));
        }
    });
}
