//! How a config is validated and parsed, from the outside.

use serde_json::{Value, json};

use super::*;

fn minimal() -> Value {
    json!({"namespace": "sandboxes", "image": "ghcr.io/acme/agent:1"})
}

fn paths(problems: &[ConfigProblem]) -> Vec<&str> {
    problems.iter().map(|p| p.path.as_str()).collect()
}

#[test]
fn minimal_config_gets_every_default() {
    let v = validate(&minimal().to_string());
    assert!(v.ok, "{v:?}");
    assert!(v.errors.is_empty() && v.warnings.is_empty());
    let normalized: Value = serde_json::from_str(v.normalized_config.as_deref().unwrap()).unwrap();
    assert_eq!(normalized["backend"], "sandbox");
    assert_eq!(normalized["sandboxApiVersion"], "auto");
    assert_eq!(normalized["readinessTimeoutSeconds"], 20);
    assert_eq!(normalized["leaseTtlSeconds"], 3600);
    assert_eq!(normalized["job"], json!({"backoffLimit": 0, "ttlSecondsAfterFinished": 900}));
    assert_eq!(normalized["command"], json!(["sleep", "infinity"]));
    assert_eq!(normalized["security"]["runAsNonRoot"], true);
    assert_eq!(normalized["security"]["capabilities"]["drop"], json!(["ALL"]));
    assert_eq!(normalized["resources"]["limits"]["memory"], "4Gi");
    let again = validate(&normalized.to_string());
    assert_eq!(again.normalized_config, v.normalized_config, "normalizing is idempotent");
}

#[test]
fn every_problem_is_reported_with_its_path() {
    let config = json!({
        "namespace": "Bad_NS",
        "backend": "vm",
        "resources": {"limits": {"cpu": "two", "memory": "4Gi"}},
        "env": {"1BAD": "x", "GOOD": 3},
        "labels": {"sandbox.paperclip.io/run-id": "x", "team": "not valid!"},
        "tolerations": [{"operator": "Exists", "value": "x"}, {"effect": "NoExecute", "key": "k", "tolerationSeconds": "soon"}],
        "job": {"backoffLimit": -1},
        "readinessTimeoutSeconds": 0,
        "security": {"runAsUser": 0}
    });
    let v = validate(&config.to_string());
    assert!(!v.ok);
    assert!(v.normalized_config.is_none());
    let got = paths(&v.errors);
    for expected in [
        "/namespace",
        "/backend",
        "/image",
        "/resources/limits/cpu",
        "/env/1BAD",
        "/env/GOOD",
        "/labels/sandbox.paperclip.io~1run-id",
        "/labels/team",
        "/tolerations/0/value",
        "/tolerations/1/tolerationSeconds",
        "/job/backoffLimit",
        "/readinessTimeoutSeconds",
        "/security/runAsUser",
    ] {
        assert!(got.contains(&expected), "missing {expected} in {got:?}");
    }
}

#[test]
fn unknown_keys_are_warnings_with_paths() {
    let mut config = minimal();
    config["imagePullPolicyy"] = json!("Always");
    config["job"] = json!({"backofLimit": 2});
    config["security"] = json!({"capabilities": {"drop": ["ALL"], "keep": []}});
    let v = validate(&config.to_string());
    assert!(v.ok, "{v:?}");
    assert_eq!(paths(&v.warnings), vec!["/imagePullPolicyy", "/job/backofLimit", "/security/capabilities/keep"]);
}

#[test]
fn loosening_defaults_is_explicit_and_warned() {
    let mut config = minimal();
    config["security"] = json!({
        "runAsNonRoot": false, "runAsUser": 0, "allowPrivilegeEscalation": true,
        "capabilities": {"drop": [], "add": ["NET_ADMIN"]}, "seccompProfile": "Unconfined",
        "readOnlyRootFilesystem": false, "automountServiceAccountToken": true
    });
    let v = validate(&config.to_string());
    assert!(v.ok, "{v:?}");
    assert_eq!(v.warnings.len(), 8, "{:?}", v.warnings);
    assert!(v.warnings.iter().all(|w| w.message.starts_with("loosens a hardened default")));
    let parsed = parse(&config.to_string()).unwrap();
    assert!(!parsed.security.run_as_non_root);
    assert_eq!(parsed.security.capabilities.add, vec!["NET_ADMIN"]);
}

#[test]
fn parse_reports_the_first_problem_as_invalid_config() {
    let err = parse(r#"{"image": "x"}"#).unwrap_err();
    match err {
        ProviderError::InvalidConfig(d) => assert_eq!(d.path, "/namespace"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(parse("not json"), Err(ProviderError::InvalidConfig(_))));
    assert!(matches!(parse("[1]"), Err(ProviderError::InvalidConfig(_))));
}

#[test]
fn full_config_parses() {
    let config = json!({
        "namespace": "team-a", "backend": "job", "sandboxApiVersion": "v1alpha1", "image": "busybox:1.36",
        "imagePullPolicy": "IfNotPresent", "command": ["/bin/sh"], "args": ["-c", "sleep 1d"], "workingDir": "/work",
        "resources": {"requests": {"cpu": 1, "memory": "1Gi"}},
        "env": {"MODE": "fast"}, "nodeSelector": {"pool": "sandboxes"},
        "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "sandbox", "effect": "NoSchedule"}],
        "runtimeClassName": "gvisor", "serviceAccountName": "sandbox", "imagePullSecrets": ["regcred"],
        "labels": {"team": "a"}, "annotations": {"example.com/owner": "team a"}, "namePrefix": "sbx-",
        "leaseTtlSeconds": 600, "readinessTimeoutSeconds": 15, "job": {"backoffLimit": 1, "ttlSecondsAfterFinished": 60},
        "sandbox": {"workspaceVolume": {"size": "10Gi", "storageClassName": "fast"}}
    });
    let v = validate(&config.to_string());
    assert!(v.ok, "{v:?}");
    assert_eq!(paths(&v.warnings), vec!["/sandbox/workspaceVolume"], "workspace volume is ignored for jobs");
    let c = parse(&config.to_string()).unwrap();
    assert_eq!(c.backend, Backend::Job);
    assert_eq!(c.sandbox_api_version, SandboxApiVersion::V1alpha1);
    assert_eq!(c.resources.requests["cpu"], "1");
    assert!(c.resources.limits.is_empty(), "explicit resources replace the defaults");
    assert_eq!(c.tolerations[0].effect.as_deref(), Some("NoSchedule"));
    assert_eq!(c.job.backoff_limit, 1);
    assert_eq!(c.name_prefix, "sbx-");
}

#[test]
fn long_values_are_quoted_by_a_short_prefix() {
    let long = "n".repeat(50_000);
    let mut config = minimal();
    config["namespace"] = json!(long);
    config["backend"] = json!(long);
    config["workingDir"] = json!(long[..4000]);
    config["labels"] = json!({"team": long});
    config["resources"] = json!({"limits": {"cpu": long}});
    config["security"] = json!({"capabilities": {"add": [long]}});
    let v = validate(&config.to_string());
    for path in [
        "/namespace",
        "/backend",
        "/workingDir",
        "/labels/team",
        "/resources/limits/cpu",
        "/security/capabilities/add/0",
    ] {
        let problem = v.errors.iter().find(|p| p.path == path).unwrap_or_else(|| panic!("no error at {path}"));
        let value = if path == "/workingDir" { &long[..4000] } else { long.as_str() };
        crate::testkit::assert_quotes_a_prefix(&problem.message, value);
    }
    let unknown = json!({long.clone(): 1});
    let v = validate(&json!({"namespace": "ns", "image": "busybox", "job": unknown}).to_string());
    assert_eq!(paths(&v.warnings), vec![format!("/job/{}…", "n".repeat(64))], "a long key is cut in the path");
}

#[test]
fn a_config_with_thousands_of_problems_lists_a_bounded_number() {
    let env: serde_json::Map<String, Value> = (0..10_000).map(|i| (format!("{i}-BAD"), json!("x"))).collect();
    let unknown: serde_json::Map<String, Value> = (0..10_000).map(|i| (format!("unknown{i}"), json!(1))).collect();
    let mut config = minimal();
    config["env"] = Value::Object(env);
    config["job"] = Value::Object(unknown);
    let v = validate(&config.to_string());
    assert!(!v.ok);
    assert!(v.errors.len() <= 51, "{} errors listed", v.errors.len());
    assert!(v.warnings.len() <= 51, "{} warnings listed", v.warnings.len());
    let last = v.errors.last().unwrap();
    assert!(last.message.contains("more errors"), "{last:?}");
    let listed = serde_json::to_string(&v).unwrap();
    assert!(listed.len() < 20_000, "validate-config answered {} bytes", listed.len());
}

#[test]
fn images_are_checked_as_the_kubelet_parses_them() {
    let digest = format!("sha256:{}", "a".repeat(64));
    for ok in [
        "busybox".to_string(),
        "busybox:1.36".into(),
        "ghcr.io/acme/agent:1".into(),
        "localhost:5000/team/agent".into(),
        "[fc00::1]:5000/agent:v2".into(),
        format!("registry.example/agent@{digest}"),
        format!("agent:1.2@{digest}"),
    ] {
        let mut config = minimal();
        config["image"] = json!(ok);
        let v = validate(&config.to_string());
        assert!(v.ok, "{ok}: {:?}", v.errors);
    }
    for (bad, why) in [
        ("busybox\0", "'\\0'"),
        ("bü\u{fc}sybox", "'ü'"),
        ("../etc/passwd", "path component"),
        ("Busybox", "lowercase"),
        ("busybox:", "tag"),
        ("busybox:-1", "tag"),
        ("busybox@sha256:abc", "digest"),
        ("busybox@md5:0123456789abcdef0123456789abcdef", "md5"),
    ] {
        let mut config = minimal();
        config["image"] = json!(bad);
        let v = validate(&config.to_string());
        let problem = v.errors.iter().find(|p| p.path == "/image").unwrap_or_else(|| panic!("{bad:?} was accepted"));
        assert!(problem.message.contains(why), "{bad:?}: {}", problem.message);
    }
}

#[test]
fn no_config_panics() {
    let full = json!({
        "namespace": "team-a", "backend": "job", "sandboxApiVersion": "v1alpha1", "image": "busybox:1.36",
        "imagePullPolicy": "IfNotPresent", "command": ["/bin/sh"], "args": ["-c"], "workingDir": "/work",
        "resources": {"requests": {"cpu": 1}}, "env": {"MODE": "fast"}, "nodeSelector": {"pool": "a"},
        "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 5}],
        "runtimeClassName": "gvisor", "serviceAccountName": "sa", "imagePullSecrets": ["regcred"],
        "labels": {"team": "a"}, "annotations": {"example.com/o": "x"}, "namePrefix": "sbx-",
        "leaseTtlSeconds": 600, "readinessTimeoutSeconds": 15, "job": {"backoffLimit": 1, "ttlSecondsAfterFinished": 60},
        "sandbox": {"workspaceVolume": {"size": "10Gi", "storageClassName": "fast"}},
        "security": {"runAsUser": 1, "capabilities": {"drop": ["ALL"], "add": []}, "seccompProfile": "Unconfined"}
    });
    let text = full.to_string();
    for cut in text.char_indices().map(|(i, _)| i) {
        let _ = validate(&text[..cut]);
    }
    let odd = [
        json!(null),
        json!(true),
        json!(-1),
        json!(i64::MIN),
        json!(u64::MAX),
        json!(1e300),
        json!(-0.5),
        json!(""),
        json!("\u{0}ü\u{202e}/~1"),
        json!([]),
        json!([null, 1, "x", {}]),
        json!({}),
        json!({"": null, "~/": [1]}),
    ];
    let paths: Vec<String> = {
        fn walk(v: &Value, at: String, out: &mut Vec<String>) {
            out.push(at.clone());
            match v {
                Value::Object(m) => m.iter().for_each(|(k, v)| walk(v, format!("{at}/{k}"), out)),
                Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| walk(v, format!("{at}/{i}"), out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&full, String::new(), &mut out);
        out
    };
    for path in &paths {
        for value in &odd {
            let mut config = full.clone();
            if path.is_empty() {
                config = value.clone();
            } else if let Some(slot) = config.pointer_mut(path) {
                *slot = value.clone();
            }
            let _ = validate(&config.to_string());
            let _ = parse(&config.to_string());
        }
    }
}

#[test]
fn a_claim_config_names_a_pool_or_a_template_and_needs_no_image() {
    let v = validate(&json!({"namespace": "ns", "backend": "claim", "claim": {"warmPool": "python"}}).to_string());
    assert!(v.ok && v.warnings.is_empty(), "{v:?}");
    let normalized: Value = serde_json::from_str(v.normalized_config.as_deref().unwrap()).unwrap();
    assert_eq!(normalized["backend"], "claim");
    assert_eq!(normalized["claim"], json!({"warmPool": "python"}));
    for key in POD_KEYS {
        assert!(normalized.get(*key).is_none(), "{key} does not apply to a claim: {normalized}");
    }
    let again = validate(&normalized.to_string());
    assert!(again.ok && again.warnings.is_empty(), "normalizing a claim config is idempotent: {again:?}");
    assert_eq!(again.normalized_config, v.normalized_config);
    let c = parse(&normalized.to_string()).unwrap();
    assert_eq!((c.backend, c.claim.template.as_deref()), (Backend::Claim, None));
}

#[test]
fn a_claim_config_without_pool_or_template_is_an_error_at_claim() {
    for claim in [None, Some(json!({})), Some(json!({"warmPool": null}))] {
        let mut config = json!({"namespace": "ns", "backend": "claim"});
        if let Some(claim) = claim.clone() {
            config["claim"] = claim;
        }
        let v = validate(&config.to_string());
        assert!(!v.ok, "{claim:?}");
        assert_eq!(paths(&v.errors), vec!["/claim"], "{claim:?}");
        assert!(v.errors[0].message.contains("claim.warmPool") && v.errors[0].message.contains("claim.template"));
    }
    let bad =
        json!({"namespace": "ns", "backend": "claim", "claim": {"warmPool": "Not_A_Name", "template": 7, "pool": "x"}});
    let v = validate(&bad.to_string());
    assert_eq!(paths(&v.errors), vec!["/claim/warmPool", "/claim/template"], "no second error at /claim");
    assert_eq!(paths(&v.warnings), vec!["/claim/pool"]);
}

#[test]
fn pod_shaping_keys_are_warned_for_a_claim_not_refused() {
    let mut config = minimal();
    config["backend"] = json!("claim");
    config["claim"] = json!({"template": "py"});
    config["command"] = json!(["bash"]);
    config["resources"] = json!({"limits": {"cpu": "1"}});
    config["security"] = json!({"runAsUser": 2000});
    config["env"] = json!({"MODE": "fast"});
    config["labels"] = json!({"team": "a"});
    let v = validate(&config.to_string());
    assert!(v.ok, "{v:?}");
    assert_eq!(paths(&v.warnings), vec!["/image", "/command", "/resources", "/security"], "env and labels apply");
    assert!(v.warnings.iter().all(|w| w.message.contains("SandboxTemplate decides the pod")));

    let mut sandbox = minimal();
    sandbox["claim"] = json!({"warmPool": "python"});
    let v = validate(&sandbox.to_string());
    assert!(v.ok);
    assert_eq!(paths(&v.warnings), vec!["/claim"], "applies to backend claim only");
    assert!(
        validate(&json!({"namespace": "ns", "backend": "sandbox"}).to_string())
            .errors
            .iter()
            .any(|e| e.path == "/image")
    );
}
