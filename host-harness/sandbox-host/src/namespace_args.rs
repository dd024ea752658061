//! The namespace a command works in, found as kubectl finds it: `-n/--namespace`, else the
//! namespace of the kubeconfig's current context (`default` when it names none). A provider
//! config that names no namespace takes it; one that names another while `-n` is given is
//! refused, as kubectl refuses a manifest whose namespace differs from `-n`'s.
//!
//! Which namespaces the host lets a provider use is another setting, the operator's allow-list
//! (`--allow-namespace`, or a policy file's `namespaces`). When neither is given it is the
//! target namespace alone, unless that came from a kubeconfig trusted less than the operator
//! (`--untrusted-kubeconfig`), whose choice widens nothing: then it is `default` alone.

use anyhow::bail;
use clap::Args;
use contract::quote;

use crate::policy_cmd::DEFAULT_NAMESPACE;

/// `-n/--namespace`, for the commands that work in a namespace.
#[derive(Args, Clone, Default)]
pub struct NamespaceArg {
    /// The namespace to work in (default: the kubeconfig context's, else `default`). A config
    /// that names no namespace takes it; without --allow-namespace or a policy file it is the
    /// only namespace the host allows.
    #[arg(short = 'n', long = "namespace", value_name = "NS")]
    pub namespace: Option<String>,
}

impl NamespaceArg {
    /// The namespace `-n` names, checked to be one.
    pub fn given(&self) -> anyhow::Result<Option<&str>> {
        let Some(name) = self.namespace.as_deref() else {
            return Ok(None);
        };
        if let Some(problem) = contract::k8s::names::dns1123_label(name).first() {
            bail!("-n/--namespace {} is not a namespace name: it {problem}", quote(name));
        }
        Ok(Some(name))
    }
}

/// Where the target namespace came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `-n/--namespace`.
    Flag,
    /// The kubeconfig's current context; `trusted` unless `--untrusted-kubeconfig`.
    Kubeconfig {
        /// Whether the kubeconfig is the operator's.
        trusted: bool,
    },
}

/// The namespace a command works in, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetNamespace {
    /// The namespace.
    pub name: String,
    /// Where it came from.
    pub origin: Origin,
}

impl TargetNamespace {
    /// `-n`'s namespace, else the kubeconfig context's (`kubeconfig`: the namespace and whether
    /// the kubeconfig is trusted); `None` when neither is known (no cluster, no `-n`).
    pub fn resolve(flag: Option<&str>, kubeconfig: Option<(&str, bool)>) -> Option<Self> {
        match (flag, kubeconfig) {
            (Some(name), _) => Some(Self { name: name.to_string(), origin: Origin::Flag }),
            (None, Some((name, trusted))) => {
                Some(Self { name: name.to_string(), origin: Origin::Kubeconfig { trusted } })
            }
            (None, None) => None,
        }
    }

    /// Where this namespace came from, for messages.
    fn shown_origin(&self) -> &'static str {
        match self.origin {
            Origin::Flag => "-n/--namespace",
            Origin::Kubeconfig { .. } => "the kubeconfig's current context",
        }
    }

    /// A provider config (JSON text) with this namespace where it names none; an error when it
    /// names another and `-n` named this one.
    pub fn fill_config(&self, config: String) -> anyhow::Result<String> {
        if let (Origin::Flag, Some(named)) = (self.origin, named_namespace(&config))
            && named != self.name
        {
            bail!(
                "the config names namespace {} and -n/--namespace names {}: drop one, or make them agree",
                quote(&named),
                quote(&self.name)
            );
        }
        Ok(with_namespace(config, &self.name))
    }

    /// An error when a stored lease lives in another namespace than `-n` names.
    pub fn check_lease(&self, lease_namespace: &str) -> anyhow::Result<()> {
        if self.origin == Origin::Flag && !lease_namespace.is_empty() && lease_namespace != self.name {
            bail!(
                "the lease is in namespace {} and -n/--namespace names {}: drop -n, or name the lease's",
                quote(lease_namespace),
                quote(&self.name)
            );
        }
        Ok(())
    }
}

/// The namespace a config (JSON text) names, if it is a JSON object that names one.
fn named_namespace(config: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(config).ok()?.get("namespace")? {
        serde_json::Value::String(named) => Some(named.clone()),
        _ => None,
    }
}

/// A provider config (JSON text) with `namespace` where it names none (absent or null); any other
/// config passes as written, for the provider to judge.
pub fn with_namespace(config: String, namespace: &str) -> String {
    let Ok(serde_json::Value::Object(mut object)) = serde_json::from_str::<serde_json::Value>(&config) else {
        return config;
    };
    if !object.get("namespace").is_none_or(serde_json::Value::is_null) {
        return config;
    }
    object.insert("namespace".into(), namespace.into());
    serde_json::Value::Object(object).to_string()
}

/// The allow-list when the operator names none, and the setting that widens it (for a denial
/// to name): the target namespace, unless an untrusted kubeconfig chose it (or none is known).
pub fn default_allowed(target: Option<&TargetNamespace>) -> (String, String) {
    match target {
        Some(target) if target.origin != (Origin::Kubeconfig { trusted: false }) => (
            target.name.clone(),
            format!(
                "--allow-namespace (without it or a policy file the host allows the namespace of {} alone)",
                target.shown_origin()
            ),
        ),
        _ => (
            DEFAULT_NAMESPACE.to_string(),
            format!("--allow-namespace (without it, a policy file or -n the host allows {DEFAULT_NAMESPACE:?} alone)"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flag(name: &str) -> TargetNamespace {
        TargetNamespace::resolve(Some(name), Some(("ignored", true))).expect("a target")
    }

    #[test]
    fn the_flag_wins_over_the_kubeconfig_and_neither_means_none() {
        assert_eq!(flag("agents").origin, Origin::Flag);
        let from_context = TargetNamespace::resolve(None, Some(("team", false))).expect("a target");
        assert_eq!((from_context.name.as_str(), from_context.origin), ("team", Origin::Kubeconfig { trusted: false }));
        assert_eq!(TargetNamespace::resolve(None, None), None);
    }

    #[test]
    fn a_config_without_a_namespace_takes_the_target() {
        let filled = flag("agents").fill_config(r#"{"image":"busybox"}"#.into()).expect("filled");
        let value: serde_json::Value = serde_json::from_str(&filled).expect("json");
        assert_eq!(value["namespace"], "agents");
        let null = flag("agents").fill_config(r#"{"namespace":null}"#.into()).expect("filled");
        assert!(null.contains(r#""namespace":"agents""#), "{null}");
    }

    #[test]
    fn a_config_naming_another_namespace_than_the_flag_is_refused() {
        let message = flag("agents").fill_config(r#"{"namespace":"other"}"#.into()).expect_err("refused").to_string();
        assert!(message.contains(r#"namespace "other" and -n/--namespace names "agents""#), "{message}");
        let context = TargetNamespace::resolve(None, Some(("team", true))).expect("a target");
        let kept = context.fill_config(r#"{"namespace": "other"}"#.into()).expect("the config wins over a context");
        assert_eq!(kept, r#"{"namespace": "other"}"#, "a config that names its namespace is passed as written");
        assert_eq!(flag("a").fill_config("not json".into()).expect("passed on"), "not json");
    }

    #[test]
    fn a_lease_in_another_namespace_than_the_flag_is_refused() {
        assert!(flag("agents").check_lease("agents").is_ok());
        assert!(flag("agents").check_lease("other").is_err());
        let context = TargetNamespace::resolve(None, Some(("team", true))).expect("a target");
        assert!(context.check_lease("other").is_ok(), "only -n is checked against the lease");
    }

    #[test]
    fn an_untrusted_kubeconfig_widens_nothing() {
        let untrusted = TargetNamespace::resolve(None, Some(("team", false)));
        assert_eq!(default_allowed(untrusted.as_ref()).0, "default");
        let trusted = TargetNamespace::resolve(None, Some(("team", true)));
        assert_eq!(default_allowed(trusted.as_ref()).0, "team");
        assert_eq!(default_allowed(Some(&flag("agents"))).0, "agents");
        assert_eq!(default_allowed(None).0, "default");
    }

    #[test]
    fn a_flag_that_is_no_namespace_name_is_refused() {
        let arg = NamespaceArg { namespace: Some("Bad_NS".into()) };
        assert!(arg.given().expect_err("refused").to_string().contains("is not a namespace name"));
        assert_eq!(NamespaceArg::default().given().expect("none"), None);
    }
}
