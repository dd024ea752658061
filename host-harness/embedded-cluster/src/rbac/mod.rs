//! Role-based access control, as kube-apiserver's RBAC authorizer implements it
//! (Kubernetes docs: "Using RBAC Authorization"; `plugin/pkg/auth/authorizer/rbac`).
//!
//! - [`authorizer`]: which bindings apply to a user, and whether their roles allow a request;
//! - [`rules`]: whether one policy rule allows a request;
//! - [`escalation`]: a user may grant only what it holds (or may `escalate` or `bind`);
//! - [`bootstrap`]: the default ClusterRoles and ClusterRoleBindings every cluster starts with;
//! - [`validation`] and [`defaults`]: what the server checks and fills in on Roles,
//!   ClusterRoles, RoleBindings and ClusterRoleBindings.

pub mod authorizer;
pub mod bootstrap;
pub mod defaults;
pub mod escalation;
pub mod rules;
pub mod validation;

/// The API group of the RBAC kinds.
pub const GROUP: &str = "rbac.authorization.k8s.io";
/// The storage key of Roles, which the authorizer reads.
pub const ROLES: &str = "roles.rbac.authorization.k8s.io";
/// The storage key of RoleBindings.
pub const ROLE_BINDINGS: &str = "rolebindings.rbac.authorization.k8s.io";
/// The storage key of ClusterRoles.
pub const CLUSTER_ROLES: &str = "clusterroles.rbac.authorization.k8s.io";
/// The storage key of ClusterRoleBindings.
pub const CLUSTER_ROLE_BINDINGS: &str = "clusterrolebindings.rbac.authorization.k8s.io";
