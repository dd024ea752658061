//! Per-kind rules for writes: what the server resets, defaults and validates on create and
//! update, and how the status subresource is kept apart from the rest of the object.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use serde_json::{Map, Value, json};

use crate::core_validation::{self, NameRule};
use crate::crd_schema::CrdSchema;
use crate::defaults;
use crate::field_error::{FieldError, FieldErrorKind};
use crate::rbac;
use crate::resources::{Flavor, ResourceType};
use crate::table::PrinterColumn;

/// The CRDs bundled with the cluster (the same files `simulate` users install), one file per
/// resource and API version.
const CRDS: [&str; 8] = [
    include_str!("../crds/sandboxes-v1beta1.yaml"),
    include_str!("../crds/sandboxes-v1alpha1.yaml"),
    include_str!("../crds/sandboxclaims-v1beta1.yaml"),
    include_str!("../crds/sandboxclaims-v1alpha1.yaml"),
    include_str!("../crds/sandboxtemplates-v1beta1.yaml"),
    include_str!("../crds/sandboxtemplates-v1alpha1.yaml"),
    include_str!("../crds/sandboxwarmpools-v1beta1.yaml"),
    include_str!("../crds/sandboxwarmpools-v1alpha1.yaml"),
];

/// (group, plural, version): one version of one custom resource.
type CrdKey = (String, String, String);

/// The CRD schemas of the custom resources, by group, plural and version, so that every custom
/// resource gets its own validation, defaulting, pruning and printer columns.
pub struct Schemas {
    loaded: Arc<Loaded>,
}

/// The parsed and compiled CRDs. They are constants of the binary, so they are parsed once per
/// process (about 0.1 s in a debug build) and shared by every server it starts.
struct Loaded {
    schemas: HashMap<CrdKey, CrdSchema>,
    /// Each version's `additionalPrinterColumns`, for server-side printing.
    printer_columns: HashMap<CrdKey, Vec<PrinterColumn>>,
}

static LOADED: OnceLock<Arc<Loaded>> = OnceLock::new();

impl Schemas {
    /// Loads the bundled CRDs.
    pub fn load() -> anyhow::Result<Self> {
        if let Some(loaded) = LOADED.get() {
            return Ok(Self { loaded: loaded.clone() });
        }
        let parsed = Arc::new(Self::parse()?);
        Ok(Self { loaded: LOADED.get_or_init(|| parsed).clone() })
    }

    fn parse() -> anyhow::Result<Loaded> {
        let mut schemas = HashMap::new();
        let mut printer_columns = HashMap::new();
        for text in CRDS {
            let crd: Value = serde_yaml_ng::from_str(text)?;
            let (Some(group), Some(plural)) = (crd["spec"]["group"].as_str(), crd["spec"]["names"]["plural"].as_str())
            else {
                anyhow::bail!("a bundled CRD has no spec.group or spec.names.plural");
            };
            for v in crd["spec"]["versions"].as_array().into_iter().flatten() {
                let (Some(name), Some(schema)) = (v["name"].as_str(), v.pointer("/schema/openAPIV3Schema")) else {
                    continue;
                };
                let key = (group.to_string(), plural.to_string(), name.to_string());
                schemas.insert(key.clone(), CrdSchema::new(schema.clone()));
                let columns = v["additionalPrinterColumns"].as_array().into_iter().flatten();
                printer_columns.insert(key, columns.map(PrinterColumn::from_crd).collect());
            }
        }
        Ok(Loaded { schemas, printer_columns })
    }

    fn key(rt: &ResourceType) -> Option<CrdKey> {
        (rt.flavor == Flavor::Custom).then(|| (rt.group.to_string(), rt.plural.to_string(), rt.version.to_string()))
    }

    /// A custom resource version's printer columns (none for built-in kinds).
    pub fn printer_columns(&self, rt: &ResourceType) -> &[PrinterColumn] {
        let columns = Self::key(rt).and_then(|k| self.loaded.printer_columns.get(&k));
        columns.map_or(&[], Vec::as_slice)
    }

    /// The schema of a custom resource version.
    pub fn get(&self, rt: &ResourceType) -> Option<&CrdSchema> {
        Self::key(rt).and_then(|k| self.loaded.schemas.get(&k))
    }

    /// The raw openAPIV3Schema of a custom resource version, for OpenAPI publishing.
    pub fn raw(&self, rt: &ResourceType) -> Option<&Value> {
        self.get(rt).map(CrdSchema::schema)
    }
}

/// What decoding, defaulting and pruning found that the client did not intend.
#[derive(Debug, Default)]
pub struct Findings {
    /// Fields that are not part of the type (rejected under `fieldValidation=Strict`).
    pub unknown_fields: Vec<String>,
}

/// Server-owned metadata a client may not set.
const SERVER_META: &[&str] = &[
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
];

/// Resets and defaults a new object (in the version it was sent in) before it is validated.
pub fn prepare_create(rt: &ResourceType, obj: &mut Value, uid: &str, now: &str, alloc_ip: &mut dyn FnMut() -> String) {
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in SERVER_META {
            meta.remove(*k);
        }
        meta.insert("uid".into(), json!(uid));
        meta.insert("creationTimestamp".into(), json!(now));
        if rt.has_generation {
            meta.insert("generation".into(), json!(1));
        }
    }
    if rt.has_status()
        && rt.kind != "Node"
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    if rt.flavor == Flavor::BuiltIn {
        defaults::apply_create_defaults(rt.kind, obj, uid, alloc_ip);
    }
}

/// Carries server-owned fields over from the stored object into an update, and keeps spec and
/// status apart: a main-resource update cannot change status, a status update changes only status.
pub fn prepare_update(rt: &ResourceType, status_update: bool, new: &mut Value, old: &Value) {
    if status_update {
        let status = new.get("status").cloned();
        *new = old.clone();
        match status {
            Some(s) => new["status"] = s,
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
        return;
    }
    if let (Some(meta), Some(old_meta)) =
        (new.get_mut("metadata").and_then(Value::as_object_mut), old["metadata"].as_object())
    {
        for k in SERVER_META {
            match old_meta.get(*k) {
                Some(v) => meta.insert(k.to_string(), v.clone()),
                None => meta.remove(*k),
            };
        }
    }
    if rt.flavor == Flavor::BuiltIn {
        defaults::apply_update_defaults(rt.kind, new, old);
    }
    if rt.has_status() {
        match old.get("status") {
            Some(s) => new["status"] = s.clone(),
            None => {
                if let Some(o) = new.as_object_mut() {
                    o.remove("status");
                }
            }
        }
    }
}

/// Bumps `metadata.generation` when anything but metadata and status changed.
pub fn bump_generation(rt: &ResourceType, new: &mut Value, old: &Value) {
    if !rt.has_generation {
        return;
    }
    let body = |v: &Value| -> Map<String, Value> {
        v.as_object()
            .map(|o| {
                o.iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "metadata" | "status"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let generation = old.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
    let next = if body(new) != body(old) { generation + 1 } else { generation };
    new["metadata"]["generation"] = json!(next);
}

/// Defaults and prunes a custom resource per its schema; returns the pruned (unknown) paths.
pub fn default_and_prune(rt: &ResourceType, schemas: &Schemas, obj: &mut Value) -> Findings {
    match schemas.get(rt) {
        Some(schema) => Findings { unknown_fields: schema.default_and_prune(obj) },
        None => Findings::default(),
    }
}

/// Validates an object on create.
pub fn validate_create(rt: &ResourceType, schemas: &Schemas, obj: &Value) -> Vec<FieldError> {
    match rt.flavor {
        Flavor::BuiltIn if rbac::validation::handles(rt.kind) => rbac::validation::validate_create(rt.kind, obj),
        Flavor::BuiltIn => core_validation::validate_create(rt.kind, obj),
        Flavor::Custom => validate_custom(rt, schemas, obj).0,
    }
}

/// A custom resource's metadata and schema errors, and whether its CEL rules may run: as in
/// apiextensions-apiserver's `hasBlockingErr`, an error that leaves the object unusable to CEL
/// (a required field missing, a wrong type, a value outside its enum, too long, too many) stops
/// the rules, and the server says so with one more cause.
fn validate_custom(rt: &ResourceType, schemas: &Schemas, obj: &Value) -> (Vec<FieldError>, bool) {
    let mut errs = core_validation::validate_object_meta(&obj["metadata"], NameRule::Dns1123Subdomain);
    let Some(schema) = schemas.get(rt) else {
        return (errs, false);
    };
    errs.extend(schema.validate(obj));
    if !schema.has_rules() {
        return (errs, false);
    }
    let blocking = errs.iter().any(|e| {
        matches!(
            e.kind,
            FieldErrorKind::Required
                | FieldErrorKind::TypeInvalid { .. }
                | FieldErrorKind::NotSupported { .. }
                | FieldErrorKind::TooLong { .. }
                | FieldErrorKind::TooMany { .. }
        )
    });
    if blocking {
        errs.push(FieldError::invalid(
            "<nil>",
            "\"null\"",
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    }
    (errs, !blocking)
}

/// Validates an update against the stored object (immutability and transition rules included).
pub fn validate_update(rt: &ResourceType, schemas: &Schemas, new: &Value, old: &Value) -> Vec<FieldError> {
    let (mut errs, rules_run) = match rt.flavor {
        Flavor::BuiltIn if rbac::validation::handles(rt.kind) => {
            (rbac::validation::validate_update(rt.kind, new, old), false)
        }
        Flavor::BuiltIn => (core_validation::validate_update(rt.kind, new, old), false),
        Flavor::Custom => validate_custom(rt, schemas, new),
    };
    if rules_run && rt.plural == "sandboxes" && rt.group == contract::k8s::agent_sandbox::GROUP {
        // The CRD's one CEL transition rule, evaluated natively.
        let vct = |v: &Value| v.pointer("/spec/volumeClaimTemplates").cloned();
        if vct(new) != vct(old) {
            errs.push(FieldError::invalid("spec", "\"object\"", "volumeClaimTemplates is immutable"));
        }
    }
    let old_finalizers = string_list(&old["metadata"]["finalizers"]);
    if old["metadata"].get("deletionTimestamp").is_some() {
        for f in string_list(&new["metadata"]["finalizers"]) {
            if !old_finalizers.contains(&f) {
                errs.push(FieldError::forbidden("metadata.finalizers", format!("no new finalizers can be added if the object is being deleted, found new finalizers []string{{{f:?}}}")));
            }
        }
    }
    errs
}

/// A JSON list of strings (absent or malformed: empty).
pub fn string_list(v: &Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{SandboxVersions, served};

    fn custom(versions: SandboxVersions, plural: &str) -> ResourceType {
        served(versions)
            .into_iter()
            .find(|t| t.plural == plural && t.flavor == Flavor::Custom)
            .unwrap_or_else(|| panic!("{plural} is served"))
    }

    #[test]
    fn every_served_custom_resource_has_its_schema() {
        let schemas = Schemas::load().unwrap_or_else(|e| panic!("{e:#}"));
        for versions in [SandboxVersions::Both, SandboxVersions::V1alpha1Only] {
            for rt in served(versions).iter().filter(|t| t.flavor == Flavor::Custom) {
                assert!(schemas.get(rt).is_some(), "{} {} has a schema", rt.plural, rt.version);
            }
        }
        let beta_claims = custom(SandboxVersions::Both, "sandboxclaims");
        let names: Vec<&str> = schemas.printer_columns(&beta_claims).iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["Ready", "Sandbox", "Reason", "Age"]);
        let alpha_pools = custom(SandboxVersions::V1alpha1Only, "sandboxwarmpools");
        assert_eq!(schemas.printer_columns(&alpha_pools).len(), 2);
    }

    #[test]
    fn extension_defaults_come_from_their_crds() {
        let schemas = Schemas::load().unwrap_or_else(|e| panic!("{e:#}"));
        let defaulted = |versions, plural, mut obj: Value| {
            let rt = custom(versions, plural);
            let findings = default_and_prune(&rt, &schemas, &mut obj);
            assert!(findings.unknown_fields.is_empty(), "{:?}", findings.unknown_fields);
            obj
        };
        let pool = defaulted(
            SandboxVersions::Both,
            "sandboxwarmpools",
            json!({"metadata": {"name": "p"}, "spec": {"sandboxTemplateRef": {"name": "t"}, "updateStrategy": {}}}),
        );
        assert_eq!(pool["spec"]["replicas"], 1);
        assert_eq!(pool["spec"]["updateStrategy"]["type"], "OnReplenish");
        let claim = defaulted(
            SandboxVersions::Both,
            "sandboxclaims",
            json!({"metadata": {"name": "c"}, "spec": {"warmPoolRef": {"name": "p"}, "lifecycle": {}}}),
        );
        assert_eq!(claim["spec"]["lifecycle"]["shutdownPolicy"], "Retain");
        let alpha_claim = defaulted(
            SandboxVersions::V1alpha1Only,
            "sandboxclaims",
            json!({"metadata": {"name": "c"}, "spec": {"sandboxTemplateRef": {"name": "t"}}}),
        );
        assert_eq!(alpha_claim["spec"]["warmpool"], "default");
        let template = defaulted(
            SandboxVersions::Both,
            "sandboxtemplates",
            json!({"metadata": {"name": "t"}, "spec": {"podTemplate": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}}),
        );
        assert_eq!(template["spec"]["envVarsInjectionPolicy"], "Disallowed");
        assert_eq!(template["spec"]["networkPolicyManagement"], "Managed");
        assert_eq!(template["spec"]["volumeClaimTemplatesPolicy"], "Disallowed");
    }
}
