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

mod config;
mod container;
mod event;
mod fields;
mod job;
mod meta;
mod node;
mod pod;
mod service;
mod storage;

use config::*;
use container::*;
use event::*;
pub(crate) use fields::shown;
use fields::*;
use job::*;
pub(crate) use meta::label_selector;
use meta::*;
use node::*;
use pod::*;
use service::*;
use storage::*;

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

#[cfg(test)]
mod tests;
