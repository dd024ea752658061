//! Create and update validation of core objects, as kube-apiserver 1.33 does it.
//!
//! Field paths, reasons and messages follow `pkg/apis/core/validation` and
//! `pkg/apis/batch/validation`, quirks included (`metadata.taints` for Node taints,
//! `spec.resources[storage]` for PVCs, `spec.template.labels` for Job templates), because clients
//! and tests match on them. Validation first applies the scheme defaults to a copy, as the real
//! server validates decoded (defaulted) objects; callers need not default first.

use std::collections::{BTreeMap, HashSet};

use serde_json::{Map, Value};

use crate::defaults::{self, CONTROLLER_UID_LABEL, JOB_NAME_LABEL, LEGACY_CONTROLLER_UID_LABEL, LEGACY_JOB_NAME_LABEL};
use crate::field_error::{FieldError, FieldErrorKind, quoted};
use crate::json::{arr_at, bool_at, int_at, nonempty_str_at, obj_at, present, semantic_eq, str_at};
use crate::names;
use crate::quantity;

/// Which rule object names must follow; each kind picks one (see [`name_rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// `NameIsDNSSubdomain`: most kinds (pods, secrets, nodes, jobs, ...).
    Dns1123Subdomain,
    /// `NameIsDNSLabel`: namespaces, whose names appear inside DNS names.
    Dns1123Label,
    /// `NameIsDNS1035Label`: services, whose names become DNS labels starting with a letter.
    Dns1035Label,
    /// `ValidatePathSegmentName`: kinds without a DNS rule (custom resources by default).
    PathSegment,
}

impl NameRule {
    /// The messages for `name`; with `prefix` it is a generateName, which may end in '-'.
    fn check(self, name: &str, prefix: bool) -> Vec<String> {
        if self == NameRule::PathSegment {
            return names::path_segment_name(name, prefix);
        }
        let name = if prefix { names::mask_trailing_dash(name) } else { name.to_string() };
        match self {
            NameRule::Dns1123Label => names::dns1123_label(&name),
            NameRule::Dns1035Label => names::dns1035_label(&name),
            _ => names::dns1123_subdomain(&name),
        }
    }
}

/// The name rule of a kind, so callers validating metadata alone pick the one the server uses.
pub fn name_rule(kind: &str) -> NameRule {
    match kind {
        "Service" => NameRule::Dns1035Label,
        "Namespace" => NameRule::Dns1123Label,
        "Pod" | "Job" | "Secret" | "Node" | "PersistentVolumeClaim" | "Event" | "ConfigMap" | "ServiceAccount" => {
            NameRule::Dns1123Subdomain
        }
        _ => NameRule::PathSegment,
    }
}

/// Validates ObjectMeta of any object (name or generateName present; name format per `name_rule`; namespace presence for namespaced kinds is the server's job; labels keys/values; annotations keys and total size ≤ 256 KiB; finalizers must be qualified names; ownerReferences need apiVersion, kind, name, uid, and at most one controller=true).
///
/// `meta` is the `metadata` value itself; paths are reported under `metadata.`. A name that is
/// absent while `generateName` is set is accepted: the server generates it before storing.
pub fn validate_object_meta(meta: &Value, name_rule: NameRule) -> Vec<FieldError> {
    let mut errs = Vec::new();
    object_meta(meta, name_rule, &mut errs);
    errs
}

/// Kind-specific create validation (metadata included). kind is "Pod" | "Job" | "Secret" | "Service" | "Namespace" | "Node" | "PersistentVolumeClaim" | "Event" | "ConfigMap".
///
/// Other kinds get metadata validation only. Jobs are expected to carry `metadata.uid` and the
/// generated selector (see `defaults::apply_create_defaults`), as the real server validates them
/// after generating both.
pub fn validate_create(kind: &str, obj: &Value) -> Vec<FieldError> {
    let mut obj = obj.clone();
    defaults::apply_scheme_defaults(kind, &mut obj);
    let mut errs = Vec::new();
    validate_kind(kind, &obj, Mode::Create, &mut errs);
    errs
}

/// Update validation: create rules plus immutability (obj vs old).
///
/// `obj` gets `defaults::apply_update_defaults` against `old` first (idempotent), so a PUT body
/// that omits server-set fields (allocated IPs, default tolerations, status) is judged as the
/// real server judges it.
pub fn validate_update(kind: &str, obj: &Value, old: &Value) -> Vec<FieldError> {
    let mut new = obj.clone();
    defaults::apply_update_defaults(kind, &mut new, old);
    let mut old = old.clone();
    defaults::apply_scheme_defaults(kind, &mut old);
    let mut errs = Vec::new();
    object_meta_update(&new, &old, &mut errs);
    let require_prefixed =
        old.pointer("/spec/template/metadata/labels").and_then(|l| l.get(CONTROLLER_UID_LABEL)).is_some();
    validate_kind(kind, &new, Mode::Update { require_prefixed_job_labels: require_prefixed }, &mut errs);
    match kind {
        "Pod" => pod_update(&new, &old, &mut errs),
        "Job" => job_update(&new, &old, &mut errs),
        "Secret" => secret_update(&new, &old, &mut errs),
        "ConfigMap" => configmap_update(&new, &old, &mut errs),
        "Service" => service_update(&new, &old, &mut errs),
        "PersistentVolumeClaim" => pvc_update(&new, &old, &mut errs),
        "Node" => node_update(&new, &old, &mut errs),
        _ => {}
    }
    errs
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Create,
    Update { require_prefixed_job_labels: bool },
}

fn validate_kind(kind: &str, obj: &Value, mode: Mode, errs: &mut Vec<FieldError>) {
    if !obj.is_object() {
        errs.push(type_error(String::new(), obj, "object"));
        return;
    }
    match kind {
        "Pod" => validate_pod(obj, mode, errs),
        "Job" => {
            let prefixed = match mode {
                Mode::Create => true,
                Mode::Update { require_prefixed_job_labels } => require_prefixed_job_labels,
            };
            validate_job(obj, prefixed, errs);
        }
        "Secret" => validate_secret(obj, errs),
        "ConfigMap" => validate_configmap(obj, errs),
        "Service" => validate_service(obj, errs),
        "Namespace" => validate_namespace(obj, errs),
        "Node" => validate_node(obj, errs),
        "PersistentVolumeClaim" => validate_pvc(obj, errs),
        "Event" => validate_event(obj, errs),
        _ => object_meta(obj.get("metadata").unwrap_or(&Value::Null), name_rule(kind), errs),
    }
}

const IMMUTABLE: &str = "field is immutable";
const IMMUTABLE_WHEN_SET: &str = "field is immutable when `immutable` is set";
const NON_NEGATIVE: &str = "must be greater than or equal to 0";
const MAX_INT32: i64 = i32::MAX as i64;
/// `TotalAnnotationSizeLimitB`.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;
/// `core.MaxSecretSize`, shared by Secrets and ConfigMaps.
const MAX_DATA_BYTES: usize = 1024 * 1024;
/// The detail of the Forbidden error for a pod spec change the server does not allow.
pub const POD_UPDATE_FORBIDDEN: &str = "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)";
/// The detail of the Forbidden error for a PVC spec change the server does not allow.
pub const PVC_UPDATE_FORBIDDEN: &str =
    "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims";

// ---------------------------------------------------------------------------------------------
// Paths, values and typed reads.

fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

fn idx(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

fn json_type(v: &Value) -> &'static str {
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

fn type_error(path: String, v: &Value, expected: &str) -> FieldError {
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

fn invalid_str(path: impl Into<String>, value: &str, detail: impl Into<String>) -> FieldError {
    FieldError::invalid(path, quoted(value), detail)
}

fn invalid_int(path: impl Into<String>, value: i64, detail: impl Into<String>) -> FieldError {
    FieldError::invalid(path, value.to_string(), detail)
}

fn not_supported(path: impl Into<String>, value: &str, allowed: &[&str]) -> FieldError {
    FieldError::not_supported(path, quoted(value), allowed)
}

/// apimachinery has no NotFound here; see the crate report. Until `FieldErrorKind` gains one,
/// a NotFound is an Invalid whose detail says so.
fn not_found(path: impl Into<String>, value: &str) -> FieldError {
    FieldError::invalid(path, quoted(value), "not found")
}

fn msgs_invalid(errs: &mut Vec<FieldError>, path: &str, value: &str, msgs: Vec<String>) {
    errs.extend(msgs.into_iter().map(|m| invalid_str(path, value, m)));
}

fn t_str<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<&'a str> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "string"));
            None
        }
    }
}

fn t_int(v: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<i64> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_i64().is_some() => n.as_i64(),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "integer"));
            None
        }
    }
}

fn t_bool(v: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<bool> {
    match v.get(k) {
        None | Some(Value::Null) => None,
        Some(Value::Bool(b)) => Some(*b),
        Some(other) => {
            errs.push(type_error(child(path, k), other, "boolean"));
            None
        }
    }
}

fn t_arr<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> &'a [Value] {
    match v.get(k) {
        None | Some(Value::Null) => &[],
        Some(Value::Array(a)) => a,
        Some(other) => {
            errs.push(type_error(child(path, k), other, "array"));
            &[]
        }
    }
}

fn t_obj<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Option<&'a Value> {
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
fn t_str_map<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<(&'a str, &'a str)> {
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
fn t_str_list<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<&'a str> {
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
fn t_obj_list<'a>(v: &'a Value, k: &str, path: &str, errs: &mut Vec<FieldError>) -> Vec<(usize, &'a Value, String)> {
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

fn non_negative(v: &Value, k: &str, path: &str, errs: &mut Vec<FieldError>) {
    if let Some(n) = t_int(v, k, path, errs).filter(|n| *n < 0) {
        errs.push(invalid_int(child(path, k), n, NON_NEGATIVE));
    }
}

/// A quantity value (string, or a bare JSON number as the server also accepts).
fn t_quantity(v: &Value, path: &str, errs: &mut Vec<FieldError>) -> Option<(i128, String)> {
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

fn one_of(errs: &mut Vec<FieldError>, path: &str, value: Option<&str>, allowed: &[&str]) {
    match value {
        None | Some("") => errs.push(FieldError::required(path, "")),
        Some(v) if !allowed.contains(&v) => errs.push(not_supported(path, v, allowed)),
        Some(_) => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata.

fn object_meta(meta: &Value, rule: NameRule, errs: &mut Vec<FieldError>) {
    let path = "metadata";
    if meta.is_null() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        return;
    }
    if !meta.is_object() {
        errs.push(type_error(path.to_string(), meta, "object"));
        return;
    }
    let generate_name = t_str(meta, "generateName", path, errs).unwrap_or("");
    if !generate_name.is_empty() {
        msgs_invalid(errs, "metadata.generateName", generate_name, rule.check(generate_name, true));
    }
    let name = t_str(meta, "name", path, errs).unwrap_or("");
    if name.is_empty() {
        if generate_name.is_empty() {
            errs.push(FieldError::required("metadata.name", "name or generateName is required"));
        }
    } else {
        msgs_invalid(errs, "metadata.name", name, rule.check(name, false));
    }
    if let Some(ns) = t_str(meta, "namespace", path, errs).filter(|n| !n.is_empty()) {
        msgs_invalid(errs, "metadata.namespace", ns, names::dns1123_label(ns));
    }
    non_negative(meta, "generation", path, errs);
    let labels = t_str_map(meta, "labels", path, errs);
    validate_labels(&labels, "metadata.labels", errs);
    let annotations = t_str_map(meta, "annotations", path, errs);
    validate_annotations(&annotations, "metadata.annotations", errs);
    owner_references(meta, errs);
    let finalizers = t_str_list(meta, "finalizers", path, errs);
    for f in &finalizers {
        msgs_invalid(errs, "metadata.finalizers", f, names::qualified_name(f));
    }
    if finalizers.contains(&"orphan") && finalizers.contains(&"foregroundDeletion") {
        let list = Value::from(finalizers.iter().map(|f| Value::from(*f)).collect::<Vec<_>>());
        errs.push(FieldError::invalid(
            "metadata.finalizers",
            shown(&list),
            "finalizer orphan and foregroundDeletion cannot be both set",
        ));
    }
}

fn owner_references(meta: &Value, errs: &mut Vec<FieldError>) {
    let path = "metadata.ownerReferences";
    let mut first_controller: Option<String> = None;
    for (_, r, _) in t_obj_list(meta, "ownerReferences", "metadata", errs) {
        let api_version = t_str(r, "apiVersion", path, errs).unwrap_or("");
        let kind = t_str(r, "kind", path, errs).unwrap_or("");
        let name = t_str(r, "name", path, errs).unwrap_or("");
        let uid = t_str(r, "uid", path, errs).unwrap_or("");
        let (group, version) = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [v] => ("", *v),
            [g, v] => (*g, *v),
            _ => ("", ""),
        };
        if version.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.apiVersion", api_version, "version must not be empty"));
        }
        if kind.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.kind", kind, "must not be empty"));
        }
        if name.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.name", name, "must not be empty"));
        }
        if uid.is_empty() {
            errs.push(invalid_str("metadata.ownerReferences.uid", uid, "must not be empty"));
        }
        if group.is_empty() && version == "v1" && kind == "Event" {
            errs.push(FieldError::invalid(path, shown(r), "/v1, Kind=Event is disallowed from being an owner"));
        }
        if t_bool(r, "controller", path, errs) == Some(true) {
            let current = format!("{kind}/{name}");
            match &first_controller {
                Some(first) => errs.push(FieldError::invalid(
                    path,
                    shown(meta.get("ownerReferences").unwrap_or(&Value::Null)),
                    format!(
                        "Only one reference can have Controller set to true. Found \"true\" in references for {first} and {current}"
                    ),
                )),
                None => first_controller = Some(current),
            }
        }
    }
}

fn validate_labels(labels: &[(&str, &str)], path: &str, errs: &mut Vec<FieldError>) {
    for (k, v) in labels {
        msgs_invalid(errs, path, k, names::qualified_name(k));
        msgs_invalid(errs, path, v, names::label_value(v));
    }
}

fn validate_annotations(annotations: &[(&str, &str)], path: &str, errs: &mut Vec<FieldError>) {
    let mut total = 0usize;
    for (k, v) in annotations {
        msgs_invalid(errs, path, k, names::qualified_name(&k.to_lowercase()));
        total += k.len() + v.len();
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errs.push(FieldError::too_long(path, ANNOTATIONS_MAX_BYTES));
    }
}

/// `core/validation.ValidateObjectMeta`: the generic rules plus core's finalizer-name rule.
fn core_meta(obj: &Value, kind: &str, errs: &mut Vec<FieldError>) {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    object_meta(meta, name_rule(kind), errs);
    kube_finalizer_names(arr_at(meta, "finalizers"), "metadata.finalizers", true, errs);
}

/// `validateKubeFinalizerName`: a finalizer without a domain must be one Kubernetes defines.
fn kube_finalizer_names(list: &[Value], path: &str, indexed: bool, errs: &mut Vec<FieldError>) {
    for (i, f) in list.iter().enumerate() {
        let Some(f) = f.as_str() else { continue };
        if !f.contains('/') && !matches!(f, "kubernetes" | "orphan" | "foregroundDeletion") {
            let at = if indexed { idx(path, i) } else { path.to_string() };
            errs.push(invalid_str(at, f, "name is neither a standard finalizer name nor is it fully qualified"));
        }
    }
}

fn object_meta_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    for field in ["name", "namespace"] {
        let n = new.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("");
        let o = old.pointer(&format!("/metadata/{field}")).and_then(Value::as_str).unwrap_or("");
        if n != o {
            errs.push(invalid_str(format!("metadata.{field}"), n, IMMUTABLE));
        }
    }
}

/// `ValidateLabelSelector` for `matchLabels`/`matchExpressions` selectors.
pub(crate) fn label_selector(sel: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let labels = t_str_map(sel, "matchLabels", path, errs);
    validate_labels(&labels, &child(path, "matchLabels"), errs);
    for (_, req, rp) in t_obj_list(sel, "matchExpressions", path, errs) {
        let op = t_str(req, "operator", &rp, errs).unwrap_or("");
        let values = t_str_list(req, "values", &rp, errs);
        match op {
            "In" | "NotIn" => {
                if values.is_empty() {
                    errs.push(FieldError::required(
                        child(&rp, "values"),
                        "must be specified when `operator` is 'In' or 'NotIn'",
                    ));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    errs.push(FieldError::forbidden(
                        child(&rp, "values"),
                        "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    ));
                }
            }
            other => errs.push(invalid_str(child(&rp, "operator"), other, "not a valid selector operator")),
        }
        let k = t_str(req, "key", &rp, errs).unwrap_or("");
        msgs_invalid(errs, &child(&rp, "key"), k, names::qualified_name(k));
    }
}

/// Whether a `LabelSelector` selects `labels`; None when the selector cannot be converted (the
/// server then skips the match check). An absent selector matches nothing; `{}` matches all.
fn selector_matches(sel: Option<&Value>, labels: &Map<String, Value>) -> Option<bool> {
    let Some(sel) = sel else { return Some(false) };
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    for (k, v) in obj_at(sel, "matchLabels").into_iter().flatten() {
        if get(k) != Some(v.as_str()?) {
            return Some(false);
        }
    }
    for req in arr_at(sel, "matchExpressions") {
        let k = str_at(req, "key")?;
        let values: Vec<&str> = arr_at(req, "values").iter().filter_map(Value::as_str).collect();
        let ok = match str_at(req, "operator")? {
            "In" if !values.is_empty() => get(k).is_some_and(|v| values.contains(&v)),
            "NotIn" if !values.is_empty() => get(k).is_none_or(|v| !values.contains(&v)),
            "Exists" if values.is_empty() => get(k).is_some(),
            "DoesNotExist" if values.is_empty() => get(k).is_none(),
            _ => return None,
        };
        if !ok {
            return Some(false);
        }
    }
    Some(true)
}

// ---------------------------------------------------------------------------------------------
// Pods.

fn validate_pod(obj: &Value, mode: Mode, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Pod", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    pod_spec(spec, "spec", true, errs);
    if mode == Mode::Create && !arr_at(spec, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden("spec.ephemeralContainers", "cannot be set on create"));
    }
}

/// `ValidatePodSpec`; `is_pod` adds the checks that apply to Pods but not pod templates.
fn pod_spec(spec: &Value, path: &str, is_pod: bool, errs: &mut Vec<FieldError>) {
    match t_int(spec, "terminationGracePeriodSeconds", path, errs) {
        None => errs.push(FieldError::required(child(path, "terminationGracePeriodSeconds"), "")),
        Some(n) if n < 0 => errs.push(invalid_int(child(path, "terminationGracePeriodSeconds"), n, NON_NEGATIVE)),
        Some(_) => {}
    }
    let volumes = pod_volumes(spec, path, errs);
    let mut container_names = HashSet::new();
    containers(spec, path, "containers", &volumes, is_pod, &mut container_names, errs);
    containers(spec, path, "initContainers", &volumes, is_pod, &mut container_names, errs);
    let restart_policy = t_str(spec, "restartPolicy", path, errs);
    one_of(errs, &child(path, "restartPolicy"), restart_policy, &["Always", "OnFailure", "Never"]);
    let dns_policy = t_str(spec, "dnsPolicy", path, errs);
    one_of(
        errs,
        &child(path, "dnsPolicy"),
        dns_policy,
        &["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"],
    );
    let node_selector = t_str_map(spec, "nodeSelector", path, errs);
    validate_labels(&node_selector, &child(path, "nodeSelector"), errs);
    if let Some(sc) = t_obj(spec, "securityContext", path, errs) {
        pod_security_context(sc, &child(path, "securityContext"), errs);
    }
    dns_config(spec, path, dns_policy, errs);
    for field in ["serviceAccountName", "nodeName", "priorityClassName"] {
        if let Some(v) = t_str(spec, field, path, errs).filter(|v| !v.is_empty()) {
            msgs_invalid(errs, &child(path, field), v, names::dns1123_subdomain(v));
        }
    }
    if let Some(n) = t_int(spec, "activeDeadlineSeconds", path, errs).filter(|n| !(1..=MAX_INT32).contains(n)) {
        errs.push(invalid_int(child(path, "activeDeadlineSeconds"), n, names::inclusive_range_error(1, MAX_INT32)));
    }
    for field in ["hostname", "subdomain"] {
        if let Some(v) = t_str(spec, field, path, errs).filter(|v| !v.is_empty()) {
            msgs_invalid(errs, &child(path, field), v, names::dns1123_label(v));
        }
    }
    tolerations(spec, path, errs);
    if let Some(p) = t_str(spec, "preemptionPolicy", path, errs) {
        one_of(errs, &child(path, "preemptionPolicy"), Some(p), &["PreemptLowerPriority", "Never"]);
    }
    // imagePullSecrets: the real server accepts any names here (at most a warning), so only the
    // JSON shape is checked.
    let _ = t_arr(spec, "imagePullSecrets", path, errs);
}

/// `ValidateVolumes`: returns the names of the volumes that passed, which mounts may use.
fn pod_volumes(spec: &Value, path: &str, errs: &mut Vec<FieldError>) -> HashSet<String> {
    let mut valid = HashSet::new();
    for (_, vol, vp) in t_obj_list(spec, "volumes", path, errs) {
        let mut el = Vec::new();
        volume_source(vol, &vp, &mut el);
        let name = t_str(vol, "name", &vp, &mut el).unwrap_or("");
        if name.is_empty() {
            el.push(FieldError::required(child(&vp, "name"), ""));
        } else {
            msgs_invalid(&mut el, &child(&vp, "name"), name, names::dns1123_label(name));
        }
        if valid.contains(name) {
            el.push(FieldError::duplicate(child(&vp, "name"), quoted(name)));
        }
        if el.is_empty() {
            valid.insert(name.to_string());
        } else {
            errs.extend(el);
        }
    }
    valid
}

fn volume_source(vol: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let sources: Vec<&str> = vol
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| k.as_str() != "name" && !v.is_null())
        .map(|(k, _)| k.as_str())
        .collect();
    match sources.as_slice() {
        [] => errs.push(FieldError::required(path, "must specify a volume type")),
        [_] => {}
        [_, second, ..] => {
            errs.push(FieldError::forbidden(child(path, second), "may not specify more than 1 volume type"));
        }
    }
    let required_name = |src: &str, field: &str, errs: &mut Vec<FieldError>| {
        if let Some(s) = t_obj(vol, src, path, errs) {
            let sp = child(path, src);
            if t_str(s, field, &sp, errs).unwrap_or("").is_empty() {
                errs.push(FieldError::required(child(&sp, field), ""));
            }
            if let Some(mode) = t_int(s, "defaultMode", &sp, errs).filter(|m| !(0..=0o777).contains(m)) {
                errs.push(invalid_int(
                    child(&sp, "defaultMode"),
                    mode,
                    "must be a number between 0 and 0777 (octal), both inclusive",
                ));
            }
        }
    };
    required_name("secret", "secretName", errs);
    required_name("configMap", "name", errs);
    required_name("persistentVolumeClaim", "claimName", errs);
    required_name("hostPath", "path", errs);
}

fn containers(
    spec: &Value,
    path: &str,
    list: &str,
    volumes: &HashSet<String>,
    is_pod: bool,
    seen_names: &mut HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let init = list == "initContainers";
    let list_path = child(path, list);
    let items = t_obj_list(spec, list, path, errs);
    if !init && arr_at(spec, list).is_empty() {
        errs.push(FieldError::required(list_path, ""));
        return;
    }
    let mut host_ports = HashSet::new();
    for (_, c, cp) in items {
        container_common(c, &cp, volumes, errs);
        let name = str_at(c, "name").unwrap_or("");
        if seen_names.contains(name) {
            errs.push(FieldError::duplicate(child(&cp, "name"), quoted(name)));
        } else if !init || !name.is_empty() {
            seen_names.insert(name.to_string());
        }
        match (init, str_at(c, "restartPolicy")) {
            (false, Some(_)) => {
                errs.push(FieldError::forbidden(child(&cp, "restartPolicy"), "may not be set for non-init containers"));
            }
            (true, Some(p)) if p != "Always" => errs.push(not_supported(child(&cp, "restartPolicy"), p, &["Always"])),
            _ => {}
        }
        for (pi, port) in arr_at(c, "ports").iter().enumerate() {
            let Some(hp) = int_at(port, "hostPort").filter(|p| *p != 0) else { continue };
            let key =
                format!("{}/{}/{hp}", str_at(port, "protocol").unwrap_or(""), str_at(port, "hostIP").unwrap_or(""));
            if !host_ports.insert(key.clone()) {
                errs.push(FieldError::duplicate(child(&idx(&child(&cp, "ports"), pi), "hostPort"), quoted(&key)));
            }
        }
        if is_pod {
            let image = str_at(c, "image").unwrap_or("");
            if image.trim() != image {
                errs.push(invalid_str(child(&cp, "image"), image, "must not have leading or trailing whitespace"));
            }
        }
    }
}

/// `validateContainerCommon`.
fn container_common(c: &Value, path: &str, volumes: &HashSet<String>, errs: &mut Vec<FieldError>) {
    match t_str(c, "name", path, errs).unwrap_or("") {
        "" => errs.push(FieldError::required(child(path, "name"), "")),
        name => msgs_invalid(errs, &child(path, "name"), name, names::dns1123_label(name)),
    }
    if t_str(c, "image", path, errs).unwrap_or("").is_empty() {
        errs.push(FieldError::required(child(path, "image"), ""));
    }
    let policy = t_str(c, "terminationMessagePolicy", path, errs);
    one_of(errs, &child(path, "terminationMessagePolicy"), policy, &["File", "FallbackToLogsOnError"]);
    container_ports(c, path, errs);
    env(c, path, errs);
    env_from(c, path, errs);
    volume_mounts(c, path, volumes, errs);
    let pull = t_str(c, "imagePullPolicy", path, errs);
    one_of(errs, &child(path, "imagePullPolicy"), pull, &["Always", "IfNotPresent", "Never"]);
    if let Some(res) = t_obj(c, "resources", path, errs) {
        resources(res, &child(path, "resources"), errs);
    }
    if let Some(sc) = t_obj(c, "securityContext", path, errs) {
        security_context(sc, &child(path, "securityContext"), errs);
    }
}

fn container_ports(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let mut seen = HashSet::new();
    for (_, port, pp) in t_obj_list(c, "ports", path, errs) {
        if let Some(name) = t_str(port, "name", &pp, errs).filter(|n| !n.is_empty()) {
            let msgs = names::port_name(name);
            if !msgs.is_empty() {
                msgs_invalid(errs, &child(&pp, "name"), name, msgs);
            } else if !seen.insert(name) {
                errs.push(FieldError::duplicate(child(&pp, "name"), quoted(name)));
            }
        }
        match t_int(port, "containerPort", &pp, errs).unwrap_or(0) {
            0 => errs.push(FieldError::required(child(&pp, "containerPort"), "")),
            n => errs.extend(names::port_num(n).into_iter().map(|m| invalid_int(child(&pp, "containerPort"), n, m))),
        }
        if let Some(n) = t_int(port, "hostPort", &pp, errs).filter(|n| *n != 0) {
            errs.extend(names::port_num(n).into_iter().map(|m| invalid_int(child(&pp, "hostPort"), n, m)));
        }
        let protocol = t_str(port, "protocol", &pp, errs);
        one_of(errs, &child(&pp, "protocol"), protocol, &["SCTP", "TCP", "UDP"]);
    }
}

const ENV_FIELD_PATHS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
];

const ENV_RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.ephemeral-storage",
    "limits.memory",
    "requests.cpu",
    "requests.ephemeral-storage",
    "requests.memory",
];

/// `ValidateEnv`, with the relaxed name rule kube-apiserver 1.32+ uses by default.
fn env(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (_, ev, ep) in t_obj_list(c, "env", path, errs) {
        match t_str(ev, "name", &ep, errs).unwrap_or("") {
            "" => errs.push(FieldError::required(child(&ep, "name"), "")),
            name => msgs_invalid(errs, &child(&ep, "name"), name, names::relaxed_env_var_name(name)),
        }
        let value = t_str(ev, "value", &ep, errs).unwrap_or("");
        let Some(vf) = t_obj(ev, "valueFrom", &ep, errs) else { continue };
        let vp = child(&ep, "valueFrom");
        let mut sources = 0;
        if let Some(fr) = t_obj(vf, "fieldRef", &vp, errs) {
            sources += 1;
            field_selector(fr, &child(&vp, "fieldRef"), errs);
        }
        if let Some(rf) = t_obj(vf, "resourceFieldRef", &vp, errs) {
            sources += 1;
            let rp = child(&vp, "resourceFieldRef");
            match t_str(rf, "resource", &rp, errs).unwrap_or("") {
                "" => errs.push(FieldError::required(child(&rp, "resource"), "")),
                r if !ENV_RESOURCE_FIELDS.contains(&r)
                    && !r.starts_with("limits.hugepages-")
                    && !r.starts_with("requests.hugepages-") =>
                {
                    errs.push(not_supported(child(&rp, "resource"), r, ENV_RESOURCE_FIELDS));
                }
                _ => {}
            }
        }
        for src in ["configMapKeyRef", "secretKeyRef"] {
            if let Some(sel) = t_obj(vf, src, &vp, errs) {
                sources += 1;
                let sp = child(&vp, src);
                let name = t_str(sel, "name", &sp, errs).unwrap_or("");
                msgs_invalid(errs, &child(&sp, "name"), name, names::dns1123_subdomain(name));
                match t_str(sel, "key", &sp, errs).unwrap_or("") {
                    "" => errs.push(FieldError::required(child(&sp, "key"), "")),
                    k => msgs_invalid(errs, &child(&sp, "key"), k, names::config_map_key(k)),
                }
            }
        }
        if sources == 0 {
            errs.push(invalid_str(
                &vp,
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`",
            ));
        } else if !value.is_empty() {
            errs.push(invalid_str(&vp, "", "may not be specified when `value` is not empty"));
        } else if sources > 1 {
            errs.push(invalid_str(&vp, "", "may not have more than one field specified at a time"));
        }
    }
}

/// `validateObjectFieldSelector` for env: pod fields, or a label/annotation by key.
fn field_selector(fs: &Value, path: &str, errs: &mut Vec<FieldError>) {
    if t_str(fs, "apiVersion", path, errs).unwrap_or("").is_empty() {
        errs.push(FieldError::required(child(path, "apiVersion"), ""));
        return;
    }
    let field_path = t_str(fs, "fieldPath", path, errs).unwrap_or("");
    if field_path.is_empty() {
        errs.push(FieldError::required(child(path, "fieldPath"), ""));
        return;
    }
    let subscripted = field_path.strip_suffix("']").and_then(|p| p.split_once("['"));
    match subscripted {
        Some(("metadata.annotations", sub)) => {
            msgs_invalid(errs, path, sub, names::qualified_name(&sub.to_lowercase()))
        }
        Some(("metadata.labels", sub)) => msgs_invalid(errs, path, sub, names::qualified_name(sub)),
        Some((other, _)) => errs.push(invalid_str(path, other, "does not support subscript")),
        None if !ENV_FIELD_PATHS.contains(&field_path) => {
            errs.push(not_supported(child(path, "fieldPath"), field_path, ENV_FIELD_PATHS));
        }
        None => {}
    }
}

fn env_from(c: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let list_path = child(path, "envFrom");
    for (_, ef, ep) in t_obj_list(c, "envFrom", path, errs) {
        if let Some(prefix) = t_str(ef, "prefix", &ep, errs).filter(|p| !p.is_empty()) {
            msgs_invalid(errs, &child(&ep, "prefix"), prefix, names::relaxed_env_var_name(prefix));
        }
        let mut sources = 0;
        for src in ["configMapRef", "secretRef"] {
            if let Some(r) = t_obj(ef, src, &ep, errs) {
                sources += 1;
                let rp = child(&ep, src);
                match t_str(r, "name", &rp, errs).unwrap_or("") {
                    "" => errs.push(FieldError::required(child(&rp, "name"), "")),
                    name => msgs_invalid(
                        errs,
                        &child(&rp, "name"),
                        name,
                        names::dns1123_subdomain(&names::mask_trailing_dash(name)),
                    ),
                }
            }
        }
        if sources == 0 {
            errs.push(invalid_str(&list_path, "", "must specify one of: `configMapRef` or `secretRef`"));
        } else if sources > 1 {
            errs.push(invalid_str(&list_path, "", "may not have more than one field specified at a time"));
        }
    }
}

fn volume_mounts(c: &Value, path: &str, volumes: &HashSet<String>, errs: &mut Vec<FieldError>) {
    let list_path = child(path, "volumeMounts");
    let mut mount_points = HashSet::new();
    for (_, m, mp) in t_obj_list(c, "volumeMounts", path, errs) {
        let name = t_str(m, "name", &mp, errs).unwrap_or("");
        if name.is_empty() {
            errs.push(FieldError::required(child(&mp, "name"), ""));
        }
        if !volumes.contains(name) {
            errs.push(not_found(child(&mp, "name"), name));
        }
        let mount_path = t_str(m, "mountPath", &mp, errs).unwrap_or("");
        if mount_path.is_empty() {
            errs.push(FieldError::required(child(&mp, "mountPath"), ""));
        }
        if !mount_points.insert(mount_path) {
            errs.push(invalid_str(child(&mp, "mountPath"), mount_path, "must be unique"));
        }
        if let Some(sub) = t_str(m, "subPath", &mp, errs).filter(|s| !s.is_empty()) {
            let sp = child(&list_path, "subPath");
            if sub.starts_with('/') {
                errs.push(invalid_str(&sp, sub, "must be a relative path"));
            }
            if sub.split('/').any(|part| part == "..") {
                errs.push(invalid_str(&sp, sub, "must not contain '..'"));
            }
        }
    }
}

fn is_native_resource(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

fn is_hugepages(name: &str) -> bool {
    name.starts_with("hugepages-")
}

/// `ValidateResourceRequirements` for containers: names, non-negative quantities, and requests
/// within limits (equal to them for resources that cannot be overcommitted).
fn resources(res: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let lim_path = child(path, "limits");
    let req_path = child(path, "requests");
    let mut limits: BTreeMap<&str, (i128, String)> = BTreeMap::new();
    for (name, q) in t_obj(res, "limits", path, errs).and_then(Value::as_object).into_iter().flatten() {
        let kp = key(&lim_path, name);
        container_resource_name(name, &kp, errs);
        if let Some(parsed) = resource_quantity(name, q, &kp, errs) {
            limits.insert(name, parsed);
        }
    }
    for (name, q) in t_obj(res, "requests", path, errs).and_then(Value::as_object).into_iter().flatten() {
        let kp = key(&req_path, name);
        container_resource_name(name, &kp, errs);
        let Some((req, req_text)) = resource_quantity(name, q, &kp, errs) else { continue };
        let overcommit = is_native_resource(name) && !is_hugepages(name);
        match limits.get(name.as_str()) {
            Some((lim, lim_text)) if !overcommit && req != *lim => {
                errs.push(invalid_str(&req_path, &req_text, format!("must be equal to {name} limit of {lim_text}")));
            }
            Some((lim, lim_text)) if req > *lim => {
                errs.push(invalid_str(
                    &req_path,
                    &req_text,
                    format!("must be less than or equal to {name} limit of {lim_text}"),
                ));
            }
            None if !overcommit => {
                errs.push(FieldError::required(&lim_path, "Limit must be set for non overcommitable resources"));
            }
            _ => {}
        }
    }
}

fn container_resource_name(name: &str, path: &str, errs: &mut Vec<FieldError>) {
    msgs_invalid(errs, path, name, names::qualified_name(name));
    if !name.contains('/') {
        if !matches!(name, "cpu" | "memory" | "ephemeral-storage") && !is_hugepages(name) {
            errs.push(invalid_str(path, name, "must be a standard resource for containers"));
        }
    } else if !is_native_resource(name)
        && (name.starts_with("requests.") || !names::qualified_name(&format!("requests.{name}")).is_empty())
    {
        errs.push(invalid_str(path, name, "doesn't follow extended resource name standard"));
    }
}

fn resource_quantity(name: &str, q: &Value, path: &str, errs: &mut Vec<FieldError>) -> Option<(i128, String)> {
    let (nanos, text) = t_quantity(q, path, errs)?;
    if nanos < 0 {
        errs.push(invalid_str(path, &text, NON_NEGATIVE));
    }
    if !is_native_resource(name) && nanos % 1_000_000_000 != 0 {
        errs.push(invalid_str(path, &text, "must be an integer"));
    }
    Some((nanos, text))
}

fn security_context(sc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for field in ["runAsUser", "runAsGroup"] {
        if let Some(id) = t_int(sc, field, path, errs) {
            errs.extend(names::user_or_group_id(id).into_iter().map(|m| invalid_int(child(path, field), id, m)));
        }
    }
    if t_bool(sc, "allowPrivilegeEscalation", path, errs) == Some(false) {
        if t_bool(sc, "privileged", path, errs) == Some(true) {
            errs.push(FieldError::invalid(
                path,
                shown(sc),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            ));
        }
        let adds = sc.pointer("/capabilities/add").and_then(Value::as_array).map_or(&[][..], Vec::as_slice);
        if adds.iter().any(|c| c.as_str() == Some("CAP_SYS_ADMIN")) {
            errs.push(FieldError::invalid(
                path,
                shown(sc),
                "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN",
            ));
        }
    }
}

fn pod_security_context(sc: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for field in ["fsGroup", "runAsUser", "runAsGroup"] {
        if let Some(id) = t_int(sc, field, path, errs) {
            errs.extend(names::user_or_group_id(id).into_iter().map(|m| invalid_int(child(path, field), id, m)));
        }
    }
    let groups_path = child(path, "supplementalGroups");
    for (i, g) in t_arr(sc, "supplementalGroups", path, errs).iter().enumerate() {
        match g.as_i64() {
            Some(id) => {
                errs.extend(names::user_or_group_id(id).into_iter().map(|m| invalid_int(idx(&groups_path, i), id, m)));
            }
            None => errs.push(type_error(idx(&groups_path, i), g, "integer")),
        }
    }
}

fn dns_config(spec: &Value, path: &str, dns_policy: Option<&str>, errs: &mut Vec<FieldError>) {
    let cp = child(path, "dnsConfig");
    let config = t_obj(spec, "dnsConfig", path, errs);
    if dns_policy == Some("None") {
        match config {
            None => {
                errs.push(FieldError::required(&cp, "must provide `dnsConfig` when `dnsPolicy` is None"));
                return;
            }
            Some(c) if arr_at(c, "nameservers").is_empty() => errs.push(FieldError::required(
                child(&cp, "nameservers"),
                "must provide at least one DNS nameserver when `dnsPolicy` is None",
            )),
            Some(_) => {}
        }
    }
    let Some(config) = config else { return };
    let servers = t_str_list(config, "nameservers", &cp, errs);
    if servers.len() > 3 {
        errs.push(FieldError::too_many(child(&cp, "nameservers"), 3));
    }
    for (i, ip) in servers.iter().enumerate() {
        if !names::ip_address(ip).is_empty() {
            errs.push(invalid_str(idx(&child(&cp, "nameservers"), i), ip, "must be valid IP address"));
        }
    }
}

/// `ValidateTolerations`.
fn tolerations(spec: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for (_, t, tp) in t_obj_list(spec, "tolerations", path, errs) {
        let k = t_str(t, "key", &tp, errs).unwrap_or("");
        if !k.is_empty() {
            msgs_invalid(errs, &child(&tp, "key"), k, names::qualified_name(k));
        }
        let op = t_str(t, "operator", &tp, errs).unwrap_or("");
        let effect = t_str(t, "effect", &tp, errs).unwrap_or("");
        let value = t_str(t, "value", &tp, errs).unwrap_or("");
        if k.is_empty() && op != "Exists" {
            errs.push(invalid_str(
                child(&tp, "operator"),
                op,
                "operator must be Exists when `key` is empty, which means \"match all values and all keys\"",
            ));
        }
        if t_int(t, "tolerationSeconds", &tp, errs).is_some() && effect != "NoExecute" {
            errs.push(invalid_str(
                child(&tp, "effect"),
                effect,
                "effect must be 'NoExecute' when `tolerationSeconds` is set",
            ));
        }
        match op {
            "Equal" | "" => {
                let msgs = names::label_value(value);
                if !msgs.is_empty() {
                    errs.push(invalid_str(child(&tp, "operator"), value, msgs.join(";")));
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    errs.push(FieldError::invalid(
                        child(&tp, "operator"),
                        shown(t),
                        "value must be empty when `operator` is 'Exists'",
                    ));
                }
            }
            other => errs.push(not_supported(child(&tp, "operator"), other, &["Equal", "Exists"])),
        }
        if !effect.is_empty() {
            taint_effect(effect, &child(&tp, "effect"), errs);
        }
    }
}

fn taint_effect(effect: &str, path: &str, errs: &mut Vec<FieldError>) {
    one_of(errs, path, Some(effect), &["NoSchedule", "PreferNoSchedule", "NoExecute"]);
}

fn pod_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    for list in ["containers", "initContainers"] {
        if arr_at(ns, list).len() != arr_at(os, list).len() {
            errs.push(FieldError::forbidden(format!("spec.{list}"), "pod updates may not add or remove containers"));
            return;
        }
    }
    let deadline_path = "spec.activeDeadlineSeconds";
    match (int_at(ns, "activeDeadlineSeconds"), int_at(os, "activeDeadlineSeconds")) {
        (Some(n), _) if !(0..=MAX_INT32).contains(&n) => {
            errs.push(invalid_int(deadline_path, n, names::inclusive_range_error(0, MAX_INT32)));
            return;
        }
        (Some(n), Some(o)) if o < n => {
            errs.push(invalid_int(deadline_path, n, "must be less than or equal to previous value"));
            return;
        }
        (None, Some(_)) => {
            errs.push(FieldError::invalid(
                deadline_path,
                "null",
                "must not update from a positive integer to nil value",
            ));
        }
        _ => {}
    }
    let without_seconds = |t: &Value| {
        let mut t = t.clone();
        if let Some(m) = t.as_object_mut() {
            m.remove("tolerationSeconds");
        }
        t
    };
    let new_tolerations: Vec<Value> = arr_at(ns, "tolerations").iter().map(without_seconds).collect();
    for old_t in arr_at(os, "tolerations") {
        let old_t = without_seconds(old_t);
        if !new_tolerations.iter().any(|n| semantic_eq(Some(n), Some(&old_t))) {
            errs.push(FieldError::forbidden(
                "spec.tolerations",
                "existing toleration can not be modified except its tolerationSeconds",
            ));
            break;
        }
    }
    let old_gates: HashSet<&str> = arr_at(os, "schedulingGates").iter().filter_map(|g| str_at(g, "name")).collect();
    for (i, gate) in arr_at(ns, "schedulingGates").iter().enumerate() {
        let name = str_at(gate, "name").unwrap_or("");
        if !old_gates.contains(name) {
            errs.push(FieldError::forbidden(
                format!("spec.schedulingGates[{i}].name"),
                format!("only deletion is allowed, but found new scheduling gate '{name}'"),
            ));
        }
    }
    let mut munged = ns.clone();
    for list in ["containers", "initContainers"] {
        let old_items = arr_at(os, list);
        if let Some(items) = munged.get_mut(list).and_then(Value::as_array_mut) {
            for (c, o) in items.iter_mut().zip(old_items) {
                if let Some(m) = c.as_object_mut() {
                    match o.get("image") {
                        Some(image) => m.insert("image".into(), image.clone()),
                        None => m.remove("image"),
                    };
                }
            }
        }
    }
    if let Some(m) = munged.as_object_mut() {
        for field in ["activeDeadlineSeconds", "tolerations", "schedulingGates"] {
            match os.get(field) {
                Some(v) => m.insert(field.into(), v.clone()),
                None => m.remove(field),
            };
        }
        let old_grace = int_at(os, "terminationGracePeriodSeconds");
        if old_grace.is_some_and(|g| g < 0) && int_at(ns, "terminationGracePeriodSeconds") == Some(1) {
            m.insert("terminationGracePeriodSeconds".into(), Value::from(old_grace));
        }
    }
    if !semantic_eq(Some(&munged), Some(os)) {
        errs.push(FieldError::forbidden("spec", POD_UPDATE_FORBIDDEN));
    }
}

// ---------------------------------------------------------------------------------------------
// Jobs.

fn validate_job(obj: &Value, require_prefixed: bool, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Job", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    generated_selector(obj, spec, require_prefixed, errs);
    job_spec(spec, errs);
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if str_at(spec, "completionMode") == Some("Indexed")
        && let Some(completions) = int_at(spec, "completions").filter(|c| *c > 0)
    {
        let hostname = format!("{name}-{}", completions - 1);
        if !names::dns1123_label(&hostname).is_empty() {
            errs.push(invalid_str(
                "metadata.name",
                name,
                format!("will not able to create pod with invalid DNS label: {hostname}"),
            ));
        }
    }
}

fn generated_selector(obj: &Value, spec: &Value, require_prefixed: bool, errs: &mut Vec<FieldError>) {
    if bool_at(spec, "manualSelector") == Some(true) {
        return;
    }
    let Some(selector) = spec.get("selector").filter(|s| !s.is_null()) else { return };
    let uid = obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or("");
    let name = obj.pointer("/metadata/name").and_then(Value::as_str).unwrap_or("");
    if uid.is_empty() {
        errs.push(FieldError::required("metadata.uid", ""));
    }
    let empty = Map::new();
    let labels = spec.pointer("/template/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
    let mut expected = vec![(LEGACY_CONTROLLER_UID_LABEL, uid), (LEGACY_JOB_NAME_LABEL, name)];
    if require_prefixed {
        expected.extend([(CONTROLLER_UID_LABEL, uid), (JOB_NAME_LABEL, name)]);
    }
    for (k, want) in &expected {
        let path = format!("spec.template.metadata.labels[{k}]");
        match labels.get(*k).and_then(Value::as_str) {
            None => errs.push(FieldError::required(path, format!("must be '{want}'"))),
            Some(v) if v != *want => {
                errs.push(FieldError::invalid(
                    path,
                    shown(&Value::Object(labels.clone())),
                    format!("must be '{want}'"),
                ));
            }
            Some(_) => {}
        }
    }
    let expected_labels: Map<String, Value> = expected.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
    if selector_matches(Some(selector), &expected_labels) == Some(false) {
        errs.push(FieldError::invalid("spec.selector", shown(selector), "`selector` not auto-generated"));
    }
}

fn job_spec(spec: &Value, errs: &mut Vec<FieldError>) {
    let path = "spec";
    for field in [
        "parallelism",
        "completions",
        "activeDeadlineSeconds",
        "backoffLimit",
        "ttlSecondsAfterFinished",
        "backoffLimitPerIndex",
        "maxFailedIndexes",
    ] {
        non_negative(spec, field, path, errs);
    }
    if let Some(mode) = t_str(spec, "completionMode", path, errs) {
        if mode != "NonIndexed" && mode != "Indexed" {
            errs.push(not_supported("spec.completionMode", mode, &["NonIndexed", "Indexed"]));
        }
        if mode == "Indexed" {
            if !present(spec, "completions") {
                errs.push(FieldError::required("spec.completions", "when completion mode is Indexed"));
            }
            if let Some(p) = int_at(spec, "parallelism").filter(|p| *p > 100_000) {
                errs.push(invalid_int(
                    "spec.parallelism",
                    p,
                    "must be less than or equal to 100000 when completion mode is Indexed",
                ));
            }
        }
    }
    let has_failure_policy = present(spec, "podFailurePolicy");
    if let Some(policy) = t_str(spec, "podReplacementPolicy", path, errs) {
        if has_failure_policy {
            if policy != "Failed" {
                errs.push(not_supported("spec.podReplacementPolicy", policy, &["Failed"]));
            }
        } else if policy != "Failed" && policy != "TerminatingOrFailed" {
            errs.push(not_supported("spec.podReplacementPolicy", policy, &["Failed", "TerminatingOrFailed"]));
        }
    }
    let template = t_obj(spec, "template", path, errs).unwrap_or(&Value::Null);
    let template_meta = t_obj(template, "metadata", "spec.template", errs).unwrap_or(&Value::Null);
    let labels = t_str_map(template_meta, "labels", "spec.template.metadata", errs);
    validate_labels(&labels, "spec.template.labels", errs);
    let annotations = t_str_map(template_meta, "annotations", "spec.template.metadata", errs);
    validate_annotations(&annotations, "spec.template.annotations", errs);
    let pod = t_obj(template, "spec", "spec.template", errs).unwrap_or(&Value::Null);
    pod_spec(pod, "spec.template.spec", false, errs);
    if !arr_at(pod, "ephemeralContainers").is_empty() {
        errs.push(FieldError::forbidden(
            "spec.template.spec.ephemeralContainers",
            "ephemeral containers not allowed in pod template",
        ));
    }
    let restart_path = "spec.template.spec.restartPolicy";
    match str_at(pod, "restartPolicy").unwrap_or("") {
        "Always" | "" => errs.push(FieldError::required(restart_path, "valid values: \"OnFailure\", \"Never\"")),
        "OnFailure" if has_failure_policy => {
            errs.push(invalid_str(
                restart_path,
                "OnFailure",
                "only \"Never\" is supported when podFailurePolicy is specified",
            ));
        }
        "OnFailure" | "Never" => {}
        other => errs.push(not_supported(restart_path, other, &["OnFailure", "Never"])),
    }
    let selector = t_obj(spec, "selector", path, errs);
    match selector {
        None => errs.push(FieldError::required("spec.selector", "")),
        Some(sel) => label_selector(sel, "spec.selector", errs),
    }
    let empty = Map::new();
    let template_labels = template_meta.get("labels").and_then(Value::as_object).unwrap_or(&empty);
    if selector_matches(selector, template_labels) == Some(false) {
        errs.push(FieldError::invalid(
            "spec.template.metadata.labels",
            shown(template_meta.get("labels").unwrap_or(&Value::Null)),
            "`selector` does not match template `labels`",
        ));
    }
}

fn job_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    if !semantic_eq(ns.get("completions"), os.get("completions")) {
        if str_at(ns, "completionMode") != Some("Indexed") {
            errs.push(FieldError::invalid(
                "spec.completions",
                shown(ns.get("completions").unwrap_or(&null)),
                IMMUTABLE,
            ));
        } else if let Some(c) = int_at(ns, "completions")
            && Some(c) != int_at(ns, "parallelism")
        {
            errs.push(invalid_int("spec.completions", c, "can only be modified in tandem with spec.parallelism"));
        }
    }
    if !semantic_eq(ns.get("selector"), os.get("selector")) {
        errs.push(FieldError::invalid("spec.selector", shown(ns.get("selector").unwrap_or(&null)), IMMUTABLE));
    }
    let mut old_template = os.get("template").cloned().unwrap_or(Value::Null);
    let suspended_never_started =
        bool_at(os, "suspend") == Some(true) && old.pointer("/status/startTime").is_none_or(Value::is_null);
    if suspended_never_started {
        for pointer in [
            "/spec/nodeSelector",
            "/spec/tolerations",
            "/metadata/annotations",
            "/metadata/labels",
            "/spec/schedulingGates",
            "/spec/affinity/nodeAffinity",
        ] {
            let replacement = ns.get("template").and_then(|t| t.pointer(pointer)).cloned();
            set_pointer(&mut old_template, pointer, replacement);
        }
    }
    if !semantic_eq(ns.get("template"), Some(&old_template)) {
        errs.push(FieldError::invalid("spec.template", shown(ns.get("template").unwrap_or(&null)), IMMUTABLE));
    }
    for field in ["completionMode", "podFailurePolicy", "backoffLimitPerIndex", "managedBy", "successPolicy"] {
        if !semantic_eq(ns.get(field), os.get(field)) {
            errs.push(FieldError::invalid(format!("spec.{field}"), shown(ns.get(field).unwrap_or(&null)), IMMUTABLE));
        }
    }
}

/// Sets (or removes, with None) the value at a JSON pointer, creating parent objects where
/// nothing is; existing list items are addressed by index.
fn set_pointer(target: &mut Value, pointer: &str, value: Option<Value>) {
    let parts: Vec<&str> = pointer.split('/').skip(1).collect();
    let Some((last, parents)) = parts.split_last() else { return };
    let mut cur = target;
    for part in parents {
        if cur.is_null() {
            *cur = Value::Object(Map::new());
        }
        cur = match cur {
            Value::Object(map) => map.entry(part.to_string()).or_insert(Value::Null),
            Value::Array(items) => match part.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(item) => item,
                None => return,
            },
            _ => return,
        };
    }
    if cur.is_null() {
        *cur = Value::Object(Map::new());
    }
    match (cur, value) {
        (Value::Object(map), Some(v)) => {
            map.insert(last.to_string(), v);
        }
        (Value::Object(map), None) => {
            map.remove(*last);
        }
        (Value::Array(items), Some(v)) => {
            if let Some(slot) = last.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                *slot = v;
            }
        }
        _ => {}
    }
}

// ---------------------------------------------------------------------------------------------
// Secrets and ConfigMaps.

/// `data` of a Secret as decoded bytes per key (stringData already folded in by defaulting).
fn secret_data<'a>(obj: &'a Value, errs: &mut Vec<FieldError>) -> Vec<(&'a str, Option<Vec<u8>>)> {
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

fn validate_secret(obj: &Value, errs: &mut Vec<FieldError>) {
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

fn immutable_data(new: &Value, old: &Value, fields: &[&str], errs: &mut Vec<FieldError>) {
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

fn secret_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let new_type = str_at(new, "type").unwrap_or("");
    if new_type != str_at(old, "type").unwrap_or("") {
        errs.push(invalid_str("type", new_type, IMMUTABLE));
    }
    immutable_data(new, old, &["data"], errs);
}

fn validate_configmap(obj: &Value, errs: &mut Vec<FieldError>) {
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

fn configmap_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    immutable_data(new, old, &["data", "binaryData"], errs);
}

// ---------------------------------------------------------------------------------------------
// Services.

fn cluster_ips(spec: &Value) -> Vec<String> {
    let list: Vec<String> = arr_at(spec, "clusterIPs").iter().filter_map(Value::as_str).map(str::to_string).collect();
    if !list.is_empty() {
        return list;
    }
    nonempty_str_at(spec, "clusterIP").map(|ip| vec![ip.to_string()]).unwrap_or_default()
}

fn validate_service(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Service", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    let path = "spec";
    let service_type = t_str(spec, "type", path, errs).unwrap_or("");
    let ips = cluster_ips(spec);
    let headless = ips.first().is_some_and(|ip| ip == "None");
    let ports = t_obj_list(spec, "ports", path, errs);
    if ports.is_empty() && !headless && service_type != "ExternalName" {
        errs.push(FieldError::required("spec.ports", ""));
    }
    match service_type {
        "LoadBalancer" | "NodePort" => {
            if headless {
                errs.push(invalid_str(
                    "spec.clusterIPs[0]",
                    "None",
                    format!("may not be set to 'None' for {service_type} services"),
                ));
            }
            if service_type == "LoadBalancer" {
                for (i, port, _) in &ports {
                    if int_at(port, "port") == Some(10250) {
                        errs.push(invalid_int(
                            idx("spec.ports", *i),
                            10250,
                            "may not expose port 10250 externally since it is used by kubelet",
                        ));
                    }
                }
            }
        }
        "ExternalName" => {
            if !arr_at(spec, "clusterIPs").is_empty() {
                errs.push(FieldError::forbidden("spec.clusterIPs", "may not be set for ExternalName services"));
            }
            if !arr_at(spec, "ipFamilies").is_empty() {
                errs.push(FieldError::forbidden("spec.ipFamilies", "may not be set for ExternalName services"));
            }
            if present(spec, "ipFamilyPolicy") {
                errs.push(FieldError::forbidden("spec.ipFamilyPolicy", "may not be set for ExternalName services"));
            }
            let external = t_str(spec, "externalName", path, errs).unwrap_or("");
            let cname = external.strip_suffix('.').unwrap_or(external);
            if cname.is_empty() {
                errs.push(FieldError::required("spec.externalName", ""));
            } else {
                msgs_invalid(errs, "spec.externalName", cname, names::dns1123_subdomain(cname));
            }
        }
        _ => {}
    }
    let mut port_names = HashSet::new();
    let mut seen_ports = HashSet::new();
    for (i, port, pp) in &ports {
        service_port(port, pp, ports.len() > 1, &mut port_names, errs);
        if service_type == "ClusterIP" && int_at(port, "nodePort").unwrap_or(0) != 0 {
            errs.push(FieldError::forbidden(child(pp, "nodePort"), "may not be used when `type` is 'ClusterIP'"));
        }
        let protocol = str_at(port, "protocol").unwrap_or("");
        let number = int_at(port, "port").unwrap_or(0);
        if !seen_ports.insert((protocol, number)) {
            errs.push(FieldError::duplicate(
                idx("spec.ports", *i),
                serde_json::json!({"port": number, "protocol": protocol}).to_string(),
            ));
        }
    }
    let selector = t_str_map(spec, "selector", path, errs);
    validate_labels(&selector, "spec.selector", errs);
    let affinity = t_str(spec, "sessionAffinity", path, errs);
    one_of(errs, "spec.sessionAffinity", affinity, &["ClientIP", "None"]);
    one_of(errs, "spec.type", Some(service_type), &["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]);
    service_cluster_ips(spec, errs);
    if let Some(p) = t_str(spec, "ipFamilyPolicy", path, errs) {
        one_of(errs, "spec.ipFamilyPolicy", Some(p), &["PreferDualStack", "RequireDualStack", "SingleStack"]);
    }
    for (i, family) in t_str_list(spec, "ipFamilies", path, errs).iter().enumerate() {
        one_of(errs, &idx("spec.ipFamilies", i), Some(family), &["IPv4", "IPv6"]);
    }
    if let Some(p) = t_str(spec, "internalTrafficPolicy", path, errs) {
        one_of(errs, "spec.internalTrafficPolicy", Some(p), &["Cluster", "Local"]);
    }
    let externally_accessible = matches!(service_type, "LoadBalancer" | "NodePort")
        || (service_type == "ClusterIP" && !arr_at(spec, "externalIPs").is_empty());
    if let Some(p) = t_str(spec, "externalTrafficPolicy", path, errs).filter(|p| !p.is_empty()) {
        if !externally_accessible {
            errs.push(invalid_str(
                "spec.externalTrafficPolicy",
                p,
                "may only be set for externally-accessible services",
            ));
        } else {
            one_of(errs, "spec.externalTrafficPolicy", Some(p), &["Cluster", "Local"]);
        }
    }
}

fn service_port(
    port: &Value,
    path: &str,
    require_name: bool,
    names_seen: &mut HashSet<String>,
    errs: &mut Vec<FieldError>,
) {
    let name = t_str(port, "name", path, errs).unwrap_or("");
    if require_name && name.is_empty() {
        errs.push(FieldError::required(child(path, "name"), ""));
    } else if !name.is_empty() {
        msgs_invalid(errs, &child(path, "name"), name, names::dns1123_label(name));
        if !names_seen.insert(name.to_string()) {
            errs.push(FieldError::duplicate(child(path, "name"), quoted(name)));
        }
    }
    let number = t_int(port, "port", path, errs).unwrap_or(0);
    errs.extend(names::port_num(number).into_iter().map(|m| invalid_int(child(path, "port"), number, m)));
    let protocol = t_str(port, "protocol", path, errs);
    one_of(errs, &child(path, "protocol"), protocol, &["SCTP", "TCP", "UDP"]);
    match port.get("targetPort") {
        Some(Value::Number(n)) => match n.as_i64() {
            Some(t) => {
                errs.extend(names::port_num(t).into_iter().map(|m| invalid_int(child(path, "targetPort"), t, m)))
            }
            None => errs.push(type_error(child(path, "targetPort"), &Value::Number(n.clone()), "integer")),
        },
        Some(Value::String(s)) => msgs_invalid(errs, &child(path, "targetPort"), s, names::port_name(s)),
        Some(Value::Null) | None => {}
        Some(other) => errs.push(type_error(child(path, "targetPort"), other, "integer")),
    }
    if let Some(p) = t_str(port, "appProtocol", path, errs) {
        msgs_invalid(errs, &child(path, "appProtocol"), p, names::qualified_name(p));
    }
}

fn service_cluster_ips(spec: &Value, errs: &mut Vec<FieldError>) {
    let list = t_str_list(spec, "clusterIPs", "spec", errs);
    let cluster_ip = str_at(spec, "clusterIP").unwrap_or("");
    let shown_list = shown(&Value::from(list.iter().map(|s| Value::from(*s)).collect::<Vec<_>>()));
    if let Some(first) = list.first()
        && *first != cluster_ip
    {
        errs.push(FieldError::invalid("spec.clusterIPs", shown_list.clone(), "first value must match `clusterIP`"));
    }
    for (i, ip) in list.iter().enumerate() {
        if i == 0 && *ip == "None" {
            if list.len() > 1 {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs",
                    shown_list.clone(),
                    "'None' must be the first and only value",
                ));
            }
            continue;
        }
        msgs_invalid(errs, &idx("spec.clusterIPs", i), ip, names::ip_address(ip));
    }
    if list.is_empty() && !cluster_ip.is_empty() && cluster_ip != "None" {
        msgs_invalid(errs, "spec.clusterIP", cluster_ip, names::ip_address(cluster_ip));
    }
}

fn service_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    if str_at(ns, "type") == Some("ExternalName") || str_at(os, "type") == Some("ExternalName") {
        return;
    }
    let new_ips = cluster_ips(ns);
    let old_ips = cluster_ips(os);
    let headless = |ips: &[String]| ips.first().is_some_and(|ip| ip == "None");
    if headless(&new_ips) && headless(&old_ips) {
        return;
    }
    let listed = shown(&Value::from(new_ips.iter().map(|s| Value::from(s.as_str())).collect::<Vec<_>>()));
    let changed = |i: usize| FieldError::invalid(idx("spec.clusterIPs", i), listed.clone(), "may not change once set");
    use std::cmp::Ordering;
    match old_ips.len().cmp(&new_ips.len()) {
        Ordering::Equal => {
            for (i, (o, n)) in old_ips.iter().zip(&new_ips).enumerate() {
                if o != n {
                    errs.push(changed(i));
                }
            }
        }
        Ordering::Greater => {
            if new_ips.is_empty() {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    listed.clone(),
                    "primary clusterIP can not be unset",
                ));
            } else if new_ips[0] != old_ips[0] {
                errs.push(changed(0));
            }
            if new_ips.len() == 1 && str_at(ns, "ipFamilyPolicy") != Some("SingleStack") {
                errs.push(FieldError::invalid(
                    "spec.clusterIPs[0]",
                    listed.clone(),
                    "`ipFamilyPolicy` must be set to 'SingleStack' when releasing the secondary clusterIP",
                ));
            }
        }
        Ordering::Less => {
            if !old_ips.is_empty() && new_ips[0] != old_ips[0] {
                errs.push(changed(0));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Namespaces, Nodes, PVCs and Events.

fn validate_namespace(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Namespace", errs);
    let Some(spec) = t_obj(obj, "spec", "", errs) else { return };
    let finalizers = t_str_list(spec, "finalizers", "spec", errs);
    for f in &finalizers {
        msgs_invalid(errs, "spec.finalizers", f, names::qualified_name(f));
    }
    kube_finalizer_names(arr_at(spec, "finalizers"), "spec.finalizers", false, errs);
}

fn validate_node(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "Node", errs);
    let Some(spec) = t_obj(obj, "spec", "", errs) else { return };
    let mut unique: HashSet<(String, String)> = HashSet::new();
    for (_, taint, tp) in t_obj_list(spec, "taints", "metadata", errs) {
        let k = t_str(taint, "key", &tp, errs).unwrap_or("");
        msgs_invalid(errs, &child(&tp, "key"), k, names::qualified_name(k));
        let v = t_str(taint, "value", &tp, errs).unwrap_or("");
        let msgs = names::label_value(v);
        if !msgs.is_empty() {
            errs.push(invalid_str(child(&tp, "value"), v, msgs.join(";")));
        }
        let effect = t_str(taint, "effect", &tp, errs).unwrap_or("");
        one_of(errs, &child(&tp, "effect"), Some(effect), &["NoSchedule", "PreferNoSchedule", "NoExecute"]);
        if !unique.insert((effect.to_string(), k.to_string())) {
            errs.push(FieldError {
                kind: FieldErrorKind::Duplicate(shown(taint)),
                field: tp.clone(),
                detail: "taints must be unique by key and effect pair".to_string(),
            });
        }
    }
}

fn node_pod_cidrs(spec: &Value) -> Vec<String> {
    let list: Vec<String> = arr_at(spec, "podCIDRs").iter().filter_map(Value::as_str).map(str::to_string).collect();
    if list.is_empty() {
        nonempty_str_at(spec, "podCIDR").map(|c| vec![c.to_string()]).unwrap_or_default()
    } else {
        list
    }
}

fn node_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let ns = new.get("spec").unwrap_or(&null);
    let os = old.get("spec").unwrap_or(&null);
    let detail = "node updates may not change podCIDR except from \"\" to valid";
    let (new_cidrs, old_cidrs) = (node_pod_cidrs(ns), node_pod_cidrs(os));
    if !old_cidrs.is_empty() {
        if old_cidrs.len() != new_cidrs.len() {
            errs.push(FieldError::forbidden("spec.podCIDRs", detail));
        } else {
            for (i, (o, n)) in old_cidrs.iter().zip(&new_cidrs).enumerate() {
                if o != n {
                    errs.push(FieldError::forbidden(idx("spec.podCIDRs", i), detail));
                }
            }
        }
    }
    let old_provider = str_at(os, "providerID").unwrap_or("");
    if !old_provider.is_empty() && old_provider != str_at(ns, "providerID").unwrap_or("") {
        errs.push(FieldError::forbidden(
            "spec.providerID",
            "node updates may not change providerID except from \"\" to valid",
        ));
    }
}

const ACCESS_MODES: &[&str] = &["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"];

fn validate_pvc(obj: &Value, errs: &mut Vec<FieldError>) {
    core_meta(obj, "PersistentVolumeClaim", errs);
    let spec = t_obj(obj, "spec", "", errs).unwrap_or(&Value::Null);
    let path = "spec";
    let modes = t_str_list(spec, "accessModes", path, errs);
    if modes.is_empty() {
        errs.push(FieldError::required("spec.accessModes", "at least 1 access mode is required"));
    }
    let (mut rwop, mut others) = (false, false);
    for mode in &modes {
        if !ACCESS_MODES.contains(mode) {
            errs.push(not_supported("spec.accessModes", mode, ACCESS_MODES));
        } else if *mode == "ReadWriteOncePod" {
            rwop = true;
        } else {
            others = true;
        }
    }
    if rwop && others {
        errs.push(FieldError::forbidden("spec.accessModes", "may not use ReadWriteOncePod with other access modes"));
    }
    if let Some(sel) = t_obj(spec, "selector", path, errs) {
        label_selector(sel, "spec.selector", errs);
    }
    let storage_path = "spec.resources[storage]";
    let resources = t_obj(spec, "resources", path, errs).unwrap_or(&Value::Null);
    let requests = t_obj(resources, "requests", "spec.resources", errs).unwrap_or(&Value::Null);
    match requests.get("storage").filter(|v| !v.is_null()) {
        None => errs.push(FieldError::required(storage_path, "")),
        Some(q) => {
            if let Some((n, text)) = t_quantity(q, storage_path, errs)
                && n <= 0
            {
                errs.push(invalid_str(storage_path, &text, "must be greater than zero"));
            }
        }
    }
    if let Some(class) = t_str(spec, "storageClassName", path, errs).filter(|c| !c.is_empty()) {
        msgs_invalid(errs, "spec.storageClassName", class, names::dns1123_subdomain(class));
    }
    if let Some(mode) = t_str(spec, "volumeMode", path, errs) {
        one_of(errs, "spec.volumeMode", Some(mode), &["Block", "Filesystem"]);
    }
}

fn storage_request(pvc: &Value, pointer: &str) -> i128 {
    pvc.pointer(pointer)
        .and_then(|q| match q {
            Value::String(s) => quantity::parse_nanos(s).ok(),
            Value::Number(n) => quantity::parse_nanos(&n.to_string()).ok(),
            _ => None,
        })
        .unwrap_or(0)
}

fn pvc_update(new: &Value, old: &Value, errs: &mut Vec<FieldError>) {
    let null = Value::Null;
    let mut new_spec = new.get("spec").cloned().unwrap_or(Value::Null);
    let mut old_spec = old.get("spec").cloned().unwrap_or(Value::Null);
    if nonempty_str_at(&old_spec, "volumeName").is_none() {
        set_pointer(&mut old_spec, "/volumeName", new_spec.get("volumeName").cloned());
    }
    let old_class_annotation =
        old.pointer("/metadata/annotations/volume.beta.kubernetes.io~1storage-class").is_some_and(|v| !v.is_null());
    if !present(&old_spec, "storageClassName") && !old_class_annotation {
        set_pointer(&mut new_spec, "/storageClassName", None);
    }
    let bound = old.pointer("/status/phase").and_then(Value::as_str) == Some("Bound");
    if bound && new_spec.pointer("/resources/requests").is_some_and(Value::is_object) {
        set_pointer(
            &mut new_spec,
            "/resources/requests/storage",
            old_spec.pointer("/resources/requests/storage").cloned(),
        );
    }
    if !semantic_eq(Some(&new_spec), Some(&old_spec)) {
        errs.push(FieldError::forbidden("spec", PVC_UPDATE_FORBIDDEN));
    }
    let new_size = storage_request(new, "/spec/resources/requests/storage");
    let old_size = storage_request(old, "/spec/resources/requests/storage");
    let status_size = storage_request(old, "/status/capacity/storage");
    if new_size < old_size && new_size <= status_size {
        errs.push(FieldError::forbidden(
            "spec.resources.requests.storage",
            "field can not be less than status.capacity",
        ));
    }
    let new_mode = new.pointer("/spec/volumeMode").unwrap_or(&null);
    if !semantic_eq(Some(new_mode), old.pointer("/spec/volumeMode")) {
        errs.push(FieldError::invalid("volumeMode", shown(new_mode), IMMUTABLE));
    }
}

/// Legacy (core/v1) event validation: the v1 API checks only namespaces and, for events that
/// carry `eventTime`, the reporting fields; object metadata is not validated beyond a name.
fn validate_event(obj: &Value, errs: &mut Vec<FieldError>) {
    let meta = obj.get("metadata").unwrap_or(&Value::Null);
    if nonempty_str_at(meta, "name").is_none() && nonempty_str_at(meta, "generateName").is_none() {
        errs.push(FieldError::required("metadata.name", "name or generateName is required"));
    }
    let namespace = str_at(meta, "namespace").unwrap_or("");
    let involved = t_obj(obj, "involvedObject", "", errs).unwrap_or(&Value::Null);
    let involved_ns = t_str(involved, "namespace", "involvedObject", errs).unwrap_or("");
    let mismatch = || invalid_str("involvedObject.namespace", involved_ns, "does not match event.namespace");
    let event_time_set = obj.get("eventTime").is_some_and(|t| !t.is_null() && t.as_str() != Some(""));
    if !event_time_set {
        if involved_ns.is_empty() {
            if !namespace.is_empty() && namespace != "default" {
                errs.push(mismatch());
            }
        } else if namespace != involved_ns {
            errs.push(mismatch());
        }
    } else {
        if involved_ns.is_empty() && namespace != "default" && namespace != "kube-system" {
            errs.push(mismatch());
        }
        let component = t_str(obj, "reportingComponent", "", errs).unwrap_or("");
        if component.is_empty() {
            errs.push(FieldError::required("reportingComponent", ""));
        }
        msgs_invalid(errs, "reportingComponent", component, names::qualified_name(component));
        for (field, limit) in [("reportingInstance", 128), ("action", 128), ("reason", 128)] {
            let v = t_str(obj, field, "", errs).unwrap_or("");
            if v.is_empty() {
                errs.push(FieldError::required(field, ""));
            }
            if v.len() > limit {
                errs.push(invalid_str(field, "", format!("can have at most {limit} characters")));
            }
        }
        if t_str(obj, "message", "", errs).unwrap_or("").len() > 1024 {
            errs.push(invalid_str("message", "", "can have at most 1024 characters"));
        }
    }
    if !namespace.is_empty() {
        msgs_invalid(errs, "namespace", namespace, names::dns1123_subdomain(namespace));
    }
}

/// Decodes secret and config map data as the API server does (standard alphabet, padded).
fn decode_base64(s: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.decode(s).map_err(|e| {
        let at = match e {
            base64::DecodeError::InvalidByte(offset, _) | base64::DecodeError::InvalidLastSymbol(offset, _) => offset,
            base64::DecodeError::InvalidLength(_) | base64::DecodeError::InvalidPadding => s.len(),
        };
        format!("illegal base64 data at input byte {at}")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The single error at `field` with `reason`; fails listing every error otherwise.
    fn find<'a>(errs: &'a [FieldError], field: &str, reason: &str) -> &'a FieldError {
        let hits: Vec<&FieldError> = errs.iter().filter(|e| e.field == field && e.reason() == reason).collect();
        match hits.as_slice() {
            [one] => one,
            _ => panic!(
                "expected one {reason} at {field}, got: {:#?}",
                errs.iter().map(ToString::to_string).collect::<Vec<_>>()
            ),
        }
    }

    fn assert_clean(errs: &[FieldError]) {
        assert!(errs.is_empty(), "unexpected errors: {:#?}", errs.iter().map(ToString::to_string).collect::<Vec<_>>());
    }

    fn created(kind: &str, mut obj: Value) -> Value {
        let mut alloc = || "10.96.0.10".to_string();
        defaults::apply_create_defaults(kind, &mut obj, "uid-1", &mut alloc);
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("uid".into(), json!("uid-1"));
        }
        obj
    }

    fn pod(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    fn simple_pod() -> Value {
        pod(json!({"containers": [{"name": "app", "image": "nginx:1.27"}]}))
    }

    fn with(mut obj: Value, pointer: &str, value: Value) -> Value {
        set_pointer(&mut obj, pointer, Some(value));
        obj
    }

    fn pod_errs(spec: Value) -> Vec<FieldError> {
        validate_create("Pod", &pod(spec))
    }

    fn job(template_spec: Value) -> Value {
        json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "namespace": "default"},
               "spec": {"template": {"spec": template_spec}}})
    }

    fn simple_job() -> Value {
        created("Job", job(json!({"restartPolicy": "Never", "containers": [{"name": "pi", "image": "perl:5"}]})))
    }

    // --- metadata -----------------------------------------------------------------------------

    #[test]
    fn name_rules_per_kind() {
        assert_eq!(name_rule("Pod"), NameRule::Dns1123Subdomain);
        assert_eq!(name_rule("Service"), NameRule::Dns1035Label);
        assert_eq!(name_rule("Namespace"), NameRule::Dns1123Label);
        assert_eq!(name_rule("Node"), NameRule::Dns1123Subdomain);
        assert_eq!(name_rule("Widget"), NameRule::PathSegment);
    }

    #[test]
    fn meta_requires_name_or_generate_name() {
        let errs = validate_object_meta(&json!({}), NameRule::Dns1123Subdomain);
        let e = find(&errs, "metadata.name", "FieldValueRequired");
        assert_eq!(e.to_string(), "metadata.name: Required value: name or generateName is required");
        assert_clean(&validate_object_meta(&json!({"generateName": "web-"}), NameRule::Dns1123Subdomain));
        let errs = validate_object_meta(&json!({"generateName": "Web-"}), NameRule::Dns1123Subdomain);
        find(&errs, "metadata.generateName", "FieldValueInvalid");
        let errs = validate_create("Pod", &json!({"spec": {"containers": [{"name": "a", "image": "x"}]}}));
        find(&errs, "metadata.name", "FieldValueRequired");
    }

    #[test]
    fn meta_name_message_is_the_apiserver_one() {
        let errs = validate_object_meta(&json!({"name": "Foo_bar"}), NameRule::Dns1123Subdomain);
        assert_eq!(
            find(&errs, "metadata.name", "FieldValueInvalid").to_string(),
            "metadata.name: Invalid value: \"Foo_bar\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        );
        assert_clean(&validate_object_meta(&json!({"name": "a:b"}), NameRule::PathSegment));
        let errs = validate_object_meta(&json!({"name": "a/b"}), NameRule::PathSegment);
        assert_eq!(find(&errs, "metadata.name", "FieldValueInvalid").detail, "may not contain '/'");
    }

    #[test]
    fn meta_namespace_generation_labels_annotations() {
        let meta = json!({
            "name": "ok", "namespace": "Bad.NS", "generation": -1,
            "labels": {"good": "v", "bad key!": "v", "k": "-bad-value"},
            "annotations": {"Example.COM/Mixed_Case": "fine", "no//good": "x"}
        });
        let errs = validate_object_meta(&meta, NameRule::Dns1123Subdomain);
        find(&errs, "metadata.namespace", "FieldValueInvalid");
        assert_eq!(
            find(&errs, "metadata.generation", "FieldValueInvalid").message(),
            "Invalid value: -1: must be greater than or equal to 0"
        );
        let label_errs: Vec<&FieldError> = errs.iter().filter(|e| e.field == "metadata.labels").collect();
        assert_eq!(label_errs.len(), 2);
        assert!(label_errs.iter().any(|e| e.kind == FieldErrorKind::Invalid("\"bad key!\"".into())));
        assert!(label_errs.iter().any(|e| e.kind == FieldErrorKind::Invalid("\"-bad-value\"".into())));
        let ann = find(&errs, "metadata.annotations", "FieldValueInvalid");
        assert_eq!(ann.kind, FieldErrorKind::Invalid("\"no//good\"".into()));
    }

    #[test]
    fn meta_annotations_total_size_limit() {
        let big = "x".repeat(256 * 1024);
        let errs = validate_object_meta(&json!({"name": "a", "annotations": {"k": big}}), NameRule::Dns1123Subdomain);
        let e = find(&errs, "metadata.annotations", "FieldValueTooLong");
        assert_eq!(e.kind, FieldErrorKind::TooLong { max: 262144 });
        let fits = "x".repeat(256 * 1024 - 1);
        assert_clean(&validate_object_meta(
            &json!({"name": "a", "annotations": {"k": fits}}),
            NameRule::Dns1123Subdomain,
        ));
    }

    #[test]
    fn meta_finalizers() {
        let errs = validate_object_meta(
            &json!({"name": "a", "finalizers": ["example.com/x", "-bad"]}),
            NameRule::Dns1123Subdomain,
        );
        find(&errs, "metadata.finalizers", "FieldValueInvalid");
        let errs = validate_object_meta(
            &json!({"name": "a", "finalizers": ["orphan", "foregroundDeletion"]}),
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            find(&errs, "metadata.finalizers", "FieldValueInvalid").message(),
            "Invalid value: []string{\"orphan\", \"foregroundDeletion\"}: finalizer orphan and foregroundDeletion cannot be both set"
        );
        assert_clean(&validate_object_meta(
            &json!({"name": "a", "finalizers": ["custom"]}),
            NameRule::Dns1123Subdomain,
        ));
        let errs =
            validate_create("ConfigMap", &json!({"metadata": {"name": "a", "finalizers": ["kubernetes", "custom"]}}));
        assert_eq!(
            find(&errs, "metadata.finalizers[1]", "FieldValueInvalid").detail,
            "name is neither a standard finalizer name nor is it fully qualified"
        );
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn meta_owner_references() {
        let meta = json!({"name": "a", "ownerReferences": [
            {"apiVersion": "", "kind": "", "name": "", "uid": ""},
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "u1", "controller": true},
            {"apiVersion": "batch/v1", "kind": "Job", "name": "j1", "uid": "u2", "controller": true}
        ]});
        let errs = validate_object_meta(&meta, NameRule::Dns1123Subdomain);
        assert_eq!(
            find(&errs, "metadata.ownerReferences.apiVersion", "FieldValueInvalid").detail,
            "version must not be empty"
        );
        assert_eq!(find(&errs, "metadata.ownerReferences.kind", "FieldValueInvalid").detail, "must not be empty");
        find(&errs, "metadata.ownerReferences.name", "FieldValueInvalid");
        find(&errs, "metadata.ownerReferences.uid", "FieldValueInvalid");
        assert_eq!(
            find(&errs, "metadata.ownerReferences", "FieldValueInvalid").detail,
            "Only one reference can have Controller set to true. Found \"true\" in references for ReplicaSet/rs1 and Job/j1"
        );
        let errs = validate_object_meta(
            &json!({"name": "a", "ownerReferences": [{"apiVersion": "v1", "kind": "Event", "name": "e", "uid": "u"}]}),
            NameRule::Dns1123Subdomain,
        );
        assert_eq!(
            find(&errs, "metadata.ownerReferences", "FieldValueInvalid").detail,
            "/v1, Kind=Event is disallowed from being an owner"
        );
    }

    #[test]
    fn wrong_json_types_are_type_errors() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "ports": [{"containerPort": "80"}]}]}));
        let e = find(&errs, "spec.containers[0].ports[0].containerPort", "FieldValueTypeInvalid");
        assert_eq!(e.kind, FieldErrorKind::TypeInvalid { value: "\"string\"".into(), expected: "integer".into() });
        let errs = validate_object_meta(&json!({"name": "a", "labels": {"k": 1}}), NameRule::Dns1123Subdomain);
        find(&errs, "metadata.labels[k]", "FieldValueTypeInvalid");
        let errs = validate_create("Pod", &json!("not an object"));
        find(&errs, "", "FieldValueTypeInvalid");
    }

    #[test]
    fn unknown_kinds_get_metadata_validation_only() {
        assert_clean(&validate_create("Widget", &json!({"metadata": {"name": "Any_Name:1"}, "spec": {"x": 1}})));
        let errs = validate_create("Widget", &json!({"metadata": {"name": ".."}}));
        assert_eq!(find(&errs, "metadata.name", "FieldValueInvalid").detail, "may not be '..'");
    }

    // --- pods ---------------------------------------------------------------------------------

    #[test]
    fn minimal_pod_is_valid_with_or_without_defaults() {
        assert_clean(&validate_create("Pod", &simple_pod()));
        assert_clean(&validate_create("Pod", &created("Pod", simple_pod())));
    }

    #[test]
    fn pod_requires_containers_and_images() {
        let errs = pod_errs(json!({}));
        assert_eq!(find(&errs, "spec.containers", "FieldValueRequired").to_string(), "spec.containers: Required value");
        let errs = pod_errs(json!({"containers": []}));
        find(&errs, "spec.containers", "FieldValueRequired");
        let errs = pod_errs(json!({"containers": [{"name": "a"}]}));
        find(&errs, "spec.containers[0].image", "FieldValueRequired");
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": " nginx"}]}));
        assert_eq!(
            find(&errs, "spec.containers[0].image", "FieldValueInvalid").detail,
            "must not have leading or trailing whitespace"
        );
    }

    #[test]
    fn container_names_are_labels_and_unique_across_init_containers() {
        let errs = pod_errs(json!({
            "initContainers": [{"name": "app", "image": "x"}, {"name": "Bad_Name", "image": "x"}],
            "containers": [{"name": "app", "image": "x"}, {"name": "app", "image": "x"}, {"image": "x"}]
        }));
        assert_eq!(find(&errs, "spec.containers[1].name", "FieldValueDuplicate").message(), "Duplicate value: \"app\"");
        find(&errs, "spec.initContainers[0].name", "FieldValueDuplicate");
        find(&errs, "spec.initContainers[1].name", "FieldValueInvalid");
        find(&errs, "spec.containers[2].name", "FieldValueRequired");
    }

    #[test]
    fn container_ports() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "ports": [
            {"containerPort": 0},
            {"containerPort": 70000, "name": "http"},
            {"containerPort": 80, "name": "http", "protocol": "ICMP"},
            {"containerPort": 81, "name": "Not_Valid"},
            {"containerPort": 82, "hostPort": 8080},
            {"containerPort": 83, "hostPort": 8080}
        ]}]}));
        find(&errs, "spec.containers[0].ports[0].containerPort", "FieldValueRequired");
        assert_eq!(
            find(&errs, "spec.containers[0].ports[1].containerPort", "FieldValueInvalid").to_string(),
            "spec.containers[0].ports[1].containerPort: Invalid value: 70000: must be between 1 and 65535, inclusive"
        );
        find(&errs, "spec.containers[0].ports[2].name", "FieldValueDuplicate");
        assert_eq!(
            find(&errs, "spec.containers[0].ports[2].protocol", "FieldValueNotSupported").message(),
            "Unsupported value: \"ICMP\": supported values: \"SCTP\", \"TCP\", \"UDP\""
        );
        find(&errs, "spec.containers[0].ports[3].name", "FieldValueInvalid");
        assert_eq!(
            find(&errs, "spec.containers[0].ports[5].hostPort", "FieldValueDuplicate").message(),
            "Duplicate value: \"TCP//8080\""
        );
    }

    #[test]
    fn env_names_and_sources() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "env": [
            {"name": "1_RELAXED_OK", "value": "v"},
            {"name": "A=B"},
            {"name": ""},
            {"name": "NOSRC", "valueFrom": {}},
            {"name": "BOTH", "value": "v", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "TWO", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}, "secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "NOKEY", "valueFrom": {"secretKeyRef": {"name": "s"}}},
            {"name": "BADPATH", "valueFrom": {"fieldRef": {"fieldPath": "spec.containers"}}},
            {"name": "LABEL", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "RES", "valueFrom": {"resourceFieldRef": {"resource": "limits.gpu"}}}
        ]}]}));
        let env = "spec.containers[0].env";
        assert!(!errs.iter().any(|e| e.field == format!("{env}[0].name")));
        assert_eq!(
            find(&errs, &format!("{env}[1].name"), "FieldValueInvalid").detail,
            "a valid environment variable name must consist only of printable ASCII characters other than '='"
        );
        find(&errs, &format!("{env}[2].name"), "FieldValueRequired");
        assert_eq!(
            find(&errs, &format!("{env}[3].valueFrom"), "FieldValueInvalid").message(),
            "Invalid value: \"\": must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`"
        );
        assert_eq!(
            find(&errs, &format!("{env}[4].valueFrom"), "FieldValueInvalid").detail,
            "may not be specified when `value` is not empty"
        );
        assert_eq!(
            find(&errs, &format!("{env}[5].valueFrom"), "FieldValueInvalid").detail,
            "may not have more than one field specified at a time"
        );
        find(&errs, &format!("{env}[6].valueFrom.secretKeyRef.key"), "FieldValueRequired");
        find(&errs, &format!("{env}[7].valueFrom.fieldRef.fieldPath"), "FieldValueNotSupported");
        assert!(!errs.iter().any(|e| e.field.starts_with(&format!("{env}[8]"))));
        find(&errs, &format!("{env}[9].valueFrom.resourceFieldRef.resource"), "FieldValueNotSupported");
    }

    #[test]
    fn env_from_sources() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "envFrom": [
            {"prefix": "OK_"},
            {"secretRef": {"name": ""}},
            {"configMapRef": {"name": "cm"}, "secretRef": {"name": "s"}},
            {"configMapRef": {"name": "trailing-"}}
        ]}]}));
        let list = "spec.containers[0].envFrom";
        let at_list: Vec<&FieldError> = errs.iter().filter(|e| e.field == list).collect();
        assert_eq!(at_list.len(), 2);
        assert_eq!(at_list[0].detail, "must specify one of: `configMapRef` or `secretRef`");
        assert_eq!(at_list[1].detail, "may not have more than one field specified at a time");
        find(&errs, &format!("{list}[1].secretRef.name"), "FieldValueRequired");
        assert!(!errs.iter().any(|e| e.field.starts_with(&format!("{list}[3]"))));
    }

    #[test]
    fn volumes_and_mounts() {
        let errs = pod_errs(json!({
            "volumes": [
                {"name": "data", "emptyDir": {}},
                {"name": "data", "emptyDir": {}},
                {"name": "Bad", "emptyDir": {}},
                {"name": "two", "emptyDir": {}, "secret": {"secretName": "s"}},
                {"name": "nosecret", "secret": {}},
                {"name": "mode", "configMap": {"name": "c", "defaultMode": 512}}
            ],
            "containers": [{"name": "a", "image": "x", "volumeMounts": [
                {"name": "data", "mountPath": "/data"},
                {"name": "x", "mountPath": "/data"},
                {"name": "data", "mountPath": "/other", "subPath": "../etc"},
                {"name": "nosecret", "mountPath": "/s"}
            ]}]
        }));
        assert_eq!(find(&errs, "spec.volumes[1].name", "FieldValueDuplicate").message(), "Duplicate value: \"data\"");
        find(&errs, "spec.volumes[2].name", "FieldValueInvalid");
        assert_eq!(
            find(&errs, "spec.volumes[3].secret", "FieldValueForbidden").detail,
            "may not specify more than 1 volume type"
        );
        find(&errs, "spec.volumes[4].secret.secretName", "FieldValueRequired");
        assert_eq!(
            find(&errs, "spec.volumes[5].configMap.defaultMode", "FieldValueInvalid").detail,
            "must be a number between 0 and 0777 (octal), both inclusive"
        );
        let m = "spec.containers[0].volumeMounts";
        assert_eq!(
            find(&errs, &format!("{m}[1].name"), "FieldValueInvalid").to_string(),
            format!("{m}[1].name: Invalid value: \"x\": not found")
        );
        assert_eq!(find(&errs, &format!("{m}[1].mountPath"), "FieldValueInvalid").detail, "must be unique");
        assert_eq!(find(&errs, &format!("{m}.subPath"), "FieldValueInvalid").detail, "must not contain '..'");
        find(&errs, &format!("{m}[3].name"), "FieldValueInvalid");
    }

    #[test]
    fn restart_and_dns_policies() {
        let errs = pod_errs(
            json!({"restartPolicy": "Sometimes", "dnsPolicy": "Magic", "containers": [{"name": "a", "image": "x"}]}),
        );
        assert_eq!(
            find(&errs, "spec.restartPolicy", "FieldValueNotSupported").message(),
            "Unsupported value: \"Sometimes\": supported values: \"Always\", \"OnFailure\", \"Never\""
        );
        assert_eq!(
            find(&errs, "spec.dnsPolicy", "FieldValueNotSupported").message(),
            "Unsupported value: \"Magic\": supported values: \"ClusterFirstWithHostNet\", \"ClusterFirst\", \"Default\", \"None\""
        );
        let errs = pod_errs(json!({"dnsPolicy": "None", "containers": [{"name": "a", "image": "x"}]}));
        assert_eq!(
            find(&errs, "spec.dnsConfig", "FieldValueRequired").detail,
            "must provide `dnsConfig` when `dnsPolicy` is None"
        );
        let errs = pod_errs(
            json!({"dnsPolicy": "None", "dnsConfig": {"nameservers": ["1.1.1.1", "nope"]}, "containers": [{"name": "a", "image": "x"}]}),
        );
        find(&errs, "spec.dnsConfig.nameservers[1]", "FieldValueInvalid");
        assert_eq!(errs.len(), 1);
    }

    #[test]
    fn resources_requests_within_limits() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "resources": {
            "limits": {"cpu": "500m", "memory": "1Gi"},
            "requests": {"cpu": "1", "memory": "1024Mi"}
        }}]}));
        let e = find(&errs, "spec.containers[0].resources.requests", "FieldValueInvalid");
        assert_eq!(e.message(), "Invalid value: \"1\": must be less than or equal to cpu limit of 500m");
        assert_eq!(errs.len(), 1);
        assert_clean(&pod_errs(json!({"containers": [{"name": "a", "image": "x", "resources": {
            "limits": {"cpu": "1.5", "memory": "128Mi"}, "requests": {"cpu": "1500m", "memory": "100M"}}}]})));
    }

    #[test]
    fn resource_names_and_quantities() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "resources": {
            "limits": {"cpu": "lots", "memory": "-1", "foo": "1", "example.com/gpu": "2"},
            "requests": {"example.com/gpu": "1", "example.com/fpga": "1", "example.com/half": "0.5"}
        }}]}));
        let lim = "spec.containers[0].resources.limits";
        assert_eq!(
            find(&errs, &format!("{lim}[cpu]"), "FieldValueInvalid").detail,
            "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
        );
        assert_eq!(
            find(&errs, &format!("{lim}[memory]"), "FieldValueInvalid").detail,
            "must be greater than or equal to 0"
        );
        assert_eq!(
            find(&errs, &format!("{lim}[foo]"), "FieldValueInvalid").detail,
            "must be a standard resource for containers"
        );
        let req = "spec.containers[0].resources.requests";
        assert_eq!(find(&errs, req, "FieldValueInvalid").detail, "must be equal to example.com/gpu limit of 2");
        let missing: Vec<&FieldError> =
            errs.iter().filter(|e| e.field == lim && e.reason() == "FieldValueRequired").collect();
        assert_eq!(missing.len(), 2);
        assert_eq!(missing[0].detail, "Limit must be set for non overcommitable resources");
        assert_eq!(find(&errs, &format!("{req}[example.com/half]"), "FieldValueInvalid").detail, "must be an integer");
    }

    #[test]
    fn pod_level_numbers_and_security_context() {
        let errs = pod_errs(json!({
            "activeDeadlineSeconds": 0,
            "terminationGracePeriodSeconds": -1,
            "securityContext": {"runAsUser": -1, "supplementalGroups": [5, -5]},
            "containers": [{"name": "a", "image": "x", "securityContext": {"runAsGroup": 4294967296i64, "privileged": true, "allowPrivilegeEscalation": false}}]
        }));
        assert_eq!(
            find(&errs, "spec.activeDeadlineSeconds", "FieldValueInvalid").message(),
            "Invalid value: 0: must be between 1 and 2147483647, inclusive"
        );
        assert_eq!(
            find(&errs, "spec.terminationGracePeriodSeconds", "FieldValueInvalid").detail,
            "must be greater than or equal to 0"
        );
        assert_eq!(
            find(&errs, "spec.securityContext.runAsUser", "FieldValueInvalid").message(),
            "Invalid value: -1: must be between 0 and 2147483647, inclusive"
        );
        find(&errs, "spec.securityContext.supplementalGroups[1]", "FieldValueInvalid");
        find(&errs, "spec.containers[0].securityContext.runAsGroup", "FieldValueInvalid");
        assert_eq!(
            find(&errs, "spec.containers[0].securityContext", "FieldValueInvalid").detail,
            "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"
        );
    }

    #[test]
    fn tolerations_operators_and_effects() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x"}], "tolerations": [
            {"key": "k", "operator": "Like", "effect": "NoExecute"},
            {"key": "k", "operator": "Equal", "value": "v", "effect": "Sometimes"},
            {"operator": "Equal", "value": "v"},
            {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 10},
            {"key": "k", "operator": "Exists", "value": "v"},
            {"key": "bad key", "operator": "Exists"}
        ]}));
        assert_eq!(
            find(&errs, "spec.tolerations[0].operator", "FieldValueNotSupported").message(),
            "Unsupported value: \"Like\": supported values: \"Equal\", \"Exists\""
        );
        assert_eq!(
            find(&errs, "spec.tolerations[1].effect", "FieldValueNotSupported").message(),
            "Unsupported value: \"Sometimes\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\""
        );
        assert_eq!(
            find(&errs, "spec.tolerations[2].operator", "FieldValueInvalid").detail,
            "operator must be Exists when `key` is empty, which means \"match all values and all keys\""
        );
        assert_eq!(
            find(&errs, "spec.tolerations[3].effect", "FieldValueInvalid").detail,
            "effect must be 'NoExecute' when `tolerationSeconds` is set"
        );
        assert_eq!(
            find(&errs, "spec.tolerations[4].operator", "FieldValueInvalid").detail,
            "value must be empty when `operator` is 'Exists'"
        );
        find(&errs, "spec.tolerations[5].key", "FieldValueInvalid");
    }

    #[test]
    fn node_selector_and_names_in_spec() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x"}],
            "nodeSelector": {"disk": "ssd!"}, "nodeName": "Node_1", "serviceAccountName": "SA", "hostname": "a.b",
            "priorityClassName": "high", "preemptionPolicy": "Always"}));
        find(&errs, "spec.nodeSelector", "FieldValueInvalid");
        find(&errs, "spec.nodeName", "FieldValueInvalid");
        find(&errs, "spec.serviceAccountName", "FieldValueInvalid");
        assert_eq!(find(&errs, "spec.hostname", "FieldValueInvalid").detail, "must not contain dots");
        find(&errs, "spec.preemptionPolicy", "FieldValueNotSupported");
        assert_eq!(errs.len(), 5);
    }

    #[test]
    fn pod_create_rejects_ephemeral_containers_and_restart_policy_on_regular_containers() {
        let errs = pod_errs(json!({"containers": [{"name": "a", "image": "x", "restartPolicy": "Always"}],
            "initContainers": [{"name": "side", "image": "x", "restartPolicy": "Never"}],
            "ephemeralContainers": [{"name": "dbg", "image": "busybox"}]}));
        find(&errs, "spec.ephemeralContainers", "FieldValueForbidden");
        assert_eq!(
            find(&errs, "spec.containers[0].restartPolicy", "FieldValueForbidden").detail,
            "may not be set for non-init containers"
        );
        find(&errs, "spec.initContainers[0].restartPolicy", "FieldValueNotSupported");
    }

    // --- pod updates ----------------------------------------------------------------------------

    #[test]
    fn pod_update_allows_image_changes() {
        let old = created("Pod", simple_pod());
        let new = with(old.clone(), "/spec/containers/0/image", json!("nginx:1.28"));
        assert_clean(&validate_update("Pod", &new, &old));
    }

    #[test]
    fn pod_update_accepts_a_put_without_server_set_fields() {
        let old = with(created("Pod", simple_pod()), "/status/phase", json!("Running"));
        let new = with(simple_pod(), "/spec/containers/0/image", json!("nginx:1.28"));
        assert_clean(&validate_update("Pod", &new, &old));
    }

    #[test]
    fn pod_update_forbids_other_spec_changes() {
        let old = created("Pod", simple_pod());
        for (pointer, value) in [
            ("/spec/containers/0/command", json!(["sleep", "1"])),
            ("/spec/nodeName", json!("node-2")),
            ("/spec/terminationGracePeriodSeconds", json!(10)),
            ("/spec/restartPolicy", json!("Never")),
        ] {
            let new = with(old.clone(), pointer, value);
            let errs = validate_update("Pod", &new, &old);
            let e = find(&errs, "spec", "FieldValueForbidden");
            assert_eq!(e.detail, POD_UPDATE_FORBIDDEN, "{pointer}");
            assert_eq!(errs.len(), 1, "{pointer}");
        }
        let e = find(
            &validate_update("Pod", &with(old.clone(), "/spec/nodeName", json!("n")), &old),
            "spec",
            "FieldValueForbidden",
        )
        .to_string();
        assert!(
            e.starts_with("spec: Forbidden: pod updates may not change fields other than `spec.containers[*].image`")
        );
    }

    #[test]
    fn pod_update_container_count_and_names() {
        let old = created("Pod", simple_pod());
        let mut new = old.clone();
        if let Some(list) = new.pointer_mut("/spec/containers").and_then(Value::as_array_mut) {
            list.push(json!({"name": "two", "image": "x"}));
        }
        let errs = validate_update("Pod", &new, &old);
        assert_eq!(
            find(&errs, "spec.containers", "FieldValueForbidden").detail,
            "pod updates may not add or remove containers"
        );
        let errs = validate_update("Pod", &with(old.clone(), "/metadata/name", json!("other")), &old);
        assert_eq!(
            find(&errs, "metadata.name", "FieldValueInvalid").message(),
            "Invalid value: \"other\": field is immutable"
        );
    }

    #[test]
    fn pod_update_active_deadline_rules() {
        let old = created("Pod", simple_pod());
        let with_deadline = with(old.clone(), "/spec/activeDeadlineSeconds", json!(100));
        assert_clean(&validate_update("Pod", &with_deadline, &old));
        assert_clean(&validate_update(
            "Pod",
            &with(old.clone(), "/spec/activeDeadlineSeconds", json!(50)),
            &with_deadline,
        ));
        let errs =
            validate_update("Pod", &with(old.clone(), "/spec/activeDeadlineSeconds", json!(200)), &with_deadline);
        assert_eq!(
            find(&errs, "spec.activeDeadlineSeconds", "FieldValueInvalid").detail,
            "must be less than or equal to previous value"
        );
        let errs = validate_update("Pod", &old, &with_deadline);
        assert_eq!(
            find(&errs, "spec.activeDeadlineSeconds", "FieldValueInvalid").message(),
            "Invalid value: null: must not update from a positive integer to nil value"
        );
    }

    #[test]
    fn pod_update_tolerations_only_grow() {
        let old = created("Pod", with(simple_pod(), "/spec/tolerations", json!([{"key": "a", "operator": "Exists"}])));
        let mut grown = old.clone();
        if let Some(list) = grown.pointer_mut("/spec/tolerations").and_then(Value::as_array_mut) {
            list.push(json!({"key": "b", "operator": "Exists", "effect": "NoSchedule"}));
        }
        assert_clean(&validate_update("Pod", &grown, &old));
        let changed = with(old.clone(), "/spec/tolerations/0/key", json!("z"));
        let errs = validate_update("Pod", &changed, &old);
        assert_eq!(
            find(&errs, "spec.tolerations", "FieldValueForbidden").detail,
            "existing toleration can not be modified except its tolerationSeconds"
        );
        let seconds = with(old.clone(), "/spec/tolerations/1/tolerationSeconds", json!(60));
        assert_clean(&validate_update("Pod", &seconds, &old));
    }

    #[test]
    fn pod_update_grace_period_may_go_from_negative_to_one() {
        let old = with(created("Pod", simple_pod()), "/spec/terminationGracePeriodSeconds", json!(-5));
        let new = with(old.clone(), "/spec/terminationGracePeriodSeconds", json!(1));
        assert!(!validate_update("Pod", &new, &old).iter().any(|e| e.field == "spec"));
        let new = with(old.clone(), "/spec/terminationGracePeriodSeconds", json!(2));
        find(&validate_update("Pod", &new, &old), "spec", "FieldValueForbidden");
    }

    // --- jobs -------------------------------------------------------------------------------------

    #[test]
    fn created_job_is_valid() {
        assert_clean(&validate_create("Job", &simple_job()));
    }

    #[test]
    fn job_restart_policy_must_be_on_failure_or_never() {
        let errs = validate_create("Job", &created("Job", job(json!({"containers": [{"name": "a", "image": "x"}]}))));
        assert_eq!(
            find(&errs, "spec.template.spec.restartPolicy", "FieldValueRequired").to_string(),
            "spec.template.spec.restartPolicy: Required value: valid values: \"OnFailure\", \"Never\""
        );
        let errs = validate_create("Job", &with(simple_job(), "/spec/template/spec/restartPolicy", json!("Sometimes")));
        let unsupported: Vec<&FieldError> = errs
            .iter()
            .filter(|e| e.field == "spec.template.spec.restartPolicy" && e.reason() == "FieldValueNotSupported")
            .collect();
        assert_eq!(unsupported.len(), 2);
        assert!(
            unsupported
                .iter()
                .any(|e| e.message() == "Unsupported value: \"Sometimes\": supported values: \"OnFailure\", \"Never\"")
        );
    }

    #[test]
    fn job_counts_must_not_be_negative() {
        for field in ["backoffLimit", "parallelism", "completions", "activeDeadlineSeconds", "ttlSecondsAfterFinished"]
        {
            let errs = validate_create("Job", &with(simple_job(), &format!("/spec/{field}"), json!(-1)));
            let e = find(&errs, &format!("spec.{field}"), "FieldValueInvalid");
            assert_eq!(e.message(), "Invalid value: -1: must be greater than or equal to 0");
        }
        let errs = validate_create("Job", &with(simple_job(), "/spec/completionMode", json!("Sometimes")));
        assert_eq!(
            find(&errs, "spec.completionMode", "FieldValueNotSupported").message(),
            "Unsupported value: \"Sometimes\": supported values: \"NonIndexed\", \"Indexed\""
        );
    }

    #[test]
    fn job_template_is_a_pod_spec_with_template_paths() {
        let errs = validate_create(
            "Job",
            &created("Job", job(json!({"restartPolicy": "Never", "containers": [{"name": "a"}]}))),
        );
        find(&errs, "spec.template.spec.containers[0].image", "FieldValueRequired");
        let errs = validate_create("Job", &with(simple_job(), "/spec/template/metadata/labels/bad key", json!("v")));
        assert!(errs.iter().any(|e| e.field == "spec.template.labels" && e.reason() == "FieldValueInvalid"));
        let errs = validate_create("Job", &with(simple_job(), "/spec/template/spec/containers/0/image", json!(" x")));
        assert!(!errs.iter().any(|e| e.field.ends_with(".image")), "whitespace in template images is a Pod-only rule");
    }

    #[test]
    fn job_selector_must_match_template_labels() {
        let manual = json!({"metadata": {"name": "m", "namespace": "default", "uid": "u"}, "spec": {
            "manualSelector": true, "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "b"}}, "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}}}});
        let errs = validate_create("Job", &manual);
        let e = find(&errs, "spec.template.metadata.labels", "FieldValueInvalid");
        assert_eq!(
            e.message(),
            "Invalid value: map[string]string{\"app\":\"b\"}: `selector` does not match template `labels`"
        );
        assert_eq!(errs.len(), 1);
        let matching = with(manual.clone(), "/spec/template/metadata/labels/app", json!("a"));
        assert_clean(&validate_create("Job", &matching));
        let errs = validate_create(
            "Job",
            &with(matching, "/spec/selector", json!({"matchExpressions": [{"key": "app", "operator": "In"}]})),
        );
        assert_eq!(
            find(&errs, "spec.selector.matchExpressions[0].values", "FieldValueRequired").detail,
            "must be specified when `operator` is 'In' or 'NotIn'"
        );
    }

    #[test]
    fn job_generated_selector_is_checked() {
        let mut no_uid = simple_job();
        if let Some(meta) = no_uid.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("uid");
        }
        find(&validate_create("Job", &no_uid), "metadata.uid", "FieldValueRequired");
        let foreign = with(simple_job(), "/spec/selector", json!({"matchLabels": {"app": "other"}}));
        let errs = validate_create("Job", &foreign);
        assert_eq!(find(&errs, "spec.selector", "FieldValueInvalid").detail, "`selector` not auto-generated");
        let raw = job(json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}));
        let errs = validate_create("Job", &with(raw, "/metadata/uid", json!("u")));
        find(&errs, "spec.selector", "FieldValueRequired");
        find(&errs, "spec.template.metadata.labels", "FieldValueInvalid");
    }

    #[test]
    fn indexed_job_names_must_leave_room_for_the_index() {
        let name = "a".repeat(62);
        let mut j = job(json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}));
        j = with(j, "/metadata/name", json!(name));
        j = with(j, "/spec/completionMode", json!("Indexed"));
        j = with(j, "/spec/completions", json!(10));
        let errs = validate_create("Job", &created("Job", j));
        assert_eq!(
            find(&errs, "metadata.name", "FieldValueInvalid").detail,
            format!("will not able to create pod with invalid DNS label: {name}-9")
        );
    }

    #[test]
    fn job_update_immutability() {
        let old = simple_job();
        let errs =
            validate_update("Job", &with(old.clone(), "/spec/template/spec/containers/0/image", json!("perl:6")), &old);
        let e = find(&errs, "spec.template", "FieldValueInvalid");
        assert_eq!(e.detail, "field is immutable");
        assert_eq!(errs.len(), 1);
        let errs = validate_update("Job", &with(old.clone(), "/spec/completions", json!(3)), &old);
        assert_eq!(
            find(&errs, "spec.completions", "FieldValueInvalid").message(),
            "Invalid value: 3: field is immutable"
        );
        let errs = validate_update("Job", &with(old.clone(), "/spec/selector/matchLabels/x", json!("y")), &old);
        assert!(errs.iter().any(|e| e.field == "spec.selector" && e.detail == "field is immutable"));
        assert!(errs.iter().any(|e| e.field == "spec.selector" && e.detail == "`selector` not auto-generated"));
        assert_clean(&validate_update("Job", &with(old.clone(), "/spec/parallelism", json!(4)), &old));
        assert_clean(&validate_update("Job", &with(old.clone(), "/spec/suspend", json!(true)), &old));
    }

    #[test]
    fn suspended_unstarted_job_may_change_scheduling_directives() {
        let old = with(simple_job(), "/spec/suspend", json!(true));
        let new = with(old.clone(), "/spec/template/spec/nodeSelector", json!({"zone": "a"}));
        assert_clean(&validate_update("Job", &new, &old));
        let started = with(old.clone(), "/status/startTime", json!("2024-01-01T00:00:00Z"));
        find(&validate_update("Job", &new, &started), "spec.template", "FieldValueInvalid");
    }

    #[test]
    fn indexed_job_completions_change_with_parallelism() {
        let mut j = job(json!({"restartPolicy": "Never", "containers": [{"name": "a", "image": "x"}]}));
        j = with(j, "/spec/completionMode", json!("Indexed"));
        j = with(j, "/spec/completions", json!(2));
        j = with(j, "/spec/parallelism", json!(2));
        let old = created("Job", j);
        let both = with(with(old.clone(), "/spec/completions", json!(4)), "/spec/parallelism", json!(4));
        assert_clean(&validate_update("Job", &both, &old));
        let errs = validate_update("Job", &with(old.clone(), "/spec/completions", json!(4)), &old);
        assert_eq!(
            find(&errs, "spec.completions", "FieldValueInvalid").detail,
            "can only be modified in tandem with spec.parallelism"
        );
    }

    // --- secrets and config maps ------------------------------------------------------------------

    fn secret(extra: Value) -> Value {
        let mut s =
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "default"}});
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
        let errs = validate_create(
            "Secret",
            &secret(json!({"data": {"a/b": "eA==", "bad": "%%%%"}, "stringData": {"c d": "x"}})),
        );
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
        let errs =
            validate_create("Secret", &secret(json!({"type": "kubernetes.io/tls", "data": {"tls.crt": "eA=="}})));
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

    // --- services ---------------------------------------------------------------------------------

    fn service(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn service_names_are_dns1035_labels() {
        assert_clean(&validate_create("Service", &service(json!({"ports": [{"port": 80}]}))));
        let errs = validate_create(
            "Service",
            &with(service(json!({"ports": [{"port": 80}]})), "/metadata/name", json!("1web")),
        );
        assert!(
            find(&errs, "metadata.name", "FieldValueInvalid").detail.starts_with("a DNS-1035 label must consist of")
        );
    }

    #[test]
    fn service_ports() {
        let errs = validate_create(
            "Service",
            &service(json!({"ports": [
                {"port": 0, "protocol": "ICMP"},
                {"port": 80, "name": "web", "targetPort": "8080"},
                {"port": 81, "name": "web", "targetPort": 70000},
                {"port": 80, "name": "dup-port", "nodePort": 30080}
            ]})),
        );
        find(&errs, "spec.ports[0].name", "FieldValueRequired");
        assert_eq!(
            find(&errs, "spec.ports[0].port", "FieldValueInvalid").message(),
            "Invalid value: 0: must be between 1 and 65535, inclusive"
        );
        find(&errs, "spec.ports[0].protocol", "FieldValueNotSupported");
        assert_eq!(
            find(&errs, "spec.ports[1].targetPort", "FieldValueInvalid").detail,
            "must contain at least one letter (a-z)"
        );
        find(&errs, "spec.ports[2].name", "FieldValueDuplicate");
        find(&errs, "spec.ports[2].targetPort", "FieldValueInvalid");
        assert_eq!(
            find(&errs, "spec.ports[3].nodePort", "FieldValueForbidden").detail,
            "may not be used when `type` is 'ClusterIP'"
        );
        find(&errs, "spec.ports[3]", "FieldValueDuplicate");
        let errs = validate_create("Service", &service(json!({})));
        find(&errs, "spec.ports", "FieldValueRequired");
    }

    #[test]
    fn service_types_and_ips() {
        let errs = validate_create("Service", &service(json!({"type": "Magic", "ports": [{"port": 80}]})));
        assert_eq!(
            find(&errs, "spec.type", "FieldValueNotSupported").message(),
            "Unsupported value: \"Magic\": supported values: \"ClusterIP\", \"ExternalName\", \"LoadBalancer\", \"NodePort\""
        );
        let errs = validate_create("Service", &service(json!({"type": "ExternalName"})));
        find(&errs, "spec.externalName", "FieldValueRequired");
        assert_clean(&validate_create(
            "Service",
            &service(json!({"type": "ExternalName", "externalName": "db.example.com."})),
        ));
        let errs = validate_create(
            "Service",
            &service(json!({"type": "NodePort", "clusterIP": "None", "ports": [{"port": 80}]})),
        );
        assert_eq!(
            find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid").detail,
            "may not be set to 'None' for NodePort services"
        );
        let errs = validate_create("Service", &service(json!({"clusterIP": "10.0.0.300", "ports": [{"port": 80}]})));
        find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid");
        assert_clean(&validate_create("Service", &service(json!({"clusterIP": "None"}))));
        let errs =
            validate_create("Service", &service(json!({"externalTrafficPolicy": "Local", "ports": [{"port": 80}]})));
        assert_eq!(
            find(&errs, "spec.externalTrafficPolicy", "FieldValueInvalid").detail,
            "may only be set for externally-accessible services"
        );
    }

    #[test]
    fn service_cluster_ip_is_immutable() {
        let old = created("Service", service(json!({"ports": [{"port": 80}]})));
        assert_clean(&validate_update(
            "Service",
            &service(json!({"ports": [{"port": 80}, {"port": 81, "name": "b"}]})).pipe_names(),
            &old,
        ));
        let moved =
            with(with(old.clone(), "/spec/clusterIP", json!("10.96.0.99")), "/spec/clusterIPs", json!(["10.96.0.99"]));
        let errs = validate_update("Service", &moved, &old);
        assert_eq!(
            find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid").message(),
            "Invalid value: []string{\"10.96.0.99\"}: may not change once set"
        );
        let headless = created("Service", service(json!({"clusterIP": "None"})));
        assert_clean(&validate_update("Service", &headless.clone(), &headless));
        let errs = validate_update(
            "Service",
            &with(
                with(headless.clone(), "/spec/clusterIP", json!("10.96.0.5")),
                "/spec/clusterIPs",
                json!(["10.96.0.5"]),
            ),
            &headless,
        );
        find(&errs, "spec.clusterIPs[0]", "FieldValueInvalid");
    }

    trait PipeNames {
        fn pipe_names(self) -> Value;
    }

    impl PipeNames for Value {
        /// Names the first port too, since services with several ports need named ports.
        fn pipe_names(self) -> Value {
            with(self, "/spec/ports/0/name", json!("a"))
        }
    }

    // --- namespaces, nodes, PVCs, events ------------------------------------------------------------

    #[test]
    fn namespaces() {
        assert_clean(&validate_create("Namespace", &created("Namespace", json!({"metadata": {"name": "team-a"}}))));
        let errs = validate_create("Namespace", &json!({"metadata": {"name": "team.a"}}));
        assert_eq!(find(&errs, "metadata.name", "FieldValueInvalid").detail, "must not contain dots");
        let errs =
            validate_create("Namespace", &json!({"metadata": {"name": "a"}, "spec": {"finalizers": ["custom"]}}));
        assert_eq!(
            find(&errs, "spec.finalizers", "FieldValueInvalid").detail,
            "name is neither a standard finalizer name nor is it fully qualified"
        );
    }

    #[test]
    fn nodes() {
        assert_clean(&validate_create(
            "Node",
            &json!({"metadata": {"name": "worker-1.example.com"}, "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]}}),
        ));
        let errs = validate_create(
            "Node",
            &json!({"metadata": {"name": "n"}, "spec": {"taints": [
                {"key": "a", "effect": "Never"}, {"key": "b", "value": "x", "effect": "NoSchedule"}, {"key": "b", "effect": "NoSchedule"}, {"key": "c"}
            ]}}),
        );
        find(&errs, "metadata.taints[0].effect", "FieldValueNotSupported");
        let dup = find(&errs, "metadata.taints[2]", "FieldValueDuplicate");
        assert_eq!(dup.detail, "taints must be unique by key and effect pair");
        find(&errs, "metadata.taints[3].effect", "FieldValueRequired");
        let old = json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.244.0.0/24", "providerID": "kind://n"}});
        let new = json!({"metadata": {"name": "n"}, "spec": {"podCIDR": "10.244.1.0/24", "providerID": "kind://m", "unschedulable": true}});
        let errs = validate_update("Node", &new, &old);
        find(&errs, "spec.podCIDRs[0]", "FieldValueForbidden");
        find(&errs, "spec.providerID", "FieldValueForbidden");
        assert_clean(&validate_update("Node", &with(old.clone(), "/spec/unschedulable", json!(true)), &old));
    }

    fn pvc(spec: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data", "namespace": "default"}, "spec": spec})
    }

    fn simple_pvc() -> Value {
        created(
            "PersistentVolumeClaim",
            pvc(json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}})),
        )
    }

    #[test]
    fn pvc_create_rules() {
        assert_clean(&validate_create("PersistentVolumeClaim", &simple_pvc()));
        let errs = validate_create("PersistentVolumeClaim", &pvc(json!({})));
        assert_eq!(find(&errs, "spec.accessModes", "FieldValueRequired").detail, "at least 1 access mode is required");
        find(&errs, "spec.resources[storage]", "FieldValueRequired");
        let errs = validate_create(
            "PersistentVolumeClaim",
            &pvc(
                json!({"accessModes": ["ReadWriteSometimes", "ReadWriteOncePod", "ReadWriteOnce"], "resources": {"requests": {"storage": "0"}}}),
            ),
        );
        assert_eq!(
            find(&errs, "spec.accessModes", "FieldValueNotSupported").message(),
            "Unsupported value: \"ReadWriteSometimes\": supported values: \"ReadOnlyMany\", \"ReadWriteMany\", \"ReadWriteOnce\", \"ReadWriteOncePod\""
        );
        find(&errs, "spec.accessModes", "FieldValueForbidden");
        assert_eq!(
            find(&errs, "spec.resources[storage]", "FieldValueInvalid").message(),
            "Invalid value: \"0\": must be greater than zero"
        );
    }

    #[test]
    fn pvc_update_rules() {
        let old = simple_pvc();
        let errs = validate_update(
            "PersistentVolumeClaim",
            &with(old.clone(), "/spec/accessModes", json!(["ReadWriteMany"])),
            &old,
        );
        assert_eq!(find(&errs, "spec", "FieldValueForbidden").detail, PVC_UPDATE_FORBIDDEN);
        let grown = with(old.clone(), "/spec/resources/requests/storage", json!("2Gi"));
        find(&validate_update("PersistentVolumeClaim", &grown, &old), "spec", "FieldValueForbidden");
        let bound =
            with(with(old.clone(), "/status/phase", json!("Bound")), "/status/capacity", json!({"storage": "1Gi"}));
        assert_clean(&validate_update("PersistentVolumeClaim", &grown, &bound));
        let bound_big = with(
            with(bound.clone(), "/spec/resources/requests/storage", json!("2Gi")),
            "/status/capacity/storage",
            json!("2Gi"),
        );
        let errs = validate_update(
            "PersistentVolumeClaim",
            &with(bound_big.clone(), "/spec/resources/requests/storage", json!("1Gi")),
            &bound_big,
        );
        assert_eq!(
            find(&errs, "spec.resources.requests.storage", "FieldValueForbidden").detail,
            "field can not be less than status.capacity"
        );
        assert_clean(&validate_update(
            "PersistentVolumeClaim",
            &with(old.clone(), "/spec/volumeName", json!("pv-1")),
            &old,
        ));
        let errs =
            validate_update("PersistentVolumeClaim", &with(old.clone(), "/spec/volumeMode", json!("Block")), &old);
        find(&errs, "volumeMode", "FieldValueInvalid");
        find(&errs, "spec", "FieldValueForbidden");
    }

    #[test]
    fn events() {
        let event = json!({"metadata": {"name": "web.1", "namespace": "default"}, "involvedObject": {"kind": "Pod", "namespace": "default", "name": "web"}, "reason": "Started"});
        assert_clean(&validate_create("Event", &event));
        let errs = validate_create("Event", &with(event.clone(), "/involvedObject/namespace", json!("other")));
        assert_eq!(
            find(&errs, "involvedObject.namespace", "FieldValueInvalid").message(),
            "Invalid value: \"other\": does not match event.namespace"
        );
        let modern = with(event.clone(), "/eventTime", json!("2024-01-01T00:00:00.000000Z"));
        let errs = validate_create("Event", &modern);
        find(&errs, "reportingComponent", "FieldValueRequired");
        find(&errs, "reportingInstance", "FieldValueRequired");
        find(&errs, "action", "FieldValueRequired");
        let errs = validate_create("Event", &json!({"metadata": {"namespace": "default"}}));
        find(&errs, "metadata.name", "FieldValueRequired");
        assert_clean(&validate_update("Event", &event, &event));
    }
}
