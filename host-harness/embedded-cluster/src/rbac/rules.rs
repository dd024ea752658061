//! Whether one policy rule allows a request: upstream's `RuleAllows` and the matchers of
//! `pkg/apis/rbac/v1/evaluation_helpers.go`.
//!
//! A resource request needs its verb, API group, `resource[/subresource]` and name to match;
//! `*` matches any verb, group or resource, `*/sub` any resource's subresource `sub`, and a rule
//! with `resourceNames` matches only requests that name one of them (so never a list without a
//! name field selector, nor a create). A non-resource request needs its verb and path to match
//! the rule's `nonResourceURLs`, where `*` matches all and a trailing `*` a prefix.

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::request_info::RequestInfo;

const ALL: &str = "*";

/// Whether `rule` allows the request.
pub fn allows(rule: &PolicyRule, info: &RequestInfo) -> bool {
    if !verb_matches(rule, &info.verb) {
        return false;
    }
    if !info.is_resource_request {
        return non_resource_url_matches(rule, &info.path);
    }
    api_group_matches(rule, &info.api_group)
        && resource_matches(rule, &info.resource_and_subresource(), &info.subresource)
        && resource_name_matches(rule, &info.name)
}

fn list(field: &Option<Vec<String>>) -> &[String] {
    field.as_deref().unwrap_or_default()
}

fn verb_matches(rule: &PolicyRule, verb: &str) -> bool {
    rule.verbs.iter().any(|v| v == ALL || v == verb)
}

fn api_group_matches(rule: &PolicyRule, group: &str) -> bool {
    list(&rule.api_groups).iter().any(|g| g == ALL || g == group)
}

fn resource_matches(rule: &PolicyRule, combined: &str, subresource: &str) -> bool {
    list(&rule.resources).iter().any(|r| {
        r == ALL
            || r == combined
            || (!subresource.is_empty() && r.strip_prefix("*/").is_some_and(|sub| sub == subresource))
    })
}

fn resource_name_matches(rule: &PolicyRule, name: &str) -> bool {
    let names = list(&rule.resource_names);
    names.is_empty() || names.iter().any(|n| n == name)
}

fn non_resource_url_matches(rule: &PolicyRule, path: &str) -> bool {
    list(&rule.non_resource_urls)
        .iter()
        .any(|url| url == ALL || url == path || url.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Query;
    use http::Method;
    use serde_json::json;

    fn rule(v: serde_json::Value) -> PolicyRule {
        serde_json::from_value(v).expect("rule")
    }

    fn request(method: Method, path_and_query: &str) -> RequestInfo {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        RequestInfo::new(&method, path, &Query::parse(Some(query)))
    }

    fn get(path: &str) -> RequestInfo {
        request(Method::GET, path)
    }

    #[test]
    fn verbs_groups_and_resources_must_all_match() {
        let r = rule(json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}));
        assert!(allows(&r, &get("/api/v1/namespaces/a/pods/p")));
        assert!(allows(&r, &get("/api/v1/namespaces/a/pods")));
        assert!(!allows(&r, &request(Method::DELETE, "/api/v1/namespaces/a/pods/p")), "verb");
        assert!(!allows(&r, &get("/api/v1/namespaces/a/secrets/s")), "resource");
        assert!(!allows(&r, &get("/apis/batch/v1/namespaces/a/pods/p")), "group");
        assert!(!allows(&r, &get("/api/v1/namespaces/a/pods/p/status")), "a subresource is its own resource");
    }

    #[test]
    fn stars_match_everything_of_their_kind() {
        let r = rule(json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}));
        assert!(allows(&r, &request(Method::PATCH, "/apis/batch/v1/namespaces/a/jobs/j/status")));
        assert!(!allows(&r, &get("/healthz")), "resource rules never match non-resource URLs");
        let sub = rule(json!({"apiGroups": [""], "resources": ["*/status"], "verbs": ["get"]}));
        assert!(allows(&sub, &get("/api/v1/namespaces/a/pods/p/status")));
        assert!(!allows(&sub, &get("/api/v1/namespaces/a/pods/p")));
        assert!(!allows(&sub, &get("/api/v1/namespaces/a/pods/p/log")));
    }

    #[test]
    fn resource_names_need_a_named_request() {
        let r = rule(json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"],
            "verbs": ["get", "list", "watch", "create"]}));
        assert!(allows(&r, &get("/api/v1/namespaces/a/configmaps/cfg")));
        assert!(!allows(&r, &get("/api/v1/namespaces/a/configmaps/other")));
        assert!(!allows(&r, &get("/api/v1/namespaces/a/configmaps")), "a list names nothing");
        assert!(!allows(&r, &request(Method::POST, "/api/v1/namespaces/a/configmaps")), "nor does a create");
        assert!(
            allows(&r, &get("/api/v1/namespaces/a/configmaps?watch=true&fieldSelector=metadata.name%3Dcfg")),
            "a watch of one object by field selector is about that object"
        );
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_prefix() {
        let r = rule(json!({"nonResourceURLs": ["/api", "/apis/*", "/version"], "verbs": ["get"]}));
        assert!(allows(&r, &get("/api")));
        assert!(allows(&r, &get("/apis/batch/v1")));
        assert!(!allows(&r, &get("/apis")), "the prefix is /apis/");
        assert!(!allows(&r, &get("/api/v1")));
        assert!(!allows(&r, &request(Method::POST, "/version")));
        assert!(!allows(&r, &get("/api/v1/namespaces/a/pods")), "URL rules never match resources");
    }
}
