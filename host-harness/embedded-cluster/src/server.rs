//! The HTTP(S) front of the API server: TLS, bearer-token authentication, authorization,
//! fault injection, the request log, and dispatch to the REST, watch, discovery, OpenAPI and
//! admin handlers, and to `pods/exec`, whose connection is upgraded to a WebSocket.

use std::collections::HashMap;
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::Value;
use tokio::net::TcpListener;

use crate::apiserver::{ApiServer, Ctx, Reply};
use crate::authorization::{self, Access, Identity};
use crate::faults::Action;
use crate::rbac::authorizer::User;
use crate::request::{self, Query, ResourceRequest, Route};
use crate::request_info::RequestInfo;
use crate::request_log::{Entry, RequestKind};
use crate::resources::{Flavor, ResourceType};
use crate::status::ApiError;
use crate::table::{self, Include, Rendering};
use crate::watch::{self, WatchCut, WatchRequest};
use crate::{admin, discovery, impersonation, openapi, pod_exec, protobuf};

/// The response body type: a full JSON document or a watch stream.
pub type Body = BoxBody<Bytes, Infallible>;

/// The HTTP layer around one [`ApiServer`].
pub struct HttpFront {
    pub api: Arc<ApiServer>,
    /// The built-in users' bearer tokens.
    pub tokens: HashMap<String, Identity>,
    /// `host:port`, reported in `/api`.
    pub address: String,
    pub bookmark_interval: Duration,
}

/// Largest request body accepted (kube-apiserver's limit is about 3 MiB).
const MAX_BODY: usize = 3 * 1024 * 1024;

/// Marker error: the connection is closed without an answer (a fault, before or after the
/// request is applied).
#[derive(Debug)]
pub struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for Dropped {}

/// What the fault rules left for the handler once a request may go on.
#[derive(Default)]
struct Pending {
    /// End the watch early.
    cut: Option<WatchCut>,
    /// Handle the request in full, then close the connection instead of answering.
    lose_response: bool,
}

impl Pending {
    /// The handler's answer, or a dropped connection if the response is to be lost.
    fn answer(&self, response: Response<Body>) -> Result<Response<Body>, Dropped> {
        if self.lose_response { Err(Dropped) } else { Ok(response) }
    }
}

fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).boxed()
}

fn json_response(code: u16, body: &Value, warnings: &[String]) -> Response<Body> {
    let mut resp = Response::new(full(serde_json::to_vec(body).unwrap_or_default()));
    *resp.status_mut() = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = resp.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
    for w in warnings {
        let text = format!("299 - {}", serde_json::Value::String(w.clone()));
        if let Ok(v) = HeaderValue::from_str(&text) {
            headers.append(header::WARNING, v);
        }
    }
    resp
}

fn text_response(text: String) -> Response<Body> {
    let mut resp = Response::new(full(text));
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    resp
}

fn error_response(err: &ApiError) -> Response<Body> {
    let mut resp = json_response(err.code, &err.to_status(), &[]);
    if let Some(secs) = err.retry_after
        && let Ok(v) = HeaderValue::from_str(&secs.to_string())
    {
        resp.headers_mut().insert(header::RETRY_AFTER, v);
    }
    resp
}

impl HttpFront {
    /// Serves connections from `listener` until the task is aborted.
    pub async fn serve(self: Arc<Self>, listener: TcpListener, tls: Option<Arc<rustls::ServerConfig>>) {
        let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                continue;
            };
            let _ = tcp.set_nodelay(true);
            let front = self.clone();
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |req| front.clone().handle(req));
                let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                // With upgrades: pods/exec switches the connection to a WebSocket.
                let result = match acceptor {
                    Some(acceptor) => match acceptor.accept(tcp).await {
                        Ok(stream) => builder.serve_connection_with_upgrades(TokioIo::new(stream), service).await,
                        Err(e) => {
                            tracing::debug!(error = %e, "TLS handshake failed");
                            return;
                        }
                    },
                    None => builder.serve_connection_with_upgrades(TokioIo::new(tcp), service).await,
                };
                if let Err(e) = result {
                    tracing::trace!(error = %e, "connection ended");
                }
            });
        }
    }

    /// The identity of the request's bearer token: a built-in user's, or a ServiceAccount's
    /// while its token is valid. Anything else is anonymous.
    fn identify(&self, req: &Request<Incoming>) -> Option<Identity> {
        let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
        let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?.trim();
        match self.tokens.get(token) {
            Some(id) => Some(id.clone()),
            None => self.api.sa_tokens.authenticate(&self.api.store, self.api.clock.now(), token),
        }
    }

    /// Handles one request: authentication, then authorization (on the URL, before routing, as
    /// kube-apiserver's filters run), then fault injection and the handler. An `Err` closes the
    /// connection (a dropped-connection fault).
    pub async fn handle(self: Arc<Self>, req: Request<Incoming>) -> Result<Response<Body>, Dropped> {
        let started = Instant::now();
        let path = req.uri().path().to_string();
        let query = Query::parse(req.uri().query());
        let info = pod_exec::authorized_as(RequestInfo::new(req.method(), &path, &query));
        let route = request::route(&path, &self.api.types);
        // Who sent it, then who it acts as (`Impersonate-*`); a refused impersonation is logged
        // under the sender.
        let (identity, refused) = match self.identify(&req) {
            Some(id) => match impersonation::apply(&self.api.store, id.clone(), req.headers()) {
                Ok(acting) => (Some(acting), None),
                Err(e) => (Some(id), Some(e)),
            },
            None => (None, None),
        };
        let mut entry = self.log_entry(&req, &route, &query, &info, identity.as_ref());
        let outcome = match (route, identity, refused) {
            (_, _, Some(refused)) => Ok(error_response(&refused)),
            (route, identity, None) => self.dispatch(req, route, identity, query, &info, &mut entry).await,
        };
        entry.code = match &outcome {
            Ok(resp) => resp.status().as_u16(),
            Err(_) => 0,
        };
        self.api.log.record(entry, started.elapsed());
        outcome
    }

    /// Routes an authenticated (or anonymous) request once its identity is settled.
    async fn dispatch(
        &self,
        req: Request<Incoming>,
        route: Result<Route, ApiError>,
        identity: Option<Identity>,
        query: Query,
        info: &RequestInfo,
        entry: &mut Entry,
    ) -> Result<Response<Body>, Dropped> {
        match (route, identity) {
            (Err(e), None) => Ok(error_response(&e)),
            (Ok(route @ (Route::Health | Route::Version)), None) => self.non_resource(req, route, entry).await,
            (Ok(_), None) => Ok(error_response(&ApiError::unauthorized())),
            (route, Some(id)) => match authorization::authorize(&self.api.store, &id, info) {
                Err(denied) => Ok(error_response(&denied)),
                Ok(()) => match route {
                    Err(e) => match self.inject(entry).await {
                        ControlFlow::Break(answer) => answer,
                        ControlFlow::Continue(pending) => pending.answer(error_response(&e)),
                    },
                    Ok(Route::Resource(r)) => self.resource(req, r, query, &id, entry).await,
                    Ok(Route::Admin(segs)) => Ok(self.admin(req, &segs).await),
                    Ok(route) => self.non_resource(req, route, entry).await,
                },
            },
        }
    }

    /// The request log's record of a request, before it is answered. A served resource is
    /// described by its route (the name in the path, the verb the handlers use); any other
    /// resource path as the authorizer reads it, so that requests for unserved versions or
    /// resources still say what they asked for.
    fn log_entry(
        &self,
        req: &Request<Incoming>,
        route: &Result<Route, ApiError>,
        query: &Query,
        info: &RequestInfo,
        id: Option<&Identity>,
    ) -> Entry {
        let (kind, group, version) = if info.is_resource_request {
            (RequestKind::Resource, info.api_group.clone(), info.api_version.clone())
        } else {
            RequestKind::of_non_resource(&info.path)
        };
        let mut entry = Entry {
            seq: 0,
            user: id.map(|i| i.user.clone()).unwrap_or_else(|| "system:anonymous".into()),
            kind,
            verb: info.verb.clone(),
            group,
            version,
            resource: info.resource.clone(),
            subresource: info.subresource.clone(),
            namespace: info.namespace.clone(),
            name: info.name.clone(),
            path: info.path.clone(),
            faults: Vec::new(),
            code: 0,
            latency_micros: 0,
        };
        if let Ok(Route::Resource(r)) = route {
            let rt = &self.api.types[r.resource];
            entry.group = rt.group.to_string();
            entry.version = rt.version.to_string();
            entry.resource = rt.plural.to_string();
            entry.subresource = r.subresource.clone().unwrap_or_default();
            entry.namespace = r.namespace.clone().unwrap_or_default();
            entry.name = r.name.clone().unwrap_or_default();
            if let Ok(verb) = request::verb(req.method(), r, query) {
                entry.verb = verb.to_string();
            }
        }
        entry
    }

    /// Applies the fault rules that fire for a request and records them in its log entry. Delays
    /// and holds are waited out here; an error or a connection dropped before the request is applied ends
    /// it (`Break`); a watch cut and a response to lose are left for the handler (`Continue`).
    async fn inject(&self, entry: &mut Entry) -> ControlFlow<Result<Response<Body>, Dropped>, Pending> {
        let mut pending = Pending::default();
        for (id, action) in self.api.faults.check(entry) {
            entry.faults.push(id);
            match action {
                Action::Delay { millis } => tokio::time::sleep(Duration::from_millis(millis)).await,
                Action::Hold { millis } => {
                    let end = tokio::time::Instant::now() + Duration::from_millis(millis);
                    while self.api.faults.holding(id) && tokio::time::Instant::now() < end {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Action::DropBeforeApply => return ControlFlow::Break(Err(Dropped)),
                Action::DropAfterApply => pending.lose_response = true,
                Action::Error { code, reason, message, retry_after_seconds } => {
                    let message = message.unwrap_or_else(|| format!("injected fault: {reason}"));
                    let mut err = ApiError::custom(code, reason, message);
                    err.retry_after = retry_after_seconds;
                    return ControlFlow::Break(Ok(error_response(&err)));
                }
                Action::EndWatch { code, after_events } => {
                    let error = code.map(|c| match c {
                        410 => ApiError::gone("too old resource version (injected)"),
                        other => ApiError::custom(other, "InternalError", "watch ended by an injected fault"),
                    });
                    pending.cut = Some(WatchCut { error, after_events });
                }
            }
        }
        ControlFlow::Continue(pending)
    }

    /// Discovery, `/version`, OpenAPI and health checks, after their faults.
    async fn non_resource(
        &self,
        req: Request<Incoming>,
        route: Route,
        entry: &mut Entry,
    ) -> Result<Response<Body>, Dropped> {
        match self.inject(entry).await {
            ControlFlow::Break(answer) => answer,
            ControlFlow::Continue(pending) => pending.answer(self.document(&req, route)),
        }
    }

    /// The document a non-resource route serves, or a 404 for one of a group it does not serve.
    fn document(&self, req: &Request<Incoming>, route: Route) -> Response<Body> {
        let types = &self.api.types;
        let doc = match route {
            Route::Health => return Response::new(full("ok")),
            Route::Version => {
                Some(discovery::version(self.api.reported_minor.load(std::sync::atomic::Ordering::Relaxed)))
            }
            Route::CoreVersions => Some(discovery::core_versions(&self.address)),
            Route::Groups => Some(discovery::group_list(types)),
            Route::Group(g) => discovery::group(types, &g),
            Route::ResourceList { group, version } => discovery::resource_list(types, &group, &version),
            Route::OpenApiV2 => {
                let accept = req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default();
                return match openapi::v2(&self.api, accept) {
                    Ok(doc) => json_response(200, &doc, &[]),
                    Err(e) => error_response(&e),
                };
            }
            Route::OpenApiV3Root => Some(openapi::v3_root(&self.api)),
            Route::OpenApiV3 { group, version } => openapi::v3_group_version(&self.api, &group, &version),
            Route::Admin(_) | Route::Resource(_) => None,
        };
        match doc {
            Some(doc) => json_response(200, &doc, &[]),
            None => error_response(&ApiError::not_found_path()),
        }
    }

    /// The embedded cluster's own endpoints, which no fault reaches.
    async fn admin(&self, req: Request<Incoming>, segs: &[String]) -> Response<Body> {
        let method = req.method().clone();
        let query = Query::parse(req.uri().query());
        let body = match read_body(req).await {
            Ok(b) => b,
            Err(e) => return error_response(&e),
        };
        match admin::handle(&self.api, &method, segs, &query, &body) {
            Ok(doc) => json_response(200, &doc, &[]),
            Err(e) => error_response(&e),
        }
    }

    /// `pods/exec`, after its faults: a refusal, or the upgrade to the exec's WebSocket. A
    /// response to lose drops the connection before anything runs.
    async fn exec(
        &self,
        req: Request<Incoming>,
        r: &ResourceRequest,
        entry: &mut Entry,
    ) -> Result<Response<Body>, Dropped> {
        let pending = match self.inject(entry).await {
            ControlFlow::Break(answer) => return answer,
            ControlFlow::Continue(pending) => pending,
        };
        if pending.lose_response {
            return Err(Dropped);
        }
        let (namespace, name) = (r.namespace.as_deref().unwrap_or_default(), r.name.as_deref().unwrap_or_default());
        Ok(pod_exec::upgrade(&self.api, req, namespace, name).unwrap_or_else(|e| error_response(&e)))
    }

    async fn resource(
        &self,
        req: Request<Incoming>,
        r: ResourceRequest,
        query: Query,
        id: &Identity,
        entry: &mut Entry,
    ) -> Result<Response<Body>, Dropped> {
        let rt = self.api.types[r.resource].clone();
        let verb = match request::verb(req.method(), &r, &query) {
            Ok(v) => v,
            Err(e) => return Ok(error_response(&e)),
        };
        if !rt.verbs.contains(&verb) && r.subresource.is_none() {
            return Ok(error_response(&ApiError::method_not_allowed(format!(
                "the server does not allow this method on the requested resource ({verb} {})",
                rt.plural
            ))));
        }
        if r.subresource.as_deref() == Some("exec") {
            return self.exec(req, &r, entry).await;
        }

        let content_type =
            req.headers().get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
        let rendering =
            Rendering::from_accept(req.headers().get(header::ACCEPT).and_then(|v| v.to_str().ok()).unwrap_or_default());
        // `includeObject` is a Table option: read (and refused when malformed) only for a Table.
        let include = match rendering {
            Rendering::Table(_) => match Include::from_query(query.get("includeObject")) {
                Ok(include) => include,
                Err(e) => return Ok(error_response(&e)),
            },
            _ => Include::Metadata,
        };
        let body = match read_body(req).await {
            Ok(b) => b,
            Err(e) => return Ok(error_response(&e)),
        };
        let body = match decode_body(&rt, verb, &content_type, body) {
            Ok(b) => b,
            Err(e) => return Ok(error_response(&e)),
        };
        if verb == "create" && r.subresource.is_none() {
            // A create names its object in the body; faults and the log match on that name.
            if let Ok(doc) = serde_json::from_slice::<Value>(&body) {
                let meta = &doc["metadata"];
                entry.name = meta["name"].as_str().or(meta["generateName"].as_str()).unwrap_or_default().to_string();
            }
        }
        let pending = match self.inject(entry).await {
            ControlFlow::Break(answer) => return answer,
            ControlFlow::Continue(pending) => pending,
        };

        if verb == "watch" {
            if pending.lose_response {
                return Err(Dropped);
            }
            let request = WatchRequest {
                rt,
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                query,
                cut: pending.cut,
                bookmark_interval: self.bookmark_interval,
                rendering,
                include,
            };
            return Ok(match watch::start(self.api.clone(), request) {
                Ok(body) => {
                    let mut resp = Response::new(body.boxed());
                    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
                    resp.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache, private"));
                    resp
                }
                Err(e) => error_response(&e),
            });
        }

        let ctx = Ctx {
            rt: &rt,
            namespace: r.namespace.as_deref(),
            name: r.name.as_deref(),
            subresource: r.subresource.as_deref(),
            query: &query,
            grants_of: (id.access == Access::Rbac).then_some(User { name: &id.user, groups: &id.groups }),
        };
        let result: Result<Reply, ApiError> = match (verb, r.subresource.as_deref()) {
            ("create", Some("binding")) => self.api.bind(&ctx, &body),
            ("create", Some("token")) => self.api.create_token(&ctx, &body),
            ("create", None) if rt.plural == crate::access_review::SELF_SUBJECT_ACCESS_REVIEWS => {
                self.api.access_review(&ctx, &body, id)
            }
            ("create", _) => self.api.create(&ctx, &body),
            ("get", Some("log")) => {
                return pending.answer(match self.api.pod_log(&ctx) {
                    Ok(text) => text_response(text),
                    Err(e) => error_response(&e),
                });
            }
            ("get", _) => self.api.get(&ctx),
            ("list", _) => self.api.list(&ctx),
            ("update", _) => self.api.update(&ctx, &body),
            ("patch", _) => self.api.patch(&ctx, &content_type, &body),
            ("delete", None) => self.api.delete(&ctx, &body),
            ("deletecollection", None) => self.api.delete_collection(&ctx, &body),
            _ => Err(ApiError::method_not_allowed(format!(
                "{verb} is not supported on {}/{}",
                rt.plural, entry.subresource
            ))),
        };
        let result = match (verb, result) {
            ("get" | "list", Ok(reply)) if rendering != Rendering::Object => {
                let columns = self.api.schemas.printer_columns(&rt);
                let body = table::render(&rt, columns, &reply.body, rendering, include, self.api.clock.now());
                Ok(Reply { body, ..reply })
            }
            (_, result) => result,
        };
        pending.answer(match result {
            Ok(reply) => json_response(reply.code, &reply.body, &reply.warnings),
            Err(e) => error_response(&e),
        })
    }
}

/// A create or update body in the JSON the handlers take, by its `Content-Type` as
/// kube-apiserver negotiates it: JSON (also when none is given), YAML, protobuf for built-in kinds,
/// and a 415 naming the accepted types for anything else. Patches pick their own types.
fn decode_body(rt: &ResourceType, verb: &str, content_type: &str, body: Bytes) -> Result<Bytes, ApiError> {
    if !matches!(verb, "create" | "update") {
        return Ok(body);
    }
    let media = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    let builtin = rt.flavor == Flavor::BuiltIn;
    match media.as_str() {
        "" | "application/json" => Ok(body),
        "application/yaml" => {
            let doc: Value = serde_yaml_ng::from_slice(&body).map_err(|e| {
                ApiError::bad_request(format!("the body of the request could not be decoded as application/yaml: {e}"))
            })?;
            serde_json::to_vec(&doc).map(Bytes::from).map_err(|e| ApiError::bad_request(e.to_string()))
        }
        _ if builtin && protobuf::is_protobuf(&media) => protobuf::object_json(&body).map(Bytes::from),
        _ => {
            let accepted = if builtin {
                "application/json, application/yaml, application/vnd.kubernetes.protobuf"
            } else {
                "application/json, application/yaml"
            };
            let shown: String = media.chars().take(80).collect();
            Err(ApiError::unsupported_media_type(format!(
                "the body of the request was in an unknown format ({shown}) - accepted media types include: {accepted}"
            )))
        }
    }
}

async fn read_body(req: Request<Incoming>) -> Result<Bytes, ApiError> {
    if req.method() == Method::GET {
        return Ok(Bytes::new());
    }
    Limited::new(req.into_body(), MAX_BODY)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|e| ApiError::custom(413, "RequestEntityTooLarge", format!("the request body could not be read: {e}")))
}
