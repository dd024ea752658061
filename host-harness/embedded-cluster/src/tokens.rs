//! ServiceAccount tokens: issued by the `token` subresource of serviceaccounts (a TokenRequest,
//! `authentication.k8s.io/v1`, which `kubectl create token` sends as protobuf) and accepted as bearer
//! tokens while valid, as kube-apiserver's `TokenREST`
//! (`pkg/registry/core/serviceaccount/storage/token.go`) and its service-account token
//! validator (`pkg/serviceaccount/claims.go`) do:
//! - `spec.expirationSeconds` defaults to 3600 and must be at least 600 and at most 2^32;
//! - `spec.audiences` default to the API server's ([`API_AUDIENCE`]); a token authenticates here
//!   only if one of its audiences is that one;
//! - `spec.boundObjectRef` may bind the token to a Pod (running as that ServiceAccount), a
//!   Secret or a Node as well;
//! - a token stays bound to the uid of its ServiceAccount (and bound object): once that object is
//!   gone, recreated with another uid, or marked for deletion for longer than the one-minute
//!   leeway, the token is refused (401); so it is one minute after it expires by the cluster
//!   clock, the leeway JWT validation grants.
//!
//! It authenticates as `system:serviceaccount:NS:NAME` in the groups `system:serviceaccounts`,
//! `system:serviceaccounts:NS` and `system:authenticated`, and is authorized by RBAC.
//! Tokens are opaque random strings the server remembers, not signed JWTs: this server is their
//! only reader.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest};
use serde_json::{Value, json};

use crate::apiserver::{ApiServer, Ctx, Reply};
use crate::authorization::{Access, Identity};
use crate::clock::{format_time, parse_time};
use crate::field_error::{FieldError, quoted};
use crate::rbac::authorizer::service_account_user;
use crate::rbac::bootstrap::AUTHENTICATED_GROUP;
use crate::status::{ApiError, Subject};
use crate::store::Store;

/// The audience of tokens for this API server (kube-apiserver's default `--api-audiences`).
pub const API_AUDIENCE: &str = "https://kubernetes.default.svc.cluster.local";
/// The group of every ServiceAccount.
pub const SERVICE_ACCOUNTS_GROUP: &str = "system:serviceaccounts";

const GROUP: &str = "authentication.k8s.io";
const DEFAULT_EXPIRATION_SECONDS: i64 = 3600;
const MIN_EXPIRATION_SECONDS: i64 = 600;
const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// How long after expiry (or a bound object's deletion) a token is still accepted.
const LEEWAY: SignedDuration = SignedDuration::from_secs(60);

/// An object a token is bound to, by uid.
#[derive(Debug, Clone)]
struct BoundObject {
    storage: &'static str,
    namespace: String,
    name: String,
    uid: String,
}

/// What the server remembers of an issued token.
#[derive(Debug, Clone)]
struct Issued {
    namespace: String,
    service_account: String,
    expires: Timestamp,
    audiences: Vec<String>,
    bound_to: Vec<BoundObject>,
}

/// The tokens the server issued, by token text.
#[derive(Debug, Default)]
pub struct ServiceAccountTokens {
    issued: Mutex<HashMap<String, Issued>>,
}

impl ServiceAccountTokens {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Issued>> {
        self.issued.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The identity of a token this server issued, if the token is still valid at `now`.
    pub fn authenticate(&self, store: &Store, now: Timestamp, token: &str) -> Option<Identity> {
        let issued = self.lock().get(token).cloned()?;
        let expired = !issued.expires.checked_add(LEEWAY).is_ok_and(|limit| now <= limit);
        if expired || issued.bound_to.iter().any(|b| !still_bound(store, now, b)) {
            self.lock().remove(token);
            return None;
        }
        if !issued.audiences.iter().any(|a| a == API_AUDIENCE) {
            return None;
        }
        let ns = issued.namespace;
        Some(Identity {
            user: service_account_user(&ns, &issued.service_account),
            groups: vec![
                SERVICE_ACCOUNTS_GROUP.to_string(),
                format!("{SERVICE_ACCOUNTS_GROUP}:{ns}"),
                AUTHENTICATED_GROUP.to_string(),
            ],
            access: Access::Rbac,
        })
    }

    fn insert(&self, now: Timestamp, token: String, issued: Issued) {
        let mut tokens = self.lock();
        tokens.retain(|_, t| t.expires.checked_add(LEEWAY).is_ok_and(|limit| now <= limit));
        tokens.insert(token, issued);
    }
}

/// Whether the bound object still exists with its uid, and is not long marked for deletion.
/// Within the leeway a deleted object pending finalizers still counts, as upstream.
fn still_bound(store: &Store, now: Timestamp, b: &BoundObject) -> bool {
    let Some(obj) = store.get(b.storage, &b.namespace, &b.name) else {
        return false;
    };
    let deleted_before_leeway = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(parse_time)
        .and_then(|t| t.checked_add(LEEWAY).ok())
        .is_some_and(|limit| limit < now);
    !deleted_before_leeway && uid_of(&obj) == b.uid
}

fn uid_of(obj: &Value) -> &str {
    obj.pointer("/metadata/uid").and_then(Value::as_str).unwrap_or_default()
}

/// The subject of TokenRequest errors.
fn token_request(name: &str) -> Subject<'_> {
    Subject { group: GROUP, resource: "tokenrequests", kind: "TokenRequest", name }
}

/// `ValidateTokenRequest`'s bounds; its errors name no object, as upstream's do.
fn validate_expiration(seconds: i64) -> Result<(), ApiError> {
    let detail = if seconds < MIN_EXPIRATION_SECONDS {
        "may not specify a duration less than 10 minutes"
    } else if seconds > MAX_EXPIRATION_SECONDS {
        "may not specify a duration larger than 2^32 seconds"
    } else {
        return Ok(());
    };
    let error = FieldError::invalid("spec.expirationSeconds", seconds.to_string(), detail);
    Err(ApiError::invalid(token_request(""), &[error]))
}

impl ApiServer {
    /// POST `serviceaccounts/{name}/token` (a protobuf body, as kubectl sends it, arrives here
    /// as JSON): validates
    /// the TokenRequest, issues a token and answers with the request, its defaults, and
    /// `status.token` and `expirationTimestamp`.
    pub fn create_token(&self, ctx: &Ctx<'_>, body: &[u8]) -> Result<Reply, ApiError> {
        let name = ctx.name.ok_or_else(|| ApiError::method_not_allowed("a resource name is required"))?;
        let namespace = ctx.namespace.unwrap_or_default();
        let (obj, warnings) = Self::decode_body_as("TokenRequest", GROUP, "v1", body, ctx.query)?;
        let request: TokenRequest = serde_json::from_value(obj.clone())
            .map_err(|e| ApiError::bad_request(format!("TokenRequest cannot be decoded: {e}")))?;
        let meta = &request.metadata;
        if let Some(given) = meta.name.as_deref().filter(|n| !n.is_empty() && *n != name) {
            let detail = "must match the service account name if specified";
            return Err(ApiError::invalid(
                token_request(name),
                &[FieldError::invalid("metadata.name", quoted(given), detail)],
            ));
        }
        if let Some(given) = meta.namespace.as_deref().filter(|n| !n.is_empty() && *n != namespace) {
            let detail = "must match the service account namespace if specified";
            let error = FieldError::invalid("metadata.namespace", quoted(given), detail);
            return Err(ApiError::invalid(token_request(name), &[error]));
        }
        let account =
            self.store.get(ctx.rt.storage, namespace, name).ok_or_else(|| ApiError::not_found(ctx.subject(name)))?;

        let spec = &request.spec;
        let audiences = if spec.audiences.is_empty() { vec![API_AUDIENCE.to_string()] } else { spec.audiences.clone() };
        let seconds = spec.expiration_seconds.unwrap_or(DEFAULT_EXPIRATION_SECONDS);
        validate_expiration(seconds)?;
        let mut bound_to = vec![BoundObject {
            storage: ctx.rt.storage,
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid_of(&account).to_string(),
        }];
        if let Some(reference) = &spec.bound_object_ref {
            bound_to.push(self.bound_object(reference, namespace, name)?);
        }

        let now = self.clock.now();
        let expires = now.checked_add(SignedDuration::from_secs(seconds)).unwrap_or(Timestamp::MAX);
        let token = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
        let issued = Issued {
            namespace: namespace.to_string(),
            service_account: name.to_string(),
            expires,
            audiences: audiences.clone(),
            bound_to,
        };
        self.sa_tokens.insert(now, token.clone(), issued);

        let mut metadata = obj.get("metadata").filter(|m| m.is_object()).cloned().unwrap_or_else(|| json!({}));
        metadata["name"] = json!(name);
        metadata["namespace"] = json!(namespace);
        metadata["creationTimestamp"] = json!(format_time(now));
        let mut spec_out = json!({"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": null});
        if let Some(reference) = &spec.bound_object_ref {
            spec_out["boundObjectRef"] = serde_json::to_value(reference).unwrap_or(Value::Null);
        }
        let body = json!({
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": metadata,
            "spec": spec_out,
            "status": {"token": token, "expirationTimestamp": format_time(expires)},
        });
        Ok(Reply { code: 201, body, warnings })
    }

    /// Resolves `spec.boundObjectRef` to the object the token is also bound to.
    fn bound_object(
        &self,
        reference: &BoundObjectReference,
        namespace: &str,
        account: &str,
    ) -> Result<BoundObject, ApiError> {
        let api_version = reference.api_version.as_deref().unwrap_or_default();
        let kind = reference.kind.as_deref().unwrap_or_default();
        let ref_name = reference.name.as_deref().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let (plural, scope) = match (group, kind) {
            ("", "Pod") => ("pods", namespace),
            ("", "Secret") => ("secrets", namespace),
            ("", "Node") => ("nodes", ""),
            _ => {
                return Err(ApiError::bad_request(format!(
                    "cannot bind token to object of type {group}/{version}, Kind={kind}"
                )));
            }
        };
        let rt = self.type_of("", plural).ok_or_else(ApiError::not_found_path)?;
        let subject = Subject { group: "", resource: rt.plural, kind: rt.kind, name: ref_name };
        let obj = self.store.get(rt.storage, scope, ref_name).ok_or_else(|| ApiError::not_found(subject))?;
        if kind == "Pod" && obj.pointer("/spec/serviceAccountName").and_then(Value::as_str) != Some(account) {
            return Err(ApiError::bad_request(format!(
                "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
            )));
        }
        let uid = uid_of(&obj).to_string();
        if let Some(wanted) = reference.uid.as_deref().filter(|u| !u.is_empty() && *u != uid) {
            let what = Subject { group: "", resource: kind, kind, name: ref_name };
            return Err(ApiError::conflict(
                what,
                &format!(
                    "the UID in the bound object reference ({wanted}) does not match the UID in record. The object might have been deleted and then recreated"
                ),
            ));
        }
        Ok(BoundObject { storage: rt.storage, namespace: scope.to_string(), name: ref_name.to_string(), uid })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expirations_are_bounded_like_upstream() {
        assert!(validate_expiration(600).is_ok() && validate_expiration(1 << 32).is_ok());
        let message = |s| validate_expiration(s).err().map(|e| e.message).unwrap_or_default();
        assert_eq!(
            message(599),
            "TokenRequest.authentication.k8s.io \"\" is invalid: spec.expirationSeconds: Invalid value: 599: may not specify a duration less than 10 minutes"
        );
        assert!(message((1 << 32) + 1).ends_with("may not specify a duration larger than 2^32 seconds"));
    }

    fn store_with_account(deleted: Option<&str>) -> Store {
        let store = Store::new(16);
        let mut sa = json!({"metadata": {"namespace": "ns", "name": "sa", "uid": "u1", "finalizers": ["x"]}});
        if let Some(at) = deleted {
            sa["metadata"]["deletionTimestamp"] = json!(at);
        }
        assert!(store.write(|txn| Ok(txn.put("serviceaccounts", sa))).is_ok());
        store
    }

    fn issue(tokens: &ServiceAccountTokens, now: Timestamp, audiences: &[&str]) {
        let account =
            BoundObject { storage: "serviceaccounts", namespace: "ns".into(), name: "sa".into(), uid: "u1".into() };
        let issued = Issued {
            namespace: "ns".into(),
            service_account: "sa".into(),
            expires: now.checked_add(SignedDuration::from_hours(1)).unwrap_or(Timestamp::MAX),
            audiences: audiences.iter().map(|a| a.to_string()).collect(),
            bound_to: vec![account],
        };
        tokens.insert(now, "t".into(), issued);
    }

    fn at(s: &str) -> Timestamp {
        parse_time(s).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    #[test]
    fn a_token_names_its_service_account_and_groups() {
        let tokens = ServiceAccountTokens::default();
        let now = at("2026-01-01T00:00:00Z");
        issue(&tokens, now, &[API_AUDIENCE]);
        let id = tokens.authenticate(&store_with_account(None), now, "t");
        assert_eq!(
            id,
            Some(Identity {
                user: "system:serviceaccount:ns:sa".into(),
                groups: vec![
                    "system:serviceaccounts".into(),
                    "system:serviceaccounts:ns".into(),
                    "system:authenticated".into()
                ],
                access: Access::Rbac,
            })
        );
        assert_eq!(tokens.authenticate(&store_with_account(None), now, "other"), None);
    }

    #[test]
    fn a_service_account_marked_for_deletion_keeps_its_tokens_for_the_leeway() {
        let tokens = ServiceAccountTokens::default();
        let now = at("2026-01-01T00:10:00Z");
        issue(&tokens, now, &[API_AUDIENCE]);
        assert!(tokens.authenticate(&store_with_account(Some("2026-01-01T00:09:00Z")), now, "t").is_some());
        assert!(tokens.authenticate(&store_with_account(Some("2026-01-01T00:08:59Z")), now, "t").is_none());
    }

    #[test]
    fn a_token_for_another_audience_is_not_for_this_server() {
        let tokens = ServiceAccountTokens::default();
        let now = at("2026-01-01T00:00:00Z");
        issue(&tokens, now, &["vault"]);
        assert_eq!(tokens.authenticate(&store_with_account(None), now, "t"), None);
    }
}
