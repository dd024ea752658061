//! Create and update validation of Roles, ClusterRoles, RoleBindings and ClusterRoleBindings, as
//! kube-apiserver 1.33's `pkg/apis/rbac/validation` does it.
//!
//! Field paths and messages follow upstream because clients match on them: a rule needs verbs
//! and, unless it names non-resource URLs (ClusterRoles only), API groups and resources; a
//! binding's `roleRef` names a Role or ClusterRole of the RBAC group and cannot change on
//! update; a subject is a ServiceAccount (no API group; a namespace in ClusterRoleBindings, while
//! a RoleBinding defaults it to its own), a User or a Group. Objects are judged after the scheme
//! defaults of [`super::defaults`], as the real server judges decoded objects. Metadata rules
//! (role and binding names are path segments) come from `core_validation`.

use serde_json::Value;

use super::{GROUP, defaults};
use crate::core_validation::{self, label_selector, shown};
use crate::field_error::{FieldError, quoted};
use crate::names;
use crate::strategy::string_list;

/// The kinds validated here rather than in `core_validation` alone.
pub fn handles(kind: &str) -> bool {
    matches!(kind, "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding")
}

/// Validates a new object of one of the RBAC kinds (metadata included).
pub fn validate_create(kind: &str, obj: &Value) -> Vec<FieldError> {
    let mut errs = core_validation::validate_create(kind, obj);
    kind_rules(kind, &defaulted(kind, obj), &mut errs);
    errs
}

/// Validates an update: the create rules, metadata immutability, and a binding's fixed `roleRef`.
pub fn validate_update(kind: &str, new: &Value, old: &Value) -> Vec<FieldError> {
    let (new, old) = (defaulted(kind, new), defaulted(kind, old));
    let mut errs = core_validation::validate_update(kind, &new, &old);
    kind_rules(kind, &new, &mut errs);
    if matches!(kind, "RoleBinding" | "ClusterRoleBinding") {
        let role_ref = RoleRef::of(&new);
        if role_ref != RoleRef::of(&old) {
            errs.push(FieldError::invalid("roleRef", role_ref.go_syntax(), "cannot change roleRef"));
        }
    }
    errs
}

fn defaulted(kind: &str, obj: &Value) -> Value {
    let mut obj = obj.clone();
    if matches!(kind, "RoleBinding" | "ClusterRoleBinding") {
        defaults::binding(&mut obj);
    }
    obj
}

fn kind_rules(kind: &str, obj: &Value, errs: &mut Vec<FieldError>) {
    match kind {
        "Role" => rules(obj, true, errs),
        "ClusterRole" => {
            rules(obj, false, errs);
            aggregation_rule(obj, errs);
        }
        "RoleBinding" => binding(obj, true, errs),
        "ClusterRoleBinding" => binding(obj, false, errs),
        _ => {}
    }
}

fn list_at<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn str_at<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// `ValidatePolicyRule` for every rule of a Role or ClusterRole.
fn rules(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    for (i, rule) in list_at(obj, "rules").iter().enumerate() {
        let path = format!("rules[{i}]");
        let field = |name: &str| format!("{path}.{name}");
        if string_list(&rule["verbs"]).is_empty() {
            errs.push(FieldError::required(field("verbs"), "verbs must contain at least one value"));
        }
        let urls = &rule["nonResourceURLs"];
        if !string_list(urls).is_empty() {
            if namespaced {
                errs.push(FieldError::invalid(
                    field("nonResourceURLs"),
                    shown(urls),
                    "namespaced rules cannot apply to non-resource URLs",
                ));
            }
            let resource_parts = ["apiGroups", "resources", "resourceNames"];
            if resource_parts.iter().any(|k| !string_list(&rule[*k]).is_empty()) {
                errs.push(FieldError::invalid(
                    field("nonResourceURLs"),
                    shown(urls),
                    "rules cannot apply to both regular resources and non-resource URLs",
                ));
            }
            continue;
        }
        if string_list(&rule["apiGroups"]).is_empty() {
            errs.push(FieldError::required(field("apiGroups"), "resource rules must supply at least one api group"));
        }
        if string_list(&rule["resources"]).is_empty() {
            errs.push(FieldError::required(field("resources"), "resource rules must supply at least one resource"));
        }
    }
}

/// A ClusterRole's `aggregationRule`, when set, needs at least one valid selector.
fn aggregation_rule(obj: &Value, errs: &mut Vec<FieldError>) {
    let Some(rule) = obj.get("aggregationRule").filter(|r| !r.is_null()) else {
        return;
    };
    let path = "aggregationRule.clusterRoleSelectors";
    let selectors = list_at(rule, "clusterRoleSelectors");
    if selectors.is_empty() {
        errs.push(FieldError::required(
            path,
            "at least one clusterRoleSelector required if aggregationRule is non-nil",
        ));
    }
    for (i, selector) in selectors.iter().enumerate() {
        label_selector(selector, &format!("{path}[{i}]"), errs);
    }
}

/// A binding's `roleRef`, compared as Go compares the struct (absent fields are empty).
#[derive(Debug, PartialEq, Eq)]
struct RoleRef<'a> {
    api_group: &'a str,
    kind: &'a str,
    name: &'a str,
}

impl<'a> RoleRef<'a> {
    fn of(obj: &'a Value) -> Self {
        let r = &obj["roleRef"];
        Self { api_group: str_at(r, "apiGroup"), kind: str_at(r, "kind"), name: str_at(r, "name") }
    }

    /// The struct as Go's `%#v` prints it in the "cannot change roleRef" message.
    fn go_syntax(&self) -> String {
        format!(
            "rbac.RoleRef{{APIGroup:{}, Kind:{}, Name:{}}}",
            quoted(self.api_group),
            quoted(self.kind),
            quoted(self.name)
        )
    }
}

/// `ValidateRoleBinding` / `ValidateClusterRoleBinding`: the role reference and the subjects.
fn binding(obj: &Value, namespaced: bool, errs: &mut Vec<FieldError>) {
    let role_ref = RoleRef::of(obj);
    if role_ref.api_group != GROUP {
        errs.push(FieldError::not_supported("roleRef.apiGroup", quoted(role_ref.api_group), &[GROUP]));
    }
    let kinds: &[&str] = if namespaced { &["Role", "ClusterRole"] } else { &["ClusterRole"] };
    if !kinds.contains(&role_ref.kind) {
        errs.push(FieldError::not_supported("roleRef.kind", quoted(role_ref.kind), kinds));
    }
    if role_ref.name.is_empty() {
        errs.push(FieldError::required("roleRef.name", ""));
    } else {
        for msg in names::path_segment_name(role_ref.name, false) {
            errs.push(FieldError::invalid("roleRef.name", quoted(role_ref.name), msg));
        }
    }
    for (i, subject) in list_at(obj, "subjects").iter().enumerate() {
        subject_rules(subject, namespaced, &format!("subjects[{i}]"), errs);
    }
}

/// `ValidateRoleBindingSubject`.
fn subject_rules(subject: &Value, namespaced: bool, path: &str, errs: &mut Vec<FieldError>) {
    let field = |name: &str| format!("{path}.{name}");
    let name = str_at(subject, "name");
    let api_group = str_at(subject, "apiGroup");
    if name.is_empty() {
        errs.push(FieldError::required(field("name"), ""));
    }
    match str_at(subject, "kind") {
        "ServiceAccount" => {
            if !name.is_empty() {
                for msg in names::dns1123_subdomain(name) {
                    errs.push(FieldError::invalid(field("name"), quoted(name), msg));
                }
            }
            if !api_group.is_empty() {
                errs.push(FieldError::not_supported(field("apiGroup"), quoted(api_group), &[""]));
            }
            if !namespaced && str_at(subject, "namespace").is_empty() {
                errs.push(FieldError::required(field("namespace"), ""));
            }
        }
        "User" | "Group" => {
            if api_group != GROUP {
                errs.push(FieldError::not_supported(field("apiGroup"), quoted(api_group), &[GROUP]));
            }
        }
        other => {
            errs.push(FieldError::not_supported(field("kind"), quoted(other), &["ServiceAccount", "User", "Group"]));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn role(rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "namespace": "ns"}, "rules": rules})
    }

    fn binding_obj(kind: &str, role_ref: Value, subjects: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "b", "namespace": "ns"}, "roleRef": role_ref, "subjects": subjects})
    }

    fn shown_errors(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn a_valid_role_passes() {
        let r = role(json!([{"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get"]}]));
        assert!(validate_create("Role", &r).is_empty());
    }

    #[test]
    fn rules_need_verbs_groups_and_resources() {
        let r = role(json!([{}]));
        assert_eq!(
            shown_errors(&validate_create("Role", &r)),
            [
                "rules[0].verbs: Required value: verbs must contain at least one value",
                "rules[0].apiGroups: Required value: resource rules must supply at least one api group",
                "rules[0].resources: Required value: resource rules must supply at least one resource",
            ]
        );
    }

    #[test]
    fn non_resource_urls_are_for_cluster_roles_without_resources() {
        let rule = json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"], "resources": ["pods"]});
        assert_eq!(
            shown_errors(&validate_create("Role", &role(json!([rule.clone()])))),
            [
                "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: namespaced rules cannot apply to non-resource URLs",
                "rules[0].nonResourceURLs: Invalid value: []string{\"/healthz\"}: rules cannot apply to both regular resources and non-resource URLs",
            ]
        );
        let mut cluster_role = role(json!([{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]));
        cluster_role["kind"] = json!("ClusterRole");
        assert!(validate_create("ClusterRole", &cluster_role).is_empty());
    }

    #[test]
    fn role_names_are_path_segments() {
        let mut r = role(json!([]));
        r["metadata"]["name"] = json!("a/b");
        assert_eq!(
            shown_errors(&validate_create("Role", &r)),
            ["metadata.name: Invalid value: \"a/b\": may not contain '/'"]
        );
        r["metadata"]["name"] = json!("system:Weird_Name");
        assert!(validate_create("Role", &r).is_empty());
    }

    #[test]
    fn aggregation_rules_need_selectors() {
        let cr = json!({"kind": "ClusterRole", "metadata": {"name": "c"}, "aggregationRule": {}});
        assert_eq!(
            shown_errors(&validate_create("ClusterRole", &cr)),
            [
                "aggregationRule.clusterRoleSelectors: Required value: at least one clusterRoleSelector required if aggregationRule is non-nil"
            ]
        );
    }

    #[test]
    fn a_binding_needs_a_role_ref() {
        let rb = json!({"kind": "RoleBinding", "metadata": {"name": "b", "namespace": "ns"}});
        assert_eq!(
            shown_errors(&validate_create("RoleBinding", &rb)),
            [
                "roleRef.kind: Unsupported value: \"\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Required value",
            ]
        );
    }

    #[test]
    fn role_refs_name_a_role_of_the_rbac_group() {
        let rb = binding_obj("RoleBinding", json!({"apiGroup": "x", "kind": "Secret", "name": "a/b"}), json!([]));
        assert_eq!(
            shown_errors(&validate_create("RoleBinding", &rb)),
            [
                "roleRef.apiGroup: Unsupported value: \"x\": supported values: \"rbac.authorization.k8s.io\"",
                "roleRef.kind: Unsupported value: \"Secret\": supported values: \"Role\", \"ClusterRole\"",
                "roleRef.name: Invalid value: \"a/b\": may not contain '/'",
            ]
        );
        let crb = binding_obj("ClusterRoleBinding", json!({"kind": "Role", "name": "r"}), json!([]));
        assert_eq!(
            shown_errors(&validate_create("ClusterRoleBinding", &crb)),
            ["roleRef.kind: Unsupported value: \"Role\": supported values: \"ClusterRole\""]
        );
    }

    #[test]
    fn subjects_need_kind_and_name() {
        let rb = binding_obj(
            "RoleBinding",
            json!({"kind": "Role", "name": "r"}),
            json!([{}, {"kind": "ServiceAccount", "name": "Bad_Name", "apiGroup": "rbac.authorization.k8s.io"},
                {"kind": "User", "name": "u", "apiGroup": "other"}, {"kind": "ServiceAccount", "name": "local"}]),
        );
        assert_eq!(
            shown_errors(&validate_create("RoleBinding", &rb)),
            [
                "subjects[0].name: Required value",
                "subjects[0].kind: Unsupported value: \"\": supported values: \"ServiceAccount\", \"User\", \"Group\"",
                "subjects[1].name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
                "subjects[1].apiGroup: Unsupported value: \"rbac.authorization.k8s.io\": supported values: \"\"",
                "subjects[2].apiGroup: Unsupported value: \"other\": supported values: \"rbac.authorization.k8s.io\"",
            ],
            "a RoleBinding's ServiceAccount subject may leave its namespace to the binding's"
        );
    }

    #[test]
    fn cluster_role_binding_service_accounts_need_a_namespace() {
        let crb = binding_obj(
            "ClusterRoleBinding",
            json!({"kind": "ClusterRole", "name": "c"}),
            json!([{"kind": "ServiceAccount", "name": "sa"}, {"kind": "Group", "name": "g"}]),
        );
        assert_eq!(
            shown_errors(&validate_create("ClusterRoleBinding", &crb)),
            ["subjects[0].namespace: Required value"]
        );
    }

    #[test]
    fn the_role_ref_is_immutable_but_subjects_are_not() {
        let old = binding_obj("RoleBinding", json!({"kind": "Role", "name": "r"}), json!([]));
        let mut new = binding_obj(
            "RoleBinding",
            json!({"apiGroup": GROUP, "kind": "Role", "name": "r"}),
            json!([{"kind": "Group", "name": "g"}]),
        );
        assert!(validate_update("RoleBinding", &new, &old).is_empty(), "a defaulted apiGroup is no change");
        new["roleRef"]["name"] = json!("other");
        assert_eq!(
            shown_errors(&validate_update("RoleBinding", &new, &old)),
            [
                "roleRef: Invalid value: rbac.RoleRef{APIGroup:\"rbac.authorization.k8s.io\", Kind:\"Role\", Name:\"other\"}: cannot change roleRef"
            ]
        );
    }
}
