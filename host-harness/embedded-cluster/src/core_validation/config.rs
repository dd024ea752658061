//! Secrets and ConfigMaps: keys, data, types and immutability.

use super::*;

/// `data` of a Secret as decoded bytes per key (stringData already folded in by defaulting).
pub(super) fn secret_data<'a>(obj: &'a Value, errs: &mut Vec<FieldError>) -> Vec<(&'a str, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for (k, v) in t_obj(obj, "data", "", errs).and_then(Value::as_object).into_iter().flatten() {
        let path = key("data", k);
        match v {
            Value::String(s) => match decode_base64(s) {
                Ok(bytes) => out.push((k.as_str(), Some(bytes))),
                Err(e) => {
                    errs.push(FieldError::invalid(path, quoted("<secret contents redacted>"), e));
                    out.push((k.as_str(), None));
                }
            },
            Value::Null => out.push((k.as_str(), Some(Vec::new()))),
            other => {
                errs.push(type_error(path, other, "string"));
                out.push((k.as_str(), None));
            }
        }
    }
    out
}

pub(super) fn validate_secret(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Secret", errs);
    let data = secret_data(obj, errs);
    let mut total = 0;
    for (k, bytes) in &data {
        msgs_invalid(errs, &key("data", k), k, names::config_map_key(k));
        total += bytes.as_ref().map_or(0, Vec::len);
    }
    if total > MAX_DATA_BYTES {
        errs.push(FieldError::too_long("data", MAX_DATA_BYTES));
    }
    let _ = t_bool(obj, "immutable", "", errs);
    let get = |k: &str| data.iter().find(|(name, _)| *name == k).map(|(_, b)| b.as_deref().unwrap_or(&[]));
    match t_str(obj, "type", "", errs).unwrap_or("") {
        "kubernetes.io/service-account-token" => {
            let sa = obj.pointer("/metadata/annotations/kubernetes.io~1service-account.name").and_then(Value::as_str);
            if sa.unwrap_or("").is_empty() {
                errs.push(FieldError::required("metadata.annotations[kubernetes.io/service-account.name]", ""));
            }
        }
        t @ ("kubernetes.io/dockercfg" | "kubernetes.io/dockerconfigjson") => {
            let k = if t == "kubernetes.io/dockercfg" { ".dockercfg" } else { ".dockerconfigjson" };
            match get(k) {
                None => errs.push(FieldError::required(key("data", k), "")),
                Some(bytes) => {
                    if let Err(e) = serde_json::from_slice::<Map<String, Value>>(bytes) {
                        errs.push(FieldError::invalid(
                            key("data", k),
                            quoted("<secret contents redacted>"),
                            e.to_string(),
                        ));
                    }
                }
            }
        }
        "kubernetes.io/basic-auth" if get("username").is_none() && get("password").is_none() => {
            errs.push(FieldError::required("data[username]", ""));
            errs.push(FieldError::required("data[password]", ""));
        }
        "kubernetes.io/ssh-auth" if get("ssh-privatekey").is_none_or(<[u8]>::is_empty) => {
            errs.push(FieldError::required("data[ssh-privatekey]", ""));
        }
        "kubernetes.io/tls" => {
            for k in ["tls.crt", "tls.key"] {
                if get(k).is_none() {
                    errs.push(FieldError::required(key("data", k), ""));
                }
            }
        }
        _ => {}
    }
}

pub(super) fn immutable_data(new: &Value, old: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
    if bool_at(old, "immutable") != Some(true) {
        return;
    }
    if bool_at(new, "immutable") != Some(true) {
        errs.push(FieldError::forbidden("immutable", IMMUTABLE_WHEN_SET));
    }
    for field in fields {
        if !semantic_eq(new.get(*field), old.get(*field)) {
            errs.push(FieldError::forbidden(*field, IMMUTABLE_WHEN_SET));
        }
    }
}

pub(super) fn secret_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let new_type = str_at(new, "type").unwrap_or("");
    if new_type != str_at(old, "type").unwrap_or("") {
        errs.push(invalid_str("type", new_type, IMMUTABLE));
    }
    immutable_data(new, old, &["data"], errs);
}

pub(super) fn validate_configmap(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "ConfigMap", errs);
    let data = t_str_map(obj, "data", "", errs);
    let binary = t_str_map(obj, "binaryData", "", errs);
    let mut total = 0;
    for (k, v) in &data {
        msgs_invalid(errs, &key("data", k), k, names::config_map_key(k));
        if binary.iter().any(|(b, _)| b == k) {
            errs.push(invalid_str(key("data", k), k, "duplicate of key present in binaryData"));
        }
        total += v.len();
    }
    for (k, v) in &binary {
        msgs_invalid(errs, &key("binaryData", k), k, names::config_map_key(k));
        match decode_base64(v) {
            Ok(bytes) => total += bytes.len(),
            Err(e) => errs.push(invalid_str(key("binaryData", k), v, e)),
        }
    }
    if total > MAX_DATA_BYTES {
        errs.push(FieldError::too_long("", MAX_DATA_BYTES));
    }
    let _ = t_bool(obj, "immutable", "", errs);
}

pub(super) fn configmap_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    immutable_data(new, old, &["data", "binaryData"], errs);
}

// ---------------------------------------------------------------------------------------------
// Services.

/// Decodes secret and config map data as the API server does (standard alphabet, padded).
pub(super) fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(offset, _) | base64::DecodeError::InvalidLastSymbol(offset, _) => offset,
            base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => s.len(),
        };
        format!("illegal base64 data at input byte {at}")
    })
}
