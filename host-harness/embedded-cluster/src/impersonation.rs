//! Impersonation: `Impersonate-User`, `Impersonate-Group` and `Impersonate-Uid` headers, as
//! kube-apiserver's `WithImpersonation` filter reads them. A requester that may `impersonate`
//! (the admin, the unrestricted built-in users, or an RBAC grant of the verb on `users`,
//! `groups` or `serviceaccounts`) acts as the named user from then on: authorization, the
//! request log and error messages all see the impersonated identity.
//!
//! `sandbox-dev simulate` relies on it so that each simulated controller keeps its own user
//! name against a real API server, as it has inside the embedded cluster.

use http::HeaderMap;

use crate::authorization::{Access, Identity};
use crate::rbac::authorizer::{self, Decision, User};
use crate::rbac::bootstrap::{AUTHENTICATED_GROUP, MASTERS_GROUP};
use crate::request_info::RequestInfo;
use crate::status::ApiError;
use crate::store::Store;

/// The header naming the user to act as.
pub const USER_HEADER: &str = "impersonate-user";
/// A header naming one group of the impersonated user (repeatable).
pub const GROUP_HEADER: &str = "impersonate-group";
const UID_HEADER: &str = "impersonate-uid";

const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

fn header_values(headers: &HeaderMap, name: &str) -> Vec<String> {
    headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(|v| v.trim().to_string()).collect()
}

/// The request info of the `impersonate` check for one impersonated name.
fn check(resource: &str, namespace: &str, name: &str) -> RequestInfo {
    RequestInfo {
        path: String::new(),
        verb: "impersonate".to_string(),
        is_resource_request: true,
        api_group: String::new(),
        api_version: "v1".to_string(),
        namespace: namespace.to_string(),
        resource: resource.to_string(),
        subresource: String::new(),
        name: name.to_string(),
    }
}

fn may_impersonate(store: &Store, id: &Identity, info: &RequestInfo) -> Result<(), ApiError> {
    let allowed = match id.access {
        Access::Admin | Access::Unrestricted => true,
        Access::ReadOnly => false,
        Access::Rbac => {
            matches!(authorizer::authorize(store, User { name: &id.user, groups: &id.groups }, info), Decision::Allow)
        }
    };
    if allowed { Ok(()) } else { Err(ApiError::forbidden_request(info, &id.user, "")) }
}

/// The identity a request acts as: `id` itself without impersonation headers, else the
/// impersonated user, once `id` is proven to be allowed to impersonate it.
pub fn apply(store: &Store, id: Identity, headers: &HeaderMap) -> Result<Identity, ApiError> {
    let users = header_values(headers, USER_HEADER);
    let groups = header_values(headers, GROUP_HEADER);
    let uids = header_values(headers, UID_HEADER);
    let Some(user) = users.first().cloned() else {
        if groups.is_empty() && uids.is_empty() {
            return Ok(id);
        }
        return Err(ApiError::bad_request("requested impersonation of groups or a uid without impersonating a user"));
    };
    if user.is_empty() {
        return Err(ApiError::bad_request("the Impersonate-User header names no user"));
    }
    let check_user = match user.strip_prefix(SERVICE_ACCOUNT_PREFIX).and_then(|rest| rest.split_once(':')) {
        Some((namespace, name)) => check("serviceaccounts", namespace, name),
        None => check("users", "", &user),
    };
    may_impersonate(store, &id, &check_user)?;
    for group in &groups {
        may_impersonate(store, &id, &check("groups", "", group))?;
    }
    let mut impersonated = groups.clone();
    if groups.is_empty()
        && let Some((namespace, _)) = user.strip_prefix(SERVICE_ACCOUNT_PREFIX).and_then(|rest| rest.split_once(':'))
    {
        impersonated = vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")];
    }
    if user != "system:anonymous" && !impersonated.iter().any(|g| g == AUTHENTICATED_GROUP) {
        impersonated.push(AUTHENTICATED_GROUP.to_string());
    }
    // The impersonated user is authorized by RBAC, where system:masters holds cluster-admin;
    // the embedded cluster's own endpoints stay the admin's.
    let access = if impersonated.iter().any(|g| g == MASTERS_GROUP) && id.access == Access::Admin {
        Access::Unrestricted
    } else {
        Access::Rbac
    };
    Ok(Identity { user, groups: impersonated, access })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn admin() -> Identity {
        Identity { user: "admin".into(), groups: vec![MASTERS_GROUP.into()], access: Access::Admin }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.append(*k, HeaderValue::from_str(v).unwrap_or_else(|_| HeaderValue::from_static("")));
        }
        map
    }

    #[test]
    fn without_headers_the_requester_acts_as_itself() {
        let store = Store::new(10);
        assert_eq!(apply(&store, admin(), &HeaderMap::new()).ok(), Some(admin()));
    }

    #[test]
    fn the_admin_acts_as_the_named_user_and_groups() {
        let store = Store::new(10);
        let h =
            headers(&[(USER_HEADER, "system:node:n1"), (GROUP_HEADER, "system:nodes"), (GROUP_HEADER, MASTERS_GROUP)]);
        let id = apply(&store, admin(), &h).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(id.user, "system:node:n1");
        assert_eq!(id.groups, ["system:nodes", MASTERS_GROUP, AUTHENTICATED_GROUP]);
        assert_eq!(id.access, Access::Unrestricted);
        let sa = apply(&store, admin(), &headers(&[(USER_HEADER, "system:serviceaccount:ns:robot")]))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sa.groups, ["system:serviceaccounts", "system:serviceaccounts:ns", AUTHENTICATED_GROUP]);
        assert_eq!(sa.access, Access::Rbac);
    }

    #[test]
    fn a_reader_may_not_impersonate_and_groups_need_a_user() {
        let store = Store::new(10);
        let viewer = Identity { user: "viewer".into(), groups: vec![], access: Access::ReadOnly };
        let err = apply(&store, viewer, &headers(&[(USER_HEADER, "someone")])).err();
        assert_eq!(
            err.map(|e| (e.code, e.message)),
            Some((
                403,
                "users \"someone\" is forbidden: User \"viewer\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
                    .to_string()
            ))
        );
        assert_eq!(apply(&store, admin(), &headers(&[(GROUP_HEADER, "g")])).err().map(|e| e.code), Some(400));
    }
}
