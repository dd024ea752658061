//! The RBAC authorizer: upstream's `RBACAuthorizer.Authorize` over `VisitRulesFor`.
//!
//! A request is allowed when a rule allows it in a role bound to the user: first the roles of
//! every ClusterRoleBinding (cluster-wide), then, for a namespaced request, those of the
//! RoleBindings of that namespace, whose `roleRef` names a Role of the same namespace or a
//! ClusterRole (whose rules then apply in that namespace only). A binding applies when one of
//! its subjects is the user: a User by name, a Group the user is in, or a ServiceAccount by
//! name and namespace (a RoleBinding's subject without a namespace means the binding's own).
//! Nothing is cached: every request reads the bindings and roles as stored, so a change takes
//! effect at once. Bindings whose role is missing contribute the `RBAC: ...` reason upstream
//! appends to the Forbidden message. The rules a user holds also bound what it may grant (see
//! `escalation`).

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES, ROLE_BINDINGS, ROLES, rules};
use crate::request_info::RequestInfo;
use crate::status::aggregate;
use crate::store::Objects;

/// The user a request is authorized for.
#[derive(Debug, Clone, Copy)]
pub struct User<'a> {
    pub name: &'a str,
    pub groups: &'a [String],
}

/// What the authorizer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// No rule allows the request; `reason` is empty or says which bindings could not be read.
    Deny {
        reason: String,
    },
}

/// Why the role a binding refers to could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleRefError {
    NotFound { kind: String, name: String },
    UnsupportedKind(String),
}

impl RoleRefError {
    fn of(role_ref: &RoleRef) -> Self {
        match role_ref.kind.as_str() {
            "Role" | "ClusterRole" => Self::NotFound { kind: role_ref.kind.clone(), name: role_ref.name.clone() },
            other => Self::UnsupportedKind(other.to_string()),
        }
    }

    /// As the authorizer's informer listers word it: `role.rbac.authorization.k8s.io "x" not found`.
    pub fn lister_text(&self) -> String {
        self.text(|kind| kind.to_ascii_lowercase())
    }

    /// As the RBAC storage words it: `roles.rbac.authorization.k8s.io "x" not found`.
    pub fn registry_text(&self) -> String {
        self.text(|kind| format!("{}s", kind.to_ascii_lowercase()))
    }

    fn text(&self, resource: impl Fn(&str) -> String) -> String {
        match self {
            Self::NotFound { kind, name } => format!("{}.{} {name:?} not found", resource(kind), super::GROUP),
            Self::UnsupportedKind(kind) => format!("unsupported role reference kind: {kind:?}"),
        }
    }
}

/// Decides a request from the bindings and roles stored.
pub fn authorize(objects: &dyn Objects, user: User<'_>, info: &RequestInfo) -> Decision {
    let (allowed, errors) = visit_rules(objects, user, &info.namespace, |rule| rules::allows(rule, info));
    if allowed {
        return Decision::Allow;
    }
    let reason = match errors.is_empty() {
        true => String::new(),
        false => format!("RBAC: {}", aggregate(errors.iter().map(RoleRefError::lister_text).collect())),
    };
    Decision::Deny { reason }
}

/// `RulesFor`: every rule granted to the user in `namespace` (cluster-wide ones only when it is
/// empty), with the bindings whose role could not be read.
pub fn rules_for(objects: &dyn Objects, user: User<'_>, namespace: &str) -> (Vec<PolicyRule>, Vec<RoleRefError>) {
    let mut granted = Vec::new();
    let (_, errors) = visit_rules(objects, user, namespace, |rule| {
        granted.push(rule.clone());
        false
    });
    (granted, errors)
}

/// `VisitRulesFor`: hands `visit` each rule bound to the user, ClusterRoleBindings first, then
/// the RoleBindings of `namespace`, until it returns true. Says whether it did, and lists the
/// roles that could not be read.
fn visit_rules(
    objects: &dyn Objects,
    user: User<'_>,
    namespace: &str,
    mut visit: impl FnMut(&PolicyRule) -> bool,
) -> (bool, Vec<RoleRefError>) {
    let mut errors = Vec::new();
    let cluster_bindings = objects.objects(CLUSTER_ROLE_BINDINGS, None);
    let cluster_bindings = cluster_bindings.iter().filter_map(|b| decode::<ClusterRoleBinding>(b));
    let cluster_wide = cluster_bindings.map(|b| (b.role_ref, b.subjects, ""));
    let local: Vec<_> = if namespace.is_empty() { Vec::new() } else { objects.objects(ROLE_BINDINGS, Some(namespace)) };
    let local = local.iter().filter_map(|b| decode::<RoleBinding>(b)).map(|b| (b.role_ref, b.subjects, namespace));
    for (role_ref, subjects, binding_namespace) in cluster_wide.chain(local) {
        if !applies(user, subjects.as_deref(), binding_namespace) {
            continue;
        }
        match role_rules(objects, &role_ref, binding_namespace) {
            Ok(rules) if rules.iter().any(&mut visit) => return (true, errors),
            Ok(_) => {}
            Err(e) => errors.push(e),
        }
    }
    (false, errors)
}

fn decode<T: DeserializeOwned>(obj: &Value) -> Option<T> {
    serde_json::from_value(obj.clone()).ok()
}

/// `appliesTo`: whether a subject of the binding is the user.
fn applies(user: User<'_>, subjects: Option<&[Subject]>, namespace: &str) -> bool {
    subjects.unwrap_or_default().iter().any(|s| match s.kind.as_str() {
        "User" => s.name == user.name,
        "Group" => user.groups.contains(&s.name),
        "ServiceAccount" => {
            let ns = s.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(namespace);
            !ns.is_empty() && user.name == service_account_user(ns, &s.name)
        }
        _ => false,
    })
}

/// `GetRoleReferenceRules`: the rules of the role a binding in `namespace` refers to.
pub fn role_rules(objects: &dyn Objects, role_ref: &RoleRef, namespace: &str) -> Result<Vec<PolicyRule>, RoleRefError> {
    let name = &role_ref.name;
    let rules = match role_ref.kind.as_str() {
        "Role" => objects.object(ROLES, namespace, name).and_then(|r| decode::<Role>(&r)).map(|r| r.rules),
        "ClusterRole" => {
            objects.object(CLUSTER_ROLES, "", name).and_then(|r| decode::<ClusterRole>(&r)).map(|r| r.rules)
        }
        _ => None,
    };
    rules.map(Option::unwrap_or_default).ok_or_else(|| RoleRefError::of(role_ref))
}

/// The user name of a ServiceAccount's tokens (`system:serviceaccount:NS:NAME`).
pub fn service_account_user(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Query;
    use crate::store::Store;
    use http::Method;
    use serde_json::json;

    const SA_USER: &str = "system:serviceaccount:ns:robot";

    fn store(objects: &[(&'static str, Value)]) -> Store {
        let store = Store::new(16);
        let written = store.write(|txn| {
            for (storage, obj) in objects {
                txn.put(storage, obj.clone());
            }
            Ok(())
        });
        assert!(written.is_ok());
        store
    }

    fn role(ns: &str, name: &str, rules: Value) -> (&'static str, Value) {
        (ROLES, json!({"metadata": {"namespace": ns, "name": name}, "rules": rules}))
    }

    fn binding(ns: &str, name: &str, role_kind: &str, role: &str, subjects: Value) -> (&'static str, Value) {
        let storage = if ns.is_empty() { CLUSTER_ROLE_BINDINGS } else { ROLE_BINDINGS };
        (
            storage,
            json!({"metadata": {"namespace": ns, "name": name},
                "roleRef": {"apiGroup": super::super::GROUP, "kind": role_kind, "name": role}, "subjects": subjects}),
        )
    }

    fn pods_reader(ns: &str) -> (&'static str, Value) {
        role(ns, "reader", json!([{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]))
    }

    fn decide(store: &Store, user: &str, groups: &[&str], method: Method, path: &str) -> Decision {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let info = RequestInfo::new(&method, path, &Query::default());
        authorize(store, User { name: user, groups: &groups }, &info)
    }

    fn no_reason() -> Decision {
        Decision::Deny { reason: String::new() }
    }

    #[test]
    fn a_role_binding_grants_its_role_in_its_namespace_only() {
        let s = store(&[
            pods_reader("ns"),
            binding("ns", "b", "Role", "reader", json!([{"kind": "ServiceAccount", "name": "robot"}])),
        ]);
        assert_eq!(decide(&s, SA_USER, &[], Method::GET, "/api/v1/namespaces/ns/pods/p"), Decision::Allow);
        assert_eq!(decide(&s, SA_USER, &[], Method::GET, "/api/v1/namespaces/other/pods/p"), no_reason());
        assert_eq!(decide(&s, SA_USER, &[], Method::GET, "/api/v1/pods"), no_reason(), "cluster scope");
        assert_eq!(
            decide(&s, "system:serviceaccount:other:robot", &[], Method::GET, "/api/v1/namespaces/ns/pods/p"),
            no_reason()
        );
    }

    #[test]
    fn subjects_match_by_user_group_or_qualified_service_account() {
        let s = store(&[
            pods_reader("ns"),
            binding("ns", "u", "Role", "reader", json!([{"kind": "User", "name": "alice"}])),
            binding("ns", "g", "Role", "reader", json!([{"kind": "Group", "name": "devs"}])),
            binding(
                "ns",
                "sa",
                "Role",
                "reader",
                json!([{"kind": "ServiceAccount", "name": "robot", "namespace": "elsewhere"}]),
            ),
        ]);
        let get = |user: &str, groups: &[&str]| decide(&s, user, groups, Method::GET, "/api/v1/namespaces/ns/pods");
        assert_eq!(get("alice", &[]), Decision::Allow);
        assert_eq!(get("bob", &["devs"]), Decision::Allow);
        assert_eq!(get("system:serviceaccount:elsewhere:robot", &[]), Decision::Allow);
        assert_eq!(get(SA_USER, &["system:serviceaccounts"]), no_reason());
    }

    #[test]
    fn a_namespace_object_is_authorized_in_its_own_namespace() {
        let s = store(&[
            role("x", "ns-reader", json!([{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}])),
            binding("x", "b", "Role", "ns-reader", json!([{"kind": "User", "name": "alice"}])),
        ]);
        assert_eq!(decide(&s, "alice", &[], Method::GET, "/api/v1/namespaces/x"), Decision::Allow);
        assert_eq!(decide(&s, "alice", &[], Method::GET, "/api/v1/namespaces/y"), no_reason());
        assert_eq!(decide(&s, "alice", &[], Method::GET, "/api/v1/namespaces"), no_reason());
    }

    #[test]
    fn cluster_roles_apply_cluster_wide_or_in_a_binding_namespace() {
        let reader = json!({"metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]});
        let s = store(&[
            (CLUSTER_ROLES, reader),
            binding("ns", "local", "ClusterRole", "pod-reader", json!([{"kind": "User", "name": "alice"}])),
            binding("", "global", "ClusterRole", "pod-reader", json!([{"kind": "Group", "name": "ops"}])),
        ]);
        assert_eq!(decide(&s, "alice", &[], Method::GET, "/api/v1/namespaces/ns/pods"), Decision::Allow);
        assert_eq!(decide(&s, "alice", &[], Method::GET, "/api/v1/pods"), no_reason());
        assert_eq!(decide(&s, "bob", &["ops"], Method::GET, "/api/v1/pods"), Decision::Allow);
        assert_eq!(decide(&s, "bob", &["ops"], Method::GET, "/api/v1/namespaces/any/pods"), Decision::Allow);
    }

    #[test]
    fn missing_roles_are_the_reason() {
        let s = store(&[
            binding("ns", "a", "Role", "gone", json!([{"kind": "User", "name": "alice"}])),
            binding("ns", "b", "ClusterRole", "absent", json!([{"kind": "User", "name": "alice"}])),
            binding("ns", "c", "Role", "unrelated", json!([{"kind": "User", "name": "bob"}])),
        ]);
        assert_eq!(
            decide(&s, "alice", &[], Method::GET, "/api/v1/namespaces/ns/pods"),
            Decision::Deny {
                reason: "RBAC: [role.rbac.authorization.k8s.io \"gone\" not found, clusterrole.rbac.authorization.k8s.io \"absent\" not found]".into()
            }
        );
    }
}
