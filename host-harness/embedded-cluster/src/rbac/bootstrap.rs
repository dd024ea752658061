//! The default RBAC policy the cluster starts with, a subset of kube-apiserver's bootstrap
//! policy (`plugin/pkg/auth/authorizer/rbac/bootstrappolicy`), stored as ordinary objects
//! exactly as a real cluster shows them:
//! - `system:discovery` lets every authenticated user read discovery, OpenAPI, version and
//!   health URLs, so a ServiceAccount token with no other grant can still run `kubectl`;
//! - `system:public-info-viewer` lets everyone read version and health;
//! - `system:basic-user` lets every authenticated user ask what it may do (a
//!   SelfSubjectAccessReview, [`crate::access_review`]);
//! - `cluster-admin` allows everything and is bound to the `system:masters` group.
//!
//! Upstream's aggregated `admin`, `edit` and `view` roles and the controllers' roles are left
//! out: the built-in identities are authorized without RBAC.

use serde_json::{Value, json};

use super::GROUP;

/// The group of every authenticated user.
pub const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The group of requests without credentials.
pub const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
/// The group that holds every permission (the admin's).
pub const MASTERS_GROUP: &str = "system:masters";

/// The URLs of `system:public-info-viewer`.
const PUBLIC_INFO: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];
/// The URLs of `system:discovery`.
const DISCOVERY: &[&str] = &[
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/openapi",
    "/openapi/*",
    "/readyz",
    "/version",
    "/version/",
];

fn metadata(name: &str) -> Value {
    json!({
        "name": name,
        "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
        "annotations": {"rbac.authorization.kubernetes.io/autoupdate": "true"},
    })
}

fn cluster_role(name: &str, rules: Value) -> (&'static str, Value) {
    let obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": metadata(name), "rules": rules});
    ("clusterroles", obj)
}

fn bound_to_groups(name: &str, groups: &[&str]) -> (&'static str, Value) {
    let subjects: Vec<Value> = groups.iter().map(|g| json!({"apiGroup": GROUP, "kind": "Group", "name": g})).collect();
    let obj = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": metadata(name), "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": name},
        "subjects": subjects});
    ("clusterrolebindings", obj)
}

/// The bootstrap objects, each with the plural of its resource, in creation order.
pub fn policy() -> Vec<(&'static str, Value)> {
    vec![
        cluster_role(
            "cluster-admin",
            json!([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        ),
        cluster_role("system:discovery", json!([{"nonResourceURLs": DISCOVERY, "verbs": ["get"]}])),
        cluster_role("system:public-info-viewer", json!([{"nonResourceURLs": PUBLIC_INFO, "verbs": ["get"]}])),
        cluster_role(
            "system:basic-user",
            json!([
                {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                 "verbs": ["create"]},
                {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
            ]),
        ),
        bound_to_groups("cluster-admin", &[MASTERS_GROUP]),
        bound_to_groups("system:discovery", &[AUTHENTICATED_GROUP]),
        bound_to_groups("system:basic-user", &[AUTHENTICATED_GROUP]),
        bound_to_groups("system:public-info-viewer", &[AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::validation;

    #[test]
    fn the_bootstrap_objects_are_valid() {
        for (_, obj) in policy() {
            let kind = obj["kind"].as_str().unwrap_or_default().to_string();
            assert!(validation::validate_create(&kind, &obj).is_empty(), "{obj}");
        }
    }
}
