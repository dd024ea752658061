//! The `PodSecurity` admission plugin as kube-apiserver runs it with its default configuration
//! (<https://kubernetes.io/docs/concepts/security/pod-security-admission/>): a namespace's
//! `pod-security.kubernetes.io/<mode>` labels pick a Pod Security Standards level per mode, and
//! the checks are the shared rule of [`contract::k8s::pod_security`], so the host's
//! pod-security ceiling is tested against the refusals a real cluster gives.
//!
//! Reproduced, from upstream's `k8s.io/pod-security-admission/admission` and `api`:
//! - `enforce`: a pod whose spec fails the level is refused with 403 `Forbidden`, worded
//!   `pods "x" is forbidden: violates PodSecurity "restricted:latest": <reasons>` (the reasons
//!   joined by ", ", as `ForbiddenDetail` joins them); on update only when a field PSA re-checks
//!   changed (an image, a seccomp annotation, the number of containers, an ephemeral container),
//!   as `isSignificantPodUpdate` decides; subresources such as `status` and `binding` skip it;
//! - `warn`: a `would violate PodSecurity "<level>:<version>": <reasons>` warning on an allowed
//!   pod, and on a create or update of the workloads upstream reads a pod template from (Job,
//!   CronJob, Deployment, ReplicaSet, StatefulSet, DaemonSet, ReplicationController,
//!   PodTemplate), which are never refused. Without a `warn` label, warn follows an `enforce`
//!   stricter than it, as upstream's `PolicyToEvaluate` defaults it;
//! - an unparsable level label counts as `restricted`, an unparsable version as `latest`;
//! - `-version` labels accept `latest` and `v1.N`; any version is evaluated as `latest` (the
//!   checks of older releases are not kept) but messages name the labelled version, as upstream's.
//!
//! Not reproduced: the `audit` mode (there is no audit log; its labels are ignored); exemptions
//! (upstream has none unless configured, so `kube-system` is not special); the 422 refusal of a
//! namespace whose labels do not parse, and the warnings upstream gives when a namespace's
//! enforce level is raised over pods that already violate it.

use contract::k8s::pod_security::{self, Level, Violation};
use serde_json::Value;

use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::store::Objects;

const LABEL_PREFIX: &str = "pod-security.kubernetes.io/";

/// Pod subresources whose writes cannot change what the checks read (upstream's
/// `ignoredPodSubresources`); any other pod subresource is evaluated.
const IGNORED_POD_SUBRESOURCES: &[&str] =
    &["exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"];

/// The workloads upstream's `PodSpecExtractor` reads a pod template from: group, resource, and
/// the path to the template.
const POD_TEMPLATE_OWNERS: &[(&str, &str, &str)] = &[
    ("", "podtemplates", "/template"),
    ("", "replicationcontrollers", "/spec/template"),
    ("apps", "replicasets", "/spec/template"),
    ("apps", "deployments", "/spec/template"),
    ("apps", "statefulsets", "/spec/template"),
    ("apps", "daemonsets", "/spec/template"),
    ("batch", "jobs", "/spec/template"),
    ("batch", "cronjobs", "/spec/jobTemplate/spec/template"),
];

/// A level and the version its label names (`latest` or `v1.N`), shown as `level:version`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LevelVersion {
    level: Level,
    version: String,
}

impl LevelVersion {
    fn label(&self) -> String {
        format!("{}:{}", self.level.as_str(), self.version)
    }
}

/// The namespace's enforce and warn policies (audit is not reproduced).
#[derive(Debug, PartialEq, Eq)]
struct Policy {
    enforce: LevelVersion,
    warn: LevelVersion,
}

/// A level label's value; `None` for one that names no level (upstream then takes
/// `restricted`).
fn parse_level(value: &str) -> Option<Level> {
    match value {
        "privileged" => Some(Level::Privileged),
        "baseline" => Some(Level::Baseline),
        "restricted" => Some(Level::Restricted),
        _ => None,
    }
}

fn parse_version(value: &str) -> String {
    let minor = value.strip_prefix("v1.");
    let valid = minor.is_some_and(|m| m == "0" || (!m.starts_with('0') && m.parse::<u32>().is_ok()));
    if valid { value.to_string() } else { "latest".to_string() }
}

/// Upstream's `PolicyToEvaluate` for the enforce and warn modes, with privileged:latest defaults.
fn policy(labels: Option<&serde_json::Map<String, Value>>) -> Policy {
    let label = |key: &str| labels.and_then(|l| l.get(&format!("{LABEL_PREFIX}{key}"))).and_then(Value::as_str);
    let mode = |mode: &str| LevelVersion {
        level: label(mode).map_or(Level::Privileged, |l| parse_level(l).unwrap_or(Level::Restricted)),
        version: label(&format!("{mode}-version")).map_or_else(|| "latest".to_string(), parse_version),
    };
    let enforce = mode("enforce");
    let mut warn = mode("warn");
    let valid_enforce = label("enforce").and_then(parse_level).is_some();
    if label("warn").is_none() && valid_enforce && enforce.level > warn.level {
        warn.level = enforce.level;
        if label("warn-version").is_none() {
            warn.version = enforce.version.clone();
        }
    }
    Policy { enforce, warn }
}

/// Pod Security admission of a write to `rt`: `Err` when the namespace's enforce level refuses
/// a pod, else the warnings to answer with. `old` is the stored object on an update.
pub fn admit(
    store: &dyn Objects,
    rt: &ResourceType,
    subresource: Option<&str>,
    namespace: &str,
    name: &str,
    obj: &Value,
    old: Option<&Value>,
) -> Result<Vec<String>, ApiError> {
    if rt.group.is_empty() && rt.plural == "pods" {
        if subresource.is_some_and(|s| IGNORED_POD_SUBRESOURCES.contains(&s))
            || old.is_some_and(|old| !significant_pod_update(obj, old))
        {
            return Ok(Vec::new());
        }
        let policy = namespace_policy(store, namespace);
        let empty = Value::Null;
        let spec = obj.get("spec").unwrap_or(&empty);
        let refused = pod_security::evaluate_pod(policy.enforce.level, obj.get("metadata"), spec, &[] as &[&str]);
        if !refused.is_empty() {
            return Err(forbidden(name, &policy.enforce, &refused));
        }
        return Ok(warnings(&policy.warn, obj.get("metadata"), spec));
    }
    let template = POD_TEMPLATE_OWNERS
        .iter()
        .find(|(group, plural, _)| *group == rt.group && *plural == rt.plural)
        .and_then(|(_, _, path)| obj.pointer(path));
    match template {
        Some(template) if subresource.is_none() => {
            let empty = Value::Null;
            let spec = template.get("spec").unwrap_or(&empty);
            Ok(warnings(&namespace_policy(store, namespace).warn, template.get("metadata"), spec))
        }
        _ => Ok(Vec::new()),
    }
}

fn namespace_policy(store: &dyn Objects, namespace: &str) -> Policy {
    let ns = store.object("namespaces", "", namespace);
    policy(ns.as_deref().and_then(|n| n.pointer("/metadata/labels")).and_then(Value::as_object))
}

/// The 403 of upstream's `forbiddenResponse`: the shared rule's words, naming the labelled
/// version.
fn forbidden(name: &str, enforce: &LevelVersion, violations: &[Violation]) -> ApiError {
    let message = pod_security::forbidden_message(name, enforce.level, &enforce.version, violations);
    ApiError { message, ..ApiError::forbidden_object("", "pods", name, "") }
}

fn warnings(warn: &LevelVersion, metadata: Option<&Value>, spec: &Value) -> Vec<String> {
    let violations = pod_security::evaluate_pod(warn.level, metadata, spec, &[] as &[&str]);
    if violations.is_empty() {
        return Vec::new();
    }
    vec![format!("would violate PodSecurity {:?}: {}", warn.label(), pod_security::reasons(&violations))]
}

/// Upstream's `isSignificantPodUpdate`: only the pod fields an update may change that the
/// checks read (images, seccomp annotations, containers added) call for a new evaluation.
fn significant_pod_update(new: &Value, old: &Value) -> bool {
    let annotation = |pod: &Value, key: &str| pod.pointer("/metadata/annotations").and_then(|a| a.get(key)).cloned();
    let containers = |pod: &Value, kind: &str| pod["spec"][kind].as_array().cloned().unwrap_or_default();
    let changed = |c: &Value, o: &Value| {
        let key = format!("container.seccomp.security.alpha.kubernetes.io/{}", c["name"].as_str().unwrap_or_default());
        c["image"] != o["image"] || annotation(new, &key) != annotation(old, &key)
    };
    let pod_seccomp = "seccomp.security.alpha.kubernetes.io/pod";
    if annotation(new, pod_seccomp) != annotation(old, pod_seccomp) {
        return true;
    }
    for kind in ["containers", "initContainers"] {
        let (now, before) = (containers(new, kind), containers(old, kind));
        if now.len() != before.len() || now.iter().zip(&before).any(|(c, o)| changed(c, o)) {
            return true;
        }
    }
    let before = containers(old, "ephemeralContainers");
    containers(new, "ephemeralContainers")
        .iter()
        .any(|c| before.iter().find(|o| o["name"] == c["name"]).is_none_or(|o| changed(c, o)))
}

#[cfg(test)]
mod tests;
