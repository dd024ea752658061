//! What a request asks to do, in the terms authorizers decide on: kube-apiserver's
//! `RequestInfoFactory` (`k8s.io/apiserver/pkg/endpoints/request/requestinfo.go`).
//!
//! It reads the URL alone, before any routing, so that a request for a resource the server does
//! not serve is authorized (and refused) like any other. Upstream's quirks are kept because
//! RBAC rules are written against them:
//! - `/api/v1/namespaces/X` and its `status` and `finalize` subresources are in namespace X;
//! - a GET without a name is `list`, or `watch` with `?watch`; a DELETE without one is
//!   `deletecollection`; `/watch/` in the path is the legacy watch verb;
//! - a list or watch with the field selector `metadata.name=N` is about the object named N,
//!   which is how rules with `resourceNames` can allow watching one object;
//! - anything that is not `/api/VERSION/...` or `/apis/GROUP/VERSION/...` is a non-resource
//!   request whose verb is the lowercase HTTP method.

use http::Method;

use crate::names;
use crate::request::Query;
use crate::selectors::FieldSelector;

/// One request as authorizers see it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestInfo {
    /// The URL path, for non-resource rules and messages.
    pub path: String,
    /// `get`, `list`, `watch`, `create`, ... (the HTTP method for non-resource requests).
    pub verb: String,
    /// Whether this is about an API resource (else `path` is what is asked for).
    pub is_resource_request: bool,
    pub api_group: String,
    pub api_version: String,
    /// Empty for cluster-scoped requests.
    pub namespace: String,
    pub resource: String,
    pub subresource: String,
    /// Empty when the request names no object (list, create, deletecollection).
    pub name: String,
}

/// Subresources of a namespace, which keep `namespaces` as the resource.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

impl RequestInfo {
    /// Resolves a request line the way kube-apiserver does.
    pub fn new(method: &Method, path: &str, query: &Query) -> Self {
        let mut info = Self { path: path.to_string(), verb: method.as_str().to_ascii_lowercase(), ..Self::default() };
        let trimmed = path.trim_matches('/');
        let parts: Vec<&str> = if trimmed.is_empty() { Vec::new() } else { trimmed.split('/').collect() };
        let rest = match parts.as_slice() {
            ["api", version, rest @ ..] if !rest.is_empty() => {
                info.api_version = version.to_string();
                rest
            }
            ["apis", group, version, rest @ ..] if !rest.is_empty() => {
                info.api_group = group.to_string();
                info.api_version = version.to_string();
                rest
            }
            _ => return Self { api_group: String::new(), api_version: String::new(), ..info },
        };
        info.is_resource_request = true;

        let rest = match rest {
            ["watch", tail @ ..] if !tail.is_empty() => {
                info.verb = "watch".into();
                tail
            }
            _ => {
                info.verb = match *method {
                    Method::POST => "create",
                    Method::GET | Method::HEAD => "get",
                    Method::PUT => "update",
                    Method::PATCH => "patch",
                    Method::DELETE => "delete",
                    _ => "",
                }
                .into();
                rest
            }
        };
        let rest = match rest {
            ["namespaces", ns, tail @ ..] => {
                info.namespace = ns.to_string();
                match tail.first() {
                    Some(next) if !NAMESPACE_SUBRESOURCES.contains(next) => tail,
                    _ => rest,
                }
            }
            _ => rest,
        };
        if let Some(resource) = rest.first() {
            info.resource = resource.to_string();
        }
        if let Some(name) = rest.get(1) {
            info.name = name.to_string();
        }
        if let Some(subresource) = rest.get(2) {
            info.subresource = subresource.to_string();
        }

        if info.name.is_empty() && info.verb == "get" {
            info.verb = if query.flag("watch") { "watch" } else { "list" }.into();
            let named = FieldSelector::parse(query.get("fieldSelector").unwrap_or_default())
                .ok()
                .and_then(|s| s.exact_name().map(String::from));
            if let Some(name) = named.filter(|n| names::path_segment_name(n, false).is_empty()) {
                info.name = name;
            }
        }
        if info.name.is_empty() && info.verb == "delete" {
            info.verb = "deletecollection".into();
        }
        info
    }

    /// `resource/subresource`, or the resource alone, as RBAC rules name it.
    pub fn resource_and_subresource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(method: Method, path_and_query: &str) -> RequestInfo {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        RequestInfo::new(&method, path, &Query::parse(Some(query)))
    }

    /// (verb, group, namespace, resource, subresource, name) of a resource request.
    fn parts(i: &RequestInfo) -> (&str, &str, &str, &str, &str, &str) {
        assert!(i.is_resource_request, "{i:?}");
        (&i.verb, &i.api_group, &i.namespace, &i.resource, &i.subresource, &i.name)
    }

    #[test]
    fn namespaced_and_cluster_resources() {
        assert_eq!(parts(&info(Method::GET, "/api/v1/namespaces/a/pods/p")), ("get", "", "a", "pods", "", "p"));
        assert_eq!(parts(&info(Method::GET, "/api/v1/namespaces/a/pods")), ("list", "", "a", "pods", "", ""));
        assert_eq!(
            parts(&info(Method::PATCH, "/apis/batch/v1/namespaces/a/jobs/j/status")),
            ("patch", "batch", "a", "jobs", "status", "j")
        );
        assert_eq!(parts(&info(Method::GET, "/api/v1/nodes")), ("list", "", "", "nodes", "", ""));
        assert_eq!(parts(&info(Method::GET, "/api/v1/pods")), ("list", "", "", "pods", "", ""));
        assert_eq!(parts(&info(Method::POST, "/api/v1/namespaces")), ("create", "", "", "namespaces", "", ""));
    }

    #[test]
    fn a_namespace_object_is_in_its_own_namespace() {
        assert_eq!(parts(&info(Method::GET, "/api/v1/namespaces/x")), ("get", "", "x", "namespaces", "", "x"));
        assert_eq!(
            parts(&info(Method::PUT, "/api/v1/namespaces/x/finalize")),
            ("update", "", "x", "namespaces", "finalize", "x")
        );
        assert_eq!(
            parts(&info(Method::GET, "/api/v1/namespaces/x/status")),
            ("get", "", "x", "namespaces", "status", "x")
        );
    }

    #[test]
    fn verbs_follow_names_and_query() {
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods?watch=true").verb, "watch");
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods?watch=0").verb, "list");
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods/p?watch=true").verb, "get", "upstream keeps get");
        assert_eq!(info(Method::GET, "/api/v1/watch/namespaces/a/pods").verb, "watch");
        assert_eq!(info(Method::DELETE, "/api/v1/namespaces/a/pods").verb, "deletecollection");
        assert_eq!(info(Method::DELETE, "/api/v1/namespaces/a/pods/p").verb, "delete");
        assert_eq!(info(Method::HEAD, "/api/v1/namespaces/a/pods/p").verb, "get");
        assert_eq!(
            parts(&info(Method::POST, "/api/v1/namespaces/a/serviceaccounts/sa/token")),
            ("create", "", "a", "serviceaccounts", "token", "sa")
        );
    }

    #[test]
    fn a_name_field_selector_names_the_object() {
        let i = info(Method::GET, "/api/v1/namespaces/a/pods?watch=1&fieldSelector=metadata.name%3Dp");
        assert_eq!(parts(&i), ("watch", "", "a", "pods", "", "p"));
        let i = info(Method::GET, "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%21%3Dp");
        assert_eq!(i.name, "", "only an exact match names the object");
        let i = info(Method::GET, "/api/v1/namespaces/a/pods?fieldSelector=metadata.name%3Da%2Fb");
        assert_eq!(i.name, "", "names that are not path segments are ignored");
    }

    #[test]
    fn discovery_and_other_paths_are_non_resource_requests() {
        for path in ["/api", "/api/v1", "/apis", "/apis/batch", "/apis/batch/v1", "/version", "/openapi/v3", "/"] {
            let i = info(Method::GET, path);
            assert!(!i.is_resource_request, "{path}");
            assert_eq!((i.verb.as_str(), i.path.as_str()), ("get", path));
        }
        assert_eq!(info(Method::POST, "/embedded-cluster/faults").verb, "post");
    }

    #[test]
    fn combined_resource_names() {
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods/p/log").resource_and_subresource(), "pods/log");
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods/p").resource_and_subresource(), "pods");
    }
}
