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

mod compile;
mod formats;
mod go_text;
mod lists;
mod prune;
mod validate;

use compile::*;
use formats::*;
use go_text::*;
use lists::*;
use prune::*;
use validate::*;

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

#[cfg(test)]
mod tests;
