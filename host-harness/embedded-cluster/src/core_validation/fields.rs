//! Field paths, typed getters that report a wrong JSON type as the server does, and the error constructors every kind shares.

use super::*;

pub(super) fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

pub(super) fn idx(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

pub(super) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

pub(super) fn type_error(path: String, v: &Value, expected: &str) -> FieldError {
    FieldError::type_invalid(path, quoted(json_type(v)), expected)
}

/// A value as the server prints it in a message: strings quoted, numbers plain, lists and maps of
/// strings in Go's `%#v` form, anything else as compact JSON.
pub(crate) fn shown(v: &Value) -> String {
    match v {
        Value::String(s) => quoted(s),
        Value::Array(items) if items.iter().all(Value::is_string) => {
            let parts: Vec<String> = items.iter().filter_map(Value::as_str).map(quoted).collect();
            format!("[]string{{{}}}", parts.join(", "))
        }
        Value::Object(map) if !map.is_empty() && map.values().all(Value::is_string) => {
            let parts: Vec<String> =
                map.iter().map(|(k, val)| format!("{}:{}", quoted(k), quoted(val.as_str().unwrap_or("")))).collect();
            format!("map[string]string{{{}}}", parts.join(", "))
        }
        Value::Null => "null".to_string(),
        other => other.to_string(),
    }
}

pub(super) fn invalid_str(path: impl Into<String>, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError::invalid(path, quoted(value), detail)
}

pub(super) fn invalid_int(path: impl Into<String>, value: i64, detail: impl Into<String>) -> FieldError {
    FieldError::invalid(path, value.to_string(), detail)
}

pub(super) fn not_supported(path: impl Into<String>, value: &str, allowed: &[&str]) -> FieldError {
    FieldError::not_supported(path, quoted(value), allowed)
}

/// apimachinery has no NotFound here; see the crate report. Until `FieldErrorKind` gains one,
/// a NotFound is an Invalid whose detail says so.
pub(super) fn not_found(path: impl Into<String>, value: &str) -> FieldError {
    FieldError::invalid(path, quoted(value), "not found")
}

pub(super) fn msgs_invalid(errs: &mut Vec<FieldError>, path: &str, value: &str, msgs: Vec<String>) {
    errs.extend(msgs.into_iter().map(|m| invalid_str(path, value, m)));
}

pub(super) fn t_str<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<&'a str> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "string"));
            None
        }
    }
}

pub(super) fn t_int(v: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<i64> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "integer"));
            None
        }
    }
}

pub(super) fn t_bool(v: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<bool> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "boolean"));
            None
        }
    }
}

pub(super) fn t_arr<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> &'a [Value] {
    match v.get(k) {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.push(type_error(child(path, k), other, "array"));
            &[]
        }
    }
}

pub(super) fn t_obj<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<&'a Value> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(o @ Value::Object(_)) => Some(o),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "object"));
            None
        }
    }
}

/// A `map[string]string` field as (key, value) pairs; non-string values are type errors.
pub(super) fn t_str_map<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<(&'a str, &'a str)> {
    let Some(map) = t_obj(v, k, path, errs).and_then(Value::as_object) else { return Vec::new() };
    let mut out = Vec::new();
    for (name, value) in map {
        match value {
            Value::String(s) => out.push((name.as_str(), s.as_str())),
            Value::Null => out.push((name.as_str(), "")),
            other => errs.push(type_error(key(&child(path, k), name), other, "string")),
        }
    }
    out
}

/// A list of strings; non-string items are type errors.
pub(super) fn t_str_list<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<&'a str> {
    let list_path = child(path, k);
    let mut out = Vec::new();
    for (i, item) in t_arr(v, k, path, errs).iter().enumerate() {
        match item.as_str() {
            Some(s) => out.push(s),
            None => errs.push(type_error(idx(&list_path, i), item, "string")),
        }
    }
    out
}

/// Objects of a list; non-object items are type errors and skipped.
pub(super) fn t_obj_list<'a>(
    v: &'a Value,
    k: &str,
    path: &str,
    errs: &mut Vec<FieldError>,
) -> Vec<(usize, &'a Value, String)> {
    let list_path = child(path, k);
    let mut out = Vec::new();
    for (i, item) in t_arr(v, k, path, errs).iter().enumerate() {
        if item.is_object() {
            out.push((i, item, idx(&list_path, i)));
        } else {
            errs.push(type_error(idx(&list_path, i), item, "object"));
        }
    }
    out
}

pub(super) fn non_negative(v: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = t_int(v, k, path, errs).filter(|n| *n < 0) {
        errs.push(invalid_int(child(path, k), n, NON_NEGATIVE));
    }
}

/// A quantity value (string, or a bare JSON number as the server also accepts).
pub(super) fn t_quantity(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Option<(i128, String)> {
    let text = match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => {
            errs.push(type_error(path.to_string(), other, "string"));
            return None;
        }
    };
    match quantity::parse_nanos(&text) {
        Ok(n) => Some((n, text)),
        Err(e) => {
            errs.push(invalid_str(path, &text, e));
            None
        }
    }
}

pub(super) fn one_of(errs: &mut Vec<FieldError>, path: &str, value: Option<&str>, allowed: &[&str]) {
    match value {
        None | Some("") => errs.push(FieldError::required(path, "")),
        Some(v) if !allowed.contains(&v) => errs.push(not_supported(path, v, allowed)),
        Some(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata.
