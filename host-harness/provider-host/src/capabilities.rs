//! Two-sided capabilities: a provider declares the `kube` access it needs (`provider-info`'s
//! `access`), the operator's policy grants, and the host runs the provider with the
//! intersection, reporting at load what it granted and what it refused.
//!
//! Neither side can widen the other: a provider that asks for more than the operator allows
//! gets less (and a warning names what), and an operator's generous policy gives a provider no
//! more than it asked for. A provider of contract 0.1.0 could not declare anything; it runs
//! with the operator's policy as written, and the report says so.

use std::fmt;

use crate::policy::{AccessRule, Policy, describe_rule};

/// What was declared, granted and refused, and the policy the host enforces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grants {
    /// What the provider declared; `None` for a component that cannot declare (contract 0.1.0).
    pub declared: Option<Vec<AccessRule>>,
    /// The operator's policy as written.
    pub operator: Policy,
    /// The intersection: what the host enforces.
    pub effective: Policy,
    /// Declared access the operator's policy does not grant, one rule per resource type.
    pub refused: Vec<AccessRule>,
}

/// The part of `wanted` that `granted` allows, and the part it does not.
fn split(wanted: &AccessRule, granted: Option<&AccessRule>) -> (Option<AccessRule>, Option<AccessRule>) {
    let Some(granted) = granted.filter(|g| g.namespaced == wanted.namespaced) else {
        return (None, Some(wanted.clone()));
    };
    let keep = |mine: &[String], theirs: &[String]| -> (Vec<String>, Vec<String>) {
        mine.iter().cloned().partition(|m| theirs.contains(m))
    };
    let (versions, refused_versions) = keep(&wanted.versions, &granted.versions);
    let (subresources, refused_subresources) = keep(&wanted.subresources, &granted.subresources);
    let (verbs, refused_verbs): (Vec<_>, Vec<_>) = wanted.verbs.iter().partition(|v| granted.allows(**v));
    let allowed = (!versions.is_empty() && !verbs.is_empty()).then(|| AccessRule {
        versions: versions.clone(),
        verbs: verbs.clone(),
        subresources,
        ..wanted.clone()
    });
    let refused = if allowed.is_none() {
        Some(wanted.clone())
    } else if refused_versions.is_empty() && refused_verbs.is_empty() && refused_subresources.is_empty() {
        None
    } else {
        Some(AccessRule {
            versions: if refused_versions.is_empty() { versions } else { refused_versions },
            verbs: if refused_verbs.is_empty() { verbs } else { refused_verbs },
            subresources: refused_subresources,
            ..wanted.clone()
        })
    };
    (allowed, refused)
}

/// Intersects what a provider declared with the operator's policy.
pub fn grant(operator: &Policy, declared: Option<&[AccessRule]>) -> Grants {
    let Some(declared) = declared else {
        return Grants { declared: None, operator: operator.clone(), effective: operator.clone(), refused: Vec::new() };
    };
    let mut resources = Vec::new();
    let mut refused = Vec::new();
    for wanted in declared {
        let (allowed, denied) = split(wanted, operator.rule(&wanted.group, &wanted.plural));
        resources.extend(allowed);
        refused.extend(denied);
    }
    let effective = Policy { resources, ..operator.clone() };
    Grants { declared: Some(declared.to_vec()), operator: operator.clone(), effective, refused }
}

impl Grants {
    /// Logs the grant for the operator: what runs, and a warning for each refusal.
    pub fn log(&self, contract_version: &str) {
        match &self.declared {
            None => tracing::info!(target: "provider_host::policy", contract_version,
                "the component declares no access (contract 0.1.0): the operator's policy applies as written"),
            Some(_) => tracing::info!(target: "provider_host::policy", contract_version,
                rules = self.effective.resources.len(), "granted the intersection of the declared access and the policy"),
        }
        // A component granted no Kubernetes access creates nothing to own.
        match (&self.effective.ownership_keys, self.effective.resources.is_empty()) {
            (_, true) => {}
            (Some(keys), false) => {
                tracing::info!(target: "provider_host::ownership", %keys, "signing what the host creates")
            }
            (None, false) => {
                tracing::warn!(target: "provider_host::ownership", "{}", crate::owner_signature::UNSIGNED_MEANS)
            }
        }
        for rule in &self.refused {
            tracing::warn!(target: "provider_host::policy", contract_version, refused = %describe_rule(rule),
                "the component asked for access the operator's policy does not grant; calls that need it will be denied");
        }
    }
}

impl fmt::Display for Grants {
    /// The report of `sandbox-host policy show`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.declared {
            None => writeln!(f, "the component declares no access (contract 0.1.0): the operator's policy applies")?,
            Some(declared) => {
                writeln!(f, "declared by the component:")?;
                for rule in declared {
                    writeln!(f, "  {}", describe_rule(rule))?;
                }
            }
        }
        writeln!(f, "granted by the operator's policy:")?;
        for rule in &self.operator.resources {
            writeln!(f, "  {}", describe_rule(rule))?;
        }
        writeln!(f, "the host runs the component with:")?;
        write!(f, "{}", self.effective)?;
        if self.refused.is_empty() {
            writeln!(f, "refused: nothing")
        } else {
            writeln!(f, "refused (calls that need these are denied):")?;
            for rule in &self.refused {
                writeln!(f, "  {}", describe_rule(rule))?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::AccessVerb::*;

    fn operator() -> Policy {
        Policy::kubernetes_default(["agents"])
    }

    #[test]
    fn the_intersection_is_what_both_sides_allow() {
        let declared = vec![
            AccessRule::new("batch", &["v1"], "jobs", &[Get, Create, List]),
            AccessRule::new("", &["v1"], "configmaps", &[Get]),
            AccessRule::new("agents.x-k8s.io", &["v1beta1", "v2"], "sandboxes", &[Get]),
        ];
        let grants = grant(&operator(), Some(&declared));
        assert_eq!(
            grants.effective.resources,
            vec![
                AccessRule::new("batch", &["v1"], "jobs", &[Get, Create]),
                AccessRule::new("agents.x-k8s.io", &["v1beta1"], "sandboxes", &[Get]),
            ],
            "nothing the operator grants beyond the declaration, nothing declared beyond the grant"
        );
        assert_eq!(
            grants.refused,
            vec![
                AccessRule::new("batch", &["v1"], "jobs", &[List]),
                AccessRule::new("", &["v1"], "configmaps", &[Get]),
                AccessRule::new("agents.x-k8s.io", &["v2"], "sandboxes", &[Get]),
            ]
        );
        assert_eq!(grants.effective.namespaces, vec!["agents"]);
        assert_eq!(grants.effective.owner_id, operator().owner_id);
        let report = grants.to_string();
        assert!(report.contains("refused (calls that need these are denied):\n  jobs.batch [v1]: list"), "{report}");
    }

    #[test]
    fn scope_and_subresources_must_match() {
        let declared = vec![
            AccessRule { namespaced: true, ..AccessRule::new("", &["v1"], "namespaces", &[Get]) },
            AccessRule { subresources: vec!["status".into()], ..AccessRule::new("batch", &["v1"], "jobs", &[Patch]) },
        ];
        let grants = grant(&operator(), Some(&declared));
        assert_eq!(grants.effective.resources, vec![AccessRule::new("batch", &["v1"], "jobs", &[Patch])]);
        assert_eq!(grants.refused.len(), 2, "{:?}", grants.refused);
        assert_eq!(grants.refused[1].subresources, vec!["status"]);
    }

    #[test]
    fn a_component_that_cannot_declare_gets_the_operators_policy() {
        let grants = grant(&operator(), None);
        assert_eq!(grants.effective, operator());
        assert!(grants.to_string().contains("declares no access (contract 0.1.0)"));
    }
}
