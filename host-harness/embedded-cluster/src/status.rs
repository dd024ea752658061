//! API errors as `metav1.Status` objects, with the codes, reasons and details of kube-apiserver.
//!
//! Clients (kube-rs, kubectl, client-go) decide what to do from `reason` and `code`, so every
//! error the server returns goes through [`ApiError`] and is rendered exactly like the real thing.

use serde_json::{Value, json};

use crate::field_error::{FieldError, quoted};
use crate::request_info::RequestInfo;

/// An error the API server answers with; renders to a `Status` body.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds a client should wait before retrying (sets `Retry-After` and `details.retryAfterSeconds`).
    pub retry_after: Option<u64>,
}

/// Identifies an object in messages and `details`: the group-qualified resource and the name.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub group: &'a str,
    /// The plural resource name, as in messages like `pods "x" not found`.
    pub resource: &'a str,
    pub kind: &'a str,
    pub name: &'a str,
}

impl Subject<'_> {
    fn qualified(&self) -> String {
        if self.group.is_empty() { self.resource.to_string() } else { format!("{}.{}", self.resource, self.group) }
    }

    fn details(&self) -> Value {
        details(self.name, self.group, self.resource)
    }
}

/// `StatusDetails` as apimachinery serializes it: `name`, `group` and `kind` are `omitempty`, so a
/// core kind's details carry no `group` at all.
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut details = serde_json::Map::new();
    for (key, value) in [("name", name), ("group", group), ("kind", kind)] {
        if !value.is_empty() {
            details.insert(key.into(), json!(value));
        }
    }
    Value::Object(details)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self { code, reason: reason.to_string(), message: message.into(), details: None, retry_after: None }
    }

    /// 404 for a named object.
    pub fn not_found(s: Subject<'_>) -> Self {
        Self {
            details: Some(s.details()),
            ..Self::new(404, "NotFound", format!("{} \"{}\" not found", s.qualified(), s.name))
        }
    }

    /// 404 for a path the server does not serve.
    pub fn not_found_path() -> Self {
        Self::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// 409 when a create names an object that exists.
    pub fn already_exists(s: Subject<'_>) -> Self {
        Self {
            details: Some(s.details()),
            ..Self::new(409, "AlreadyExists", format!("{} \"{}\" already exists", s.qualified(), s.name))
        }
    }

    /// 409 for a stale resourceVersion or a failed precondition.
    pub fn conflict(s: Subject<'_>, why: &str) -> Self {
        Self {
            details: Some(s.details()),
            ..Self::new(
                409,
                "Conflict",
                format!("Operation cannot be fulfilled on {} \"{}\": {why}", s.qualified(), s.name),
            )
        }
    }

    /// The message of a conflict caused by a stale resourceVersion.
    /// 409 for a delete whose uid precondition names another object: the registry's early
    /// check (`rest.BeforeDelete`), which qualifies the Kind, not the plural, as upstream does.
    pub fn uid_precondition_failed(s: Subject<'_>, want: &str, have: &str) -> Self {
        let why = format!(
            "the UID in the precondition ({want}) does not match the UID in record ({have}). The object might have been deleted and then recreated"
        );
        Self::conflict(Subject { resource: s.kind, ..s }, &why)
    }

    /// 409 for a delete whose resourceVersion precondition is stale (`rest.BeforeDelete`).
    pub fn resource_version_precondition_failed(s: Subject<'_>, want: &str, have: &str) -> Self {
        let why = format!(
            "the ResourceVersion in the precondition ({want}) does not match the ResourceVersion in record ({have}). The object might have been modified"
        );
        Self::conflict(Subject { resource: s.kind, ..s }, &why)
    }

    /// The message of a conflict caused by a stale resourceVersion.
    pub const STALE: &'static str =
        "the object has been modified; please apply your changes to the latest version and try again";

    /// 422 with one cause per invalid field.
    pub fn invalid(s: Subject<'_>, errors: &[FieldError]) -> Self {
        let summary: Vec<String> = errors.iter().map(ToString::to_string).collect();
        let summary = match summary.len() {
            1 => summary[0].clone(),
            _ => format!("[{}]", summary.join(", ")),
        };
        let causes: Vec<Value> =
            errors.iter().map(|e| json!({"reason": e.reason(), "message": e.message(), "field": e.field})).collect();
        let kind_group = if s.group.is_empty() { s.kind.to_string() } else { format!("{}.{}", s.kind, s.group) };
        let mut details = details(s.name, s.group, s.kind);
        details["causes"] = json!(causes);
        Self {
            details: Some(details),
            ..Self::new(422, "Invalid", format!("{kind_group} \"{}\" is invalid: {summary}", s.name))
        }
    }

    /// 400 for malformed requests and bodies.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 405 for a verb the resource does not support.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 410 for a resourceVersion older than the watch history keeps.
    pub fn gone(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 401 for a missing or unknown bearer token.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 for an authenticated user that may not do this.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message)
    }

    /// 403 for a request an authorizer refused, worded and detailed as kube-apiserver's
    /// `responsewriters.Forbidden` does, since clients show and match that text:
    /// `pods "x" is forbidden: User "u" cannot get resource "pods" in API group "" in the
    /// namespace "ns"`, `... at the cluster scope`, or `forbidden: User "u" cannot get path "/p"`,
    /// with the authorizer's `reason` appended when it gives one.
    pub fn forbidden_request(info: &RequestInfo, user: &str, reason: &str) -> Self {
        let mut why = if info.is_resource_request {
            let scope = if info.namespace.is_empty() {
                "at the cluster scope".to_string()
            } else {
                format!("in the namespace {}", quoted(&info.namespace))
            };
            format!(
                "User {} cannot {} resource {} in API group {} {scope}",
                quoted(user),
                info.verb,
                quoted(&info.resource_and_subresource()),
                quoted(&info.api_group)
            )
        } else {
            format!("User {} cannot {} path {}", quoted(user), info.verb, quoted(&info.path))
        };
        if !reason.is_empty() {
            why = format!("{why}: {reason}");
        }
        let resource = if info.is_resource_request { info.resource.as_str() } else { "" };
        let group = if info.is_resource_request { info.api_group.as_str() } else { "" };
        Self::forbidden_object(group, resource, &info.name, &why)
    }

    /// 403 about an object (or a resource, without a name, or nothing, without either), as
    /// apimachinery's `NewForbidden` words and details it: `roles.rbac.authorization.k8s.io "r"
    /// is forbidden: <why>`.
    pub fn forbidden_object(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = if group.is_empty() { resource.to_string() } else { format!("{resource}.{group}") };
        let message = match (qualified.is_empty(), name.is_empty()) {
            (true, _) => format!("forbidden: {why}"),
            (false, true) => format!("{qualified} is forbidden: {why}"),
            (false, false) => format!("{qualified} {} is forbidden: {why}", quoted(name)),
        };
        Self { details: Some(details(name, group, resource)), ..Self::new(403, "Forbidden", message) }
    }

    /// 415 for a patch type the resource does not accept.
    pub fn unsupported_media_type(message: impl Into<String>) -> Self {
        Self::new(415, "UnsupportedMediaType", message)
    }

    /// 406 for an Accept header the server cannot satisfy.
    pub fn not_acceptable(message: impl Into<String>) -> Self {
        Self::new(406, "NotAcceptable", message)
    }

    /// 500 for a server bug; never expected.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", format!("Internal error occurred: {}", message.into()))
    }

    /// An error upstream raises as a plain Go error, not a Status (`ErrorToAPIStatus`): 500 with
    /// no reason, its text as the message.
    pub fn plain(message: impl Into<String>) -> Self {
        Self::custom(500, "", message)
    }

    /// Any code with any reason, for fault injection.
    pub fn custom(code: u16, reason: impl Into<String>, message: impl Into<String>) -> Self {
        Self { code, reason: reason.into(), message: message.into(), details: None, retry_after: None }
    }

    /// The Status object sent on the wire.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let (true, Some(fields)) = (self.reason.is_empty(), status.as_object_mut()) {
            // `reason` is omitempty in metav1.Status.
            fields.remove("reason");
        }
        let mut details = self.details.clone();
        if let Some(secs) = self.retry_after {
            let d = details.get_or_insert_with(|| json!({}));
            d["retryAfterSeconds"] = json!(secs);
        }
        if let Some(d) = details {
            status["details"] = d;
        }
        status
    }
}

pub use contract::k8s::aggregate;

/// The Status a successful immediate DELETE answers with.
pub fn delete_success(group: &str, resource: &str, name: &str, uid: &str) -> Value {
    let mut details = details(name, group, resource);
    if !uid.is_empty() {
        details["uid"] = json!(uid);
    }
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_reads_like_the_real_server() {
        let s = Subject { group: "agents.x-k8s.io", resource: "sandboxes", kind: "Sandbox", name: "a" };
        let st = ApiError::not_found(s).to_status();
        assert_eq!(st["code"], 404);
        assert_eq!(st["reason"], "NotFound");
        assert_eq!(st["message"], "sandboxes.agents.x-k8s.io \"a\" not found");
        assert_eq!(st["details"]["kind"], "sandboxes");
        assert_eq!(st["details"]["group"], "agents.x-k8s.io");
    }

    #[test]
    fn core_kinds_leave_group_out_of_details() {
        let pod = Subject { group: "", resource: "pods", kind: "Pod", name: "p" };
        for st in [
            ApiError::not_found(pod).to_status(),
            ApiError::already_exists(pod).to_status(),
            ApiError::conflict(pod, ApiError::STALE).to_status(),
            ApiError::invalid(pod, &[FieldError::required("spec.containers", "")]).to_status(),
        ] {
            let details = st["details"].as_object().cloned().unwrap_or_default();
            assert!(!details.contains_key("group"), "{st}");
            assert_eq!(details.get("name"), Some(&json!("p")), "{st}");
        }
        assert_eq!(delete_success("", "pods", "p", "u")["details"], json!({"name": "p", "kind": "pods", "uid": "u"}));
    }

    #[test]
    fn a_uid_precondition_conflict_names_the_kind_and_both_uids() {
        let s = Subject { group: "agents.x-k8s.io", resource: "sandboxes", kind: "Sandbox", name: "a" };
        let st = ApiError::uid_precondition_failed(s, "A", "B").to_status();
        assert_eq!(st["code"], 409);
        assert_eq!(st["reason"], "Conflict");
        assert_eq!(
            st["message"],
            "Operation cannot be fulfilled on Sandbox.agents.x-k8s.io \"a\": the UID in the precondition (A) does not match the UID in record (B). The object might have been deleted and then recreated"
        );
        assert_eq!(st["details"], json!({"name": "a", "group": "agents.x-k8s.io", "kind": "Sandbox"}));
    }

    fn request(method: http::Method, path_and_query: &str) -> RequestInfo {
        let (path, query) = path_and_query.split_once('?').unwrap_or((path_and_query, ""));
        RequestInfo::new(&method, path, &crate::request::Query::parse(Some(query)))
    }

    #[test]
    fn forbidden_requests_read_like_kube_apiserver() {
        let user = "system:serviceaccount:ns:sa";
        let st = ApiError::forbidden_request(&request(http::Method::GET, "/api/v1/namespaces/ns/pods/x"), user, "")
            .to_status();
        assert_eq!(st["code"], 403);
        assert_eq!(st["reason"], "Forbidden");
        assert_eq!(
            st["message"],
            "pods \"x\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot get resource \"pods\" in API group \"\" in the namespace \"ns\""
        );
        assert_eq!(st["details"], json!({"name": "x", "kind": "pods"}));

        let list = ApiError::forbidden_request(&request(http::Method::GET, "/apis/batch/v1/jobs"), user, "RBAC: why");
        assert_eq!(
            list.message,
            "jobs.batch is forbidden: User \"system:serviceaccount:ns:sa\" cannot list resource \"jobs\" in API group \"batch\" at the cluster scope: RBAC: why"
        );
        assert_eq!(list.details, Some(json!({"group": "batch", "kind": "jobs"})));

        let status =
            ApiError::forbidden_request(&request(http::Method::PATCH, "/api/v1/namespaces/ns/pods/x/status"), user, "");
        assert!(status.message.starts_with(
            "pods \"x\" is forbidden: User \"system:serviceaccount:ns:sa\" cannot patch resource \"pods/status\""
        ));

        let path = ApiError::forbidden_request(&request(http::Method::POST, "/embedded-cluster/faults"), user, "");
        assert_eq!(
            path.message,
            "forbidden: User \"system:serviceaccount:ns:sa\" cannot post path \"/embedded-cluster/faults\""
        );
        assert_eq!(path.to_status()["details"], json!({}));
    }

    #[test]
    fn invalid_lists_every_cause() {
        let s = Subject { group: "", resource: "pods", kind: "Pod", name: "p" };
        let errs = [FieldError::required("spec.containers", ""), FieldError::invalid("metadata.name", "\"P\"", "bad")];
        let st = ApiError::invalid(s, &errs).to_status();
        assert_eq!(st["code"], 422);
        assert_eq!(st["details"]["causes"].as_array().map(Vec::len), Some(2));
        assert_eq!(st["details"]["causes"][0]["reason"], "FieldValueRequired");
        assert!(st["message"].as_str().unwrap_or_default().starts_with("Pod \"p\" is invalid: ["));
    }
}
