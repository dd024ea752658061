//! Validation: every problem at its path, warnings for unknown keys, defaults in the
//! normalized config, the host's deadline, and the schema naming every key validation knows.

use std::time::Duration;

use serde_json::{Value, json};

use super::checker::MAX_LISTED_PROBLEMS;
use super::*;

fn validate_json(config: Value) -> Validation {
    validate(&config.to_string(), None)
}

fn problems(list: &[ConfigProblem]) -> Vec<(&str, &str)> {
    list.iter().map(|p| (p.path.as_str(), p.message.as_str())).collect()
}

#[test]
fn an_empty_config_normalizes_to_the_defaults() {
    let v = validate_json(json!({}));
    assert!(v.ok && v.errors.is_empty() && v.warnings.is_empty(), "{v:?}");
    let normalized: Value = serde_json::from_str(v.normalized_config.as_deref().unwrap()).unwrap();
    assert_eq!(normalized, json!({"leaseTtlSeconds": 3600, "operations": {}}));
}

#[test]
fn each_operation_normalizes_with_its_defaults_filled_in() {
    let v = validate_json(json!({"leaseTtlSeconds": 60, "operations": {
        "destroy": {"delayMillis": 0},
        "acquire": {"fail": {"error": "image-pull"}},
        "resume-check": {"stall": {"until": "before-deadline"}},
        "renew": {"fail": {"error": "invalid-config", "message": "bad"}},
        "execute": {"stall": {"until": "past-deadline", "marginMillis": 50}}
    }}));
    assert!(v.ok, "{v:?}");
    let normalized: Value = serde_json::from_str(v.normalized_config.as_deref().unwrap()).unwrap();
    assert_eq!(
        normalized,
        json!({"leaseTtlSeconds": 60, "operations": {
            "acquire": {"fail": {"error": "image-pull", "retryable": false, "message": "acquire failed with image-pull \
                because the config asks for it at /operations/acquire/fail; this is the reference provider's \
                configured failure, not a real one"}},
            "resume-check": {"stall": {"until": "before-deadline", "marginMillis": 200}},
            "renew": {"fail": {"error": "invalid-config", "message": "bad"}},
            "destroy": {"delayMillis": 0},
            "execute": {"stall": {"until": "past-deadline", "marginMillis": 50}}
        }})
    );
    let again = validate(v.normalized_config.as_deref().unwrap(), None);
    assert_eq!(again.normalized_config, v.normalized_config, "normalizing is idempotent");
}

#[test]
fn every_problem_is_reported_at_its_path() {
    let v = validate_json(json!({
        "leaseTtlSeconds": 0,
        "operations": {
            "acquire": {"delayMillis": -5, "fail": {"error": "oops", "retryable": "yes"}},
            "renew": {"stall": {"marginMillis": 1.5}},
            "release": {"fail": {"message": ""}},
            "destroy": {"delayMillis": 10, "stall": {"until": "past-deadline"}},
            "probe": {"fail": {"error": "invalid-config", "retryable": true}},
            "resume-check": []
        }
    }));
    assert!(!v.ok && v.normalized_config.is_none());
    assert_eq!(
        problems(&v.errors),
        vec![
            ("/leaseTtlSeconds", "must be between 1 and 604800, not 0"),
            (
                "/operations/probe/fail/retryable",
                "does not apply: an invalid-config error carries a path, not retry advice"
            ),
            ("/operations/acquire/delayMillis", "must be between 0 and 600000, not -5"),
            (
                "/operations/acquire/fail/error",
                "must be one of invalid-config, forbidden, denied, conflict, capacity, \
                image-pull, rejected, timeout, unsupported, unavailable, internal, not \"oops\""
            ),
            ("/operations/acquire/fail/retryable", "must be true or false, not a string"),
            ("/operations/resume-check", "must be an object, not an array"),
            ("/operations/renew/stall/until", "is required: before-deadline or past-deadline"),
            ("/operations/renew/stall/marginMillis", "must be an integer, not a fractional number"),
            (
                "/operations/release/fail/error",
                "is required: the provider-error case, one of invalid-config, forbidden, \
                denied, conflict, capacity, image-pull, rejected, timeout, unsupported, unavailable, internal"
            ),
            ("/operations/release/fail/message", "is empty; leave it out for the default message"),
            (
                "/operations/destroy",
                "sets both delayMillis and stall; choose one: a delay is a fixed wait, a stall is \
                measured from the host's deadline"
            ),
        ]
    );
}

#[test]
fn unknown_keys_are_warnings_naming_the_known_ones() {
    let v = validate_json(json!({"leaseTTL": 5, "operations": {"aquire": {}, "renew": {"delay": 5, "fail": {
        "error": "timeout", "retry": true}}}}));
    assert!(v.ok, "{v:?}");
    assert_eq!(
        problems(&v.warnings),
        vec![
            ("/leaseTTL", "unknown key, ignored; the known keys here are leaseTtlSeconds, operations"),
            (
                "/operations/aquire",
                "unknown key, ignored; the known keys here are probe, acquire, resume-check, renew, \
                release, destroy, execute"
            ),
            ("/operations/renew/delay", "unknown key, ignored; the known keys here are delayMillis, stall, fail"),
            ("/operations/renew/fail/retry", "unknown key, ignored; the known keys here are error, retryable, message"),
        ]
    );
}

#[test]
fn a_failure_after_a_stall_past_the_deadline_is_a_warning() {
    let v = validate_json(
        json!({"operations": {"renew": {"stall": {"until": "past-deadline"}, "fail": {"error": "timeout"}}}}),
    );
    assert!(v.ok);
    assert_eq!(v.warnings[0].path, "/operations/renew/fail");
    assert!(v.warnings[0].message.contains("never answered"), "{v:?}");
}

#[test]
fn a_delay_the_hosts_deadline_cannot_fit_is_an_error() {
    let config =
        json!({"operations": {"acquire": {"delayMillis": 29_999}, "renew": {"delayMillis": 30_000}}}).to_string();
    assert!(validate(&config, None).ok, "no host deadline, nothing to fit");
    let v = validate(&config, Some(Duration::from_secs(30)));
    assert!(!v.ok && v.normalized_config.is_none());
    assert_eq!(problems(&v.errors).len(), 1, "{v:?}");
    assert_eq!(v.errors[0].path, "/operations/renew/delayMillis");
    assert!(v.errors[0].message.contains("does not fit the host's call deadline of 30000 ms"), "{v:?}");
    assert!(v.errors[0].message.contains("stall past-deadline"), "{v:?}");
}

#[test]
fn text_that_is_not_a_json_object_or_too_large_is_one_error_at_the_root() {
    for (text, expected) in
        [("{", "is not valid JSON"), ("[]", "must be an object, not an array"), ("null", "must be an object, not null")]
    {
        let v = validate(text, None);
        assert_eq!(v.errors.len(), 1, "{text}");
        assert_eq!(v.errors[0].path, "");
        assert!(v.errors[0].message.contains(expected), "{text}: {v:?}");
    }
    let huge = format!("{{\"x\": \"{}\"}}", "x".repeat(crate::input_limits::CONFIG_TEXT.max));
    let v = validate(&huge, None);
    assert!(v.errors[0].message.contains("over the provider's limit of 65536 bytes"), "{v:?}");
    assert!(!v.errors[0].message.contains("xxxx"), "the value is not echoed");
}

#[test]
fn problems_are_listed_up_to_a_bound_and_long_keys_are_cut() {
    let mut map = serde_json::Map::new();
    for i in 0..200 {
        map.insert(format!("unknown-{i}"), json!(1));
    }
    map.insert("k".repeat(10_000), json!(1));
    let v = validate(&Value::Object(map).to_string(), None);
    assert_eq!(v.warnings.len(), MAX_LISTED_PROBLEMS + 1);
    assert!(v.warnings.last().unwrap().message.starts_with("151 more warnings"), "{:?}", v.warnings.last());
    let long = validate(&json!({"k".repeat(10_000): 1}).to_string(), None);
    assert!(long.warnings[0].path.len() < 100, "{}", long.warnings[0].path);
    let message = "m".repeat(crate::input_limits::FAILURE_MESSAGE.max + 1);
    let v = validate_json(json!({"operations": {"acquire": {"fail": {"error": "internal", "message": message}}}}));
    assert_eq!(v.errors[0].path, "/operations/acquire/fail/message");
    assert!(!v.errors[0].message.contains("mmmm"), "{v:?}");
}

#[test]
fn parse_names_the_first_problem() {
    let err = parse(r#"{"operations": {"renew": {"stall": {}}}}"#).unwrap_err();
    assert_eq!(
        err,
        contract::ProviderError::invalid_config(
            "/operations/renew/stall/until",
            "is required: before-deadline or past-deadline; run validate-config for every problem"
        )
    );
}

#[test]
fn the_schema_names_every_key_validation_knows() {
    let schema = schema();
    let keys = |pointer: &str| -> Vec<String> {
        let mut k: Vec<String> = schema.pointer(pointer).and_then(Value::as_object).unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    let sorted = |list: &[&str]| {
        let mut k: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        k.sort();
        k
    };
    let operations: Vec<&str> = Operation::ALL.iter().map(|o| o.as_str()).collect();
    assert_eq!(keys("/properties"), sorted(TOP_KEYS));
    assert_eq!(keys("/properties/operations/properties"), sorted(&operations));
    for op in operations {
        let at = format!("/properties/operations/properties/{op}");
        assert_eq!(keys(&format!("{at}/properties")), sorted(BEHAVIOUR_KEYS), "{op}");
        assert_eq!(keys(&format!("{at}/properties/stall/properties")), sorted(STALL_KEYS), "{op}");
        assert_eq!(keys(&format!("{at}/properties/fail/properties")), sorted(FAILURE_KEYS), "{op}");
    }
    let cases: Vec<&str> = ErrorCase::ALL.iter().map(|e| e.as_str()).collect();
    assert_eq!(
        schema["properties"]["operations"]["properties"]["acquire"]["properties"]["fail"]["properties"]["error"]["enum"],
        json!(cases)
    );
    assert_eq!(schema["properties"]["leaseTtlSeconds"]["maximum"], MAX_LEASE_TTL_SECONDS);
}
