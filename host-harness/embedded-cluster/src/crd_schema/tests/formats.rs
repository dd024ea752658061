//! String formats, Go patterns, and values printed as Go prints them.

use super::*;

#[test]
fn bad_date_time_reads_like_the_server() {
    for schema in [sandbox_schema(), v1beta1()] {
        let mut spec = minimal_spec();
        spec["shutdownTime"] = json!("tomorrow");
        let (_, _, errs) = admit(&schema, sandbox(spec));
        assert_eq!(
            errs,
            vec![FieldError::invalid(
                "spec.shutdownTime",
                "\"tomorrow\"",
                "spec.shutdownTime in body must be of type date-time: \"tomorrow\""
            )]
        );
        assert_eq!(
            errs[0].to_string(),
            r#"spec.shutdownTime: Invalid value: "tomorrow": spec.shutdownTime in body must be of type date-time: "tomorrow""#
        );
    }
}

#[test]
fn date_time_follows_go_openapi() {
    for ok in [
        "2025-01-02T03:04:05Z",
        "2025-01-02T03:04:05.123456+02:00",
        "2025-01-02t03:04:05z",
        "2024-02-29T23:59:59-08:00",
    ] {
        assert!(is_date_time(ok), "{ok} should be a date-time");
    }
    for bad in [
        "tomorrow",
        "2025-02-30T00:00:00Z",
        "2023-02-29T00:00:00Z",
        "2025-01-02T24:00:00Z",
        "2025-01-02T23:60:00Z",
        "2025-01-02T23:59:60Z",
        "2025-01-02 03:04:05Z",
        "2025-01-02T03:04:05",
        "25-01-02T03:04:05Z",
        "",
    ] {
        assert!(!is_date_time(bad), "{bad} should not be a date-time");
    }
    assert!(is_date("0000-01-01") && !is_date("2025-13-01") && !is_date("2025-1-01"));
}

#[test]
fn patterns_follow_go_semantics_and_bad_ones_are_skipped() {
    let digits = json!({"type": "string", "pattern": r"^\d+$"});
    assert!(errors_for(digits.clone(), json!("123")).is_empty());
    assert_eq!(errors_for(digits, json!("١٢٣")).len(), 1, "Go's \\d is ASCII-only");
    assert!(errors_for(json!({"type": "string", "pattern": "(?<=a)b"}), json!("zzz")).is_empty());
    assert!(
        errors_for(json!({"type": "string", "pattern": "[[]x"}), json!("[x")).is_empty(),
        "'[' in a class is literal in Go"
    );
    assert!(
        errors_for(json!({"type": "string", "pattern": "ab"}), json!("xaby")).is_empty(),
        "patterns are unanchored"
    );
    assert_eq!(go_regex_to_rust(r"^\w+\s[\d.]$"), r"^[0-9A-Za-z_]+[\t\n\x0C\r ][[0-9].]$");
}

#[test]
fn each_distinct_pattern_compiles_once() {
    let schema = v1beta1();
    assert_eq!(schema.patterns.len(), 3, "19 quantity patterns share one slot");
    let (_, _, errs) = admit(&schema, realistic_sandbox());
    assert!(errs.is_empty());
    let quantity = schema.patterns.iter().find(|p| p.source == QUANTITY).expect("the quantity pattern");
    assert!(matches!(quantity.compiled.get(), Some(Some(_))), "compiled on first use");
    let status = schema.patterns.iter().find(|p| p.source.starts_with("^[A-Za-z]")).expect("the reason pattern");
    assert!(status.compiled.get().is_none(), "never needed, never compiled");
}

#[test]
fn other_string_formats() {
    let errs = |format: &str, v: &str| errors_for(json!({"type": "string", "format": format}), json!(v)).len();
    assert_eq!(errs("date", "2024-02-29"), 0);
    assert_eq!(errs("date", "2024-02-30"), 1);
    assert_eq!(errs("uuid", "123e4567-e89b-12d3-a456-426614174000"), 0);
    assert_eq!(errs("uuid4", "123e4567-e89b-12d3-a456-426614174000"), 1);
    assert_eq!(errs("uuid4", "123e4567e89b42d3a456426614174000"), 0);
    assert_eq!(errs("byte", "aGVsbG8="), 0);
    assert_eq!(errs("byte", "aGVsbG8"), 1);
    assert_eq!(errs("ipv4", "10.0.0.1"), 0);
    assert_eq!(errs("ipv4", "::1"), 1);
    assert_eq!(errs("ipv6", "::1"), 0);
    assert_eq!(errs("cidr", "10.0.0.0/33"), 1);
    assert_eq!(errs("cidr", "fd00::/8"), 0);
    assert_eq!(errs("k8s-short-name", "my-name"), 0);
    assert_eq!(errs("k8s-short-name", "My-Name"), 1);
    assert_eq!(errs("email", "anything goes: not checked"), 0);
    assert_eq!(errs("made-up-format", "dropped by the server, so accepted"), 0);
    assert_eq!(
        errors_for(json!({"type": "string", "format": "date-time"}), json!(5)),
        vec![FieldError::type_invalid("x", "\"int64\"", "date-time")]
    );
}

#[test]
fn values_print_like_go() {
    assert_eq!(go_float(0.5), "0.5");
    assert_eq!(go_float(100_000.0), "100000");
    assert_eq!(go_float(1_000_000.0), "1e+06");
    assert_eq!(go_float(1_234_567.0), "1.234567e+06");
    assert_eq!(go_float(0.0001), "0.0001");
    assert_eq!(go_float(0.00001), "1e-05");
    assert_eq!(go_float(-2.5e-10), "-2.5e-10");
    assert_eq!(go_json(&json!(1e21)), "1e+21");
    assert_eq!(go_json(&json!(1e-7)), "1e-7");
    assert_eq!(go_json(&json!({"b": [1, 2.5], "a": null})), r#"{"a":null,"b":[1,2.5]}"#);
    assert_eq!(go_value(&json!(null)), "null");
    assert_eq!(go_value(&json!("a\"b")), r#""a\"b""#);
    assert_eq!(
        go_sharp(&json!({"a": null, "b": ["x"]})),
        r#"map[string]interface {}{"a":interface {}(nil), "b":[]interface {}{"x"}}"#
    );
    assert!(is_json_integer(3.0) && !is_json_integer(3.5) && !is_json_integer(1e16));
    assert!(is_json_integer(1.000_000_000_1), "go-openapi accepts values within 1e-9 of an integer");
}
