//! The `kube` import: Kubernetes access for a provider through `kube::Client`, checked against
//! the host [`Policy`] before anything is sent.
//!
//! Requests are raw (`Client::send` with URLs from group/version/plural) rather than
//! `Api<DynamicObject>`: the contract moves JSON text both ways, so a typed round trip would
//! only cost a discovery request per resource type (to learn the kind) and re-encode bodies
//! through `ObjectMeta` (dropping or reformatting fields the guest may compare). Raw responses
//! also keep the `Retry-After` header, which `kube`'s typed errors drop.
//!
//! Each request has its own deadline. Request and response bodies are never logged: a Secret's
//! create body holds secret values.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http::{HeaderValue, Method, Request};
use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::{Value, json};

use wasmtime::component::Resource;

use crate::bindings::paperclip::sandbox_provider::kube::{
    self as kube_wit, DeleteOptions, KubeError, ListOptions, PatchType, Propagation, ResourceType, WatchEvent,
    WatchOptions,
};
use crate::error::HostError;
use crate::kube_errors;
use crate::kube_url;
use crate::kube_watch::WatchStream;
use crate::policy::{Access, Policy, Verb};
use crate::state::CallState;

/// Builds a client for the host from a kube config, with `kube`'s built-in retries switched
/// off: its default retries 429/503/504 for up to minutes, hidden inside one guest request,
/// while the contract gives the provider `unavailable` with `retry-after` so it can decide
/// within its own deadline.
pub fn client_from_config(mut config: kube::Config) -> Result<kube::Client, HostError> {
    config.default_retry = false;
    kube::Client::try_from(config).map_err(|e| HostError::Config(format!("cannot build the Kubernetes client: {e}")))
}

/// Policy-checked Kubernetes access; cheap to clone (one per call's store).
#[derive(Clone)]
pub struct KubeHost {
    client: kube::Client,
    policy: Arc<Policy>,
    request_timeout: Duration,
}

/// What one request is about, for the policy, messages and log lines.
struct Target<'a> {
    verb: Verb,
    rt: &'a ResourceType,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
    subresource: Option<&'a str>,
}

impl Target<'_> {
    fn describe(&self) -> String {
        let mut out = format!("{} {}", self.verb, qualified(self.rt));
        if let Some(ns) = self.namespace {
            out.push_str(&format!(" in {ns}"));
        }
        if let Some(name) = self.name {
            out.push_str(&format!(" {name:?}"));
        }
        if let Some(sub) = self.subresource {
            out.push_str(&format!(" /{sub}"));
        }
        out
    }
}

fn qualified(rt: &ResourceType) -> String {
    if rt.group.is_empty() {
        format!("{}/{}", rt.version, rt.plural)
    } else {
        format!("{}/{}/{}", rt.group, rt.version, rt.plural)
    }
}

const JSON: &str = "application/json";

impl KubeHost {
    /// Access through `client`, limited by `policy`, each request bounded by `request_timeout`.
    pub fn new(client: kube::Client, policy: Arc<Policy>, request_timeout: Duration) -> Self {
        Self { client, policy, request_timeout }
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Reads one object; returns its JSON.
    pub async fn get(&self, rt: &ResourceType, namespace: Option<&str>, name: &str) -> Result<String, KubeError> {
        let target = Target { verb: Verb::Get, rt, namespace, name: Some(name), subresource: None };
        self.allow(&target)?;
        let url = kube_url::object(rt, namespace, name, None)?;
        self.text(&target, request(Method::GET, url, None, Vec::new())?).await
    }

    /// Creates an object from JSON, stamped with the policy's managed-by label; returns it.
    pub async fn create(&self, rt: &ResourceType, namespace: Option<&str>, body: &str) -> Result<String, KubeError> {
        let target = Target { verb: Verb::Create, rt, namespace, name: None, subresource: None };
        self.allow(&target)?;
        let labelled = self.policy.label_created(body).map_err(KubeError::Invalid)?;
        let url = kube_url::with_query(
            kube_url::collection(rt, namespace)?,
            [("fieldManager", Some(self.policy.managed_by.as_str()))],
        );
        self.text(&target, request(Method::POST, url, Some(JSON), labelled.into_bytes())?).await
    }

    /// Patches an object (or its `status`); returns the result.
    pub async fn patch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &str,
        subresource: Option<&str>,
    ) -> Result<String, KubeError> {
        let target = Target { verb: Verb::Patch, rt, namespace, name: Some(name), subresource };
        self.allow(&target)?;
        let content_type = match patch_type {
            PatchType::Merge => "application/merge-patch+json",
            PatchType::Json => "application/json-patch+json",
            PatchType::Strategic => "application/strategic-merge-patch+json",
        };
        let url = kube_url::with_query(
            kube_url::object(rt, namespace, name, subresource)?,
            [("fieldManager", Some(self.policy.managed_by.as_str()))],
        );
        self.text(&target, request(Method::PATCH, url, Some(content_type), body.as_bytes().to_vec())?).await
    }

    /// Deletes an object with the given propagation and preconditions.
    pub async fn delete(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let target = Target { verb: Verb::Delete, rt, namespace, name: Some(name), subresource: None };
        self.allow(&target)?;
        let url = kube_url::object(rt, namespace, name, None)?;
        let body = delete_body(options);
        self.text(&target, request(Method::DELETE, url, Some(JSON), body.into_bytes())?).await.map(drop)
    }

    /// Lists objects; returns the List JSON (with `metadata.resourceVersion` and `continue`).
    pub async fn list(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<String, KubeError> {
        let target = Target { verb: Verb::List, rt, namespace, name: None, subresource: None };
        self.allow(&target)?;
        let limit = options.limit.map(|l| l.to_string());
        let url = kube_url::with_query(
            kube_url::collection(rt, namespace)?,
            [
                ("labelSelector", options.label_selector.as_deref()),
                ("fieldSelector", options.field_selector.as_deref()),
                ("limit", limit.as_deref()),
                ("continue", options.continue_token.as_deref()),
                ("resourceVersion", options.resource_version.as_deref()),
            ],
        );
        self.text(&target, request(Method::GET, url, None, Vec::new())?).await
    }

    /// Opens a watch; events are read with [`WatchStream::next`].
    pub async fn watch(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<WatchStream, KubeError> {
        let target = Target { verb: Verb::Watch, rt, namespace, name: None, subresource: None };
        self.allow(&target)?;
        let timeout = options.timeout_seconds.map(|t| t.to_string());
        let url = kube_url::with_query(
            kube_url::collection(rt, namespace)?,
            [
                ("watch", Some("true")),
                ("labelSelector", options.label_selector.as_deref()),
                ("fieldSelector", options.field_selector.as_deref()),
                ("resourceVersion", options.resource_version.as_deref()),
                ("timeoutSeconds", timeout.as_deref()),
                ("allowWatchBookmarks", options.allow_bookmarks.then_some("true")),
            ],
        );
        let mut req = request(Method::GET, url, None, Vec::new())?;
        req.headers_mut().insert(http::header::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
        let body = self.open(&target, req).await?;
        Ok(WatchStream::new(body, target.describe()))
    }

    /// The versions of an API group, preferred first; empty when the group is not served.
    pub async fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError> {
        if let Err(denial) = self.policy.check_discovery(group) {
            tracing::warn!(target: "provider_host::policy", verb = "discovery", group, reason = %denial,
                "kube call denied by host policy");
            return Err(KubeError::Forbidden(denial.0));
        }
        let url = kube_url::group_discovery(group)?;
        let what = format!("discovery of API group {group:?}");
        let started = Instant::now();
        let result = self.exchange(&what, request(Method::GET, url, None, Vec::new())?).await;
        tracing::debug!(target: "provider_host::kube", verb = "discovery", group,
            ok = result.is_ok(), millis = started.elapsed().as_millis() as u64, "kube request");
        let text = match result {
            Ok(text) => text,
            Err(KubeError::NotFound(_)) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let doc: Value = serde_json::from_str(&text)
            .map_err(|e| KubeError::Transport(format!("{what}: the answer is not JSON: {e}")))?;
        Ok(versions_of(group, &doc))
    }

    fn allow(&self, target: &Target<'_>) -> Result<(), KubeError> {
        let access = Access {
            verb: target.verb,
            group: &target.rt.group,
            version: &target.rt.version,
            plural: &target.rt.plural,
            namespace: target.namespace,
            name: target.name,
            subresource: target.subresource,
        };
        self.policy.check(&access).map_err(|denial| {
            tracing::warn!(
                target: "provider_host::policy",
                verb = %target.verb,
                resource = %qualified(target.rt),
                namespace = target.namespace.unwrap_or_default(),
                name = target.name.unwrap_or_default(),
                reason = %denial,
                "kube call denied by host policy"
            );
            KubeError::Forbidden(denial.0)
        })
    }

    /// Sends a request and returns the success body as text, logging the outcome (never bodies).
    async fn text(&self, target: &Target<'_>, req: Request<Vec<u8>>) -> Result<String, KubeError> {
        let started = Instant::now();
        let result = self.exchange(&target.describe(), req).await;
        self.log(target, started, result.as_ref().err());
        result
    }

    /// Sends a request and returns the body of a success once its headers arrived (watches).
    async fn open(&self, target: &Target<'_>, req: Request<Vec<u8>>) -> Result<Body, KubeError> {
        let started = Instant::now();
        let what = target.describe();
        let opening = async {
            let response =
                self.client.send(req.map(Body::from)).await.map_err(|e| kube_errors::from_client_error(&e))?;
            if response.status().is_success() {
                return Ok(response.into_body());
            }
            let code = response.status().as_u16();
            let headers = response.headers().clone();
            let bytes = response.into_body().collect().await.map(|c| c.to_bytes()).unwrap_or_default();
            Err(kube_errors::from_response(code, &headers, &bytes))
        };
        let result = match tokio::time::timeout(self.request_timeout, opening).await {
            Err(_) => Err(kube_errors::request_timed_out(&what, self.request_timeout)),
            Ok(result) => result,
        };
        self.log(target, started, result.as_ref().err());
        result
    }

    async fn exchange(&self, what: &str, req: Request<Vec<u8>>) -> Result<String, KubeError> {
        let exchange = async {
            let response =
                self.client.send(req.map(Body::from)).await.map_err(|e| kube_errors::from_client_error(&e))?;
            let code = response.status();
            let headers = response.headers().clone();
            let bytes =
                response.into_body().collect().await.map_err(|e| kube_errors::from_client_error(&e))?.to_bytes();
            if !code.is_success() {
                return Err(kube_errors::from_response(code.as_u16(), &headers, &bytes));
            }
            String::from_utf8(bytes.to_vec())
                .map_err(|e| KubeError::Transport(format!("{what}: the answer is not UTF-8: {e}")))
        };
        match tokio::time::timeout(self.request_timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(kube_errors::request_timed_out(what, self.request_timeout)),
        }
    }

    fn log(&self, target: &Target<'_>, started: Instant, error: Option<&KubeError>) {
        let millis = started.elapsed().as_millis() as u64;
        let resource = qualified(target.rt);
        let namespace = target.namespace.unwrap_or_default();
        let name = target.name.unwrap_or_default();
        match error {
            None => tracing::debug!(target: "provider_host::kube", verb = %target.verb, resource, namespace, name,
                millis, "kube request"),
            Some(e) => tracing::debug!(target: "provider_host::kube", verb = %target.verb, resource, namespace, name,
                millis, error = error_kind(e), "kube request failed"),
        }
    }
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
        KubeError::Unauthorized(_) => "unauthorized",
        KubeError::Timeout(_) => "timeout",
        KubeError::Unavailable(_) => "unavailable",
        KubeError::Transport(_) => "transport",
        KubeError::Other(_) => "other",
    }
}

fn request(
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

fn delete_body(options: &DeleteOptions) -> String {
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

/// Versions from `/api` (APIVersions) or `/apis/{group}` (APIGroup), preferred first.
fn versions_of(group: &str, doc: &Value) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if group.is_empty() {
        out.extend(doc["versions"].as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string));
        return out;
    }
    if let Some(preferred) = doc["preferredVersion"]["version"].as_str() {
        out.push(preferred.to_string());
    }
    for version in doc["versions"].as_array().into_iter().flatten().filter_map(|v| v["version"].as_str()) {
        if !out.iter().any(|o| o == version) {
            out.push(version.to_string());
        }
    }
    out
}

/// The bindgen glue: each import forwards to [`KubeHost`]; watches live in the call's
/// resource table, at most `max-open-watches` at a time, and close when the guest drops them or
/// the call's store goes away.
impl kube_wit::Host for CallState {
    async fn get(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.get(&resource, namespace.as_deref(), &name).await)
    }

    async fn create(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        body: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.create(&resource, namespace.as_deref(), &body).await)
    }

    async fn patch(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        name: String,
        patch_type: PatchType,
        body: String,
        subresource: Option<String>,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.patch(&resource, namespace.as_deref(), &name, patch_type, &body, subresource.as_deref()).await)
    }

    async fn delete(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        name: String,
        options: DeleteOptions,
    ) -> wasmtime::Result<Result<(), KubeError>> {
        Ok(self.kube.delete(&resource, namespace.as_deref(), &name, &options).await)
    }

    async fn list(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        options: ListOptions,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.list(&resource, namespace.as_deref(), &options).await)
    }

    async fn open_watch(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        options: WatchOptions,
    ) -> wasmtime::Result<Result<Resource<WatchStream>, KubeError>> {
        if self.open_watches >= self.max_open_watches {
            return Ok(Err(KubeError::Forbidden(format!(
                "the host allows {} open watches per call (limits max-open-watches); drop one first",
                self.max_open_watches
            ))));
        }
        let stream = match self.kube.watch(&resource, namespace.as_deref(), &options).await {
            Ok(stream) => stream,
            Err(e) => return Ok(Err(e)),
        };
        let handle = self.table.push(stream)?;
        self.open_watches += 1;
        Ok(Ok(handle))
    }

    async fn served_versions(&mut self, group: String) -> wasmtime::Result<Result<Vec<String>, KubeError>> {
        Ok(self.kube.served_versions(&group).await)
    }
}

impl kube_wit::HostWatch for CallState {
    async fn next(
        &mut self,
        watch: Resource<WatchStream>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<Option<WatchEvent>, KubeError>> {
        let stream = self.table.get_mut(&watch)?;
        Ok(stream.next(Duration::from_millis(u64::from(timeout_ms))).await)
    }

    async fn drop(&mut self, watch: Resource<WatchStream>) -> wasmtime::Result<()> {
        self.table.delete(watch)?;
        self.open_watches = self.open_watches.saturating_sub(1);
        Ok(())
    }
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

    #[test]
    fn group_versions_put_the_preferred_one_first() {
        let doc = json!({"kind": "APIGroup", "name": "g", "versions": [{"version": "v1alpha1"}, {"version": "v1beta1"}],
            "preferredVersion": {"version": "v1beta1"}});
        assert_eq!(versions_of("g", &doc), vec!["v1beta1", "v1alpha1"]);
        assert_eq!(versions_of("", &json!({"kind": "APIVersions", "versions": ["v1"]})), vec!["v1"]);
    }
}
