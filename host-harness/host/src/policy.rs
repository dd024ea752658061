//! The host policy every `kube` call of a provider passes through: which namespaces, which
//! resource types (group, versions, plural), which verbs and subresources, and the managed-by
//! label stamped on everything the provider creates.
//!
//! The policy is data (serde, kebab-case) so an operator can keep it in a config file; a denial
//! names what was refused and which setting would allow it, because the person reading it is
//! the one who has to decide whether to change the policy.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::error::HostError;

/// The label the host stamps on every object a provider creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The managed-by value of [`Policy::kubernetes_default`].
pub const DEFAULT_MANAGED_BY: &str = "paperclip-sandbox-provider";

/// Namespace entry that allows every namespace.
pub const ANY_NAMESPACE: &str = "*";

/// An operation of the `kube` interface, as the policy names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verb {
    /// Read one object.
    Get,
    /// Create an object.
    Create,
    /// Patch an object (merge, JSON or strategic).
    Patch,
    /// Delete an object.
    Delete,
    /// List objects.
    List,
    /// Watch objects.
    Watch,
    /// Ask which versions of the rule's group are served.
    Discovery,
}

impl Verb {
    /// The policy name of the verb.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::Create => "create",
            Self::Patch => "patch",
            Self::Delete => "delete",
            Self::List => "list",
            Self::Watch => "watch",
            Self::Discovery => "discovery",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a provider may do with one resource type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ResourceRule {
    /// API group; empty for the core group.
    #[serde(default)]
    pub group: String,
    /// The versions of the group the rule covers.
    pub versions: Vec<String>,
    /// The resource's plural name (`sandboxes`, `jobs`, `pods`).
    pub plural: String,
    /// The allowed verbs; empty allows nothing but documents that the type was considered.
    #[serde(default)]
    pub verbs: BTreeSet<Verb>,
    /// Subresources that may be patched (`status`); none by default.
    #[serde(default)]
    pub subresources: Vec<String>,
    /// Whether objects live in namespaces (false for `namespaces` itself).
    #[serde(default = "default_true")]
    pub namespaced: bool,
}

fn default_true() -> bool {
    true
}

impl ResourceRule {
    fn new(group: &str, versions: &[&str], plural: &str, verbs: &[Verb]) -> Self {
        Self {
            group: group.to_string(),
            versions: versions.iter().map(|v| (*v).to_string()).collect(),
            plural: plural.to_string(),
            verbs: verbs.iter().copied().collect(),
            subresources: Vec::new(),
            namespaced: true,
        }
    }

    fn describe(&self) -> String {
        qualified(&self.group, &self.plural)
    }
}

fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}

/// The host policy. Built from a config file (serde) or [`Policy::kubernetes_default`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Policy {
    /// Namespaces the provider may use; `*` allows any.
    #[serde(default)]
    pub namespaces: Vec<String>,
    /// Resource types and their verbs; absent types are denied.
    #[serde(default = "default_rules")]
    pub resources: Vec<ResourceRule>,
    /// Value of the `app.kubernetes.io/managed-by` label stamped on created objects.
    #[serde(default = "default_managed_by")]
    pub managed_by: String,
}

fn default_managed_by() -> String {
    DEFAULT_MANAGED_BY.to_string()
}

/// The resource rules the Kubernetes provider needs and no more (a test in `tests/policy.rs`
/// checks that a full set of lifecycles uses every grant): Sandboxes (both served versions)
/// fully, Jobs without list or watch (readiness watches their pods), pods read-only, its
/// per-lease Secrets without list or watch (so it cannot enumerate other secrets), delete of
/// the workspace claims of reusable leases, namespaces get-only (probe checks existence),
/// events none.
pub fn default_rules() -> Vec<ResourceRule> {
    use Verb::*;
    vec![
        ResourceRule::new(
            "agents.x-k8s.io",
            &["v1beta1", "v1alpha1"],
            "sandboxes",
            &[Get, Create, Patch, Delete, List, Watch, Discovery],
        ),
        ResourceRule::new("batch", &["v1"], "jobs", &[Get, Create, Patch, Delete]),
        ResourceRule::new("", &["v1"], "pods", &[Get, List, Watch]),
        ResourceRule::new("", &["v1"], "secrets", &[Create, Get, Delete, Patch]),
        ResourceRule::new("", &["v1"], "persistentvolumeclaims", &[Delete]),
        ResourceRule { namespaced: false, ..ResourceRule::new("", &["v1"], "namespaces", &[Get]) },
        ResourceRule::new("", &["v1"], "events", &[]),
    ]
}

/// One `kube` call as the policy sees it.
#[derive(Debug, Clone, Copy)]
pub struct Access<'a> {
    /// The operation.
    pub verb: Verb,
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

/// Why the policy refused a call; the message names the setting that would allow it.
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
    /// The policy for the Kubernetes provider, allowing the given namespaces.
    pub fn kubernetes_default<S: Into<String>>(namespaces: impl IntoIterator<Item = S>) -> Self {
        Self {
            namespaces: namespaces.into_iter().map(Into::into).collect(),
            resources: default_rules(),
            managed_by: default_managed_by(),
        }
    }

    /// Refuses a policy that cannot be enforced as written (a bad label value, an empty rule).
    pub fn validate(&self) -> Result<(), HostError> {
        if !valid_label_value(&self.managed_by) || self.managed_by.is_empty() {
            return Err(HostError::Config(format!(
                "policy managed-by {:?} is not a valid label value (1-63 characters: letters, digits, '-', '_', '.', \
                 starting and ending with a letter or digit)",
                self.managed_by
            )));
        }
        for rule in &self.resources {
            if rule.plural.is_empty() || rule.versions.is_empty() {
                return Err(HostError::Config(format!(
                    "policy rule for {:?} needs a plural and at least one version",
                    rule.describe()
                )));
            }
        }
        Ok(())
    }

    /// Whether a namespace is allowed.
    pub fn allows_namespace(&self, namespace: &str) -> bool {
        self.namespaces.iter().any(|n| n == namespace || n == ANY_NAMESPACE)
    }

    /// Checks one call; `Err` says what was denied and which setting allows it.
    pub fn check(&self, access: &Access<'_>) -> Result<(), Denial> {
        let what = qualified(access.group, access.plural);
        let verb = access.verb;
        let Some(rule) = self.resources.iter().find(|r| r.group == access.group && r.plural == access.plural) else {
            return Err(Denial(format!(
                "host policy denies {verb} on {what}: the policy has no rule for this resource type; add one to \
                 `resources` (group {:?}, plural {:?}, versions, verbs)",
                access.group, access.plural
            )));
        };
        if !rule.versions.iter().any(|v| v == access.version) {
            return Err(Denial(format!(
                "host policy denies {verb} on {what}: version {:?} is not allowed; add it to the `versions` of the \
                 {what} rule",
                access.version
            )));
        }
        if !rule.verbs.contains(&verb) {
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
                "host policy denies {verb} on {what}/{sub}: add \"{sub}\" to the `subresources` of the {what} rule"
            )));
        }
        match (rule.namespaced, access.namespace) {
            (true, None) => {
                return Err(Denial(format!(
                    "host policy denies {verb} on {what} across all namespaces: name one of the allowed namespaces \
                     (`namespaces`)"
                )));
            }
            (true, Some(ns)) if !self.allows_namespace(ns) => {
                return Err(Denial(format!(
                    "host policy denies {verb} on {what} in namespace {ns:?}: add it to `namespaces` (allowed: [{}])",
                    self.namespaces.join(", ")
                )));
            }
            (false, Some(ns)) => {
                return Err(Denial(format!(
                    "host policy denies {verb} on {what} in namespace {ns:?}: {what} is cluster-scoped; call it \
                     without a namespace"
                )));
            }
            _ => {}
        }
        if access.group.is_empty() && access.plural == "namespaces" {
            self.check_namespace_object(verb, access.name)?;
        }
        Ok(())
    }

    /// A namespace object is visible only when it is an allowed namespace, so `get namespaces`
    /// cannot be used to learn what else runs on the cluster; listing needs `*`.
    fn check_namespace_object(&self, verb: Verb, name: Option<&str>) -> Result<(), Denial> {
        match name {
            Some(name) if self.allows_namespace(name) => Ok(()),
            Some(name) => Err(Denial(format!(
                "host policy denies {verb} on namespace {name:?}: it is not an allowed namespace; add it to \
                 `namespaces`"
            ))),
            None if self.namespaces.iter().any(|n| n == ANY_NAMESPACE) => Ok(()),
            None => Err(Denial(format!(
                "host policy denies {verb} on all namespaces: only the allowed namespaces are visible; add \"*\" to \
                 `namespaces` to allow it"
            ))),
        }
    }

    /// Checks a `served-versions` call: allowed when some rule of the group grants `discovery`.
    pub fn check_discovery(&self, group: &str) -> Result<(), Denial> {
        if self.resources.iter().any(|r| r.group == group && r.verbs.contains(&Verb::Discovery)) {
            return Ok(());
        }
        Err(Denial(format!(
            "host policy denies discovery of API group {group:?}: add \"discovery\" to the `verbs` of a rule for \
             that group"
        )))
    }

    /// Stamps the managed-by label into a create body. A different value the provider set is
    /// replaced (the host, not the guest, says who manages an object) and reported to the
    /// operator. `Err` means the body is not a JSON object with an object `metadata`.
    pub fn label_created(&self, body: &str) -> Result<String, String> {
        let mut object: Value =
            serde_json::from_str(body).map_err(|e| format!("the request body is not valid JSON: {e}"))?;
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
        let labels = metadata.entry("labels").or_insert_with(|| Value::Object(Map::new()));
        if labels.is_null() {
            *labels = Value::Object(Map::new());
        }
        let Value::Object(labels) = labels else {
            return Err("metadata.labels of the request body is not a JSON object".to_string());
        };
        let previous = labels.insert(MANAGED_BY_LABEL.to_string(), Value::String(self.managed_by.clone()));
        if let Some(previous) = previous.filter(|p| p.as_str() != Some(self.managed_by.as_str())) {
            tracing::warn!(
                target: "provider_host::policy",
                label = MANAGED_BY_LABEL,
                provider_value = %previous,
                host_value = %self.managed_by,
                "the provider set a different managed-by label; the host policy's value replaces it"
            );
        }
        serde_json::to_string(&object).map_err(|e| format!("cannot encode the labelled body: {e}"))
    }
}

/// Kubernetes label value syntax: at most 63 characters of `[A-Za-z0-9._-]`, starting and
/// ending alphanumeric (or empty).
fn valid_label_value(value: &str) -> bool {
    let bytes = value.as_bytes();
    value.len() <= 63
        && bytes.iter().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && bytes.first().is_none_or(u8::is_ascii_alphanumeric)
        && bytes.last().is_none_or(u8::is_ascii_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access<'a>(verb: Verb, group: &'a str, version: &'a str, plural: &'a str, ns: Option<&'a str>) -> Access<'a> {
        Access { verb, group, version, plural, namespace: ns, name: Some("x"), subresource: None }
    }

    fn policy() -> Policy {
        Policy::kubernetes_default(["agents"])
    }

    #[test]
    fn the_default_allows_what_the_provider_needs() {
        let p = policy();
        for verb in [Verb::Get, Verb::Create, Verb::Patch, Verb::Delete, Verb::List, Verb::Watch] {
            assert!(p.check(&access(verb, "agents.x-k8s.io", "v1beta1", "sandboxes", Some("agents"))).is_ok());
            assert!(p.check(&access(verb, "agents.x-k8s.io", "v1alpha1", "sandboxes", Some("agents"))).is_ok());
        }
        for verb in [Verb::Get, Verb::Create, Verb::Patch, Verb::Delete] {
            assert!(p.check(&access(verb, "batch", "v1", "jobs", Some("agents"))).is_ok());
        }
        assert!(
            p.check(&access(Verb::Watch, "batch", "v1", "jobs", Some("agents"))).is_err(),
            "readiness watches pods"
        );
        assert!(p.check(&access(Verb::Watch, "", "v1", "pods", Some("agents"))).is_ok());
        assert!(p.check(&access(Verb::Create, "", "v1", "secrets", Some("agents"))).is_ok());
        assert!(p.check(&access(Verb::Get, "", "v1", "namespaces", None)).is_err());
        let ns = Access { name: Some("agents"), ..access(Verb::Get, "", "v1", "namespaces", None) };
        assert!(p.check(&ns).is_ok());
        assert!(p.check_discovery("agents.x-k8s.io").is_ok());
    }

    #[test]
    fn denials_name_the_setting_that_allows_them() {
        let p = policy();
        let cases = [
            (access(Verb::Delete, "", "v1", "pods", Some("agents")), "add \"delete\" to the `verbs` of the pods rule"),
            (access(Verb::List, "", "v1", "secrets", Some("agents")), "add \"list\""),
            (access(Verb::Get, "", "v1", "events", Some("agents")), "the rule allows []"),
            (access(Verb::Get, "", "v1", "configmaps", Some("agents")), "no rule for this resource type"),
            (access(Verb::Get, "batch", "v2", "jobs", Some("agents")), "add it to the `versions`"),
            (access(Verb::Get, "batch", "v1", "jobs", Some("kube-system")), "add it to `namespaces`"),
            (access(Verb::List, "agents.x-k8s.io", "v1beta1", "sandboxes", None), "across all namespaces"),
            (access(Verb::Get, "", "v1", "namespaces", Some("agents")), "cluster-scoped"),
        ];
        for (call, expected) in cases {
            let denial = p.check(&call).expect_err("denied");
            assert!(denial.0.contains(expected), "{call:?}: {denial}");
        }
        let status =
            Access { subresource: Some("status"), ..access(Verb::Patch, "batch", "v1", "jobs", Some("agents")) };
        assert!(p.check(&status).expect_err("denied").0.contains("`subresources`"));
        assert!(p.check_discovery("apps").expect_err("denied").0.contains("\"discovery\""));
    }

    #[test]
    fn namespace_objects_are_visible_only_when_allowed() {
        let p = policy();
        let get = |name| Access { name: Some(name), ..access(Verb::Get, "", "v1", "namespaces", None) };
        assert!(p.check(&get("agents")).is_ok());
        assert!(p.check(&get("kube-system")).is_err());
        let open = Policy::kubernetes_default([ANY_NAMESPACE]);
        assert!(open.check(&get("kube-system")).is_ok());
        assert!(open.check(&access(Verb::Get, "batch", "v1", "jobs", Some("anything"))).is_ok());
    }

    #[test]
    fn created_objects_get_the_managed_by_label() {
        let p = policy();
        let out = p.label_created(r#"{"kind":"Secret","metadata":{"name":"s","labels":{"a":"b"}}}"#).expect("labels");
        let v: Value = serde_json::from_str(&out).expect("json");
        assert_eq!(v["metadata"]["labels"][MANAGED_BY_LABEL], DEFAULT_MANAGED_BY);
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        let bare: Value =
            serde_json::from_str(&p.label_created(r#"{"kind":"Secret"}"#).expect("labels")).expect("json");
        assert_eq!(bare["metadata"]["labels"][MANAGED_BY_LABEL], DEFAULT_MANAGED_BY);
        let replaced = p.label_created(&format!(r#"{{"metadata":{{"labels":{{"{MANAGED_BY_LABEL}":"me"}}}}}}"#));
        assert!(replaced.expect("labels").contains(DEFAULT_MANAGED_BY));
        assert!(p.label_created("[1]").is_err());
        assert!(p.label_created(r#"{"metadata":{"labels":[]}}"#).is_err());
        assert!(p.label_created("not json").is_err());
    }

    #[test]
    fn policies_read_from_config_files_and_are_validated() {
        let p: Policy = serde_json::from_str(r#"{"namespaces":["a"],"managed-by":"my-host"}"#).expect("parses");
        assert_eq!(p.resources, default_rules());
        assert!(p.validate().is_ok());
        let custom: Policy = serde_json::from_str(
            r#"{"namespaces":["a"],"resources":[{"group":"","versions":["v1"],"plural":"configmaps","verbs":["get"]}]}"#,
        )
        .expect("parses");
        assert!(custom.check(&access(Verb::Get, "", "v1", "configmaps", Some("a"))).is_ok());
        assert!(custom.check(&access(Verb::Get, "", "v1", "pods", Some("a"))).is_err());
        let bad = Policy { managed_by: "not a label!".into(), ..policy() };
        assert!(matches!(bad.validate(), Err(HostError::Config(_))));
        assert!(serde_json::from_str::<Policy>(r#"{"namespace":["a"]}"#).is_err());
    }
}
