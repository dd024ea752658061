//! RBAC's privilege-escalation prevention (Kubernetes docs: "Using RBAC Authorization",
//! "Privilege escalation prevention and bootstrapping"; `pkg/registry/rbac/*/policybased` and
//! `pkg/registry/rbac/validation/rule.go`).
//!
//! A user may write a Role (ClusterRole) only with rules it holds itself in that namespace
//! (cluster-wide), unless it may `escalate` that role; and may write a RoleBinding
//! (ClusterRoleBinding) only to a role whose rules it holds there, unless it may `bind` that
//! role. Members of `system:masters` are exempt, and so is an update that changes nothing but
//! the fields the garbage collector writes. Held rules cover a wanted rule as upstream's
//! `Covers` decides, verb by group by resource by name; a refusal is a 403 that lists the
//! missing rules in upstream's compact form. The check runs on the object as it will be stored,
//! before validation, as upstream's storage does.

use std::collections::BTreeSet;

use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef};
use serde_json::Value;

use super::GROUP;
use super::authorizer::{self, Decision, RoleRefError, User};
use super::bootstrap::MASTERS_GROUP;
use crate::field_error::quoted;
use crate::json::semantic_eq;
use crate::request_info::RequestInfo;
use crate::status::{ApiError, Subject, aggregate};
use crate::store::Objects;

/// Refuses a write of a role or binding (`kind`, in `namespace`) that would grant more than
/// `user` holds. Other kinds pass.
pub fn check(
    objects: &dyn Objects,
    user: User<'_>,
    kind: &str,
    namespace: &str,
    new: &Value,
    old: Option<&Value>,
) -> Result<(), ApiError> {
    let resource = match kind {
        "Role" => "roles",
        "ClusterRole" => "clusterroles",
        "RoleBinding" => "rolebindings",
        "ClusterRoleBinding" => "clusterrolebindings",
        _ => return Ok(()),
    };
    if user.groups.iter().any(|g| g == MASTERS_GROUP) || old.is_some_and(|old| only_gc_fields_change(new, old)) {
        return Ok(());
    }
    let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let wanted = match kind {
        "Role" | "ClusterRole" => {
            if may(objects, user, "escalate", resource, namespace, name) {
                return Ok(());
            }
            serde_json::from_value::<Vec<PolicyRule>>(new.get("rules").cloned().unwrap_or(Value::Null))
                .unwrap_or_default()
        }
        _ => {
            let role_ref: RoleRef = serde_json::from_value(new["roleRef"].clone()).unwrap_or_default();
            let role_resource = if role_ref.kind == "Role" { "roles" } else { "clusterroles" };
            if may(objects, user, "bind", role_resource, namespace, &role_ref.name) {
                return Ok(());
            }
            authorizer::role_rules(objects, &role_ref, namespace).map_err(|e| match e {
                RoleRefError::NotFound { .. } => ApiError::not_found(Subject {
                    group: GROUP,
                    resource: role_resource,
                    kind: &role_ref.kind,
                    name: &role_ref.name,
                }),
                RoleRefError::UnsupportedKind(_) => ApiError::internal(e.registry_text()),
            })?
        }
    };
    let (held, errors) = authorizer::rules_for(objects, user, namespace);
    let missing = uncovered(&held, &wanted);
    if missing.is_empty() {
        return Ok(());
    }
    let described: BTreeSet<String> = compact(missing).iter().map(compact_string).collect();
    let groups: Vec<&str> = user.groups.iter().map(String::as_str).collect();
    let mut why = format!(
        "user {} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
        quoted(user.name),
        go_list(&groups),
        described.into_iter().collect::<Vec<_>>().join("\n")
    );
    if !errors.is_empty() {
        let texts = errors.iter().map(RoleRefError::registry_text).collect();
        why = format!("{why}; resolution errors: [{}]", aggregate(texts));
    }
    Err(ApiError::forbidden_object(GROUP, resource, name, &why))
}

/// `RoleEscalationAuthorized` and `BindingAuthorized`: whether RBAC allows the special verb on
/// the named role.
fn may(objects: &dyn Objects, user: User<'_>, verb: &str, resource: &str, namespace: &str, name: &str) -> bool {
    let info = RequestInfo {
        verb: verb.into(),
        is_resource_request: true,
        api_group: GROUP.into(),
        api_version: "*".into(),
        namespace: namespace.into(),
        resource: resource.into(),
        name: name.into(),
        ..RequestInfo::default()
    };
    authorizer::authorize(objects, user, &info) == Decision::Allow
}

/// `IsOnlyMutatingGCFields`: whether the update leaves everything but owner references and
/// finalizers as it was.
fn only_gc_fields_change(new: &Value, old: &Value) -> bool {
    let mut copied = new.clone();
    for field in ["ownerReferences", "finalizers", "managedFields"] {
        match old.pointer(&format!("/metadata/{field}")) {
            Some(v) => copied["metadata"][field] = v.clone(),
            None => {
                if let Some(meta) = copied.get_mut("metadata").and_then(Value::as_object_mut) {
                    meta.remove(field);
                }
            }
        }
    }
    semantic_eq(Some(&copied), Some(old))
}

fn list(field: &Option<Vec<String>>) -> &[String] {
    field.as_deref().unwrap_or_default()
}

fn one(value: &str) -> Option<Vec<String>> {
    Some(vec![value.to_string()])
}

/// `BreakdownRule`: one rule per verb, group, resource and name (or URL and verb).
fn breakdown(rule: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for group in list(&rule.api_groups) {
        for resource in list(&rule.resources) {
            for verb in &rule.verbs {
                let simple = |names| PolicyRule {
                    api_groups: one(group),
                    resources: one(resource),
                    verbs: vec![verb.clone()],
                    resource_names: names,
                    ..PolicyRule::default()
                };
                match list(&rule.resource_names) {
                    [] => out.push(simple(None)),
                    names => out.extend(names.iter().map(|n| simple(one(n)))),
                }
            }
        }
    }
    for url in list(&rule.non_resource_urls) {
        for verb in &rule.verbs {
            out.push(PolicyRule { non_resource_urls: one(url), verbs: vec![verb.clone()], ..PolicyRule::default() });
        }
    }
    out
}

/// `Covers`: the broken-down wanted rules that no held rule covers.
fn uncovered(held: &[PolicyRule], wanted: &[PolicyRule]) -> Vec<PolicyRule> {
    wanted.iter().flat_map(breakdown).filter(|sub| !held.iter().any(|owner| covers(owner, sub))).collect()
}

fn has_all(owner: &[String], wanted: &[String]) -> bool {
    wanted.iter().all(|w| owner.contains(w))
}

fn has_star(owner: &[String]) -> bool {
    owner.iter().any(|o| o == "*")
}

/// `ruleCovers`.
fn covers(owner: &PolicyRule, sub: &PolicyRule) -> bool {
    let verbs = has_star(&owner.verbs) || has_all(&owner.verbs, &sub.verbs);
    let groups = has_star(list(&owner.api_groups)) || has_all(list(&owner.api_groups), list(&sub.api_groups));
    let resources = resources_covered(list(&owner.resources), list(&sub.resources));
    let urls = list(&sub.non_resource_urls).iter().all(|wanted| {
        list(&owner.non_resource_urls)
            .iter()
            .any(|o| o == wanted || o.strip_suffix('*').is_some_and(|prefix| wanted.starts_with(prefix)))
    });
    let (owner_names, sub_names) = (list(&owner.resource_names), list(&sub.resource_names));
    let names = owner_names.is_empty() || (!sub_names.is_empty() && has_all(owner_names, sub_names));
    verbs && groups && resources && names && urls
}

/// `resourceCoversAll`: `*`, the same resources, or `*/sub` for subresources.
fn resources_covered(owner: &[String], wanted: &[String]) -> bool {
    has_star(owner)
        || has_all(owner, wanted)
        || wanted.iter().all(|w| w.split_once('/').is_some_and(|(_, sub)| owner.contains(&format!("*/{sub}"))))
}

/// `CompactRules`: rules of one group, resource and (at most one) name are merged across verbs.
fn compact(rules: Vec<PolicyRule>) -> Vec<PolicyRule> {
    let mut out: Vec<PolicyRule> = Vec::new();
    for rule in rules {
        let simple = list(&rule.non_resource_urls).is_empty()
            && list(&rule.api_groups).len() == 1
            && list(&rule.resources).len() == 1
            && list(&rule.resource_names).len() <= 1;
        let same = |r: &PolicyRule| {
            r.api_groups == rule.api_groups && r.resources == rule.resources && r.resource_names == rule.resource_names
        };
        match out.iter_mut().find(|r| simple && list(&r.non_resource_urls).is_empty() && same(r)) {
            Some(existing) => {
                for verb in rule.verbs {
                    if !existing.verbs.contains(&verb) {
                        existing.verbs.push(verb);
                    }
                }
            }
            None => out.push(rule),
        }
    }
    out
}

/// A string list as Go's `%q` prints it: `["a" "b"]`.
fn go_list(items: &[&str]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| quoted(i)).collect();
    format!("[{}]", quoted.join(" "))
}

/// `CompactString`: `{APIGroups:[""], Resources:["pods"], Verbs:["get" "list"]}`.
fn compact_string(rule: &PolicyRule) -> String {
    let parts = [
        ("APIGroups", list(&rule.api_groups)),
        ("Resources", list(&rule.resources)),
        ("NonResourceURLs", list(&rule.non_resource_urls)),
        ("ResourceNames", list(&rule.resource_names)),
        ("Verbs", rule.verbs.as_slice()),
    ];
    let shown: Vec<String> = parts
        .iter()
        .filter(|(_, items)| !items.is_empty())
        .map(|(label, items)| {
            let items: Vec<&str> = items.iter().map(String::as_str).collect();
            format!("{label}:{}", go_list(&items))
        })
        .collect();
    format!("{{{}}}", shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(v: Value) -> Vec<PolicyRule> {
        serde_json::from_value(v).unwrap_or_default()
    }

    fn missing(held: Value, wanted: Value) -> Vec<String> {
        compact(uncovered(&rules(held), &rules(wanted))).iter().map(compact_string).collect()
    }

    #[test]
    fn held_rules_cover_what_they_allow() {
        let held = json!([{"apiGroups": [""], "resources": ["pods", "*/status"], "verbs": ["get", "list"]}]);
        assert!(
            missing(held.clone(), json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}])).is_empty()
        );
        assert!(
            missing(held.clone(), json!([{"apiGroups": [""], "resources": ["pods/status"], "verbs": ["get"]}]))
                .is_empty()
        );
        assert!(
            missing(
                held,
                json!([{"apiGroups": [""], "resources": ["pods"], "resourceNames": ["p"], "verbs": ["get"]}])
            )
            .is_empty(),
            "a rule without names covers named ones"
        );
        let star = json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]);
        assert!(
            missing(star.clone(), json!([{"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["*"]}])).is_empty()
        );
        assert_eq!(
            missing(star, json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}])),
            ["{NonResourceURLs:[\"/healthz\"], Verbs:[\"get\"]}"]
        );
    }

    #[test]
    fn missing_rules_are_compacted_by_resource() {
        let held = json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]);
        let wanted = json!([{"apiGroups": [""], "resources": ["pods", "secrets"], "verbs": ["get", "list", "watch"]}]);
        assert_eq!(
            missing(held, wanted),
            [
                "{APIGroups:[\"\"], Resources:[\"pods\"], Verbs:[\"list\" \"watch\"]}",
                "{APIGroups:[\"\"], Resources:[\"secrets\"], Verbs:[\"get\" \"list\" \"watch\"]}",
            ]
        );
    }

    #[test]
    fn named_rules_cover_only_their_names() {
        let held = json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get"]}]);
        assert_eq!(
            missing(held.clone(), json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}])),
            ["{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"get\"]}"]
        );
        assert_eq!(
            missing(
                held,
                json!([{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["get"]}])
            ),
            ["{APIGroups:[\"\"], Resources:[\"configmaps\"], ResourceNames:[\"b\"], Verbs:[\"get\"]}"]
        );
    }

    #[test]
    fn url_rules_cover_by_prefix() {
        let held = json!([{"nonResourceURLs": ["/apis/*"], "verbs": ["get"]}]);
        assert!(missing(held.clone(), json!([{"nonResourceURLs": ["/apis/batch"], "verbs": ["get"]}])).is_empty());
        assert_eq!(missing(held, json!([{"nonResourceURLs": ["/api"], "verbs": ["get"]}])).len(), 1);
    }

    #[test]
    fn garbage_collector_fields_are_not_a_change() {
        let old = json!({"metadata": {"name": "r", "finalizers": ["a"]}, "rules": []});
        let new = json!({"metadata": {"name": "r", "ownerReferences": [{"uid": "u"}]}, "rules": []});
        assert!(only_gc_fields_change(&new, &old));
        let changed = json!({"metadata": {"name": "r"}, "rules": [{"verbs": ["get"]}]});
        assert!(!only_gc_fields_change(&changed, &old));
    }
}
