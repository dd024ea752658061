//! The scheme defaults of `rbac.authorization.k8s.io/v1` (`pkg/apis/rbac/v1/defaults.go`):
//! a binding's `roleRef.apiGroup` and its User and Group subjects' `apiGroup` default to the
//! RBAC group, so clients read back what a real cluster stores.

use serde_json::{Value, json};

use super::GROUP;
use crate::json::{arr_mut, default_field, ensure_obj_value};

/// Defaults a RoleBinding or ClusterRoleBinding in place. Idempotent.
pub fn binding(obj: &mut Value) {
    if let Some(role_ref) = ensure_obj_value(obj, "roleRef") {
        default_field(role_ref, "apiGroup", json!(GROUP));
    }
    for subject in arr_mut(obj, "subjects").into_iter().flatten() {
        if matches!(subject.get("kind").and_then(Value::as_str), Some("User" | "Group")) {
            default_field(subject, "apiGroup", json!(GROUP));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_refs_and_user_and_group_subjects_get_the_rbac_group() {
        let mut rb = json!({
            "roleRef": {"kind": "Role", "name": "r"},
            "subjects": [
                {"kind": "User", "name": "u"},
                {"kind": "Group", "name": "g", "apiGroup": ""},
                {"kind": "ServiceAccount", "name": "s"},
                {"kind": "Other", "name": "o"}
            ]
        });
        binding(&mut rb);
        assert_eq!(rb["roleRef"]["apiGroup"], GROUP);
        assert_eq!(rb["subjects"][0]["apiGroup"], GROUP);
        assert_eq!(rb["subjects"][1]["apiGroup"], GROUP);
        assert!(rb["subjects"][2].get("apiGroup").is_none(), "a ServiceAccount's group stays empty");
        assert!(rb["subjects"][3].get("apiGroup").is_none());
    }

    #[test]
    fn a_binding_without_role_ref_gets_one_with_the_group_only() {
        let mut rb = json!({"metadata": {"name": "x"}});
        binding(&mut rb);
        assert_eq!(rb["roleRef"], json!({"apiGroup": GROUP}));
    }
}
