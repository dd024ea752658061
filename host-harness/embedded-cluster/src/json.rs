//! Small helpers over `serde_json::Value` shared by validation and defaulting.
//!
//! JSON `null` is treated as absent everywhere, as Go's decoder leaves a nil field for it.

use serde_json::{Map, Value};

/// A string field, or None when absent, null or not a string.
pub(crate) fn str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// An integer field, or None when absent, null or not an integer.
pub(crate) fn int_at(v: &Value, key: &str) -> Option<i64> {
    v.get(key).and_then(Value::as_i64)
}

/// A boolean field, or None when absent, null or not a boolean.
pub(crate) fn bool_at(v: &Value, key: &str) -> Option<bool> {
    v.get(key).and_then(Value::as_bool)
}

/// An array field; absent, null or mistyped reads as empty.
pub(crate) fn arr_at<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// An object field, or None when absent, null or not an object.
pub(crate) fn obj_at<'a>(v: &'a Value, key: &str) -> Option<&'a Map<String, Value>> {
    v.get(key).and_then(Value::as_object)
}

/// A non-empty string field (Go's `len(x) > 0`).
pub(crate) fn nonempty_str_at<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    str_at(v, key).filter(|s| !s.is_empty())
}

/// Whether a field is present and not null.
pub(crate) fn present(v: &Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

/// The object at `key`, created when absent or null; None when `v` is not an object or the field
/// holds another type (left alone so that validation can report it).
pub(crate) fn ensure_obj<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Map<String, Value>> {
    let map = v.as_object_mut()?;
    let slot = map.entry(key.to_string()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
}

/// Like `ensure_obj`, but hands back the field as a `Value` for nested defaulting.
pub(crate) fn ensure_obj_value<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    ensure_obj(v, key)?;
    v.get_mut(key)
}

/// Sets `key` to `value` when it is absent, null or an empty string (Go's zero value).
pub(crate) fn default_field(v: &mut Value, key: &str, value: Value) {
    if let Some(map) = v.as_object_mut() {
        let missing = match map.get(key) {
            None | Some(Value::Null) => true,
            Some(Value::String(s)) => s.is_empty(),
            Some(_) => false,
        };
        if missing {
            map.insert(key.to_string(), value);
        }
    }
}

/// Mutable array items at `key`, if it is an array.
pub(crate) fn arr_mut<'a>(v: &'a mut Value, key: &str) -> Option<&'a mut Vec<Value>> {
    v.get_mut(key).and_then(Value::as_array_mut)
}

/// The value with the zero values `apiequality.Semantic.DeepEqual` ignores removed: null, empty
/// lists and empty maps count as absent. Empty strings are kept, because in a map (labels, data)
/// a key with an empty value differs from a missing key.
pub(crate) fn normalized(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, item) in map {
                let item = normalized(item);
                if !is_zero(&item) {
                    out.insert(k.clone(), item);
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Whether two values are equal once zero values are ignored.
pub(crate) fn semantic_eq(a: Option<&Value>, b: Option<&Value>) -> bool {
    let a = a.map_or(Value::Null, normalized);
    let b = b.map_or(Value::Null, normalized);
    match (is_zero(&a), is_zero(&b)) {
        (true, true) => true,
        _ => a == b,
    }
}

/// How Go's JSON decoder names a JSON value's kind in error messages (`string`, `object`, ...).
pub(crate) fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn semantic_equality_ignores_zero_values() {
        let a = json!({"x": 1, "z": [], "w": {"k": null}});
        let b = json!({"x": 1});
        assert!(semantic_eq(Some(&a), Some(&b)));
        assert!(semantic_eq(None, Some(&json!({}))));
        assert!(!semantic_eq(Some(&json!({"x": 2})), Some(&b)));
        assert!(!semantic_eq(Some(&json!({"x": 0})), Some(&json!({}))));
        assert!(!semantic_eq(Some(&json!({"labels": {"a": ""}})), Some(&json!({}))));
    }

    #[test]
    fn defaulting_fills_only_zero_values() {
        let mut v = json!({"a": "", "b": "set", "c": null});
        default_field(&mut v, "a", json!("A"));
        default_field(&mut v, "b", json!("B"));
        default_field(&mut v, "c", json!("C"));
        default_field(&mut v, "d", json!(1));
        assert_eq!(v, json!({"a": "A", "b": "set", "c": "C", "d": 1}));
    }

    #[test]
    fn ensure_obj_creates_missing_objects_only() {
        let mut v = json!({"m": null});
        if let Some(m) = ensure_obj(&mut v, "m") {
            m.insert("k".into(), json!(true));
        }
        assert_eq!(v, json!({"m": {"k": true}}));
        let mut typed_wrong = json!({"m": 3});
        assert!(ensure_obj(&mut typed_wrong, "m").is_none());
        assert_eq!(typed_wrong, json!({"m": 3}));
        assert!(ensure_obj(&mut json!([1]), "m").is_none());
    }
}
