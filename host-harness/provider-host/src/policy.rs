//! The operator's policy, which every `kube` call of a provider passes through: which
//! namespaces, which resource types (group, versions, plural), which verbs and subresources,
//! and the owner id stamped on everything the provider creates.
//!
//! The policy is the operator's, never the caller's: nothing a provider config or a lease says
//! widens it. It is data (serde, kebab-case) so an operator keeps it in a file; a denial names
//! what was refused and which setting would allow it, because the person reading it is the one
//! who decides whether to change the policy. What a provider may do is the intersection of this
//! policy and what the provider declares it needs ([`crate::capabilities`]).

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use contract::{AccessRule, AccessVerb};

use crate::bindings::kube::ResourceType;
use crate::error::HostError;
use crate::network_policy::{self, EgressRule};
use crate::owner_signature::{self, OwnershipKeys, SIGNATURE_ANNOTATION, Subject};
use crate::pod_security_ceiling::PodSecurityCeiling;
use contract::labels::LABEL_ACQUISITION_ID;

/// A guest-supplied name for a message: quoted, and cut to a short prefix when long.
pub(crate) use contract::quote::quote as quoted;

/// The label the host stamps on every object a provider creates, with the installation's
/// owner id as its value; the host proves ownership by it before any read or write.
pub use contract::labels::LABEL_MANAGED_BY as MANAGED_BY_LABEL;

/// The owner id of a policy that names none. Two installations sharing a cluster must each set
/// their own, or each could touch what the other created.
pub const DEFAULT_OWNER_ID: &str = "paperclip-sandbox-host";

/// Namespace entry that allows every namespace except the [`SYSTEM_NAMESPACES`].
pub const ANY_NAMESPACE: &str = "*";

/// Namespaces the cluster itself runs in: allowed only when the operator names them, never by
/// [`ANY_NAMESPACE`].
pub const SYSTEM_NAMESPACES: [&str; 3] = ["kube-system", "kube-public", "kube-node-lease"];

/// The operator's policy. Built from a config file (serde) or [`Policy::kubernetes_default`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Policy {
    /// Namespaces the provider may use; `*` allows any but the system namespaces.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Resource types and their verbs; absent types are denied.
    #[serde(default = "default_rules")]
    pub resources: Vec<AccessRule>,
    /// The installation's owner id: the value of the managed-by label on created objects. Every
    /// replica of one deployment shares it, so any replica can resume or destroy what another
    /// acquired; a second installation on the same cluster needs its own.
    #[serde(default = "default_owner_id")]
    pub owner_id: String,
    /// Secrets a sandbox's pod may refer to without this installation owning them (an image
    /// pull secret the operator made, say); every other reference must be to an owned Secret.
    #[serde(default)]
    pub pod_secrets: Vec<String>,
    /// ServiceAccounts a sandbox's pod may run as besides `default`.
    #[serde(default)]
    pub pod_service_accounts: Vec<String>,
    /// Whether a sandbox's pod may hold a ServiceAccount token (automounted or projected); off,
    /// every pod spec must set `automountServiceAccountToken: false`.
    #[serde(default)]
    pub allow_service_account_tokens: bool,
    /// Warm pools a SandboxClaim may name (`spec.warmPoolRef.name`, or a v1alpha1 claim's
    /// `spec.warmpool`); `*` allows any. A claim's pod is its pool's template, which the host
    /// cannot check as it checks a pod spec a provider sends: the operator vouches for each pool
    /// by naming it. None by default.
    #[serde(default)]
    pub warm_pools: Vec<String>,
    /// Templates a v1alpha1 SandboxClaim may name (`spec.sandboxTemplateRef.name`); `*` allows
    /// any. None by default.
    #[serde(default)]
    pub claim_templates: Vec<String>,
    /// Where a sandbox's pod may connect beyond the cluster DNS, in the NetworkPolicy that
    /// `sandbox-host network-policy` prints ([`crate::network_policy`]): a CIDR (any port), or
    /// `{"cidr": ..., "ports": [443], "protocol": "TCP"}`. None by default: DNS only.
    #[serde(default)]
    pub egress: Vec<EgressRule>,
    /// The most a sandbox's pod may ask of its node ([`crate::pod_security_ceiling`]): Kubernetes'
    /// restricted Pod Security level, no RuntimeClass, toleration, nodeSelector or affinity key,
    /// and any registry, unless the operator relaxes them here.
    #[serde(default)]
    pub pod_security: PodSecurityCeiling,
    /// The file of the operator's ownership keys ([`crate::owner_signature`]); read by
    /// [`Policy::load_ownership_keys`]. Without one the managed-by label alone is ownership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ownership_key_file: Option<PathBuf>,
    /// The keys the host signs and verifies ownership with; never serialized.
    #[serde(skip)]
    pub ownership_keys: Option<OwnershipKeys>,
    /// How the operator allows another namespace where `namespaces` came from elsewhere than a
    /// policy file's field (a command-line option, a default), so a denial names the setting
    /// to change; `None`: the policy's `namespaces`. Never serialized.
    #[serde(skip)]
    pub namespaces_from: Option<String>,
}

fn default_owner_id() -> String {
    DEFAULT_OWNER_ID.to_string()
}

/// What an operator grants a Kubernetes sandbox provider when its policy file lists no
/// resources: Sandboxes and SandboxClaims (both served versions of each) fully, Jobs without list or watch, pods
/// read-only plus commands in them (`exec`, the point of `execute`; on owned pods only, as
/// every read), per-lease Secrets without list or watch (so they cannot be enumerated), delete
/// of the workspace claims of reusable leases, and the allowed namespaces' own objects
/// (probe checks they exist). The host narrows it further to what the component declares.
pub fn default_rules() -> Vec<AccessRule> {
    use AccessVerb::*;
    use contract::k8s::agent_sandbox;
    vec![
        AccessRule::new(
            agent_sandbox::GROUP,
            &agent_sandbox::SANDBOX_VERSIONS,
            agent_sandbox::SANDBOXES,
            &[Get, Create, Patch, Delete, List, Watch, Discovery],
        ),
        AccessRule::new(
            agent_sandbox::EXTENSIONS_GROUP,
            &agent_sandbox::EXTENSIONS_VERSIONS,
            agent_sandbox::CLAIMS,
            &[Get, Create, Patch, Delete, List, Watch, Discovery],
        ),
        AccessRule::new("batch", &["v1"], "jobs", &[Get, Create, Patch, Delete]),
        AccessRule::new("", &["v1"], "pods", &[Get, List, Watch, Exec]),
        AccessRule::new("", &["v1"], "secrets", &[Create, Get, Delete, Patch]),
        AccessRule::new("", &["v1"], "persistentvolumeclaims", &[Delete]),
        AccessRule { namespaced: false, ..AccessRule::new("", &["v1"], "namespaces", &[Get]) },
    ]
}

/// One `kube` call as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    /// The operation.
    pub verb: AccessVerb,
    /// API group (empty for core).
    pub group: &'a str,
    /// API version.
    pub version: &'a str,
    /// Plural resource name.
    pub plural: &'a str,
    /// Namespace, when the call names one.
    pub namespace: Option<&'a str>,
    /// Object name, when the call names one.
    pub name: Option<&'a str>,
    /// Subresource (`status`), when the call names one.
    pub subresource: Option<&'a str>,
}

/// Why the host refused a call; the message names the setting that would allow it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Denial(pub String);

impl Default for Policy {
    /// The Kubernetes provider's rules with no namespace allowed: a host must say where the
    /// provider may work.
    fn default() -> Self {
        Self::kubernetes_default(Vec::<String>::new())
    }
}

impl Policy {
    /// The default rules for the Kubernetes provider, allowing the given namespaces.
    pub fn kubernetes_default<S: Into<String>>(namespaces: impl IntoIterator<Item = S>) -> Self {
        Self {
            namespaces: namespaces.into_iter().map(Into::into).collect(),
            resources: default_rules(),
            owner_id: default_owner_id(),
            pod_secrets: Vec::new(),
            pod_service_accounts: Vec::new(),
            allow_service_account_tokens: false,
            warm_pools: Vec::new(),
            claim_templates: Vec::new(),
            egress: Vec::new(),
            pod_security: PodSecurityCeiling::default(),
            ownership_key_file: None,
            ownership_keys: None,
            namespaces_from: None,
        }
    }

    /// Whether a claim may name the warm pool `name`.
    pub fn allows_warm_pool(&self, name: &str) -> bool {
        self.warm_pools.iter().any(|p| p == ANY_NAMESPACE || p == name)
    }

    /// Whether a v1alpha1 claim may name the template `name`.
    pub fn allows_claim_template(&self, name: &str) -> bool {
        self.claim_templates.iter().any(|t| t == ANY_NAMESPACE || t == name)
    }

    /// Refuses a policy that cannot be enforced as written (a bad owner id, an empty rule, a
    /// pod rule that writes).
    pub fn validate(&self) -> Result<(), HostError> {
        if let (Some(path), None) = (&self.ownership_key_file, &self.ownership_keys) {
            return Err(HostError::Config(format!(
                "policy ownership-key-file {} was never read: load it with `Policy::load_ownership_keys`",
                path.display()
            )));
        }
        if self.owner_id.is_empty() || !valid_label_value(&self.owner_id) {
            return Err(HostError::Config(format!(
                "policy owner-id {} is not a valid label value (1-63 characters: letters, digits, '-', '_', '.', \
                 starting and ending with a letter or digit)",
                quoted(&self.owner_id)
            )));
        }
        if let Some(unknown) = self.pod_security.unknown_checks().first() {
            return Err(HostError::Config(format!(
                "policy pod-security.allow names {}, which is no Pod Security check; the checks are {}",
                quoted(unknown),
                contract::k8s::pod_security::check_ids().collect::<Vec<_>>().join(", ")
            )));
        }
        if let Err(problem) = network_policy::check_egress(&self.egress) {
            return Err(HostError::Config(format!("policy egress: {problem}")));
        }
        for rule in &self.resources {
            if rule.plural.is_empty() || rule.versions.is_empty() {
                return Err(HostError::Config(format!(
                    "policy rule for {} needs a plural and at least one version",
                    quoted(&rule.qualified())
                )));
            }
            let writes = [AccessVerb::Create, AccessVerb::Patch, AccessVerb::Delete];
            if rule.group.is_empty() && rule.plural == "pods" && writes.iter().any(|v| rule.allows(*v)) {
                return Err(HostError::Config(
                    "policy rule for pods grants a write: pods are read-only for providers (their workload's \
                     controller owns them); grant only get, list and watch"
                        .to_string(),
                ));
            }
        }
        Ok(())
    }

    /// Reads the keys of `ownership-key-file`, when the policy names one.
    pub fn load_ownership_keys(&mut self) -> Result<(), HostError> {
        if let Some(path) = &self.ownership_key_file {
            self.ownership_keys = Some(OwnershipKeys::read_file(path).map_err(HostError::Config)?);
        }
        Ok(())
    }

    /// Whether a namespace is allowed: named, or covered by `*` and not a system namespace.
    pub fn allows_namespace(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|n| n == namespace)
            || (self.namespaces.iter().any(|n| n == ANY_NAMESPACE) && !SYSTEM_NAMESPACES.contains(&namespace))
    }

    /// Checks a namespace a provider wants to work in; the denial says what the operator
    /// would change.
    pub fn check_namespace(&self, namespace: &str) -> Result<(), Denial> {
        if self.allows_namespace(namespace) {
            return Ok(());
        }
        let allowed =
            if self.namespaces.is_empty() { "none".to_string() } else { format!("[{}]", self.namespaces.join(", ")) };
        let system = if SYSTEM_NAMESPACES.contains(&namespace) {
            "; it is a system namespace, which \"*\" never covers, so the operator must name it"
        } else {
            ""
        };
        let setting = self.namespaces_from.as_deref().unwrap_or("the policy's `namespaces`");
        Err(Denial(format!(
            "the host's policy does not allow namespace {} (allowed: {allowed}){system}; use an allowed namespace, \
             or ask the operator to add it to {setting}",
            quoted(namespace)
        )))
    }

    /// The rule for a resource type, if the policy has one.
    pub fn rule(&self, group: &str, plural: &str) -> Option<&AccessRule> {
        self.resources.iter().find(|r| r.group == group && r.plural == plural)
    }

    /// Checks one call; `Err` says what was denied and which setting allows it.
    pub fn check(&self, access: &Access<'_>) -> Result<(), Denial> {
        let what = qualified(access.group, access.plural);
        let verb = access.verb;
        let Some(rule) = self.rule(access.group, access.plural) else {
            return Err(Denial(format!(
                "host policy denies {verb} on {what}: the policy has no rule for this resource type; add one to \
                 `resources` (group {:?}, plural {:?}, versions, verbs)",
                access.group, access.plural
            )));
        };
        if !rule.versions.iter().any(|v| v == access.version) {
            return Err(Denial(format!(
                "host policy denies {verb} on {what}: version {} is not allowed; add it to the `versions` of the \
                 {what} rule",
                quoted(access.version)
            )));
        }
        if !rule.allows(verb) {
            let allowed: Vec<&str> = rule.verbs.iter().map(|v| v.as_str()).collect();
            return Err(Denial(format!(
                "host policy denies {verb} on {what}: the rule allows [{}]; add \"{verb}\" to the `verbs` of the \
                 {what} rule",
                allowed.join(", ")
            )));
        }
        if let Some(sub) = access.subresource
            && !rule.subresources.iter().any(|s| s == sub)
        {
            return Err(Denial(format!(
                "host policy denies {verb} on {what}/{}: add it to the `subresources` of the {what} rule",
                quoted(sub)
            )));
        }
        match (rule.namespaced, access.namespace) {
            (true, None) => {
                return Err(Denial(format!(
                    "host policy denies {verb} on {what} across all namespaces: name one of the allowed namespaces \
                     (`namespaces`)"
                )));
            }
            (true, Some(ns)) => {
                self.check_namespace(ns).map_err(|d| Denial(format!("host policy denies {verb} on {what}: {d}")))?
            }
            (false, Some(ns)) => {
                return Err(Denial(format!(
                    "host policy denies {verb} on {what} in namespace {}: {what} is cluster-scoped; call it without \
                     a namespace",
                    quoted(ns)
                )));
            }
            (false, None) => {}
        }
        if access.group.is_empty() && access.plural == "namespaces" {
            self.check_namespace_object(verb, access.name)?;
        }
        Ok(())
    }

    /// A namespace object is visible only when it is an allowed namespace, so `get namespaces`
    /// cannot be used to learn what else runs on the cluster; listing needs `*`.
    fn check_namespace_object(&self, verb: AccessVerb, name: Option<&str>) -> Result<(), Denial> {
        match name {
            Some(name) => {
                self.check_namespace(name).map_err(|d| Denial(format!("host policy denies {verb} on a namespace: {d}")))
            }
            None if self.namespaces.iter().any(|n| n == ANY_NAMESPACE) => Ok(()),
            None => Err(Denial(format!(
                "host policy denies {verb} on all namespaces: only the allowed namespaces are visible; add \"*\" to \
                 `namespaces` to allow it"
            ))),
        }
    }

    /// Checks a `served-versions` call: allowed when some rule of the group grants `discovery`.
    pub fn check_discovery(&self, group: &str) -> Result<(), Denial> {
        if self.resources.iter().any(|r| r.group == group && r.allows(AccessVerb::Discovery)) {
            return Ok(());
        }
        Err(Denial(format!(
            "host policy denies discovery of API group {}: add \"discovery\" to the `verbs` of a rule for that group",
            quoted(group)
        )))
    }

    /// Stamps the managed-by label with the owner id into a create body of type `rt` in
    /// `namespace`, and, with an ownership key, the signature annotation over it
    /// ([`crate::owner_signature`]). A different label value the provider set is replaced (the
    /// host, not the guest, says who owns an object) and reported to the operator; a signature
    /// annotation the provider set is never kept. `Err` means the body is not a JSON object with
    /// an object `metadata`, or, with a key, has no `metadata.name` to sign.
    pub fn stamp_created(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        mut object: Value,
    ) -> Result<String, String> {
        let Value::Object(root) = &mut object else {
            return Err("the request body is not a JSON object".to_string());
        };
        let metadata = root.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
        if metadata.is_null() {
            *metadata = Value::Object(Map::new());
        }
        let Value::Object(metadata) = metadata else {
            return Err("metadata of the request body is not a JSON object".to_string());
        };
        let labels = object_entry(metadata, "labels")?;
        let previous = labels.insert(MANAGED_BY_LABEL.to_string(), Value::String(self.owner_id.clone()));
        if let Some(previous) = previous.filter(|p| p.as_str() != Some(self.owner_id.as_str())) {
            tracing::warn!(
                target: "provider_host::policy",
                label = MANAGED_BY_LABEL,
                provider_value = %previous,
                host_value = %self.owner_id,
                "the provider set a different managed-by label; the host policy's owner id replaces it"
            );
        }
        let acquisition_id = labels.get(LABEL_ACQUISITION_ID).and_then(Value::as_str).unwrap_or_default().to_string();
        let name = metadata.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let signature = match &self.ownership_keys {
            Some(_) if name.is_empty() => {
                return Err("the host signs what it creates over its name, so a body needs `metadata.name` (a \
                            `generateName` alone cannot be signed)"
                    .to_string());
            }
            Some(keys) => Some(keys.sign(&Subject {
                group: &rt.group,
                plural: &rt.plural,
                namespace: namespace.unwrap_or_default(),
                name: &name,
                owner_id: &self.owner_id,
                acquisition_id: &acquisition_id,
            })),
            None => None,
        };
        let annotations = object_entry(metadata, "annotations")?;
        match signature {
            Some(signature) => annotations.insert(SIGNATURE_ANNOTATION.to_string(), Value::String(signature)),
            None => annotations.remove(SIGNATURE_ANNOTATION),
        };
        if annotations.is_empty() {
            metadata.remove("annotations");
        }
        serde_json::to_string(&object).map_err(|e| format!("cannot encode the labelled body: {e}"))
    }
}

/// The object under `key` in `metadata` (created when absent or null).
fn object_entry<'m>(metadata: &'m mut Map<String, Value>, key: &str) -> Result<&'m mut Map<String, Value>, String> {
    let entry = metadata.entry(key).or_insert_with(|| Value::Object(Map::new()));
    if entry.is_null() {
        *entry = Value::Object(Map::new());
    }
    match entry {
        Value::Object(map) => Ok(map),
        _ => Err(format!("metadata.{key} of the request body is not a JSON object")),
    }
}

impl fmt::Display for Policy {
    /// The policy as an operator reads it: owner id, namespaces, then one line per rule.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "owner id    {} (label {MANAGED_BY_LABEL})", self.owner_id)?;
        match &self.ownership_keys {
            Some(keys) => writeln!(f, "ownership   signed ({keys})")?,
            None => writeln!(f, "ownership   label only. Warning: {}", owner_signature::UNSIGNED_MEANS)?,
        }
        let namespaces = if self.namespaces.is_empty() { "none".to_string() } else { self.namespaces.join(", ") };
        writeln!(f, "namespaces  {namespaces}")?;
        let listed = |names: &[String]| if names.is_empty() { "none".to_string() } else { names.join(", ") };
        writeln!(
            f,
            "pods may use Secrets: owned ones and {}; ServiceAccounts: default and {}; tokens: {}",
            listed(&self.pod_secrets),
            listed(&self.pod_service_accounts),
            if self.allow_service_account_tokens { "allowed" } else { "never" }
        )?;
        writeln!(
            f,
            "claims may name warm pools: {}; templates: {}",
            listed(&self.warm_pools),
            listed(&self.claim_templates)
        )?;
        let egress: Vec<String> = self.egress.iter().map(EgressRule::to_string).collect();
        writeln!(f, "sandboxes may reach (network-policy): cluster DNS and {}", listed(&egress))?;
        writeln!(f, "{}", self.pod_security)?;
        for rule in &self.resources {
            writeln!(f, "  {}", describe_rule(rule))?;
        }
        Ok(())
    }
}

/// One rule on one line: `sandboxes.agents.x-k8s.io [v1beta1, v1alpha1]: get, create`.
pub fn describe_rule(rule: &AccessRule) -> String {
    let verbs: Vec<&str> = rule.verbs.iter().map(|v| v.as_str()).collect();
    let mut line = format!("{} [{}]: {}", rule.qualified(), rule.versions.join(", "), verbs.join(", "));
    if verbs.is_empty() {
        line.push_str("(nothing)");
    }
    if !rule.subresources.is_empty() {
        line.push_str(&format!("; subresources {}", rule.subresources.join(", ")));
    }
    if !rule.namespaced {
        line.push_str(" (cluster-scoped)");
    }
    line
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

/// Kubernetes label value syntax (the shared apimachinery rule).
fn valid_label_value(value: &str) -> bool {
    contract::k8s::names::label_value(value).is_empty()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The default rules are what the Kubernetes provider declares, rule for rule: a default
    /// policy grants it everything it needs and nothing it does not, and a provider that comes
    /// to need more fails here before an operator meets a refusal.
    #[test]
    fn the_default_rules_are_what_the_kubernetes_provider_declares() {
        let sorted = |mut rules: Vec<AccessRule>| {
            rules.sort_by(|a, b| (&a.group, &a.plural).cmp(&(&b.group, &b.plural)));
            rules
        };
        assert_eq!(sorted(default_rules()), sorted(provider::describe::access()));
    }

    fn access<'a>(
        verb: AccessVerb,
        group: &'a str,
        version: &'a str,
        plural: &'a str,
        ns: Option<&'a str>,
    ) -> Access<'a> {
        Access { verb, group, version, plural, namespace: ns, name: Some("x"), subresource: None }
    }

    fn policy() -> Policy {
        Policy::kubernetes_default(["agents"])
    }

    fn jobs() -> ResourceType {
        ResourceType { group: "batch".into(), version: "v1".into(), plural: "jobs".into() }
    }

    use AccessVerb::*;

    #[test]
    fn the_default_allows_what_the_provider_needs() {
        let p = policy();
        for verb in [Get, Create, Patch, Delete, List, Watch] {
            assert!(p.check(&access(verb, "agents.x-k8s.io", "v1beta1", "sandboxes", Some("agents"))).is_ok());
            assert!(p.check(&access(verb, "agents.x-k8s.io", "v1alpha1", "sandboxes", Some("agents"))).is_ok());
        }
        for verb in [Get, Create, Patch, Delete] {
            assert!(p.check(&access(verb, "batch", "v1", "jobs", Some("agents"))).is_ok());
        }
        assert!(p.check(&access(Watch, "batch", "v1", "jobs", Some("agents"))).is_err(), "readiness watches pods");
        assert!(p.check(&access(Watch, "", "v1", "pods", Some("agents"))).is_ok());
        assert!(p.check(&access(Create, "", "v1", "secrets", Some("agents"))).is_ok());
        assert!(p.check(&access(Get, "", "v1", "namespaces", None)).is_err());
        let ns = Access { name: Some("agents"), ..access(Get, "", "v1", "namespaces", None) };
        assert!(p.check(&ns).is_ok());
        assert!(p.check_discovery("agents.x-k8s.io").is_ok());
    }

    #[test]
    fn denials_name_the_setting_that_allows_them() {
        let p = policy();
        let cases = [
            (access(Delete, "", "v1", "pods", Some("agents")), "add \"delete\" to the `verbs` of the pods rule"),
            (access(List, "", "v1", "secrets", Some("agents")), "add \"list\""),
            (access(Get, "", "v1", "configmaps", Some("agents")), "no rule for this resource type"),
            (access(Get, "batch", "v2", "jobs", Some("agents")), "add it to the `versions`"),
            (access(Get, "batch", "v1", "jobs", Some("kube-system")), "add it to the policy's `namespaces`"),
            (access(List, "agents.x-k8s.io", "v1beta1", "sandboxes", None), "across all namespaces"),
            (access(Get, "", "v1", "namespaces", Some("agents")), "cluster-scoped"),
        ];
        for (call, expected) in cases {
            let denial = p.check(&call).expect_err("denied");
            assert!(denial.0.contains(expected), "{call:?}: {denial}");
        }
        let status = Access { subresource: Some("status"), ..access(Patch, "batch", "v1", "jobs", Some("agents")) };
        assert!(p.check(&status).expect_err("denied").0.contains("`subresources`"));
        assert!(p.check_discovery("apps").expect_err("denied").0.contains("\"discovery\""));
    }

    #[test]
    fn system_namespaces_need_to_be_named() {
        let open = Policy::kubernetes_default([ANY_NAMESPACE]);
        assert!(open.allows_namespace("team-a"));
        for system in SYSTEM_NAMESPACES {
            let denial = open.check_namespace(system).expect_err("a wildcard never covers a system namespace");
            assert!(denial.0.contains("system namespace"), "{denial}");
            assert!(open.check(&access(Get, "batch", "v1", "jobs", Some(system))).is_err());
        }
        let named = Policy::kubernetes_default(["kube-system"]);
        assert!(named.check(&access(Get, "batch", "v1", "jobs", Some("kube-system"))).is_ok());
        let none = Policy::default();
        assert!(none.check_namespace("default").expect_err("nothing allowed").0.contains("allowed: none"));
    }

    #[test]
    fn namespace_objects_are_visible_only_when_allowed() {
        let p = policy();
        let get = |name| Access { name: Some(name), ..access(Get, "", "v1", "namespaces", None) };
        assert!(p.check(&get("agents")).is_ok());
        assert!(p.check(&get("kube-system")).is_err());
        let open = Policy::kubernetes_default([ANY_NAMESPACE]);
        assert!(open.check(&get("team-a")).is_ok());
        assert!(open.check(&get("kube-system")).is_err());
        assert!(open.check(&access(Get, "batch", "v1", "jobs", Some("anything"))).is_ok());
    }

    #[test]
    fn created_objects_get_the_owner_id() {
        let p = Policy { owner_id: "team-prod".into(), ..policy() };
        let label = |v: Value| {
            p.stamp_created(&jobs(), Some("agents"), v).map(|out| serde_json::from_str::<Value>(&out).expect("json"))
        };
        let v = label(json!({"kind": "Secret", "metadata": {"name": "s", "labels": {"a": "b"}}})).expect("labels");
        assert_eq!(v["metadata"]["labels"][MANAGED_BY_LABEL], "team-prod");
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        let bare = label(json!({"kind": "Secret"})).expect("labels");
        assert_eq!(bare["metadata"]["labels"][MANAGED_BY_LABEL], "team-prod");
        let replaced = label(json!({"metadata": {"labels": {MANAGED_BY_LABEL: "me"}}})).expect("labels");
        assert_eq!(replaced["metadata"]["labels"][MANAGED_BY_LABEL], "team-prod");
        assert!(label(json!([1])).is_err());
        assert!(label(json!({"metadata": {"labels": []}})).is_err());
        let forged = label(json!({"metadata": {"annotations": {SIGNATURE_ANNOTATION: "v1.00"}}})).expect("labels");
        assert_eq!(forged["metadata"].get("annotations"), None, "without a key the host signs nothing");
    }

    #[test]
    fn with_a_key_created_objects_are_signed_over_their_subject() {
        let keys = OwnershipKeys::parse("0123456789abcdef0123456789abcdef").expect("a key");
        let p = Policy { owner_id: "team-prod".into(), ownership_keys: Some(keys.clone()), ..policy() };
        let body = json!({"metadata": {"name": "pc-1", "labels": {LABEL_ACQUISITION_ID: "a1"},
            "annotations": {SIGNATURE_ANNOTATION: "v1.forged", "keep": "me"}}});
        let out: Value =
            serde_json::from_str(&p.stamp_created(&jobs(), Some("agents"), body).expect("signed")).expect("json");
        let served = json!({"metadata": {"name": "pc-1", "namespace": "agents", "labels": out["metadata"]["labels"]}});
        let signature = out["metadata"]["annotations"][SIGNATURE_ANNOTATION].as_str().expect("signed");
        assert!(keys.verify(&Subject::of(&jobs(), &served, "team-prod"), signature));
        assert_eq!(out["metadata"]["annotations"]["keep"], "me");
        let unnamed = p.stamp_created(&jobs(), Some("agents"), json!({"metadata": {"generateName": "pc-"}}));
        assert!(unnamed.expect_err("no name").contains("generateName"));
    }

    #[test]
    fn policies_read_from_config_files_and_are_validated() {
        let p: Policy = serde_json::from_str(r#"{"namespaces":["a"],"owner-id":"my-host"}"#).expect("parses");
        assert_eq!(p.resources, default_rules());
        assert!(p.validate().is_ok());
        let custom: Policy = serde_json::from_str(
            r#"{"namespaces":["a"],"resources":[{"group":"","versions":["v1"],"plural":"configmaps","verbs":["get"]}]}"#,
        )
        .expect("parses");
        assert!(custom.check(&access(Get, "", "v1", "configmaps", Some("a"))).is_ok());
        assert!(custom.check(&access(Get, "", "v1", "pods", Some("a"))).is_err());
        let bad = Policy { owner_id: "not a label!".into(), ..policy() };
        assert!(matches!(bad.validate(), Err(HostError::Config(_))));
        assert!(serde_json::from_str::<Policy>(r#"{"namespace":["a"]}"#).is_err());
        let mut writes_pods = policy();
        writes_pods.resources.push(AccessRule::new("", &["v1"], "pods", &[Delete]));
        writes_pods.resources.retain(|r| r.plural != "pods" || r.allows(Delete));
        assert!(matches!(writes_pods.validate(), Err(HostError::Config(m)) if m.contains("read-only")));
        let misspelt: Policy = serde_json::from_str(r#"{"pod-security":{"allow":["runAsRoot"]}}"#).expect("parses");
        assert!(matches!(misspelt.validate(), Err(HostError::Config(m)) if m.contains("no Pod Security check")));
        assert!(policy().to_string().contains("Pod Security restricted except checks: none"));
    }

    #[test]
    fn long_names_are_cut_in_denials() {
        let p = policy();
        let long = "n".repeat(100_000);
        let denial = p.check_namespace(&long).expect_err("denied");
        assert!(denial.0.len() < 400, "{} bytes", denial.0.len());
        assert!(denial.0.contains("100000 bytes"), "{denial}");
    }
}
