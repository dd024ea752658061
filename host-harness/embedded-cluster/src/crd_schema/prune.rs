//! Decoding: pruning unknown fields, dropping non-nullable nulls, coercing embedded ObjectMeta, and applying defaults.

use super::*;

pub(super) const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Appends a field or map key to a pruning path (`a.b`), as the server's prune options do.
pub(super) fn push_name(buf: &mut String, name: &str) {
    if !buf.is_empty() {
        buf.push('.');
    }
    buf.push_str(name);
}

pub(super) fn push_index(buf: &mut String, i: usize) {
    let _ = write!(buf, "[{i}]");
}

/// Removes fields the schema does not know, recording their paths (apiserver's `prune`). The
/// apiVersion/kind/metadata of the resource `root` and of `x-kubernetes-embedded-resource` nodes
/// are left alone (embedded metadata is handled by [`coerce`]).
pub(super) fn prune(x: &mut Value, s: Option<&Node>, root: bool, path: &mut String, out: &mut Vec<String>) {
    if let Some(s) = s.filter(|s| s.preserve_unknown) {
        skip_prune(x, s, root, path, out);
        return;
    }
    let len = path.len();
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                for k in map.keys() {
                    record(path, k, out);
                }
                map.clear();
                return;
            };
            let embedded = root || s.embedded;
            let mut gone = Vec::new();
            for (k, v) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    push_name(path, k);
                    prune(v, Some(prop), false, path, out);
                    path.truncate(len);
                } else if let Some(addl) = s.additional.structural() {
                    push_name(path, k);
                    prune(v, addl, false, path, out);
                    path.truncate(len);
                } else {
                    if !META_FIELDS.contains(&k.as_str()) || !path.is_empty() {
                        record(path, k, out);
                    }
                    gone.push(k.clone());
                }
            }
            for k in gone {
                map.remove(&k);
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, v) in items.iter_mut().enumerate() {
                push_index(path, i);
                prune(v, item_schema, false, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

/// Pruning below `x-kubernetes-preserve-unknown-fields`: unknown fields stay, known ones are
/// still pruned by their own schema.
pub(super) fn skip_prune(x: &mut Value, s: &Node, root: bool, path: &mut String, out: &mut Vec<String>) {
    let len = path.len();
    match x {
        Value::Object(map) => {
            let embedded = root || s.embedded;
            for (k, v) in map.iter_mut() {
                if embedded && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                if let Some(prop) = s.properties.get(k) {
                    push_name(path, k);
                    prune(v, Some(prop), false, path, out);
                    path.truncate(len);
                } else if let Some(addl) = s.additional.structural() {
                    push_name(path, k);
                    prune(v, addl, false, path, out);
                    path.truncate(len);
                }
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else {
                return;
            };
            for (i, v) in items.iter_mut().enumerate() {
                push_index(path, i);
                skip_prune(v, item_schema, false, path, out);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

pub(super) fn record(path: &str, key: &str, out: &mut Vec<String>) {
    let mut p = path.to_string();
    push_name(&mut p, key);
    out.push(p);
}

/// The schema of an object's field: a property, else the map-value schema.
pub(super) fn field_schema<'n>(s: Option<&'n Node>, key: &str) -> Option<&'n Node> {
    let s = s?;
    s.properties.get(key).or(match &s.additional {
        Additional::Schema(n) => Some(n),
        _ => None,
    })
}

/// Drops object fields that are `null` where the schema is not nullable and has no default
/// (apiserver's `PruneNonNullableNullsWithoutDefaults`); nulls with a default are defaulted later.
pub(super) fn drop_nulls(x: &mut Value, s: Option<&Node>) {
    match x {
        Value::Object(map) => {
            let mut gone = Vec::new();
            for (k, v) in map.iter_mut() {
                let fs = field_schema(s, k);
                if v.is_null() && fs.is_some_and(|fs| !fs.nullable && fs.default.is_none()) {
                    gone.push(k.clone());
                } else {
                    drop_nulls(v, fs);
                }
            }
            for k in gone {
                map.remove(&k);
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for v in items {
                drop_nulls(v, item_schema);
            }
        }
        _ => {}
    }
}

/// Fills in `default`s where a field is absent (or a non-nullable null), then descends, so
/// defaults inside a defaulted object apply too (apiserver's `structuraldefaulting.Default`).
pub(super) fn apply_defaults(x: &mut Value, s: Option<&Node>) {
    let Some(s) = s else {
        return;
    };
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else {
                    continue;
                };
                let missing = match map.get(k) {
                    None => true,
                    Some(v) => v.is_null() && !prop.nullable,
                };
                if missing {
                    map.insert(k.clone(), d.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply_defaults(v, Some(prop));
                } else if let Some(addl) = s.additional.structural() {
                    default_null(v, addl);
                    apply_defaults(v, addl);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.items.as_deref();
            for v in items {
                default_null(v, item_schema);
                apply_defaults(v, item_schema);
            }
        }
        _ => {}
    }
}

pub(super) fn default_null(v: &mut Value, s: Option<&Node>) {
    if let Some(d) = s.filter(|s| v.is_null() && !s.nullable).and_then(|s| s.default.as_ref()) {
        *v = d.clone();
    }
}

/// Appends a property to a `field.Path`-style path (`a.b`).
pub(super) fn push_field(buf: &mut String, name: &str) {
    push_name(buf, name);
}

/// Appends a map key to a `field.Path`-style path (`a[b]`).
pub(super) fn push_key(buf: &mut String, key: &str) {
    buf.push('[');
    buf.push_str(key);
    buf.push(']');
}

/// Coerces embedded resources (apiserver's `objectmeta.Coerce` with invalid fields dropped):
/// non-string apiVersion/kind are removed and metadata is round-tripped through ObjectMeta,
/// recording unknown metadata fields.
pub(super) fn coerce(x: &mut Value, s: &Node, path: &mut String, unknown: &mut Vec<String>) {
    let len = path.len();
    match x {
        Value::Object(map) => {
            if s.embedded {
                coerce_embedded(map, path, unknown);
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    push_field(path, k);
                    coerce(v, prop, path, unknown);
                } else if let Additional::Schema(addl) = &s.additional {
                    push_key(path, k);
                    coerce(v, addl, path, unknown);
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            let Some(item_schema) = s.items.as_deref() else {
                return;
            };
            for (i, v) in items.iter_mut().enumerate() {
                push_index(path, i);
                coerce(v, item_schema, path, unknown);
                path.truncate(len);
            }
        }
        _ => {}
    }
}

pub(super) fn coerce_embedded(map: &mut Map<String, Value>, path: &str, unknown: &mut Vec<String>) {
    for k in ["apiVersion", "kind"] {
        if map.get(k).is_some_and(|v| !v.is_string()) {
            map.remove(k);
        }
    }
    let Some(meta) = map.get_mut("metadata") else {
        return;
    };
    match meta {
        Value::Null => *meta = Value::Object(Map::new()),
        Value::Object(m) => {
            let mut prefix = path.to_string();
            push_field(&mut prefix, "metadata");
            let mut clean = Map::new();
            let mut unknown_here = Vec::new();
            let mut malformed = false;
            for (k, v) in m.iter() {
                match object_meta_field(k) {
                    None => unknown_here.push(format!("{prefix}.{k}")),
                    Some(kind) => match kind.normalize(v) {
                        Ok(Some(nv)) => {
                            clean.insert(k.clone(), nv);
                        }
                        Ok(None) => {}
                        Err(_) => malformed = true,
                    },
                }
            }
            if !malformed {
                unknown.extend(unknown_here);
            }
            *m = clean;
        }
        _ => {}
    }
}

/// The JSON shapes of ObjectMeta's fields, which decide what survives a round trip through it.
#[derive(Clone, Copy)]
pub(super) enum MetaKind {
    Str,
    Int,
    Time,
    StrMap,
    StrList,
    ObjList(&'static str),
}

pub(super) fn object_meta_field(name: &str) -> Option<MetaKind> {
    Some(match name {
        "name" | "generateName" | "namespace" | "selfLink" | "uid" | "resourceVersion" => MetaKind::Str,
        "generation" | "deletionGracePeriodSeconds" => MetaKind::Int,
        "creationTimestamp" | "deletionTimestamp" => MetaKind::Time,
        "labels" | "annotations" => MetaKind::StrMap,
        "finalizers" => MetaKind::StrList,
        "ownerReferences" => MetaKind::ObjList("v1.OwnerReference"),
        "managedFields" => MetaKind::ObjList("v1.ManagedFieldsEntry"),
        _ => return None,
    })
}

/// Why a metadata field does not decode into ObjectMeta.
pub(super) enum MetaError {
    /// A JSON value of the wrong kind (`go_kind`) for a Go type.
    Type { found: &'static str, go_type: String },
    /// A timestamp that is not RFC 3339.
    Time(String),
}

impl MetaError {
    /// The message of Go's decoder for this field of ObjectMeta.
    pub(super) fn message(&self, field: &str) -> String {
        match self {
            MetaError::Type { found, go_type } => {
                format!("json: cannot unmarshal {found} into Go struct field ObjectMeta.{field} of type {go_type}")
            }
            MetaError::Time(s) => {
                format!(
                    "parsing time {} as \"2006-01-02T15:04:05Z07:00\": cannot parse {} as \"2006\"",
                    quoted(s),
                    quoted(s)
                )
            }
        }
    }
}

impl MetaKind {
    /// The field as ObjectMeta would serialize it back (`None` when empty and so omitted), or the
    /// Go decoding error that makes the server drop it.
    pub(super) fn normalize(self, v: &Value) -> Result<Option<Value>, MetaError> {
        let mismatch = |bad: &Value, go_type: &str| {
            Err(MetaError::Type { found: crate::json::go_kind(bad), go_type: go_type.to_string() })
        };
        match (self, v) {
            (_, Value::Null) => Ok(None),
            (MetaKind::Str, Value::String(s)) => Ok((!s.is_empty()).then(|| v.clone())),
            (MetaKind::Str, _) => mismatch(v, "string"),
            (MetaKind::Int, Value::Number(n)) if n.as_i64().is_some() => Ok((n.as_i64() != Some(0)).then(|| v.clone())),
            (MetaKind::Int, _) => mismatch(v, "int64"),
            (MetaKind::Time, Value::String(s)) => match s.parse::<jiff::Timestamp>() {
                Ok(ts) => Ok(Some(Value::String(ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))),
                Err(_) => Err(MetaError::Time(s.clone())),
            },
            (MetaKind::Time, _) => mismatch(v, "string"),
            (MetaKind::StrMap, Value::Object(m)) => {
                let mut out = Map::new();
                for (k, e) in m {
                    match e {
                        Value::String(_) => out.insert(k.clone(), e.clone()),
                        Value::Null => out.insert(k.clone(), Value::String(String::new())),
                        _ => return mismatch(e, "string"),
                    };
                }
                Ok((!out.is_empty()).then_some(Value::Object(out)))
            }
            (MetaKind::StrMap, _) => mismatch(v, "map[string]string"),
            (MetaKind::StrList, Value::Array(a)) => {
                let mut out = Vec::new();
                for e in a {
                    match e {
                        Value::String(_) => out.push(e.clone()),
                        Value::Null => out.push(Value::String(String::new())),
                        _ => return mismatch(e, "string"),
                    }
                }
                Ok((!out.is_empty()).then_some(Value::Array(out)))
            }
            (MetaKind::StrList, _) => mismatch(v, "[]string"),
            (MetaKind::ObjList(go_type), Value::Array(a)) => match a.iter().find(|e| !e.is_object() && !e.is_null()) {
                Some(e) => mismatch(e, go_type),
                None => Ok((!a.is_empty()).then(|| v.clone())),
            },
            (MetaKind::ObjList(go_type), _) => mismatch(v, &format!("[]{go_type}")),
        }
    }
}

/// The error Go's JSON decoder gives when `metadata` does not decode into ObjectMeta.
pub(super) fn object_meta_error(v: &Value) -> Option<String> {
    let m = match v {
        Value::Null => return None,
        Value::Object(m) => m,
        _ => {
            return Some(format!(
                "json: cannot unmarshal {} into Go value of type v1.ObjectMeta",
                crate::json::go_kind(v)
            ));
        }
    };
    m.iter().find_map(|(k, v)| Some(object_meta_field(k)?.normalize(v).err()?.message(k)))
}

// ---------------------------------------------------------------------------------------------
// Validation.
