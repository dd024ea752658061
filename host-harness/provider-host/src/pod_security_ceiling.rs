//! The most a provider's pod may ask of the node it runs on, whatever its config says: a
//! provider config is written by whoever configures sandboxes, not by the operator, and a pod
//! that runs as root with every capability, or schedules itself onto the control plane, is a
//! way out of the sandbox.
//!
//! The ceiling is Kubernetes' Pod Security Standards at the operator's level (restricted unless
//! relaxed; [`contract::k8s::pod_security`]), less the checks the operator exempts by
//! id; then the scheduling and image fields the Standards leave open: a `runtimeClassName`,
//! toleration keys, nodeSelector and affinity keys only from the operator's lists, no
//! `nodeName` (it skips the scheduler), and images only from the operator's registries when it
//! names any. Every refusal names the policy field that would allow it.

use std::fmt;

use contract::k8s::image;
use contract::k8s::pod_security::{self, Level};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::policy::quoted;

/// Allows any key or class in one of the ceiling's lists.
const ANY: &str = "*";

/// The operator's `pod-security` ceiling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PodSecurityCeiling {
    /// The Pod Security Standards level every pod must meet.
    #[serde(default = "restricted")]
    pub level: Level,
    /// Check ids of the level not enforced (`runAsNonRoot`, `capabilities_restricted`, ...).
    #[serde(default)]
    pub allow: Vec<String>,
    /// RuntimeClasses a pod may name; a pod naming none is fine.
    #[serde(default)]
    pub runtime_classes: Vec<String>,
    /// Taint keys a pod may tolerate; `*` also allows a keyless toleration (every taint).
    #[serde(default)]
    pub toleration_keys: Vec<String>,
    /// Node label keys a pod's nodeSelector may name.
    #[serde(default)]
    pub node_selector_keys: Vec<String>,
    /// Node label keys a pod's affinity may name (node affinity terms, pod affinity topology keys).
    #[serde(default)]
    pub affinity_keys: Vec<String>,
    /// Registries a pod's images may come from (`docker.io`, `ghcr.io`); any when empty.
    #[serde(default)]
    pub image_registries: Vec<String>,
}

fn restricted() -> Level {
    Level::Restricted
}

impl Default for PodSecurityCeiling {
    fn default() -> Self {
        Self {
            level: Level::Restricted,
            allow: Vec::new(),
            runtime_classes: Vec::new(),
            toleration_keys: Vec::new(),
            node_selector_keys: Vec::new(),
            affinity_keys: Vec::new(),
            image_registries: Vec::new(),
        }
    }
}

fn listed(list: &[String], item: &str) -> bool {
    list.iter().any(|l| l == ANY || l == item)
}

fn shown(list: &[String]) -> String {
    if list.is_empty() { "none".to_string() } else { list.join(", ") }
}

impl PodSecurityCeiling {
    /// The `allow` entries that name no check, for the policy's validation.
    pub fn unknown_checks(&self) -> Vec<&str> {
        self.allow.iter().map(String::as_str).filter(|a| !pod_security::check_ids().any(|id| id == *a)).collect()
    }

    /// Refuses a pod (`metadata` and `spec`) above the ceiling; the message names every
    /// Standards check it fails and the field that relaxes it, or the first other field over.
    pub fn check(&self, metadata: Option<&Value>, spec: &Value) -> Result<(), String> {
        let violations = pod_security::evaluate_pod(self.level, metadata, spec, &self.allow);
        if !violations.is_empty() {
            let reasons: Vec<&str> = violations.iter().map(|v| v.reason.as_str()).collect();
            let ids: Vec<String> = violations.iter().map(|v| format!("{:?}", v.check)).collect();
            return Err(format!(
                "the pod exceeds the operator's pod-security ceiling ({}): {}; the operator may relax it with \
                 `pod-security.allow`: [{}]",
                self.level.as_str(),
                reasons.join("; "),
                ids.join(", ")
            ));
        }
        if spec.get("nodeName").is_some_and(|n| !n.is_null()) {
            return Err("a pod may not set nodeName, which bypasses the scheduler and the node checks".to_string());
        }
        if let Some(class) = spec.get("runtimeClassName").and_then(Value::as_str)
            && !listed(&self.runtime_classes, class)
        {
            return Err(format!(
                "a pod may name only the RuntimeClasses the operator lists in `pod-security.runtime-classes` ({}), \
                 not {}",
                shown(&self.runtime_classes),
                quoted(class)
            ));
        }
        self.check_tolerations(spec)?;
        let selector = spec.get("nodeSelector").and_then(Value::as_object);
        if let Some(key) = selector.into_iter().flatten().map(|(k, _)| k).find(|k| !listed(&self.node_selector_keys, k))
        {
            return Err(format!(
                "a pod's nodeSelector may name only the node labels in `pod-security.node-selector-keys` ({}), not {}",
                shown(&self.node_selector_keys),
                quoted(key)
            ));
        }
        if let Some(key) = affinity_keys(spec).into_iter().find(|k| !listed(&self.affinity_keys, k)) {
            return Err(format!(
                "a pod's affinity may name only the node labels in `pod-security.affinity-keys` ({}), not {}",
                shown(&self.affinity_keys),
                quoted(key)
            ));
        }
        self.check_images(spec)
    }

    fn check_tolerations(&self, spec: &Value) -> Result<(), String> {
        for toleration in spec.get("tolerations").and_then(Value::as_array).into_iter().flatten() {
            let key = toleration.get("key").and_then(Value::as_str).unwrap_or_default();
            if key.is_empty() && !self.toleration_keys.iter().any(|k| k == ANY) {
                return Err(
                    "a pod may not carry a toleration without a key, which tolerates every taint (the control \
                     plane's included); only `pod-security.toleration-keys`: [\"*\"] allows it"
                        .to_string(),
                );
            }
            if !listed(&self.toleration_keys, key) {
                return Err(format!(
                    "a pod may tolerate only the taints in `pod-security.toleration-keys` ({}), not {}",
                    shown(&self.toleration_keys),
                    quoted(key)
                ));
            }
        }
        Ok(())
    }

    fn check_images(&self, spec: &Value) -> Result<(), String> {
        if self.image_registries.is_empty() {
            return Ok(());
        }
        let containers = ["initContainers", "containers", "ephemeralContainers"]
            .into_iter()
            .flat_map(|kind| spec.get(kind).and_then(Value::as_array).into_iter().flatten());
        for reference in containers.filter_map(|c| c.get("image").and_then(Value::as_str)) {
            let registry = image::registry(reference);
            if !listed(&self.image_registries, registry) {
                return Err(format!(
                    "a pod may pull images only from the registries in `pod-security.image-registries` ({}), not \
                     {} (image {})",
                    shown(&self.image_registries),
                    quoted(registry),
                    quoted(reference)
                ));
            }
        }
        Ok(())
    }
}

/// The node label keys a pod's affinity names: node affinity expressions and fields, and the
/// topology keys of pod (anti-)affinity terms.
fn affinity_keys(spec: &Value) -> Vec<&str> {
    fn list(v: Option<&Value>) -> impl Iterator<Item = &Value> {
        v.and_then(Value::as_array).into_iter().flatten()
    }
    let affinity = spec.get("affinity");
    let node = affinity.and_then(|a| a.get("nodeAffinity"));
    let required =
        list(node.and_then(|n| n.pointer("/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")));
    let preferred = list(node.and_then(|n| n.get("preferredDuringSchedulingIgnoredDuringExecution")))
        .filter_map(|p| p.get("preference"));
    let mut keys = Vec::new();
    for term in required.chain(preferred) {
        for requirement in list(term.get("matchExpressions")).chain(list(term.get("matchFields"))) {
            keys.push(requirement.get("key").and_then(Value::as_str).unwrap_or_default());
        }
    }
    for kind in ["podAffinity", "podAntiAffinity"] {
        let pods = affinity.and_then(|a| a.get(kind));
        let required = list(pods.and_then(|p| p.get("requiredDuringSchedulingIgnoredDuringExecution")));
        let preferred = list(pods.and_then(|p| p.get("preferredDuringSchedulingIgnoredDuringExecution")))
            .filter_map(|p| p.get("podAffinityTerm"));
        for term in required.chain(preferred) {
            keys.push(term.get("topologyKey").and_then(Value::as_str).unwrap_or_default());
        }
    }
    keys
}

impl fmt::Display for PodSecurityCeiling {
    /// One line for `policy show`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let registries =
            if self.image_registries.is_empty() { "any".to_string() } else { self.image_registries.join(", ") };
        write!(
            f,
            "pods may ask of their node: Pod Security {} except checks: {}; runtime classes: {}; toleration keys: \
             {}; nodeSelector keys: {}; affinity keys: {}; image registries: {}",
            self.level.as_str(),
            shown(&self.allow),
            shown(&self.runtime_classes),
            shown(&self.toleration_keys),
            shown(&self.node_selector_keys),
            shown(&self.affinity_keys),
            registries
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The provider's default pod (`provider/src/pod_spec.rs`), scheduling fields merged in.
    fn pod(extra: Value) -> Value {
        let mut spec = json!({
            "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "automountServiceAccountToken": false,
            "containers": [{"name": "sandbox", "image": "busybox:1.36",
                "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "allowPrivilegeEscalation": false,
                    "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "workspace", "emptyDir": {}}, {"name": "tmp", "emptyDir": {}}]
        });
        if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
            s.extend(e.clone());
        }
        spec
    }

    /// The tester's `security` config as the provider renders it.
    fn hostile() -> Value {
        let mut spec = pod(json!({}));
        spec["securityContext"] =
            json!({"runAsUser": 0, "runAsNonRoot": false, "seccompProfile": {"type": "Unconfined"}});
        spec["containers"][0]["securityContext"] = json!({"runAsUser": 0, "runAsNonRoot": false,
            "allowPrivilegeEscalation": true, "capabilities": {"add": ["ALL"]}});
        spec
    }

    #[test]
    fn the_default_is_restricted_and_the_providers_pod_meets_it() {
        let ceiling: PodSecurityCeiling = serde_json::from_str("{}").expect("parses");
        assert_eq!(ceiling, PodSecurityCeiling::default());
        assert_eq!(ceiling.check(None, &pod(json!({}))), Ok(()));
    }

    #[test]
    fn the_testers_pod_is_refused_naming_each_check_and_the_field() {
        let ceiling = PodSecurityCeiling::default();
        let refusal = ceiling.check(None, &hostile()).expect_err("refused");
        for named in [
            "\"allowPrivilegeEscalation\"",
            "\"capabilities_restricted\"",
            "\"runAsNonRoot\"",
            "\"runAsUser\"",
            "\"seccompProfile_restricted\"",
            "`pod-security.allow`",
            "runAsUser=0 (pod and container \"sandbox\" must not set runAsUser=0)",
        ] {
            assert!(refusal.contains(named), "{refusal} should name {named}");
        }
        let relaxed = PodSecurityCeiling {
            allow: [
                "allowPrivilegeEscalation",
                "capabilities_restricted",
                "runAsNonRoot",
                "runAsUser",
                "seccompProfile_restricted",
            ]
            .map(String::from)
            .to_vec(),
            ..Default::default()
        };
        let still = relaxed.check(None, &hostile()).expect_err("baseline checks come back");
        assert!(
            still.contains("\"capabilities_baseline\"") && still.contains("\"seccompProfile_baseline\""),
            "{still}"
        );
        let privileged = PodSecurityCeiling { level: Level::Privileged, ..Default::default() };
        assert_eq!(privileged.check(None, &hostile()), Ok(()));
        let added = pod(json!({}));
        let mut sys_admin = added.clone();
        sys_admin["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["SYS_ADMIN", "NET_ADMIN"]);
        let baseline = PodSecurityCeiling { level: Level::Baseline, ..Default::default() };
        assert!(baseline.check(None, &sys_admin).is_err_and(|e| e.contains("\"capabilities_baseline\"")));
    }

    #[test]
    fn scheduling_fields_come_only_from_the_operators_lists() {
        let open = PodSecurityCeiling {
            runtime_classes: vec!["gvisor".into()],
            toleration_keys: vec!["dedicated".into()],
            node_selector_keys: vec!["pool".into()],
            affinity_keys: vec!["topology.kubernetes.io/zone".into()],
            ..Default::default()
        };
        let fine = pod(json!({"runtimeClassName": "gvisor", "nodeSelector": {"pool": "sbx"},
            "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "sbx", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms":
                [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]}}}}));
        assert_eq!(open.check(None, &fine), Ok(()));
        assert!(PodSecurityCeiling::default().check(None, &fine).is_err_and(|e| e.contains("runtime-classes")));
        let control_plane = pod(json!({"tolerations": [{"operator": "Exists"}],
            "nodeSelector": {"node-role.kubernetes.io/control-plane": ""}}));
        let refusal = open.check(None, &control_plane).expect_err("refused");
        assert!(refusal.contains("without a key") && refusal.contains("[\"*\"]"), "{refusal}");
        let any = PodSecurityCeiling { toleration_keys: vec!["*".into()], ..open.clone() };
        assert!(any.check(None, &control_plane).is_err_and(|e| e.contains("node-selector-keys")));
        let cases = [
            (json!({"runtimeClassName": "runc"}), "runtime-classes"),
            (
                json!({"tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}),
                "toleration-keys",
            ),
            (json!({"nodeSelector": {"kubernetes.io/hostname": "n1"}}), "node-selector-keys"),
            (
                json!({"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}}]}}}),
                "affinity-keys",
            ),
            (
                json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {}}]}}}),
                "affinity-keys",
            ),
            (json!({"nodeName": "control-plane-1"}), "nodeName"),
        ];
        for (extra, field) in cases {
            let spec = pod(extra);
            assert!(open.check(None, &spec).is_err_and(|e| e.contains(field)), "{spec} should be refused by {field}");
        }
    }

    #[test]
    fn images_come_only_from_the_listed_registries() {
        let ceiling = PodSecurityCeiling { image_registries: vec!["docker.io".into()], ..Default::default() };
        assert_eq!(ceiling.check(None, &pod(json!({}))), Ok(()), "busybox is on docker.io");
        let mut other = pod(json!({}));
        other["containers"][0]["image"] = json!("evil.example:5000/miner:1");
        let refusal = ceiling.check(None, &other).expect_err("refused");
        assert!(refusal.contains("image-registries") && refusal.contains("\"evil.example:5000\""), "{refusal}");
        assert_eq!(PodSecurityCeiling::default().check(None, &other), Ok(()), "any registry when none is listed");
    }

    #[test]
    fn unknown_checks_are_found_and_the_ceiling_reads_as_one_line() {
        let ceiling: PodSecurityCeiling = serde_json::from_str(
            r#"{"level": "baseline", "allow": ["privileged", "runAsRoot"], "runtime-classes": ["gvisor"]}"#,
        )
        .expect("parses");
        assert_eq!(ceiling.unknown_checks(), ["runAsRoot"]);
        assert!(serde_json::from_str::<PodSecurityCeiling>(r#"{"levels": "baseline"}"#).is_err());
        let line = ceiling.to_string();
        assert!(
            line.contains("Pod Security baseline except checks: privileged, runAsRoot; runtime classes: gvisor"),
            "{line}"
        );
        assert!(line.contains("image registries: any"), "{line}");
    }
}
