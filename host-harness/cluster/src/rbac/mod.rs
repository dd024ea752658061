//! Role-based access control, as kube-apiserver's RBAC authorizer implements it
//! (Kubernetes docs: "Using RBAC Authorization"; `plugin/pkg/auth/authorizer/rbac`).
//!
//! - [`validation`] and [`defaults`]: what the server checks and fills in on Roles,
//!   ClusterRoles, RoleBindings and ClusterRoleBindings.

pub mod defaults;
pub mod validation;

/// The API group of the RBAC kinds.
pub const GROUP: &str = "rbac.authorization.k8s.io";
