//! How the host sends a provider's requests through `kube::Client`: raw requests with JSON
//! both ways, each with its own deadline (the per-request timeout, cut short so it ends before
//! the call does), answers mapped to the contract's `kube-error`, outcomes logged and bodies
//! never (a Secret's create body holds secret values).

use std::time::{Duration, Instant};

use http::{Method, Request};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::{Value, json};

use crate::bindings::kube::{DeleteOptions, KubeError, Propagation, UnavailableDetail};
use crate::kube_errors;
use crate::kube_host::{KubeHost, Target, qualified};
use crate::policy::{AccessVerb, quoted};

pub(crate) const JSON: &str = "application/json";

/// How long before the call's deadline the host stops sending requests.
pub(crate) const DEADLINE_MARGIN: Duration = Duration::from_millis(250);

impl KubeHost {
    /// How long the next request may take: the per-request timeout, cut short so it ends
    /// [`DEADLINE_MARGIN`] before the call does (the provider then gets a typed timeout while it
    /// can still answer, instead of the host ending the call under it).
    pub(crate) fn budget(&self, what: &str) -> Result<Duration, KubeError> {
        let Some(deadline) = self.call_deadline else {
            return Ok(self.request_timeout);
        };
        let left = deadline.saturating_duration_since(Instant::now()).saturating_sub(DEADLINE_MARGIN);
        if left.is_zero() {
            return Err(KubeError::Timeout(format!(
                "{what}: not sent, the call's deadline is reached (the host ends the call in under {} ms)",
                DEADLINE_MARGIN.as_millis()
            )));
        }
        Ok(left.min(self.request_timeout))
    }

    /// A discovery document (`None` on 404), logged like a request.
    pub(crate) async fn discovery(&self, what: &str, url: String) -> Result<Option<String>, KubeError> {
        let started = Instant::now();
        let result = self.exchange(what, request(Method::GET, url, None, Vec::new())?).await;
        tracing::debug!(target: "provider_host::kube", verb = "discovery", what,
            ok = result.is_ok(), millis = started.elapsed().as_millis() as u64, "kube request");
        match result {
            Ok(text) => Ok(Some(text)),
            Err(KubeError::NotFound(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn client(&self) -> Result<&kube::Client, KubeError> {
        self.client.as_ref().ok_or_else(|| {
            KubeError::Unavailable(UnavailableDetail {
                message: "this host was started without a cluster connection".to_string(),
                retry_after_seconds: None,
            })
        })
    }

    /// Sends a request and returns the success body as text, logging the outcome (never bodies).
    pub(crate) async fn text(&self, target: &Target<'_>, req: Request<Vec<u8>>) -> Result<String, KubeError> {
        let started = Instant::now();
        let result = self.exchange(&target.describe(), req).await;
        self.log(target, started, result.as_ref().err());
        self.forget_discovery_on_missing_collection(target, result.as_ref().err());
        result
    }

    /// A 404 about a whole collection (create, list, watch) means its version may no longer
    /// be served: the next discovery question asks the cluster ([`crate::discovery_cache`]).
    fn forget_discovery_on_missing_collection(&self, target: &Target<'_>, error: Option<&KubeError>) {
        let collection = matches!(target.verb, AccessVerb::Create | AccessVerb::List | AccessVerb::Watch);
        if collection && matches!(error, Some(KubeError::NotFound(_))) {
            self.discovery.forget(&target.rt.group);
        }
    }

    /// Sends a request and returns the body of a success once its headers arrived (watches).
    pub(crate) async fn open(&self, target: &Target<'_>, req: Request<Vec<u8>>) -> Result<Body, KubeError> {
        let started = Instant::now();
        let what = target.describe();
        let client = self.client()?;
        let budget = self.budget(&what)?;
        let opening = async {
            let response = client
                .send(req.map(Body::from))
                .await
                .map_err(|e| kube_errors::from_client_error_at(&e, self.server.as_deref()))?;
            if response.status().is_success() {
                return Ok(response.into_body());
            }
            let code = response.status().as_u16();
            let headers = response.headers().clone();
            let bytes = response.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            Err(kube_errors::from_response(code, &headers, &bytes))
        };
        let result = match tokio::time::timeout(budget, opening).await {
            Err(_) => Err(kube_errors::request_timed_out(&what, budget)),
            Ok(result) => result,
        };
        self.log(target, started, result.as_ref().err());
        self.forget_discovery_on_missing_collection(target, result.as_ref().err());
        result
    }

    pub(crate) async fn exchange(&self, what: &str, req: Request<Vec<u8>>) -> Result<String, KubeError> {
        let client = self.client()?;
        let budget = self.budget(what)?;
        let exchange = async {
            let response = client
                .send(req.map(Body::from))
                .await
                .map_err(|e| kube_errors::from_client_error_at(&e, self.server.as_deref()))?;
            let code = response.status();
            let headers = response.headers().clone();
            let bytes = response
                .into_body()
                .collect()
                .await
                .map_err(|e| kube_errors::from_client_error_at(&e, self.server.as_deref()))?
                .to_bytes();
            if !code.is_success() {
                return Err(kube_errors::from_response(code.as_u16(), &headers, &bytes));
            }
            String::from_utf8(bytes.to_vec())
                .map_err(|e| KubeError::Transport(format!("{what}: the answer is not UTF-8: {e}")))
        };
        match tokio::time::timeout(budget, exchange).await {
            Ok(result) => result,
            Err(_) => Err(kube_errors::request_timed_out(what, budget)),
        }
    }

    fn log(&self, target: &Target<'_>, started: Instant, error: Option<&KubeError>) {
        let millis = started.elapsed().as_millis() as u64;
        let resource = qualified(target.rt);
        let namespace = target.namespace.unwrap_or_default();
        let name = target.name.map(|n| quoted(n).to_string()).unwrap_or_default();
        match error {
            None => tracing::debug!(target: "provider_host::kube", verb = %target.verb, resource, namespace, name,
                millis, "kube request"),
            Some(e) => tracing::debug!(target: "provider_host::kube", verb = %target.verb, resource, namespace, name,
                millis, error = error_kind(e), "kube request failed"),
        }
    }
}

/// An answer of the API server as JSON (an object the host must inspect).
pub(crate) fn parse(target: &Target<'_>, text: &str) -> Result<Value, KubeError> {
    serde_json::from_str(text)
        .map_err(|e| KubeError::Transport(format!("{}: the answer is not JSON: {e}", target.describe())))
}

/// The WIT case name of an error, for log fields (messages may echo object fields).
pub(crate) fn error_kind(e: &KubeError) -> &'static str {
    match e {
        KubeError::NotFound(_) => "not-found",
        KubeError::AlreadyExists(_) => "already-exists",
        KubeError::Conflict(_) => "conflict",
        KubeError::Gone(_) => "gone",
        KubeError::Invalid(_) => "invalid",
        KubeError::Forbidden(_) => "forbidden",
        KubeError::Denied(_) => "denied",
        KubeError::NotOwned(_) => "not-owned",
        KubeError::Unauthorized(_) => "unauthorized",
        KubeError::Timeout(_) => "timeout",
        KubeError::Unavailable(_) => "unavailable",
        KubeError::Transport(_) => "transport",
        KubeError::Other(_) => "other",
    }
}

pub(crate) fn request(
    method: Method,
    url: String,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> Result<Request<Vec<u8>>, KubeError> {
    let mut builder = Request::builder().method(method).uri(url).header(http::header::ACCEPT, JSON);
    if let Some(content_type) = content_type {
        builder = builder.header(http::header::CONTENT_TYPE, content_type);
    }
    builder.body(body).map_err(|e| KubeError::Invalid(format!("cannot build the request: {e}")))
}

pub(crate) fn delete_body(options: &DeleteOptions) -> String {
    let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
    if let Some(p) = options.propagation {
        body["propagationPolicy"] = json!(match p {
            Propagation::Background => "Background",
            Propagation::Foreground => "Foreground",
            Propagation::Orphan => "Orphan",
        });
    }
    if let Some(seconds) = options.grace_period_seconds {
        body["gracePeriodSeconds"] = json!(seconds);
    }
    let mut preconditions = serde_json::Map::new();
    if let Some(uid) = &options.precondition_uid {
        preconditions.insert("uid".into(), json!(uid));
    }
    if let Some(rv) = &options.precondition_resource_version {
        preconditions.insert("resourceVersion".into(), json!(rv));
    }
    if !preconditions.is_empty() {
        body["preconditions"] = Value::Object(preconditions);
    }
    body.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_options_become_a_delete_options_body() {
        let options = DeleteOptions {
            propagation: Some(Propagation::Foreground),
            precondition_uid: Some("u1".into()),
            precondition_resource_version: None,
            grace_period_seconds: Some(0),
        };
        let body: Value = serde_json::from_str(&delete_body(&options)).expect("json");
        assert_eq!(body["propagationPolicy"], "Foreground");
        assert_eq!(body["preconditions"], json!({"uid": "u1"}));
        assert_eq!(body["gracePeriodSeconds"], 0);
        let empty = DeleteOptions {
            propagation: None,
            precondition_uid: None,
            precondition_resource_version: None,
            grace_period_seconds: None,
        };
        let body: Value = serde_json::from_str(&delete_body(&empty)).expect("json");
        assert!(body.get("preconditions").is_none() && body.get("propagationPolicy").is_none());
    }
}
