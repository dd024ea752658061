//! PATCH bodies: which patch types a resource accepts and how each is applied.

use serde_json::Value;

use crate::resources::{Flavor, ResourceType};
use crate::status::ApiError;
use crate::strategic_merge;

/// The patch types of the Kubernetes API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// RFC 6902 (`application/json-patch+json`).
    Json,
    /// RFC 7386 (`application/merge-patch+json`).
    Merge,
    /// Kubernetes strategic merge patch; built-in kinds only, as on a real server.
    Strategic,
}

impl PatchKind {
    /// Picks the patch type from the request's Content-Type; unsupported types are a 415.
    pub fn from_content_type(content_type: &str, rt: &ResourceType) -> Result<Self, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        let accepted = if rt.flavor == Flavor::Custom {
            "application/json-patch+json, application/merge-patch+json"
        } else {
            "application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json"
        };
        let unsupported = || {
            ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ))
        };
        match media {
            "application/json-patch+json" => Ok(Self::Json),
            "application/merge-patch+json" => Ok(Self::Merge),
            "application/strategic-merge-patch+json" if rt.flavor == Flavor::BuiltIn => Ok(Self::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+cbor" => Err(ApiError::unsupported_media_type(
                "server-side apply is not supported by the embedded cluster: use a merge, JSON or strategic merge patch",
            )),
            _ => Err(unsupported()),
        }
    }
}

/// Applies a patch to the object as served (in the request's version).
pub fn apply(kind: PatchKind, object_kind: &str, doc: &Value, patch: &Value) -> Result<Value, ApiError> {
    match kind {
        PatchKind::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("error decoding JSON patch: {e}")))?;
            let mut out = doc.clone();
            json_patch::patch(&mut out, &ops).map_err(|e| {
                ApiError::custom(
                    422,
                    "Invalid",
                    format!("the server rejected our request due to an error in our request: {e}"),
                )
            })?;
            Ok(out)
        }
        PatchKind::Merge => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("a merge patch must be a JSON object"));
            }
            let mut out = doc.clone();
            json_patch::merge(&mut out, patch);
            Ok(out)
        }
        PatchKind::Strategic => {
            strategic_merge::apply(object_kind, doc, patch).map_err(|e| ApiError::bad_request(e.to_string()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{SandboxVersions, served};
    use serde_json::json;

    fn rt(plural: &str) -> ResourceType {
        served(SandboxVersions::Both).into_iter().find(|t| t.plural == plural).expect("served")
    }

    #[test]
    fn custom_resources_refuse_strategic_merge() {
        let err = PatchKind::from_content_type("application/strategic-merge-patch+json", &rt("sandboxes")).err();
        assert_eq!(err.map(|e| e.code), Some(415));
        assert_eq!(
            PatchKind::from_content_type("application/strategic-merge-patch+json", &rt("pods")).ok(),
            Some(PatchKind::Strategic)
        );
    }

    #[test]
    fn json_patch_test_failure_is_422() {
        let doc = json!({"a": 1});
        let p = json!([{"op": "test", "path": "/a", "value": 2}]);
        assert_eq!(apply(PatchKind::Json, "Pod", &doc, &p).err().map(|e| e.code), Some(422));
    }

    #[test]
    fn merge_patch_null_deletes() {
        let doc = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
        let out = apply(PatchKind::Merge, "Pod", &doc, &json!({"metadata": {"labels": {"a": null}}})).ok();
        assert_eq!(out, Some(json!({"metadata": {"labels": {"b": "2"}}})));
    }
}
