//! Pruning, defaulting and validation of custom resources against a CRD's structural
//! `openAPIV3Schema`, reproducing kube-apiserver (apiextensions-apiserver and kube-openapi).
//!
//! A test double is only worth having if clients see what a real cluster would show them, so this
//! follows the server closely, quirks included:
//! - decoding ([`CrdSchema::default_and_prune`]) prunes unknown fields (returning their paths for
//!   `fieldValidation`), drops non-nullable nulls that have no default, coerces the `metadata` of
//!   embedded resources to ObjectMeta, then applies `default`s;
//! - validation ([`CrdSchema::validate`]) runs kube-openapi's schema validator, then the checks of
//!   embedded resources' apiVersion/kind, then `x-kubernetes-list-type` uniqueness, in that order,
//!   with the server's field paths, values and messages.
//!
//! The root `metadata` is the server's business (ObjectMeta rules), and CEL rules
//! (`x-kubernetes-validations`) are not evaluated here.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::net::IpAddr;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::{Map, Number, Value};

use crate::field_error::{FieldError, quoted};
use crate::names;

/// A CRD version's `openAPIV3Schema`, compiled once so that every request only walks the object.
#[derive(Debug)]
pub struct CrdSchema {
    raw: Value,
    root: Node,
    patterns: Vec<PatternSlot>,
    /// Whether any node carries CEL rules (`x-kubernetes-validations`).
    has_rules: bool,
}

/// One distinct `pattern` of the schema; compiled on first use and shared by every node using it.
#[derive(Debug)]
struct PatternSlot {
    source: String,
    compiled: OnceLock<Option<Regex>>,
}

/// One schema node with the keywords the server acts on, already interpreted.
#[derive(Debug, Default)]
struct Node {
    /// `type`, or `integer,string` for `x-kubernetes-int-or-string`.
    types: Vec<String>,
    nullable: bool,
    /// `format` after the server drops the formats it does not support for the node's type.
    format: String,
    enum_values: Option<Vec<Value>>,
    /// `default`; a `null` default is no default, as in the server.
    default: Option<Value>,
    maximum: Option<f64>,
    exclusive_maximum: bool,
    minimum: Option<f64>,
    exclusive_minimum: bool,
    multiple_of: Option<f64>,
    max_length: Option<i64>,
    min_length: Option<i64>,
    pattern: Option<usize>,
    max_items: Option<i64>,
    min_items: Option<i64>,
    max_properties: Option<i64>,
    min_properties: Option<i64>,
    required: Vec<String>,
    properties: BTreeMap<String, Node>,
    additional: Additional,
    items: Option<Box<Node>>,
    any_of: Vec<Node>,
    all_of: Vec<Node>,
    one_of: Vec<Node>,
    not: Option<Box<Node>>,
    preserve_unknown: bool,
    embedded: bool,
    list: ListType,
}

/// `additionalProperties`: absent, a boolean, or the schema of a map's values.
#[derive(Debug, Default)]
enum Additional {
    #[default]
    Absent,
    Allows(bool),
    Schema(Box<Node>),
}

impl Additional {
    /// The structural view used by pruning and defaulting: `Some(schema-or-none)` when present.
    fn structural(&self) -> Option<Option<&Node>> {
        match self {
            Additional::Absent => None,
            Additional::Allows(_) => Some(None),
            Additional::Schema(n) => Some(Some(n)),
        }
    }
}

/// `x-kubernetes-list-type` (with the keys of a map list); atomic lists need no check.
#[derive(Debug, Default)]
enum ListType {
    #[default]
    Other,
    Set,
    Map(Vec<String>),
}

/// The formats apiserver keeps on string (or untyped) nodes, with dashes removed as go-openapi does.
const STRING_FORMATS: &[&str] = &[
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
    "quantity",
    "k8sshortname",
    "k8slongname",
];

impl CrdSchema {
    /// Compiles the schema once; malformed keywords are ignored rather than rejected, because the
    /// CRD was already accepted by whoever installed it.
    pub fn new(open_api_v3_schema: Value) -> Self {
        let mut builder = Builder::default();
        let root = builder.node(&open_api_v3_schema);
        let has_rules = carries_rules(&open_api_v3_schema);
        Self { raw: open_api_v3_schema, root, patterns: builder.patterns, has_rules }
    }

    /// Whether the schema has CEL rules: the server then builds a CEL validator, which is what
    /// reports "some validation rules were not checked" on an object the schema already rejects.
    pub fn has_rules(&self) -> bool {
        self.has_rules
    }

    /// Applies `default`s (recursively, only where the parent object exists, as apiserver does)
    /// then prunes unknown fields. Returns the JSON paths of pruned fields (e.g. "spec.foo"),
    /// which the server uses for fieldValidation=Strict/Warn.
    ///
    /// The steps run in the server's decoding order (prune, drop nulls, coerce embedded metadata,
    /// default); for the structural schemas the server accepts the result is the same as
    /// defaulting first. Pruned paths come sorted, followed by the sorted unknown fields found in
    /// the metadata of embedded resources.
    pub fn default_and_prune(&self, obj: &mut Value) -> Vec<String> {
        let mut pruned = Vec::new();
        prune(obj, Some(&self.root), true, &mut String::new(), &mut pruned);
        pruned.sort();
        drop_nulls(obj, Some(&self.root));
        let mut unknown_meta = Vec::new();
        coerce(obj, &self.root, &mut String::new(), &mut unknown_meta);
        unknown_meta.sort();
        pruned.extend(unknown_meta);
        apply_defaults(obj, Some(&self.root));
        pruned
    }

    /// Validates the object; every problem, not just the first.
    ///
    /// Errors come in the server's order: schema validation (deduplicated, as kube-openapi
    /// does), then embedded resources' apiVersion/kind/metadata, then list-type uniqueness.
    /// Call it on a defaulted and pruned object, as the server does.
    pub fn validate(&self, obj: &Value) -> Vec<FieldError> {
        let mut path = Vec::new();
        let mut schema_errs = Vec::new();
        self.check(&self.root, obj, &mut path, &mut schema_errs);
        let mut seen = HashSet::new();
        schema_errs.retain(|e| seen.insert((e.field.clone(), e.message())));
        let mut embedded = Vec::new();
        let mut lists = Vec::new();
        self.check_structural(&self.root, obj, &mut path, &mut embedded, &mut lists);
        schema_errs.extend(embedded);
        schema_errs.extend(lists);
        schema_errs
    }

    /// The whole openAPIV3Schema as given, for callers that publish it (OpenAPI, discovery).
    pub fn schema(&self) -> &Value {
        &self.raw
    }

    /// The compiled regex of a pattern slot; `None` when the pattern does not compile.
    fn regex(&self, slot: usize) -> Option<&Regex> {
        let slot = self.patterns.get(slot)?;
        slot.compiled.get_or_init(|| Regex::new(&go_regex_to_rust(&slot.source)).ok()).as_ref()
    }
}

/// Whether a schema (or any schema inside it) lists `x-kubernetes-validations`.
fn carries_rules(node: &Value) -> bool {
    match node {
        Value::Object(map) => {
            map.get("x-kubernetes-validations").and_then(Value::as_array).is_some_and(|rules| !rules.is_empty())
                || map.values().any(carries_rules)
        }
        Value::Array(items) => items.iter().any(carries_rules),
        _ => false,
    }
}

/// Turns schema JSON into [`Node`]s, interning patterns so each distinct one compiles once.
#[derive(Default)]
struct Builder {
    patterns: Vec<PatternSlot>,
    pattern_index: HashMap<String, usize>,
}

impl Builder {
    fn node(&mut self, v: &Value) -> Node {
        let Some(o) = v.as_object() else {
            return Node::default();
        };
        let flag = |k: &str| o.get(k).and_then(Value::as_bool).unwrap_or(false);
        let float = |k: &str| o.get(k).and_then(Value::as_f64);
        let int = |k: &str| o.get(k).and_then(|v| v.as_i64().or_else(|| v.as_f64().map(|f| f as i64)));
        let mut n = Node::default();
        match o.get("type") {
            Some(Value::String(t)) if !t.is_empty() => n.types = vec![t.clone()],
            Some(Value::Array(ts)) => n.types = ts.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            _ => {}
        }
        if flag("x-kubernetes-int-or-string") {
            n.types = vec!["integer".into(), "string".into()];
        }
        n.nullable = flag("nullable");
        n.format = supported_format(o.get("format").and_then(Value::as_str).unwrap_or(""), &n.types);
        n.enum_values = o.get("enum").and_then(Value::as_array).cloned();
        n.default = o.get("default").filter(|d| !d.is_null()).cloned();
        n.maximum = float("maximum");
        n.exclusive_maximum = flag("exclusiveMaximum");
        n.minimum = float("minimum");
        n.exclusive_minimum = flag("exclusiveMinimum");
        n.multiple_of = float("multipleOf");
        n.max_length = int("maxLength");
        n.min_length = int("minLength");
        n.max_items = int("maxItems");
        n.min_items = int("minItems");
        n.max_properties = int("maxProperties");
        n.min_properties = int("minProperties");
        if let Some(p) = o.get("pattern").and_then(Value::as_str).filter(|p| !p.is_empty()) {
            n.pattern = Some(self.intern(p));
        }
        n.required = strings(o.get("required"));
        if let Some(props) = o.get("properties").and_then(Value::as_object) {
            n.properties = props.iter().map(|(k, v)| (k.clone(), self.node(v))).collect();
        }
        n.additional = match o.get("additionalProperties") {
            Some(Value::Bool(b)) => Additional::Allows(*b),
            Some(s @ Value::Object(_)) => Additional::Schema(Box::new(self.node(s))),
            _ => Additional::Absent,
        };
        n.items = o.get("items").filter(|i| i.is_object()).map(|i| Box::new(self.node(i)));
        let mut list = |k: &str| -> Vec<Node> {
            o.get(k).and_then(Value::as_array).map(|a| a.iter().map(|s| self.node(s)).collect()).unwrap_or_default()
        };
        n.any_of = list("anyOf");
        n.all_of = list("allOf");
        n.one_of = list("oneOf");
        n.not = o.get("not").filter(|v| v.is_object()).map(|v| Box::new(self.node(v)));
        n.preserve_unknown = flag("x-kubernetes-preserve-unknown-fields");
        n.embedded = flag("x-kubernetes-embedded-resource");
        n.list = match o.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListType::Set,
            Some("map") => ListType::Map(strings(o.get("x-kubernetes-list-map-keys"))),
            _ => ListType::Other,
        };
        n
    }

    fn intern(&mut self, pattern: &str) -> usize {
        if let Some(&i) = self.pattern_index.get(pattern) {
            return i;
        }
        let i = self.patterns.len();
        self.patterns.push(PatternSlot { source: pattern.to_string(), compiled: OnceLock::new() });
        self.pattern_index.insert(pattern.to_string(), i);
        i
    }
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

/// The format apiserver keeps after `StripUnsupportedFormatsPostProcess`: unknown formats are
/// ignored rather than enforced, so only these ever reach validation.
fn supported_format(format: &str, types: &[String]) -> String {
    let schema_type = match types {
        [only] => only.as_str(),
        _ => "",
    };
    let keep = match schema_type {
        "" | "string" => STRING_FORMATS.contains(&format.replace('-', "").as_str()),
        "integer" => format == "int32" || format == "int64",
        "number" => format == "float" || format == "double",
        _ => false,
    };
    if keep { format.to_string() } else { String::new() }
}

// ---------------------------------------------------------------------------------------------
// Decoding: pruning, nulls, embedded metadata, defaults.

const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Appends a field or map key to a pruning path (`a.b`), as the server's prune options do.
fn push_name(buf: &mut String, name: &str) {
    if !buf.is_empty() {
        buf.push('.');
    }
    buf.push_str(name);
}

fn push_index(buf: &mut String, i: usize) {
    let _ = write!(buf, "[{i}]");
}

/// Removes fields the schema does not know, recording their paths (apiserver's `prune`). The
/// apiVersion/kind/metadata of the resource `root` and of `x-kubernetes-embedded-resource` nodes
/// are left alone (embedded metadata is handled by [`coerce`]).
fn prune(x: &mut Value, s: Option<&Node>, root: bool, path: &mut String, out: &mut Vec<String>) {
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
fn skip_prune(x: &mut Value, s: &Node, root: bool, path: &mut String, out: &mut Vec<String>) {
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

fn record(path: &str, key: &str, out: &mut Vec<String>) {
    let mut p = path.to_string();
    push_name(&mut p, key);
    out.push(p);
}

/// The schema of an object's field: a property, else the map-value schema.
fn field_schema<'n>(s: Option<&'n Node>, key: &str) -> Option<&'n Node> {
    let s = s?;
    s.properties.get(key).or(match &s.additional {
        Additional::Schema(n) => Some(n),
        _ => None,
    })
}

/// Drops object fields that are `null` where the schema is not nullable and has no default
/// (apiserver's `PruneNonNullableNullsWithoutDefaults`); nulls with a default are defaulted later.
fn drop_nulls(x: &mut Value, s: Option<&Node>) {
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
fn apply_defaults(x: &mut Value, s: Option<&Node>) {
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

fn default_null(v: &mut Value, s: Option<&Node>) {
    if let Some(d) = s.filter(|s| v.is_null() && !s.nullable).and_then(|s| s.default.as_ref()) {
        *v = d.clone();
    }
}

/// Appends a property to a `field.Path`-style path (`a.b`).
fn push_field(buf: &mut String, name: &str) {
    push_name(buf, name);
}

/// Appends a map key to a `field.Path`-style path (`a[b]`).
fn push_key(buf: &mut String, key: &str) {
    buf.push('[');
    buf.push_str(key);
    buf.push(']');
}

/// Coerces embedded resources (apiserver's `objectmeta.Coerce` with invalid fields dropped):
/// non-string apiVersion/kind are removed and metadata is round-tripped through ObjectMeta,
/// recording unknown metadata fields.
fn coerce(x: &mut Value, s: &Node, path: &mut String, unknown: &mut Vec<String>) {
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

fn coerce_embedded(map: &mut Map<String, Value>, path: &str, unknown: &mut Vec<String>) {
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
enum MetaKind {
    Str,
    Int,
    Time,
    StrMap,
    StrList,
    ObjList(&'static str),
}

fn object_meta_field(name: &str) -> Option<MetaKind> {
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
enum MetaError {
    /// A JSON value of the wrong kind (`go_kind`) for a Go type.
    Type { found: &'static str, go_type: String },
    /// A timestamp that is not RFC 3339.
    Time(String),
}

impl MetaError {
    /// The message of Go's decoder for this field of ObjectMeta.
    fn message(&self, field: &str) -> String {
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
    fn normalize(self, v: &Value) -> Result<Option<Value>, MetaError> {
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
fn object_meta_error(v: &Value) -> Option<String> {
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

/// One step of a field path; rendered differently by kube-openapi and by `field.Path`.
#[derive(Clone, Copy)]
enum Seg<'a> {
    Field(&'a str),
    Key(&'a str),
    Index(usize),
}

/// kube-openapi's path: names and map keys joined with dots, indices in brackets.
fn dotted(path: &[Seg<'_>]) -> String {
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(n) | Seg::Key(n) => push_name(&mut s, n),
            Seg::Index(i) => push_index(&mut s, *i),
        }
    }
    s
}

/// `field.Path`'s rendering: fields dotted, map keys and indices in brackets, `<nil>` for none.
fn field_path(path: &[Seg<'_>]) -> String {
    if path.is_empty() {
        return "<nil>".into();
    }
    let mut s = String::new();
    for seg in path {
        match seg {
            Seg::Field(n) => push_field(&mut s, n),
            Seg::Key(k) => push_key(&mut s, k),
            Seg::Index(i) => push_index(&mut s, *i),
        }
    }
    s
}

/// The field and the name used in messages of a kube-openapi error at `path`; the server turns
/// an empty path into a nil `field.Path`, printed `<nil>`.
fn at(path: &[Seg<'_>]) -> (String, String) {
    let name = dotted(path);
    let field = if name.is_empty() { "<nil>".to_string() } else { name.clone() };
    (field, name)
}

/// A JSON number as Go holds it after decoding: int64 when it is written as an integer that
/// fits, float64 otherwise.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num(n: &Number) -> Num {
    match n.as_i64() {
        Some(i) => Num::Int(i),
        None => Num::Float(n.as_f64().unwrap_or(f64::NAN)),
    }
}

impl CrdSchema {
    /// kube-openapi's `SchemaValidator.Validate` for one node: type, anyOf/allOf/oneOf/not,
    /// string, format, number, array, enum and object checks, in that order.
    fn check<'a>(&'a self, node: &'a Node, value: &'a Value, path: &mut Vec<Seg<'a>>, out: &mut Vec<FieldError>) {
        if let Some(e) = type_error(node, value, path) {
            out.push(e);
        }
        if value.is_null() {
            check_enum(node, value, path, out);
            return;
        }
        self.check_combinators(node, value, path, out);
        if let Value::String(s) = value {
            self.check_string(node, s, path, out);
            check_format(node, s, path, out);
        }
        if let Value::Number(n) = value {
            check_number(node, num(n), path, out);
        }
        if let Value::Array(items) = value {
            self.check_array(node, items, path, out);
        }
        check_enum(node, value, path, out);
        if let Value::Object(map) = value {
            self.check_object(node, map, path, out);
        }
    }

    /// anyOf/oneOf/allOf/not. A composite failure is reported as the server does, at the nil
    /// path (`<nil>`), followed by one failing branch's errors; kube-openapi picks the branch with
    /// the most passed checks, this picks the first failing one (the same for int-or-string).
    fn check_combinators<'a>(
        &'a self,
        node: &'a Node,
        value: &'a Value,
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        let composite = |path: &[Seg<'_>], what: &str| {
            FieldError::invalid("<nil>", "\"\"", format!("{} {what}", quoted(&dotted(path))))
        };
        if !node.any_of.is_empty() {
            let mut first_failure = None;
            let mut ok = false;
            for branch in &node.any_of {
                let mut errs = Vec::new();
                self.check(branch, value, path, &mut errs);
                if errs.is_empty() {
                    ok = true;
                    break;
                }
                first_failure.get_or_insert(errs);
            }
            if !ok {
                out.push(composite(path, "must validate at least one schema (anyOf)"));
                out.extend(first_failure.unwrap_or_default());
            }
        }
        if !node.one_of.is_empty() {
            let mut valid = 0;
            let mut first_failure = None;
            for branch in &node.one_of {
                let mut errs = Vec::new();
                self.check(branch, value, path, &mut errs);
                if errs.is_empty() {
                    valid += 1;
                    first_failure = None;
                } else if valid == 0 {
                    first_failure.get_or_insert(errs);
                }
            }
            if valid != 1 {
                let found = if valid == 0 {
                    "Found none valid".to_string()
                } else {
                    format!("Found {valid} valid alternatives")
                };
                out.push(composite(path, &format!("must validate one and only one schema (oneOf). {found}")));
                out.extend(first_failure.unwrap_or_default());
            }
        }
        if !node.all_of.is_empty() {
            let mut valid = 0;
            for branch in &node.all_of {
                let mut errs = Vec::new();
                self.check(branch, value, path, &mut errs);
                if errs.is_empty() {
                    valid += 1;
                }
                out.extend(errs);
            }
            if valid != node.all_of.len() {
                let none = if valid == 0 { ". None validated" } else { "" };
                out.push(composite(path, &format!("must validate all the schemas (allOf){none}")));
            }
        }
        if let Some(not) = &node.not {
            let mut errs = Vec::new();
            self.check(not, value, path, &mut errs);
            if errs.is_empty() {
                out.push(composite(path, "must not validate the schema (not)"));
            }
        }
    }

    /// maxLength, then minLength, then pattern; the first failure ends the checks, as in
    /// kube-openapi. Lengths count Unicode characters.
    fn check_string(&self, node: &Node, s: &str, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
        if node.max_length.is_some() || node.min_length.is_some() {
            let len = i64::try_from(s.chars().count()).unwrap_or(i64::MAX);
            if let Some(max) = node.max_length.filter(|&max| len > max) {
                out.push(FieldError::too_long(at(path).0, usize::try_from(max).unwrap_or(0)));
                return;
            }
            if let Some(min) = node.min_length.filter(|&min| len < min) {
                let (field, name) = at(path);
                out.push(FieldError::invalid(
                    field,
                    quoted(s),
                    format!("{name} in body should be at least {min} chars long"),
                ));
                return;
            }
        }
        let Some(slot) = node.pattern else {
            return;
        };
        if let Some(re) = self.regex(slot).filter(|re| !re.is_match(s)) {
            let (field, name) = at(path);
            let source = self.patterns.get(slot).map_or(re.as_str(), |p| p.source.as_str());
            out.push(FieldError::invalid(field, quoted(s), format!("{name} in body should match '{source}'")));
        }
    }

    fn check_array<'a>(
        &'a self,
        node: &'a Node,
        items: &'a [Value],
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        if let Some(item_schema) = &node.items {
            for (i, v) in items.iter().enumerate() {
                path.push(Seg::Index(i));
                self.check(item_schema, v, path, out);
                path.pop();
            }
        }
        let size = i64::try_from(items.len()).unwrap_or(i64::MAX);
        if let Some(min) = node.min_items.filter(|&min| size < min) {
            let (field, name) = at(path);
            out.push(FieldError::invalid(
                field,
                size.to_string(),
                format!("{name} in body should have at least {min} items"),
            ));
        }
        if let Some(max) = node.max_items.filter(|&max| size > max) {
            out.push(FieldError::too_many(at(path).0, usize::try_from(max).unwrap_or(0)));
        }
    }

    /// min/maxProperties (which end the object's checks when they fail, as in kube-openapi),
    /// then each field, then `required`. The root `metadata` is left to the server.
    fn check_object<'a>(
        &'a self,
        node: &'a Node,
        map: &'a Map<String, Value>,
        path: &mut Vec<Seg<'a>>,
        out: &mut Vec<FieldError>,
    ) {
        let count = i64::try_from(map.len()).unwrap_or(i64::MAX);
        if let Some(min) = node.min_properties.filter(|&min| count < min) {
            let (field, name) = at(path);
            let detail = format!("{name} in body should have at least {min} properties");
            out.push(FieldError::invalid(field, count.to_string(), detail));
            return;
        }
        if let Some(max) = node.max_properties.filter(|&max| count > max) {
            out.push(FieldError::too_many(at(path).0, usize::try_from(max).unwrap_or(0)));
            return;
        }
        if matches!(node.additional, Additional::Allows(false)) {
            for k in map.keys().filter(|k| !node.properties.contains_key(*k)) {
                let (field, name) = at(path);
                out.push(FieldError::invalid(field, quoted(k), format!("{name}.{k} in body is a forbidden property")));
            }
        }
        let at_root = path.is_empty();
        for (k, v) in map {
            if at_root && k == "metadata" {
                continue;
            }
            if let Some(prop) = node.properties.get(k) {
                path.push(Seg::Field(k));
                self.check(prop, v, path, out);
                path.pop();
            } else if let Additional::Schema(addl) = &node.additional {
                path.push(Seg::Key(k));
                self.check(addl, v, path, out);
                path.pop();
            }
        }
        for r in node.required.iter().filter(|r| !map.contains_key(*r)) {
            path.push(Seg::Field(r));
            out.push(FieldError::required(dotted(path), ""));
            path.pop();
        }
    }

    /// The checks apiserver runs after schema validation, both following only the structural
    /// schema: embedded resources (`objectmeta.Validate`) and list-type uniqueness
    /// (`listtype.ValidateListSetsAndMaps`), with `field.Path` paths.
    fn check_structural<'a>(
        &'a self,
        node: &'a Node,
        value: &'a Value,
        path: &mut Vec<Seg<'a>>,
        embedded: &mut Vec<FieldError>,
        lists: &mut Vec<FieldError>,
    ) {
        match value {
            Value::Object(map) => {
                if node.embedded {
                    check_embedded(map, path, embedded);
                }
                let at_root = path.is_empty();
                for (k, v) in map {
                    if at_root && k == "metadata" {
                        continue;
                    }
                    if let Some(prop) = node.properties.get(k) {
                        path.push(Seg::Field(k));
                        self.check_structural(prop, v, path, embedded, lists);
                        path.pop();
                    } else if let Additional::Schema(addl) = &node.additional {
                        path.push(Seg::Key(k));
                        self.check_structural(addl, v, path, embedded, lists);
                        path.pop();
                    }
                }
            }
            Value::Array(items) => {
                match &node.list {
                    ListType::Set => check_list_set(items, path, lists),
                    ListType::Map(keys) => check_list_map(keys, items, path, lists),
                    ListType::Other => {}
                }
                if let Some(item_schema) = &node.items {
                    for (i, v) in items.iter().enumerate() {
                        path.push(Seg::Index(i));
                        self.check_structural(item_schema, v, path, embedded, lists);
                        path.pop();
                    }
                }
            }
            _ => {}
        }
    }
}

/// kube-openapi's type validator, including its treatment of formats on non-string values
/// (a float in an `int32` field is "must be of type int32: \"float64\"") and its value, which is
/// the JSON type it found rather than the value itself.
fn type_error(node: &Node, value: &Value, path: &[Seg<'_>]) -> Option<FieldError> {
    if node.types.is_empty() && node.format.is_empty() {
        return None;
    }
    let has = |t: &str| node.types.iter().any(|x| x == t);
    let fail = |actual: &str, expected: &str| Some(FieldError::type_invalid(at(path).0, quoted(actual), expected));
    let (found, found_format) = match value {
        Value::Null => {
            if !node.types.is_empty() && !has("null") && !node.nullable {
                return fail("null", &node.types.join(","));
            }
            return None;
        }
        Value::Bool(_) => ("boolean", ""),
        Value::String(_) => ("string", ""),
        Value::Number(n) => match num(n) {
            Num::Int(_) => ("integer", "int64"),
            Num::Float(_) => ("number", "float64"),
        },
        Value::Array(_) => ("array", ""),
        Value::Object(_) => ("object", ""),
    };
    let float_int =
        matches!(value, Value::Number(n) if matches!(num(n), Num::Float(f) if is_json_integer(f))) && has("integer");
    let int_float = found == "integer" && has("number");
    let string_or_array = matches!(value, Value::String(_) | Value::Array(_));
    let has_format = !node.format.is_empty();
    let type_or_format_matches = has(found) || found_format == node.format || float_int || int_float;
    if has_format && !string_or_array && !type_or_format_matches {
        return fail(found_format, &node.format);
    }
    let numeric = has("number") || has("integer");
    if has_format && string_or_array && !numeric {
        return None;
    }
    if !(has(found) || float_int || int_float) {
        return fail(found, &node.types.join(","));
    }
    None
}

/// go-openapi's `swag.IsFloat64AJSONInteger`: integral (or within 1e-9 relative of it, for
/// positive values) and within ±(2^53-1).
fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_INT: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || !(-MAX_JSON_INT..=MAX_JSON_INT).contains(&f) {
        return false;
    }
    if f == f.trunc() {
        return true;
    }
    let g = f.trunc();
    if f < 0.0 || g == 0.0 {
        return false;
    }
    (f - g).abs() / (f.abs() + g.abs()) < 1e-9
}

/// The string formats that are checked; the other formats apiserver keeps are accepted as is.
fn format_ok(format: &str, s: &str) -> bool {
    match format.replace('-', "").as_str() {
        "datetime" => is_date_time(s),
        "date" => is_date(s),
        "byte" => is_base64(s),
        "uuid" => is_uuid(s, None),
        "uuid3" => is_uuid(s, Some('3')),
        "uuid4" => is_uuid(s, Some('4')),
        "uuid5" => is_uuid(s, Some('5')),
        "ipv4" => s.parse::<IpAddr>().is_ok() && s.contains('.'),
        "ipv6" => s.parse::<IpAddr>().is_ok() && s.contains(':'),
        "cidr" => is_cidr(s),
        "k8sshortname" => names::dns1123_label(s).is_empty(),
        "k8slongname" => names::dns1123_subdomain(s).is_empty(),
        _ => true,
    }
}

/// A bad format is reported as `FieldError::invalid` whose message reads exactly like the
/// server's (`... in body must be of type date-time: "tomorrow"`).
fn check_format(node: &Node, s: &str, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
    if node.format.is_empty() || format_ok(&node.format, s) {
        return;
    }
    let (field, name) = at(path);
    out.push(FieldError::invalid(
        field,
        quoted(s),
        format!("{name} in body must be of type {}: {}", node.format, quoted(s)),
    ));
}

/// multipleOf, minimum, maximum. Integers are compared with integer bounds (truncated, as Go's
/// `int64(bound)`), floats with float bounds.
fn check_number(node: &Node, n: Num, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
    let value = || match n {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => go_float(f),
    };
    if let Some(factor) = node.multiple_of {
        let (positive, multiple, shown) = match n {
            Num::Int(i) => {
                let f = factor as i64;
                (f > 0, f > 0 && i % f == 0, f.to_string())
            }
            Num::Float(x) => {
                let mult = if factor < 1.0 { 1.0 / factor * x } else { x / factor };
                (factor > 0.0, is_json_integer(mult), go_float(factor))
            }
        };
        let (field, name) = at(path);
        if !positive {
            let detail = format!("factor MultipleOf declared for {name} must be positive: {shown}");
            out.push(FieldError::invalid(field, shown, detail));
        } else if !multiple {
            out.push(FieldError::invalid(field, value(), format!("{name} in body should be a multiple of {shown}")));
        }
    }
    let against = |bound: f64| match n {
        Num::Int(i) => ((bound as i64).to_string(), Some(i.cmp(&(bound as i64)))),
        Num::Float(x) => (go_float(bound), x.partial_cmp(&bound)),
    };
    let mut bound_error = |shown: String, relation: &str| {
        let (field, name) = at(path);
        out.push(FieldError::invalid(field, value(), format!("{name} in body should be {relation} {shown}")));
    };
    if let Some(min) = node.minimum {
        let (shown, ord) = against(min);
        if node.exclusive_minimum && matches!(ord, Some(Ordering::Less | Ordering::Equal)) {
            bound_error(shown, "greater than");
        } else if !node.exclusive_minimum && ord == Some(Ordering::Less) {
            bound_error(shown, "greater than or equal to");
        }
    }
    if let Some(max) = node.maximum {
        let (shown, ord) = against(max);
        if node.exclusive_maximum && matches!(ord, Some(Ordering::Greater | Ordering::Equal)) {
            bound_error(shown, "less than");
        } else if !node.exclusive_maximum && ord == Some(Ordering::Greater) {
            bound_error(shown, "less than or equal to");
        }
    }
}

/// `enum`, compared as Go does after converting the value to the enum entry's type.
fn check_enum(node: &Node, value: &Value, path: &[Seg<'_>], out: &mut Vec<FieldError>) {
    let Some(allowed) = node.enum_values.as_ref().filter(|e| !e.is_empty()) else {
        return;
    };
    if allowed.iter().any(|e| enum_matches(value, e)) {
        return;
    }
    let shown: Vec<String> =
        allowed.iter().map(|a| if let Value::String(s) = a { s.clone() } else { go_json(a) }).collect();
    let shown: Vec<&str> = shown.iter().map(String::as_str).collect();
    out.push(FieldError::not_supported(at(path).0, go_value(value), &shown));
}

fn enum_matches(value: &Value, allowed: &Value) -> bool {
    match (value, allowed) {
        (Value::Number(v), Value::Number(a)) => match (num(v), num(a)) {
            (Num::Int(v), Num::Int(a)) => v == a,
            (Num::Float(v), Num::Int(a)) => v as i64 == a,
            (Num::Int(v), Num::Float(a)) => v as f64 == a,
            (Num::Float(v), Num::Float(a)) => v == a,
        },
        (Value::Null, _) | (_, Value::Null) => false,
        _ => value == allowed,
    }
}

/// apiserver's checks of an embedded resource: apiVersion and kind required and well formed,
/// metadata decodable as ObjectMeta. ObjectMeta's own rules (name, labels, ...) are not run.
fn check_embedded(map: &Map<String, Value>, path: &mut Vec<Seg<'_>>, out: &mut Vec<FieldError>) {
    let child = |path: &mut Vec<Seg<'_>>, name: &'static str| {
        path.push(Seg::Field(name));
        let p = field_path(path);
        path.pop();
        p
    };
    for k in ["apiVersion", "kind"] {
        if !map.contains_key(k) {
            out.push(FieldError::required(child(path, k), ""));
        }
    }
    match map.get("apiVersion") {
        Some(Value::String(v)) if v.is_empty() => out.push(FieldError::required(child(path, "apiVersion"), "")),
        Some(Value::String(v)) if v != "/" && v.matches('/').count() > 1 => out.push(FieldError::invalid(
            child(path, "apiVersion"),
            quoted(v),
            format!("unexpected GroupVersion string: {v}"),
        )),
        Some(Value::String(_)) | None => {}
        Some(v) => out.push(FieldError::invalid(child(path, "apiVersion"), go_value(v), "must be a string")),
    }
    match map.get("kind") {
        Some(Value::String(k)) if k.is_empty() => out.push(FieldError::required(child(path, "kind"), "")),
        Some(Value::String(k)) => {
            let errs = names::dns1035_label(&k.to_lowercase());
            if !errs.is_empty() {
                out.push(FieldError::invalid(
                    child(path, "kind"),
                    quoted(k),
                    format!("may have mixed case, but should otherwise match: {}", errs.join(",")),
                ));
            }
        }
        None => {}
        Some(v) => out.push(FieldError::invalid(child(path, "kind"), go_value(v), "must be a string")),
    }
    if let Some(err) = map.get("metadata").and_then(object_meta_error) {
        let v = map.get("metadata").map(go_value).unwrap_or_default();
        out.push(FieldError::invalid(child(path, "metadata"), v, err));
    }
}

/// The key under which a list item is compared for uniqueness: scalars by Go type and value,
/// compound values by their JSON (as the server does).
fn set_key(v: &Value) -> String {
    match v {
        Value::Null => "n".into(),
        Value::Bool(b) => format!("b{b}"),
        Value::Number(n) => match num(n) {
            Num::Int(i) => format!("i{i}"),
            Num::Float(f) => format!("f{f}"),
        },
        Value::String(s) => format!("s{s}"),
        Value::Array(_) | Value::Object(_) => format!("j{}", go_json(v)),
    }
}

/// The indices of second occurrences (later repeats are not reported again), as the server's
/// `validateListSet` returns them.
fn second_occurrences(keys: &[String]) -> Vec<usize> {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    let mut out = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let times = seen.entry(k).or_insert(0);
        *times += 1;
        if *times == 2 {
            out.push(i);
        }
    }
    out
}

fn check_list_set(items: &[Value], path: &mut Vec<Seg<'_>>, out: &mut Vec<FieldError>) {
    let keys: Vec<String> = items.iter().map(set_key).collect();
    for (i, item) in second_occurrences(&keys).into_iter().filter_map(|i| Some((i, items.get(i)?))) {
        path.push(Seg::Index(i));
        out.push(FieldError::duplicate(field_path(path), go_value(item)));
        path.pop();
    }
}

fn check_list_map(key_fields: &[String], items: &[Value], path: &mut Vec<Seg<'_>>, out: &mut Vec<FieldError>) {
    if let Some((i, bad)) = items.iter().enumerate().find(|(_, x)| !x.is_object() && !x.is_null()) {
        path.push(Seg::Index(i));
        out.push(FieldError::invalid(
            field_path(path),
            go_value(bad),
            "must be an object for an array of list-type map",
        ));
        path.pop();
        return;
    }
    if items.len() <= 1 {
        return;
    }
    let key_maps: Vec<Map<String, Value>> = items
        .iter()
        .map(|x| {
            let mut key = Map::new();
            for f in key_fields {
                if let Some(v) = x.get(f) {
                    key.insert(f.clone(), v.clone());
                }
            }
            key
        })
        .collect();
    let keys: Vec<String> = if let [single] = key_fields {
        key_maps.iter().map(|m| m.get(single).map(set_key).unwrap_or_else(|| "u".into())).collect()
    } else {
        key_maps.iter().map(|m| format!("j{}", go_json(&Value::Object(m.clone())))).collect()
    };
    for (i, key) in second_occurrences(&keys).into_iter().filter_map(|i| Some((i, key_maps.get(i)?))) {
        path.push(Seg::Index(i));
        out.push(FieldError::duplicate(field_path(path), go_sharp(&Value::Object(key.clone()))));
        path.pop();
    }
}

// ---------------------------------------------------------------------------------------------
// Formats and names.

/// go-openapi's `IsDateTime`: a valid calendar date, a `t`, then `hh:mm:ss[.frac](z|±hh:mm)`
/// with hour <= 23 and minute, second <= 59 (case-insensitive; leap seconds rejected).
fn is_date_time(s: &str) -> bool {
    static TIME: OnceLock<Option<Regex>> = OnceLock::new();
    if s.len() < 4 {
        return false;
    }
    let lower = s.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(time)) = (parts.next(), parts.next()) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let re = TIME
        .get_or_init(|| Regex::new(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$").ok());
    let Some(c) = re.as_ref().and_then(|re| re.captures(time)) else {
        return false;
    };
    let part = |i: usize| c.get(i).map_or("", |m| m.as_str());
    part(1) <= "23" && part(2) <= "59" && part(3) <= "59"
}

/// Go's `time.Parse("2006-01-02", s)`: four-digit year, two-digit month and day, a real date.
fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r.clone()).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' || !digits(0..4) || !digits(5..7) || !digits(8..10) {
        return false;
    }
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|d| d.parse::<i16>().ok());
    match (n(0..4), n(5..7), n(8..10)) {
        (Some(y), Some(m), Some(d)) => jiff::civil::Date::new(y, m as i8, d as i8).is_ok(),
        _ => false,
    }
}

/// Go's `base64.StdEncoding.DecodeString` acceptance (newlines ignored, padding required).
fn is_base64(s: &str) -> bool {
    let b: Vec<u8> = s.bytes().filter(|c| *c != b'\r' && *c != b'\n').collect();
    if !b.len().is_multiple_of(4) {
        return false;
    }
    let pad = b.iter().rev().take_while(|c| **c == b'=').count();
    pad <= 2 && b[..b.len() - pad].iter().all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
}

/// The go-openapi UUID regexes: 8-4-4-4-12 hex digits with optional dashes, a version digit
/// and (for versions 4 and 5) the RFC 4122 variant.
fn is_uuid(s: &str, version: Option<char>) -> bool {
    let mut groups: Vec<String> = Vec::new();
    let mut chars = s.chars().peekable();
    for (i, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
        if i > 0 && chars.peek() == Some(&'-') {
            chars.next();
        }
        let g: String = chars.by_ref().take(len).collect();
        if g.len() != len || !g.chars().all(|c| c.is_ascii_hexdigit()) {
            return false;
        }
        groups.push(g);
    }
    if chars.next().is_some() {
        return false;
    }
    let first = |i: usize| groups.get(i).and_then(|g| g.chars().next()).map(|c| c.to_ascii_lowercase());
    match version {
        None => true,
        Some('3') => first(2) == Some('3'),
        Some(v) => first(2) == Some(v) && matches!(first(3), Some('8' | '9' | 'a' | 'b')),
    }
}

/// Go's `net.ParseCIDR`: an address, a slash, a decimal prefix within the address size.
fn is_cidr(s: &str) -> bool {
    let Some((addr, bits)) = s.split_once('/') else {
        return false;
    };
    let Ok(ip) = addr.parse::<IpAddr>() else {
        return false;
    };
    let max = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty() && bits.bytes().all(|c| c.is_ascii_digit()) && bits.parse::<u32>().is_ok_and(|b| b <= max)
}

/// Rewrites a Go (RE2) pattern for Rust's `regex`: Go's `\d`, `\w`, `\s`, `\b` are ASCII-only
/// where Rust's are Unicode, and Rust reads `[` and `&&`/`~~` inside classes as set syntax.
fn go_regex_to_rust(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    let mut chars = p.chars().peekable();
    let mut in_class = false;
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('d') => out.push_str("[0-9]"),
                Some('D') => out.push_str("[^0-9]"),
                Some('w') => out.push_str("[0-9A-Za-z_]"),
                Some('W') => out.push_str("[^0-9A-Za-z_]"),
                Some('s') => out.push_str(r"[\t\n\x0C\r ]"),
                Some('S') => out.push_str(r"[^\t\n\x0C\r ]"),
                Some('b') if !in_class => out.push_str(r"(?-u:\b)"),
                Some('B') if !in_class => out.push_str(r"(?-u:\B)"),
                Some(e) => {
                    out.push('\\');
                    out.push(e);
                }
                None => out.push('\\'),
            },
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push_str(r"\]");
                }
            }
            '[' if chars.peek() == Some(&':') => {
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            '[' | '&' | '~' if in_class => {
                out.push('\\');
                out.push(c);
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            _ => out.push(c),
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Printing values the way the Go server does.

/// A bad value as `field.Error` prints it: strings quoted, numbers and booleans bare, `null`
/// for nil, and Go's `%#v` for maps and slices.
fn go_value(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => go_float(f),
        },
        Value::String(s) => quoted(s),
        Value::Array(_) | Value::Object(_) => go_sharp(v),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`), keys sorted as fmt does.
fn go_sharp(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".into(),
        Value::Array(a) => {
            let items: Vec<String> = a.iter().map(go_sharp).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> = entries.iter().map(|(k, v)| format!("{}:{}", quoted(k), go_sharp(v))).collect();
            format!("map[string]interface {{}}{{{}}}", items.join(", "))
        }
        _ => go_value(v),
    }
}

/// Go's `%v` of a float64: shortest digits, exponent form below 1e-4 and from 1e6 (`1e+06`).
fn go_float(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0".into() } else { "0".into() };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..6).contains(&exp) {
        return format!("{f}");
    }
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// Go's `json.Marshal` of a decoded JSON value: sorted keys, integers bare, floats in `%f` form
/// between 1e-6 and 1e21 and `1e+21`/`1e-7` outside.
fn go_json(v: &Value) -> String {
    match v {
        Value::Number(n) => match num(n) {
            Num::Int(i) => i.to_string(),
            Num::Float(f) => {
                let abs = f.abs();
                if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
                    let sci = format!("{f:e}");
                    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
                    let exp: i32 = exp.parse().unwrap_or(0);
                    let sign = if exp < 0 { '-' } else { '+' };
                    format!("{mantissa}e{sign}{}", exp.abs())
                } else {
                    format!("{f}")
                }
            }
        },
        Value::Array(a) => format!("[{}]", a.iter().map(go_json).collect::<Vec<_>>().join(",")),
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let items: Vec<String> =
                entries.iter().map(|(k, v)| format!("{}:{}", Value::String((*k).clone()), go_json(v))).collect();
            format!("{{{}}}", items.join(","))
        }
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::field_error::FieldErrorKind;

    const QUANTITY: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

    /// A container of the hand-written Sandbox schema (split out to keep `json!` shallow).
    fn container_schema() -> Value {
        json!({
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "image": {"type": "string"},
                "ports": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["containerPort", "protocol"],
                    "items": {"type": "object", "required": ["containerPort"], "properties": {
                        "containerPort": {"type": "integer", "format": "int32"},
                        "protocol": {"type": "string", "default": "TCP"}
                    }}
                },
                "resources": {"type": "object", "properties": {
                    "limits": {"type": "object", "additionalProperties": {
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                        "pattern": QUANTITY,
                        "x-kubernetes-int-or-string": true
                    }}
                }}
            }
        })
    }

    /// A hand-written cut of the Sandbox schema, with the same shapes as the real one.
    fn sandbox_schema() -> CrdSchema {
        CrdSchema::new(json!({
            "type": "object",
            "required": ["spec"],
            "properties": {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object",
                    "required": ["podTemplate"],
                    "properties": {
                        "operatingMode": {"type": "string", "default": "Running", "enum": ["Running", "Suspended"]},
                        "shutdownPolicy": {"type": "string", "default": "Retain", "enum": ["Delete", "Retain"]},
                        "shutdownTime": {"type": "string", "format": "date-time"},
                        "replicas": {"type": "integer", "format": "int32", "minimum": 0, "maximum": 1, "default": 1},
                        "service": {"type": "boolean"},
                        "podTemplate": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {
                                "metadata": {"type": "object", "properties": {
                                    "labels": {"type": "object", "additionalProperties": {"type": "string"}}
                                }},
                                "spec": {
                                    "type": "object",
                                    "required": ["containers"],
                                    "properties": {
                                        "containers": {
                                            "type": "array",
                                            "x-kubernetes-list-type": "map",
                                            "x-kubernetes-list-map-keys": ["name"],
                                            "items": container_schema()
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }))
    }

    fn sandbox(spec: Value) -> Value {
        json!({"apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "metadata": {"name": "s"}, "spec": spec})
    }

    fn minimal_spec() -> Value {
        json!({"podTemplate": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}})
    }

    /// Decodes then validates, as the server does for a create.
    fn admit(schema: &CrdSchema, mut obj: Value) -> (Value, Vec<String>, Vec<FieldError>) {
        let pruned = schema.default_and_prune(&mut obj);
        let errs = schema.validate(&obj);
        (obj, pruned, errs)
    }

    /// A schema with one field `x` of the given schema, under an object root.
    fn one_field(x: Value) -> CrdSchema {
        CrdSchema::new(json!({"type": "object", "properties": {"x": x}}))
    }

    fn errors_for(x: Value, value: Value) -> Vec<FieldError> {
        one_field(x).validate(&json!({ "x": value }))
    }

    fn real_schema(yaml: &str) -> CrdSchema {
        let crd: Value = serde_yaml_ng::from_str(yaml).expect("the bundled CRD is valid YAML");
        let schema = crd.pointer("/spec/versions/0/schema/openAPIV3Schema").expect("the CRD has a schema").clone();
        CrdSchema::new(schema)
    }

    fn v1beta1() -> CrdSchema {
        real_schema(include_str!("../crds/sandboxes-v1beta1.yaml"))
    }

    fn v1alpha1() -> CrdSchema {
        real_schema(include_str!("../crds/sandboxes-v1alpha1.yaml"))
    }

    /// A Sandbox such as a user would write, touching the big parts of the pod template.
    fn realistic_sandbox() -> Value {
        json!({
            "apiVersion": "agents.x-k8s.io/v1beta1",
            "kind": "Sandbox",
            "metadata": {"name": "demo", "namespace": "default", "labels": {"app": "demo"}},
            "spec": {
                "podTemplate": {
                    "metadata": {"labels": {"app": "demo"}, "annotations": {"example.com/owner": "team-a"}},
                    "spec": {
                        "containers": [{
                            "name": "agent",
                            "image": "python:3.12",
                            "command": ["python", "-m", "http.server"],
                            "args": ["8080"],
                            "env": [
                                {"name": "MODE", "value": "dev"},
                                {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
                            ],
                            "ports": [{"containerPort": 8080, "name": "http"}],
                            "resources": {"limits": {"cpu": 1, "memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "256Mi"}},
                            "securityContext": {
                                "runAsNonRoot": true,
                                "runAsUser": 1000,
                                "allowPrivilegeEscalation": false,
                                "readOnlyRootFilesystem": true,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"}
                            },
                            "volumeMounts": [
                                {"name": "work", "mountPath": "/work"},
                                {"name": "config", "mountPath": "/etc/config", "readOnly": true}
                            ],
                            "readinessProbe": {"httpGet": {"path": "/", "port": 8080}, "periodSeconds": 5}
                        }],
                        "securityContext": {"fsGroup": 2000},
                        "restartPolicy": "Always",
                        "volumes": [
                            {"name": "work", "emptyDir": {"sizeLimit": "1Gi"}},
                            {"name": "config", "configMap": {"name": "demo-config", "items": [{"key": "a", "path": "a"}]}}
                        ]
                    }
                },
                "volumeClaimTemplates": [{
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
                }],
                "shutdownTime": "2030-01-01T00:00:00Z",
                "shutdownPolicy": "Delete"
            }
        })
    }

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
        let mut obj =
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "n", "x": 1}, "spec": {}, "other": 1});
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
        spec["podTemplate"]["spec"]["containers"][0]["ports"] =
            json!([{"containerPort": 80}, {"containerPort": "x"}, {}]);
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
        assert_eq!(
            errs,
            vec![FieldError::type_invalid("spec.podTemplate.metadata.labels.app", "\"integer\"", "string")]
        );

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
            vec![FieldError::invalid(
                "spec.replicas",
                "-1",
                "spec.replicas in body should be greater than or equal to 0"
            )]
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
    fn embedded_resources_need_apiversion_and_a_valid_kind() {
        let schema = one_field(json!({"type": "object", "x-kubernetes-embedded-resource": true,
            "x-kubernetes-preserve-unknown-fields": true}));
        assert_eq!(
            schema.validate(&json!({"x": {"metadata": {}}})),
            vec![FieldError::required("x.apiVersion", ""), FieldError::required("x.kind", "")]
        );
        let errs =
            schema.validate(&json!({"x": {"apiVersion": "a/b/c", "kind": "Bad_Kind", "metadata": {"labels": "x"}}}));
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
    fn decoding_twice_changes_nothing() {
        let schema = v1beta1();
        let mut obj = realistic_sandbox();
        obj["spec"]["junk"] = json!(1);
        assert_eq!(schema.default_and_prune(&mut obj), vec!["spec.junk"]);
        let once = obj.clone();
        assert!(schema.default_and_prune(&mut obj).is_empty());
        assert_eq!(obj, once);
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
}
