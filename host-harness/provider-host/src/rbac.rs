//! The least-privilege RBAC objects for a policy: one ServiceAccount for the host, and in each
//! allowed namespace a Role with exactly the verbs the effective policy grants plus what the
//! host itself needs to enforce it, bound to that ServiceAccount.
//!
//! What the host adds: `get` on every type it patches or deletes (it reads the object first to
//! prove ownership and take its uid as a precondition), `list` on every workload type it creates
//! (a Sandbox, Job or SandboxClaim: the lease inventory, [`crate::inventory`]), `list` and
//! `watch` on pods wherever it may exec (its watch keeps its proofs of pods current, so an
//! exec needs no read before it opens: `crate::pod_watch`), `list` on
//! NetworkPolicies (`probe` checks one isolates the sandboxes, [`crate::network_policy`]), and,
//! when claims may be
//! created, `get` on warm pools and templates (a claim's template is checked against the
//! pod-security ceiling, [`crate::warm_pool_ceiling`]). Discovery (`served-versions`,
//! and the kind lookups behind owner chains) needs no rule: Kubernetes lets every authenticated
//! user read discovery documents (the `system:discovery` ClusterRole). Nothing else is
//! generated: no wildcard, no ClusterRole, no verb nobody uses. A policy that needs a
//! ClusterRole (`*` namespaces, a cluster-scoped type other than the namespaces themselves) is
//! refused.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::Value;

use crate::error::HostError;
use crate::network_policy;
use crate::policy::{ANY_NAMESPACE, AccessRule, AccessVerb, Policy};
use contract::k8s::agent_sandbox::{CLAIMS, EXTENSIONS_GROUP, TEMPLATES, WARM_POOLS};

/// The RBAC verbs of one policy rule, in the order kubectl prints them, with the host's own.
fn verbs(rule: &AccessRule) -> Vec<String> {
    let host_reads = rule.allows(AccessVerb::Patch) || rule.allows(AccessVerb::Delete) || rule.allows(AccessVerb::Exec);
    let inventory =
        rule.allows(AccessVerb::Create) && contract::Backend::of_workload(&rule.group, &rule.plural).is_some();
    let pod_watch = rule.allows(AccessVerb::Exec);
    let order = [
        (AccessVerb::Get, rule.allows(AccessVerb::Get) || host_reads),
        (AccessVerb::List, rule.allows(AccessVerb::List) || inventory || pod_watch),
        (AccessVerb::Watch, rule.allows(AccessVerb::Watch) || pod_watch),
        (AccessVerb::Create, rule.allows(AccessVerb::Create)),
        (AccessVerb::Patch, rule.allows(AccessVerb::Patch)),
        (AccessVerb::Delete, rule.allows(AccessVerb::Delete)),
    ];
    order.into_iter().filter(|(_, on)| *on).map(|(v, _)| v.as_str().to_string()).collect()
}

/// The Role rules for `namespace`.
fn rules(policy: &Policy, namespace: &str) -> Result<Vec<PolicyRule>, HostError> {
    let mut out = Vec::new();
    for rule in &policy.resources {
        let verbs = verbs(rule);
        if verbs.is_empty() {
            continue;
        }
        let group = vec![rule.group.clone()];
        if !rule.namespaced {
            if rule.group.is_empty() && rule.plural == "namespaces" {
                // A Role may grant reads of its own namespace object (the request's namespace is
                // the namespace's name), and nothing more of a cluster-scoped type.
                let reads: Vec<String> = verbs.into_iter().filter(|v| v == "get").collect();
                if !reads.is_empty() {
                    out.push(PolicyRule {
                        api_groups: Some(group),
                        resources: Some(vec![rule.plural.clone()]),
                        resource_names: Some(vec![namespace.to_string()]),
                        verbs: reads,
                        ..Default::default()
                    });
                }
                continue;
            }
            return Err(HostError::Config(format!(
                "the policy grants cluster-scoped {}, which needs a ClusterRole; this command generates Roles only",
                rule.qualified()
            )));
        }
        out.push(PolicyRule {
            api_groups: Some(group.clone()),
            resources: Some(vec![rule.plural.clone()]),
            verbs,
            ..Default::default()
        });
        if rule.allows(AccessVerb::Exec) {
            // The exec WebSocket is a GET upgrade, which API servers before 1.31 authorize as
            // `get` and later ones as `create` (KEP-4006); both are granted.
            out.push(PolicyRule {
                api_groups: Some(group.clone()),
                resources: Some(vec![format!("{}/exec", rule.plural)]),
                verbs: vec!["get".to_string(), "create".to_string()],
                ..Default::default()
            });
        }
        if rule.allows(AccessVerb::Patch) && !rule.subresources.is_empty() {
            out.push(PolicyRule {
                api_groups: Some(group),
                resources: Some(rule.subresources.iter().map(|s| format!("{}/{s}", rule.plural)).collect()),
                verbs: vec!["patch".to_string()],
                ..Default::default()
            });
        }
    }
    out.push(PolicyRule {
        api_groups: Some(vec![network_policy::GROUP.to_string()]),
        resources: Some(vec![network_policy::PLURAL.to_string()]),
        verbs: vec!["list".to_string()],
        ..Default::default()
    });
    if policy.rule(EXTENSIONS_GROUP, CLAIMS).is_some_and(|r| r.allows(AccessVerb::Create)) {
        out.push(PolicyRule {
            api_groups: Some(vec![EXTENSIONS_GROUP.to_string()]),
            resources: Some(vec![WARM_POOLS.to_string(), TEMPLATES.to_string()]),
            verbs: vec!["get".to_string()],
            ..Default::default()
        });
    }
    Ok(out)
}

fn meta(name: &str, namespace: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(namespace.to_string()),
        labels: Some(BTreeMap::from([("app.kubernetes.io/component".to_string(), "sandbox-host".to_string())])),
        ..Default::default()
    }
}

fn encode<T: serde::Serialize>(object: &T) -> Result<Value, HostError> {
    serde_json::to_value(object).map_err(|e| HostError::Config(format!("cannot encode an RBAC object: {e}")))
}

/// The ServiceAccount `service_account` in `namespace`, and a Role and RoleBinding (both named
/// like the ServiceAccount) in every namespace the policy allows, in apply order.
pub fn manifests(policy: &Policy, namespace: &str, service_account: &str) -> Result<Vec<Value>, HostError> {
    if policy.namespaces.iter().any(|n| n == ANY_NAMESPACE) {
        return Err(HostError::Config(
            "the policy allows any namespace (\"*\"), which needs a ClusterRole; name the namespaces in the policy \
             and this command generates a Role for each"
                .to_string(),
        ));
    }
    if policy.namespaces.is_empty() {
        return Err(HostError::Config("the policy allows no namespace, so there is nothing to grant".to_string()));
    }
    let account = ServiceAccount { metadata: meta(service_account, namespace), ..Default::default() };
    let mut out = vec![encode(&account)?];
    for allowed in &policy.namespaces {
        let role = Role { metadata: meta(service_account, allowed), rules: Some(rules(policy, allowed)?) };
        let binding = RoleBinding {
            metadata: meta(service_account, allowed),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".to_string(),
                kind: "Role".to_string(),
                name: service_account.to_string(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_string(),
                name: service_account.to_string(),
                namespace: Some(namespace.to_string()),
                ..Default::default()
            }]),
        };
        out.push(encode(&role)?);
        out.push(encode(&binding)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_default_policy_becomes_one_role_per_namespace() {
        let objects = manifests(&Policy::kubernetes_default(["agents"]), "agents", "sandbox-host").expect("manifests");
        let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(kinds, ["ServiceAccount", "Role", "RoleBinding"]);
        let rules = &objects[1]["rules"];
        assert_eq!(
            rules,
            &json!([
                {"apiGroups": ["agents.x-k8s.io"], "resources": ["sandboxes"],
                 "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
                {"apiGroups": ["extensions.agents.x-k8s.io"], "resources": ["sandboxclaims"],
                 "verbs": ["get", "list", "watch", "create", "patch", "delete"]},
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "create", "patch", "delete"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["get", "create"]},
                {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "create", "patch", "delete"]},
                {"apiGroups": [""], "resources": ["persistentvolumeclaims"], "verbs": ["get", "delete"]},
                {"apiGroups": [""], "resources": ["namespaces"], "resourceNames": ["agents"], "verbs": ["get"]},
                {"apiGroups": ["networking.k8s.io"], "resources": ["networkpolicies"], "verbs": ["list"]},
                {"apiGroups": ["extensions.agents.x-k8s.io"], "resources": ["sandboxwarmpools", "sandboxtemplates"],
                 "verbs": ["get"]},
            ])
        );
        assert!(!objects.iter().any(|o| o.to_string().contains('*')), "no wildcard anywhere");
        assert_eq!(
            objects[2]["subjects"],
            json!([{"kind": "ServiceAccount", "name": "sandbox-host", "namespace": "agents"}])
        );
        assert_eq!(objects[2]["roleRef"]["name"], "sandbox-host");
    }

    #[test]
    fn exec_brings_the_host_s_watch_of_the_pods() {
        let mut policy = Policy::kubernetes_default(["a"]);
        policy.resources = vec![AccessRule::new("", &["v1"], "pods", &[AccessVerb::Exec])];
        let objects = manifests(&policy, "a", "host").expect("manifests");
        assert_eq!(
            objects[1]["rules"][0],
            json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}),
            "the host reads each pod it execs in and watches the namespace's pods"
        );
        policy.resources = vec![AccessRule::new("", &["v1"], "pods", &[AccessVerb::Get])];
        let objects = manifests(&policy, "a", "host").expect("manifests");
        assert_eq!(objects[1]["rules"][0]["verbs"], json!(["get"]), "no exec, no watch");
    }

    #[test]
    fn subresources_get_their_own_rule_and_each_namespace_its_role() {
        let mut policy = Policy::kubernetes_default(["a", "b"]);
        policy.resources = vec![AccessRule {
            subresources: vec!["status".into()],
            ..AccessRule::new("batch", &["v1"], "jobs", &[AccessVerb::Patch])
        }];
        let objects = manifests(&policy, "a", "host").expect("manifests");
        assert_eq!(objects.len(), 5);
        assert_eq!(objects[3]["metadata"]["namespace"], "b");
        assert_eq!(objects[4]["subjects"][0]["namespace"], "a", "bound to the one ServiceAccount");
        assert_eq!(
            objects[1]["rules"][1],
            json!({"apiGroups": ["batch"], "resources": ["jobs/status"], "verbs": ["patch"]})
        );
    }

    #[test]
    fn policies_that_need_a_cluster_role_are_refused() {
        assert!(manifests(&Policy::kubernetes_default([ANY_NAMESPACE]), "a", "h").is_err());
        assert!(manifests(&Policy::kubernetes_default(Vec::<String>::new()), "a", "h").is_err());
        let mut nodes = Policy::kubernetes_default(["a"]);
        nodes
            .resources
            .push(AccessRule { namespaced: false, ..AccessRule::new("", &["v1"], "nodes", &[AccessVerb::Get]) });
        assert!(matches!(manifests(&nodes, "a", "h"), Err(HostError::Config(m)) if m.contains("ClusterRole")));
    }
}
