//! Request URLs for the `kube` interface, built from group/version/plural.
//!
//! Every path segment comes from the guest, so each one is checked against the characters
//! Kubernetes names can have before it goes into a URL: a name like `../../secrets/x` or
//! `a?b` is refused as `invalid` and never reaches the API server.

use crate::bindings::kube::{KubeError, ResourceType};

/// Longest segment accepted (a DNS subdomain).
const MAX_SEGMENT: usize = 253;

/// Checks one guest-supplied path segment.
pub(crate) fn segment<'a>(what: &str, value: &'a str) -> Result<&'a str, KubeError> {
    let ok = !value.is_empty()
        && value.len() <= MAX_SEGMENT
        && value != "."
        && value != ".."
        && value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b':'));
    if ok {
        Ok(value)
    } else {
        Err(KubeError::Invalid(format!(
            "{what} {} is not a valid Kubernetes name (1-{MAX_SEGMENT} characters of letters, digits, '-', \
             '.', '_', ':')",
            crate::policy::quoted(value)
        )))
    }
}

/// The collection path: `/api/v1/namespaces/ns/pods`, `/apis/batch/v1/jobs`.
pub(crate) fn collection(rt: &ResourceType, namespace: Option<&str>) -> Result<String, KubeError> {
    let version = segment("version", &rt.version)?;
    let plural = segment("resource", &rt.plural)?;
    let mut path = if rt.group.is_empty() {
        format!("/api/{version}")
    } else {
        format!("/apis/{}/{version}", segment("group", &rt.group)?)
    };
    if let Some(ns) = namespace {
        path.push_str("/namespaces/");
        path.push_str(segment("namespace", ns)?);
    }
    path.push('/');
    path.push_str(plural);
    Ok(path)
}

/// The object path, optionally with a subresource: `.../pods/name/status`.
pub(crate) fn object(
    rt: &ResourceType,
    namespace: Option<&str>,
    name: &str,
    subresource: Option<&str>,
) -> Result<String, KubeError> {
    let mut path = collection(rt, namespace)?;
    path.push('/');
    path.push_str(segment("name", name)?);
    if let Some(sub) = subresource {
        path.push('/');
        path.push_str(segment("subresource", sub)?);
    }
    Ok(path)
}

/// Appends query parameters (skipping absent ones), percent-encoded.
pub(crate) fn with_query<'a>(path: String, params: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) -> String {
    let mut query = form_urlencoded::Serializer::new(String::new());
    let mut any = false;
    for (key, value) in params {
        if let Some(value) = value {
            query.append_pair(key, value);
            any = true;
        }
    }
    if any { format!("{path}?{}", query.finish()) } else { path }
}

/// The discovery path of a group's versions: `/api` for the core group, `/apis/{group}` otherwise.
pub(crate) fn group_discovery(group: &str) -> Result<String, KubeError> {
    if group.is_empty() { Ok("/api".to_string()) } else { Ok(format!("/apis/{}", segment("group", group)?)) }
}

/// The resource list of a group version (`v1` or `group/version`): `/api/v1`, `/apis/batch/v1`.
pub(crate) fn group_version_discovery(api_version: &str) -> Result<String, KubeError> {
    match api_version.split_once('/') {
        None => Ok(format!("/api/{}", segment("version", api_version)?)),
        Some((group, version)) => Ok(format!("/apis/{}/{}", segment("group", group)?, segment("version", version)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(group: &str, version: &str, plural: &str) -> ResourceType {
        ResourceType { group: group.into(), version: version.into(), plural: plural.into() }
    }

    #[test]
    fn paths_follow_the_api_conventions() {
        assert_eq!(collection(&rt("", "v1", "pods"), Some("a")).expect("ok"), "/api/v1/namespaces/a/pods");
        assert_eq!(collection(&rt("", "v1", "namespaces"), None).expect("ok"), "/api/v1/namespaces");
        assert_eq!(
            object(&rt("agents.x-k8s.io", "v1beta1", "sandboxes"), Some("a"), "sb-1", Some("status")).expect("ok"),
            "/apis/agents.x-k8s.io/v1beta1/namespaces/a/sandboxes/sb-1/status"
        );
        assert_eq!(group_discovery("").expect("ok"), "/api");
        assert_eq!(group_discovery("batch").expect("ok"), "/apis/batch");
    }

    #[test]
    fn resource_lists_of_group_versions() {
        assert_eq!(group_version_discovery("v1").expect("core"), "/api/v1");
        assert_eq!(group_version_discovery("batch/v1").expect("batch"), "/apis/batch/v1");
        assert!(group_version_discovery("../x/v1").is_err());
    }

    #[test]
    fn hostile_segments_never_reach_a_url() {
        for bad in ["", ".", "..", "../secrets", "a/b", "a?b", "a b", "a%2Fb", "a#b"] {
            assert!(matches!(object(&rt("", "v1", "pods"), Some("a"), bad, None), Err(KubeError::Invalid(_))), "{bad}");
            assert!(collection(&rt("", "v1", "pods"), Some(bad)).is_err(), "{bad}");
        }
        assert!(collection(&rt("x/y", "v1", "pods"), None).is_err());
        assert!(object(&rt("", "v1", "pods"), Some("a"), "p", Some("../exec")).is_err());
    }

    #[test]
    fn queries_are_encoded_and_skip_absent_values() {
        let url = with_query("/p".into(), [("labelSelector", Some("a=b,c in (d)")), ("limit", None)]);
        assert_eq!(url, "/p?labelSelector=a%3Db%2Cc+in+%28d%29");
        assert_eq!(with_query("/p".into(), [("limit", None)]), "/p");
    }
}
