//! `SelfSubjectAccessReview` (`authorization.k8s.io/v1`): whether the requesting user may do
//! what the review's spec describes, as kube-apiserver's
//! `pkg/registry/authorization/selfsubjectaccessreview/rest.go` answers it. The spec's
//! `resourceAttributes` (or `nonResourceAttributes`) go through the same authorizer as a
//! request would (`authorization::authorize`) for the identity that sent the review;
//! the review comes back, `201 Created`, with `status.allowed` and the reason, and nothing is
//! stored. Every authenticated user may create one (`system:basic-user`, in the bootstrap
//! policy). `kubectl auth can-i` sends its review as protobuf, which `protobuf`
//! decodes.

use serde_json::{Value, json};

use crate::apiserver::{ApiServer, Ctx, Reply};
use crate::authorization::{self, Access, Identity};
use crate::field_error::FieldError;
use crate::request_info::RequestInfo;
use crate::status::{ApiError, Subject};

/// The API group of access reviews.
pub const GROUP: &str = "authorization.k8s.io";
/// The resource of self access reviews.
pub const SELF_SUBJECT_ACCESS_REVIEWS: &str = "selfsubjectaccessreviews";
/// Their kind.
pub const KIND: &str = "SelfSubjectAccessReview";

fn review_subject() -> Subject<'static> {
    Subject { group: GROUP, resource: SELF_SUBJECT_ACCESS_REVIEWS, kind: KIND, name: "" }
}

/// The request a review's spec describes; the validation errors of the spec when it describes
/// none, or two.
fn described(spec: &Value) -> Result<RequestInfo, Vec<FieldError>> {
    let text = |attributes: &Value, key: &str| attributes[key].as_str().unwrap_or_default().to_string();
    match (
        spec.get("resourceAttributes").filter(|v| !v.is_null()),
        spec.get("nonResourceAttributes").filter(|v| !v.is_null()),
    ) {
        (Some(_), Some(other)) => Err(vec![FieldError::invalid(
            "spec.nonResourceAttributes",
            other.to_string(),
            "cannot be specified in combination with resourceAttributes",
        )]),
        (None, None) => Err(vec![FieldError::invalid(
            "spec.resourceAttributes",
            "null",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )]),
        (Some(r), None) => Ok(RequestInfo {
            path: String::new(),
            verb: text(r, "verb"),
            is_resource_request: true,
            api_group: text(r, "group"),
            api_version: text(r, "version"),
            namespace: text(r, "namespace"),
            resource: text(r, "resource"),
            subresource: text(r, "subresource"),
            name: text(r, "name"),
        }),
        (None, Some(n)) => Ok(RequestInfo {
            path: text(n, "path"),
            verb: text(n, "verb"),
            is_resource_request: false,
            ..RequestInfo::default()
        }),
    }
}

impl ApiServer {
    /// POST `selfsubjectaccessreviews`: the review, answered for `identity`.
    pub fn access_review(&self, ctx: &Ctx<'_>, body: &[u8], identity: &Identity) -> Result<Reply, ApiError> {
        let (review, warnings) = Self::decode_body_as(KIND, GROUP, "v1", body, ctx.query)?;
        let spec = review.get("spec").cloned().unwrap_or(Value::Null);
        let metadata = review.get("metadata").filter(|m| m.as_object().is_some_and(|m| !m.is_empty()));
        let mut errors = Vec::new();
        if let Some(metadata) = metadata {
            errors.push(FieldError::invalid("metadata", metadata.to_string(), "must be empty"));
        }
        let info = match described(&spec) {
            Ok(info) => Some(info),
            Err(mut found) => {
                errors.append(&mut found);
                None
            }
        };
        let Some(info) = info.filter(|_| errors.is_empty()) else {
            return Err(ApiError::invalid(review_subject(), &errors));
        };
        let status = match authorization::authorize(&self.store, identity, &info) {
            Ok(()) if identity.access == Access::Rbac => json!({"allowed": true, "reason": "RBAC: allowed"}),
            Ok(()) => json!({"allowed": true, "reason": "a built-in identity of the embedded cluster"}),
            // RBAC has no opinion on what it does not grant, and says nothing more (kubectl prints
            // a bare "no").
            Err(_) => json!({"allowed": false}),
        };
        let body = json!({
            "kind": KIND,
            "apiVersion": format!("{GROUP}/v1"),
            "metadata": {"creationTimestamp": null},
            "spec": spec,
            "status": status,
        });
        Ok(Reply { code: 201, body, warnings })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_describes_one_request() {
        let info = described(&json!({"resourceAttributes": {"verb": "create", "group": "batch", "resource": "jobs",
            "namespace": "agents"}}))
        .expect("a resource request");
        assert_eq!((info.verb.as_str(), info.api_group.as_str(), info.resource.as_str()), ("create", "batch", "jobs"));
        assert!(info.is_resource_request && info.namespace == "agents");
        let path = described(&json!({"nonResourceAttributes": {"path": "/healthz", "verb": "get"}})).expect("a path");
        assert!(!path.is_resource_request && path.path == "/healthz");
        let none = described(&json!({})).expect_err("neither");
        assert!(
            none[0].to_string().contains("exactly one of nonResourceAttributes or resourceAttributes"),
            "{}",
            none[0]
        );
        let both = described(&json!({"resourceAttributes": {}, "nonResourceAttributes": {}})).expect_err("both");
        assert!(both[0].to_string().contains("cannot be specified in combination"), "{}", both[0]);
    }
}
