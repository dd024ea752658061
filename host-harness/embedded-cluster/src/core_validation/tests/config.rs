//! Secrets and ConfigMaps.

use super::*;

fn secret(extra: Value) -> Value {
    let mut s = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"}});
    if let (Some(m), Some(e)) = (s.as_object_mut(), extra.as_object()) {
        m.extend(e.clone());
    }
    s
}

#[test]
fn secret_keys_and_size() {
    assert_clean(&validate_create(
        "Secret",
        &secret(json!({"data": {"tls.crt": "eA=="}, "stringData": {"user_name": "u"}})),
    ));
    let errs =
        validate_create("Secret", &secret(json!({"data": {"a/b": "eA==", "bad": "%%%%"}, "stringData": {"c d": "x"}})));
    assert!(
        find(&errs, "data[a/b]", "FieldValueInvalid")
            .detail
            .starts_with("a valid config key must consist of alphanumeric characters")
    );
    find(&errs, "data[c d]", "FieldValueInvalid");
    assert_eq!(find(&errs, "data[bad]", "FieldValueInvalid").detail, "illegal base64 data at input byte 0");
    let big = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, vec![0u8; 1024 * 1024 + 1]);
    let errs = validate_create("Secret", &secret(json!({"data": {"big": big}})));
    assert_eq!(find(&errs, "data", "FieldValueTooLong").kind, FieldErrorKind::TooLong { max: 1048576 });
}

#[test]
fn secret_types_require_their_keys() {
    let errs = validate_create("Secret", &secret(json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}})));
    find(&errs, "data[tls.key]", "FieldValueRequired");
    assert_eq!(errs.len(), 1);
    let errs = validate_create(
        "Secret",
        &secret(json!({"type": "kubernetes.io/dockerconfigjson", "stringData": {".dockerconfigjson": "{nope"}})),
    );
    find(&errs, "data[.dockerconfigjson]", "FieldValueInvalid");
    let errs = validate_create("Secret", &secret(json!({"type": "kubernetes.io/service-account-token"})));
    find(&errs, "metadata.annotations[kubernetes.io/service-account.name]", "FieldValueRequired");
    let errs = validate_create("Secret", &secret(json!({"type": "kubernetes.io/basic-auth"})));
    find(&errs, "data[username]", "FieldValueRequired");
    find(&errs, "data[password]", "FieldValueRequired");
}

#[test]
fn secret_updates() {
    let old = created("Secret", secret(json!({"stringData": {"k": "v"}})));
    assert_clean(&validate_update("Secret", &with(old.clone(), "/data/k", json!("dzI=")), &old));
    let errs = validate_update("Secret", &with(old.clone(), "/type", json!("kubernetes.io/tls")), &old);
    assert_eq!(
        find(&errs, "type", "FieldValueInvalid").message(),
        "Invalid value: \"kubernetes.io/tls\": field is immutable"
    );
    let frozen = with(old.clone(), "/immutable", json!(true));
    let errs = validate_update("Secret", &with(frozen.clone(), "/data/k", json!("dzI=")), &frozen);
    assert_eq!(find(&errs, "data", "FieldValueForbidden").detail, "field is immutable when `immutable` is set");
    let errs = validate_update("Secret", &old, &frozen);
    find(&errs, "immutable", "FieldValueForbidden");
    let via_string_data = with(frozen.clone(), "/stringData", json!({"k": "changed"}));
    find(&validate_update("Secret", &via_string_data, &frozen), "data", "FieldValueForbidden");
}

#[test]
fn config_maps() {
    let cm = json!({"metadata": {"name": "cfg", "namespace": "default"}, "data": {"ok.key": "v", "bad key": "v", "dup": "v"}, "binaryData": {"dup": "eA=="}});
    let errs = validate_create("ConfigMap", &cm);
    find(&errs, "data[bad key]", "FieldValueInvalid");
    assert_eq!(find(&errs, "data[dup]", "FieldValueInvalid").detail, "duplicate of key present in binaryData");
    let frozen = json!({"metadata": {"name": "cfg"}, "immutable": true, "data": {"a": "1"}});
    let errs = validate_update("ConfigMap", &with(frozen.clone(), "/data/a", json!("2")), &frozen);
    find(&errs, "data", "FieldValueForbidden");
}
