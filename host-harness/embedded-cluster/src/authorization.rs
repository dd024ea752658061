//! Who may do what: the authorization step in front of every handler.
//!
//! As kube-apiserver's `WithAuthorization` filter, it runs on the [`RequestInfo`] of the URL
//! before routing, so a request for an unserved resource is refused like any other, and a
//! refusal is the Status of [`ApiError::forbidden_request`]. Each identity carries the
//! [`Access`] that decides for it: the built-in users have fixed permissions, ServiceAccount
//! tokens are authorized by RBAC. Whatever that is, the embedded cluster's own endpoints
//! (`/embedded-cluster/...`: faults, request log, clock) are for the admin only.

use crate::rbac::authorizer::{self, Decision, User};
use crate::request_info::RequestInfo;
use crate::status::ApiError;
use crate::store::Store;

/// Who sent a request: the user name the request log and messages show, its groups, and what
/// decides its permissions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    pub access: Access,
}

/// What an identity may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Everything, the admin endpoints included.
    Admin,
    /// Every API request, but not the admin endpoints (the controllers, a provider host).
    Unrestricted,
    /// Reads of resources (get, list, watch) and every non-resource URL, to exercise 403.
    ReadOnly,
    /// Whatever the RBAC objects in the store grant the user and its groups.
    Rbac,
}

const ADMIN_ONLY: &str = "the embedded cluster's admin endpoints need the admin token";

/// Whether the request is for the embedded cluster's own endpoints.
fn is_admin_endpoint(info: &RequestInfo) -> bool {
    !info.is_resource_request && info.path.split('/').find(|s| !s.is_empty()) == Some("embedded-cluster")
}

/// Allows the request or answers why not; RBAC decisions read the bindings in `store`.
pub fn authorize(store: &Store, id: &Identity, info: &RequestInfo) -> Result<(), ApiError> {
    if is_admin_endpoint(info) {
        return if id.access == Access::Admin { Ok(()) } else { Err(ApiError::forbidden(ADMIN_ONLY)) };
    }
    match id.access {
        Access::Admin | Access::Unrestricted => Ok(()),
        Access::ReadOnly if !info.is_resource_request || matches!(info.verb.as_str(), "get" | "list" | "watch") => {
            Ok(())
        }
        Access::ReadOnly => Err(ApiError::forbidden_request(info, &id.user, "")),
        Access::Rbac => match authorizer::authorize(store, User { name: &id.user, groups: &id.groups }, info) {
            Decision::Allow => Ok(()),
            Decision::Deny { reason } => Err(ApiError::forbidden_request(info, &id.user, &reason)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rbac::bootstrap::{self, AUTHENTICATED_GROUP};
    use crate::rbac::{CLUSTER_ROLE_BINDINGS, CLUSTER_ROLES};
    use crate::request::Query;
    use http::Method;

    fn id(access: Access) -> Identity {
        Identity { user: "u".into(), groups: vec![AUTHENTICATED_GROUP.into()], access }
    }

    /// A store with the bootstrap policy, as every cluster starts.
    fn bootstrapped() -> Store {
        let store = Store::new(16);
        let written = store.write(|txn| {
            for (plural, obj) in bootstrap::policy() {
                let storage = if plural == "clusterroles" { CLUSTER_ROLES } else { CLUSTER_ROLE_BINDINGS };
                txn.put(storage, obj);
            }
            Ok(())
        });
        assert!(written.is_ok());
        store
    }

    fn decide(access: Access, method: Method, path: &str) -> Result<(), u16> {
        authorize(&bootstrapped(), &id(access), &RequestInfo::new(&method, path, &Query::default())).map_err(|e| e.code)
    }

    #[test]
    fn the_admin_endpoints_are_for_the_admin_only() {
        assert_eq!(decide(Access::Admin, Method::POST, "/embedded-cluster/faults"), Ok(()));
        for access in [Access::Unrestricted, Access::ReadOnly, Access::Rbac] {
            assert_eq!(decide(access, Method::GET, "/embedded-cluster/requests"), Err(403));
        }
    }

    #[test]
    fn rbac_users_get_discovery_from_the_bootstrap_policy_and_nothing_else() {
        for path in ["/api", "/api/v1", "/apis", "/apis/batch/v1", "/openapi/v3", "/version", "/healthz"] {
            assert_eq!(decide(Access::Rbac, Method::GET, path), Ok(()), "{path}");
        }
        assert_eq!(decide(Access::Rbac, Method::POST, "/api"), Err(403));
        assert_eq!(decide(Access::Rbac, Method::GET, "/metrics"), Err(403));
        assert_eq!(decide(Access::Rbac, Method::GET, "/api/v1/namespaces/default/pods"), Err(403));
    }

    #[test]
    fn read_only_identities_read_resources_and_discovery() {
        assert_eq!(decide(Access::ReadOnly, Method::GET, "/api/v1/namespaces/a/pods"), Ok(()));
        assert_eq!(decide(Access::ReadOnly, Method::GET, "/apis"), Ok(()));
        assert_eq!(decide(Access::ReadOnly, Method::DELETE, "/api/v1/namespaces/a/pods/p"), Err(403));
        assert_eq!(decide(Access::ReadOnly, Method::POST, "/api/v1/namespaces/a/widgets"), Err(403));
        assert_eq!(decide(Access::Unrestricted, Method::DELETE, "/api/v1/namespaces/a/pods/p"), Ok(()));
    }
}
