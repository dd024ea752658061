//! Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for the request bodies
//! clients send only that way: kubectl's typed clients (`kubectl create token`) post a
//! TokenRequest as protobuf.
//!
//! The wire format is apimachinery's (`runtime/serializer/protobuf`): the magic bytes `k8s\0`,
//! then a `runtime.Unknown` message whose `typeMeta` names the kind and whose `raw` holds the
//! object's message. The messages below declare only the fields the server reads (protobuf
//! skips the rest), with the numbers of `k8s.io/api/authentication/v1/generated.proto`; the
//! object is turned into the JSON every handler takes.

use prost::Message;
use serde_json::{Map, Value, json};

use crate::status::ApiError;

/// The media type of Kubernetes' protobuf encoding.
pub const MEDIA_TYPE: &str = "application/vnd.kubernetes.protobuf";
const MAGIC: &[u8] = b"k8s\0";

/// Whether a `Content-Type` is Kubernetes' protobuf encoding.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|media| media.trim().eq_ignore_ascii_case(MEDIA_TYPE))
}

/// `runtime.Unknown`: the envelope of every protobuf body.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", optional, tag = "2")]
    raw: Option<Vec<u8>>,
    #[prost(string, optional, tag = "3")]
    content_encoding: Option<String>,
}

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, optional, tag = "1")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "2")]
    kind: Option<String>,
}

/// `authentication/v1.TokenRequest` (its status is the server's to fill).
#[derive(Clone, PartialEq, Message)]
struct TokenRequest {
    #[prost(message, optional, tag = "1")]
    metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    spec: Option<TokenRequestSpec>,
}

/// The part of `meta/v1.ObjectMeta` a TokenRequest's handler reads.
#[derive(Clone, PartialEq, Message)]
struct ObjectMeta {
    #[prost(string, optional, tag = "1")]
    name: Option<String>,
    #[prost(string, optional, tag = "3")]
    namespace: Option<String>,
}

/// `authentication/v1.TokenRequestSpec`.
#[derive(Clone, PartialEq, Message)]
struct TokenRequestSpec {
    #[prost(string, repeated, tag = "1")]
    audiences: Vec<String>,
    #[prost(message, optional, tag = "3")]
    bound_object_ref: Option<BoundObjectReference>,
    #[prost(int64, optional, tag = "4")]
    expiration_seconds: Option<i64>,
}

/// `authentication/v1.BoundObjectReference`.
#[derive(Clone, PartialEq, Message)]
struct BoundObjectReference {
    #[prost(string, optional, tag = "1")]
    kind: Option<String>,
    #[prost(string, optional, tag = "2")]
    api_version: Option<String>,
    #[prost(string, optional, tag = "3")]
    name: Option<String>,
    #[prost(string, optional, tag = "4")]
    uid: Option<String>,
}

fn bad(why: impl std::fmt::Display) -> ApiError {
    ApiError::bad_request(format!("the body of the request could not be decoded as {MEDIA_TYPE}: {why}"))
}

/// Inserts the string fields that are set.
fn strings(pairs: &[(&str, &Option<String>)]) -> Value {
    let map: Map<String, Value> =
        pairs.iter().filter_map(|(k, v)| v.as_ref().map(|v| (k.to_string(), json!(v)))).collect();
    Value::Object(map)
}

/// A protobuf TokenRequest body as the JSON body the handler takes (its `apiVersion` and
/// `kind` are the envelope's, so the handler checks them as it checks JSON bodies).
pub fn token_request_json(body: &[u8]) -> Result<Vec<u8>, ApiError> {
    let envelope = body.strip_prefix(MAGIC).ok_or_else(|| bad("the body does not start with the protobuf magic"))?;
    let unknown = Unknown::decode(envelope).map_err(bad)?;
    if unknown.content_encoding.as_deref().is_some_and(|e| !e.is_empty()) {
        return Err(bad("content encodings are not supported"));
    }
    let request = TokenRequest::decode(unknown.raw.as_deref().unwrap_or_default()).map_err(bad)?;
    let type_meta = unknown.type_meta.unwrap_or_default();
    let mut doc = strings(&[("apiVersion", &type_meta.api_version), ("kind", &type_meta.kind)]);
    let meta = request.metadata.unwrap_or_default();
    doc["metadata"] = strings(&[("name", &meta.name), ("namespace", &meta.namespace)]);
    let spec = request.spec.unwrap_or_default();
    doc["spec"] = json!({"audiences": spec.audiences});
    if let Some(seconds) = spec.expiration_seconds {
        doc["spec"]["expirationSeconds"] = json!(seconds);
    }
    if let Some(r) = spec.bound_object_ref {
        doc["spec"]["boundObjectRef"] =
            strings(&[("kind", &r.kind), ("apiVersion", &r.api_version), ("name", &r.name), ("uid", &r.uid)]);
    }
    serde_json::to_vec(&doc).map_err(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn envelope(raw: Vec<u8>) -> Vec<u8> {
        let unknown = Unknown {
            type_meta: Some(TypeMeta {
                api_version: Some("authentication.k8s.io/v1".into()),
                kind: Some("TokenRequest".into()),
            }),
            raw: Some(raw),
            content_encoding: Some(String::new()),
        };
        [MAGIC, &unknown.encode_to_vec()].concat()
    }

    fn decoded(body: &[u8]) -> Value {
        let json = token_request_json(body).unwrap_or_else(|e| panic!("{e}"));
        serde_json::from_slice(&json).unwrap_or_default()
    }

    #[test]
    fn a_token_request_becomes_its_json() {
        let request = TokenRequest {
            metadata: Some(ObjectMeta { name: Some("sa".into()), namespace: None }),
            spec: Some(TokenRequestSpec {
                audiences: vec!["a".into()],
                bound_object_ref: Some(BoundObjectReference {
                    kind: Some("Pod".into()),
                    api_version: Some("v1".into()),
                    name: Some("p".into()),
                    uid: None,
                }),
                expiration_seconds: Some(600),
            }),
        };
        assert_eq!(
            decoded(&envelope(request.encode_to_vec())),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {"name": "sa"},
                "spec": {"audiences": ["a"], "expirationSeconds": 600,
                    "boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p"}}})
        );
    }

    #[test]
    fn an_empty_request_has_an_empty_spec() {
        assert_eq!(
            decoded(&envelope(Vec::new())),
            json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "metadata": {},
                "spec": {"audiences": []}})
        );
    }

    #[test]
    fn bodies_that_are_not_kubernetes_protobuf_are_bad_requests() {
        assert_eq!(token_request_json(b"{}").err().map(|e| e.code), Some(400));
        assert_eq!(token_request_json(b"k8s\0\xff\xff").err().map(|e| e.code), Some(400));
    }

    #[test]
    fn the_media_type_may_carry_parameters() {
        assert!(is_protobuf("application/vnd.kubernetes.protobuf"));
        assert!(is_protobuf("application/vnd.kubernetes.protobuf; charset=utf-8"));
        assert!(!is_protobuf("application/json"));
    }
}
