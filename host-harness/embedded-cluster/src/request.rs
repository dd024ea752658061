//! Turns an HTTP request line into what the API server must do: which resource, namespace,
//! name and subresource, which Kubernetes verb, and the query parameters.

use std::collections::HashMap;

use http::Method;

use crate::resources::ResourceType;
use crate::status::ApiError;

/// The endpoints of the API server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    ResourceList {
        group: String,
        version: String,
    },
    OpenApiV2,
    OpenApiV3Root,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`
    OpenApiV3 {
        group: String,
        version: String,
    },
    /// The embedded cluster's own admin endpoints (`/embedded-cluster/...`).
    Admin(Vec<String>),
    Resource(ResourceRequest),
}

/// A request for objects of one resource type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRequest {
    /// Index into the served resource table.
    pub resource: usize,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub subresource: Option<String>,
}

/// Splits a path and finds its route among the served resources.
pub fn route(path: &str, types: &[ResourceType]) -> Result<Route, ApiError> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    match segs.as_slice() {
        ["healthz" | "livez" | "readyz", ..] => Ok(Route::Health),
        ["version"] => Ok(Route::Version),
        ["api"] => Ok(Route::CoreVersions),
        ["apis"] => Ok(Route::Groups),
        ["openapi", "v2"] => Ok(Route::OpenApiV2),
        ["openapi", "v3"] => Ok(Route::OpenApiV3Root),
        ["openapi", "v3", "api", version] => {
            Ok(Route::OpenApiV3 { group: String::new(), version: version.to_string() })
        }
        ["openapi", "v3", "apis", group, version] => {
            Ok(Route::OpenApiV3 { group: group.to_string(), version: version.to_string() })
        }
        ["embedded-cluster", rest @ ..] => Ok(Route::Admin(rest.iter().map(|s| s.to_string()).collect())),
        ["api", version, rest @ ..] => resource_route("", version, rest, types),
        ["apis", group] => {
            if types.iter().any(|t| t.group == *group) {
                Ok(Route::Group(group.to_string()))
            } else {
                Err(ApiError::not_found_path())
            }
        }
        ["apis", group, version, rest @ ..] => resource_route(group, version, rest, types),
        _ => Err(ApiError::not_found_path()),
    }
}

fn resource_route(group: &str, version: &str, rest: &[&str], types: &[ResourceType]) -> Result<Route, ApiError> {
    let find = |plural: &str| types.iter().position(|t| t.group == group && t.version == version && t.plural == plural);
    if !types.iter().any(|t| t.group == group && t.version == version) {
        return Err(ApiError::not_found_path());
    }
    let owned = |s: &&str| s.to_string();
    let req = |resource, namespace: Option<&&str>, name: Option<&&str>, sub: Option<&&str>| {
        Ok(Route::Resource(ResourceRequest {
            resource,
            namespace: namespace.map(owned),
            name: name.map(owned),
            subresource: sub.map(owned),
        }))
    };
    match rest {
        [] => Ok(Route::ResourceList { group: group.to_string(), version: version.to_string() }),
        ["namespaces", ns, plural, tail @ ..] if find(plural).is_some_and(|i| types[i].namespaced) => {
            let i = find(plural).unwrap_or_default();
            match tail {
                [] => req(i, Some(ns), None, None),
                [name] => req(i, Some(ns), Some(name), None),
                [name, sub] if types[i].subresources.contains(sub) => req(i, Some(ns), Some(name), Some(sub)),
                _ => Err(ApiError::not_found_path()),
            }
        }
        [plural, tail @ ..] => {
            let i = find(plural).ok_or_else(ApiError::not_found_path)?;
            let t = &types[i];
            match tail {
                [] => req(i, None, None, None),
                [_] | [_, _] if t.namespaced => Err(ApiError::not_found_path()),
                [name] => req(i, None, Some(name), None),
                [name, sub] if t.subresources.contains(sub) => req(i, None, Some(name), Some(sub)),
                _ => Err(ApiError::not_found_path()),
            }
        }
    }
}

/// The Kubernetes verb of a resource request.
pub fn verb(method: &Method, req: &ResourceRequest, query: &Query) -> Result<&'static str, ApiError> {
    let named = req.name.is_some();
    Ok(match *method {
        // An exec is a `create` whether it comes as a WebSocket's GET or as SPDY's POST.
        Method::GET | Method::POST if req.subresource.as_deref() == Some("exec") => "create",
        Method::GET if query.flag("watch") => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST if !named => "create",
        Method::POST if matches!(req.subresource.as_deref(), Some("binding" | "token")) => "create",
        Method::PUT if named => "update",
        Method::PATCH if named => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => {
            return Err(ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({method})"
            )));
        }
    })
}

/// Decoded query parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query(HashMap<String, String>);

impl Query {
    /// Parses `a=b&c=d` with percent-decoding (`+` is a space, as Go's url.ParseQuery does),
    /// the last of repeated keys winning.
    pub fn parse(raw: Option<&str>) -> Self {
        Self(pairs(raw).collect())
    }

    /// A parameter's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// A boolean parameter, decoded as the API server's parameter codec does: present and not
    /// `0` or `false` (any case) is true, so the authorizer and the handlers agree on `?watch`.
    pub fn flag(&self, key: &str) -> bool {
        self.get(key).is_some_and(|v| v != "0" && !v.eq_ignore_ascii_case("false"))
    }

    /// An integer parameter; malformed values are a 400.
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        self.get(key)
            .map(|v| {
                v.parse().map_err(|_| ApiError::bad_request(format!("invalid value {v:?} for query parameter {key}")))
            })
            .transpose()
    }
}

/// Every value of a repeated query parameter, in order (`command=a&command=b`), decoded as
/// [`Query::parse`] decodes; [`Query`] keeps only the last.
pub fn query_values(raw: Option<&str>, key: &str) -> Vec<String> {
    pairs(raw).filter(|(k, _)| k == key).map(|(_, v)| v).collect()
}

/// A query's decoded pairs, in order: `form_urlencoded` (the `url` crate's) decodes as Go's
/// `url.ParseQuery` does, with a malformed escape kept as written.
fn pairs(raw: Option<&str>) -> impl Iterator<Item = (String, String)> + '_ {
    form_urlencoded::parse(raw.unwrap_or_default().as_bytes()).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{SandboxVersions, served};

    fn resolve(path: &str) -> Result<Route, ApiError> {
        route(path, &served(SandboxVersions::Both))
    }

    fn resource(path: &str) -> (String, Option<String>, Option<String>, Option<String>) {
        let types = served(SandboxVersions::Both);
        match route(path, &types) {
            Ok(Route::Resource(r)) => (types[r.resource].plural.to_string(), r.namespace, r.name, r.subresource),
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn routes_namespaced_and_cluster_paths() {
        assert_eq!(resource("/api/v1/namespaces/a/pods"), ("pods".into(), Some("a".into()), None, None));
        assert_eq!(
            resource("/api/v1/namespaces/a/pods/p/binding"),
            ("pods".into(), Some("a".into()), Some("p".into()), Some("binding".into()))
        );
        assert_eq!(resource("/api/v1/namespaces/a"), ("namespaces".into(), None, Some("a".into()), None));
        assert_eq!(
            resource("/api/v1/namespaces/a/status"),
            ("namespaces".into(), None, Some("a".into()), Some("status".into()))
        );
        assert_eq!(resource("/api/v1/pods"), ("pods".into(), None, None, None));
        assert_eq!(resource("/apis/agents.x-k8s.io/v1alpha1/namespaces/n/sandboxes/s/status").3, Some("status".into()));
        assert!(matches!(resolve("/apis/batch/v1"), Ok(Route::ResourceList { .. })));
        assert!(matches!(resolve("/apis/agents.x-k8s.io"), Ok(Route::Group(_))));
    }

    #[test]
    fn unknown_paths_are_404() {
        for p in ["/api/v2", "/apis/nope/v1", "/api/v1/widgets", "/api/v1/namespaces/a/pods/p/attach", "/apis/nope"] {
            assert_eq!(resolve(p).err().map(|e| e.code), Some(404), "{p}");
        }
    }

    #[test]
    fn query_is_percent_decoded() {
        let q = Query::parse(Some("labelSelector=app%3Dx%2Cenv+in+%28a%29&watch=1&limit=5"));
        assert_eq!(q.get("labelSelector"), Some("app=x,env in (a)"));
        assert!(q.flag("watch"));
        assert!(Query::parse(Some("watch=yes")).flag("watch"));
        assert!(!Query::parse(Some("watch=False")).flag("watch") && !Query::parse(Some("watch=")).flag("watch"));
        assert_eq!(q.int("limit").ok().flatten(), Some(5));
        assert!(Query::parse(Some("limit=x")).int("limit").is_err());
        let raw = Some("command=sh&stdout=true&command=-c&command=echo+a%26b&command=");
        assert_eq!(query_values(raw, "command"), ["sh", "-c", "echo a&b", ""]);
        assert!(query_values(None, "command").is_empty());
    }

    #[test]
    fn exec_is_routed_and_is_a_create() {
        let types = served(SandboxVersions::Both);
        let Ok(Route::Resource(r)) = route("/api/v1/namespaces/a/pods/p/exec", &types) else {
            panic!("pods/exec is routed");
        };
        assert_eq!(verb(&Method::GET, &r, &Query::default()).ok(), Some("create"));
        assert_eq!(verb(&Method::POST, &r, &Query::default()).ok(), Some("create"));
    }
}
