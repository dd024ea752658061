//! `pods/exec`: `GET /api/v1/namespaces/{ns}/pods/{name}/exec?command=..&container=..&stdin=..
//! &stdout=..&stderr=..&tty=..` upgraded to a WebSocket that speaks the remote-command protocol
//! (`remote_command.rs`), with the command run by the simulated kubelet as a **local process on
//! the host** (`controllers/kubelet/exec.rs`; not in the image).
//!
//! ## Authorization
//! The exec is authorized as `create` on `pods/exec`, whatever the method. Upstream authorizes
//! the URL's verb (`get` for the WebSocket's GET) and, from 1.35
//! (`AuthorizePodWebsocketUpgradeCreatePermission`, `pkg/registry/core/pod/rest/subresources.go`),
//! also `create`; a client refused the GET (kubectl) falls back to SPDY, a POST: `create`. This
//! server speaks no SPDY, so it asks for the one permission every upstream route to an exec
//! needs. A refusal is the usual 403 Status, before any upgrade.
//!
//! ## Refusals, in upstream's order, before any upgrade
//! kube-apiserver's `ExecLocation` (`pkg/registry/core/pod/strategy.go`), then the kubelet:
//! 1. a pod that does not exist: 404 `pods "p" not found`;
//! 2. no container named when the pod has several, or a name the pod does not have:
//!    400 `a container name must be specified for pod p, choose one of: [a b]`,
//!    `container c is not valid for pod p`;
//! 3. a pod not bound to a node: 400 `pod p does not have a host assigned`; a pod on a lost
//!    node (`node-lost-after`): 500 `error dialing backend: dial tcp <node IP>:10250: i/o
//!    timeout`, with no reason, as the API server's proxy fails to reach the kubelet;
//! 4. no upgrade: 400 `Upgrade request required`; SPDY (what kubectl falls back to when its
//!    WebSocket is refused, or uses with `KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false`): 400 saying
//!    only WebSockets are served;
//! 5. none of stdin, stdout, stderr: 400 `you must specify at least 1 of stdin, stdout, stderr`;
//!    no command: 400 `you must specify at least one command for the container`;
//! 6. a pod that has completed: 400 `cannot exec into a container in a completed pod; current
//!    phase is Succeeded` (kubectl's words; kubectl checks it itself); a container that is not
//!    running: 400 `unable to upgrade connection: container not found ("c")`, the kubelet's words
//!    as the API server relays them (upstream answers 500, or after the upgrade for v5);
//! 7. the WebSocket handshake: GET only (405), version 13 and a key (400), and a subprotocol
//!    this server speaks: `v5.channel.k8s.io` whenever offered, else the client's first of
//!    `v4.channel.k8s.io` and `v4.base64.channel.k8s.io`. Offering none is refused with 403, as
//!    the kubelet's `wsstream` refuses it (upstream sends no body; this server adds a Status
//!    naming what it speaks). The pre-v4 protocols (`channel.k8s.io`, none at all), whose error
//!    channel is plain text, are not served;
//! 8. a container environment that cannot be built (a required Secret or ConfigMap deleted
//!    since the container started): 500, naming what is missing.
//!
//! A command that cannot be started (not on `PATH`) is reported after the upgrade, in the final
//! status, as the container runtime's error is. Faults apply to exec requests like to any other
//! (`create` on `pods`, subresource `exec`); a response to lose is a connection dropped before
//! anything runs. The request log records the upgrade (101) when it is answered.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use base64::Engine as _;
use contract::k8s::pod_container::ContainerNames;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Empty};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::core::v1::{Container, Pod};
use serde_json::Value;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use crate::apiserver::ApiServer;
use crate::controllers::kubelet::exec::ExecSpec;
use crate::controllers::kubelet::exec_env::{self, ConfigData};
use crate::controllers::kubelet::pid_namespace::MainProcess;
use crate::fanout::{FeedEnd, Interest, Route as FeedRoute};
use crate::remote_command::{self, Protocol};
use crate::request::{Query, query_values};
use crate::request_info::RequestInfo;
use crate::server::Body;
use crate::status::{ApiError, Subject};
use crate::store::{EventType, Store};

/// How much of a container name a message shows (the longest valid name).
const SHOWN_NAME_CHARS: usize = 63;

/// Whether a request is for `pods/{name}/exec`.
fn is_exec(info: &RequestInfo) -> bool {
    info.is_resource_request
        && info.api_group.is_empty()
        && info.resource == "pods"
        && info.subresource == "exec"
        && !info.name.is_empty()
}

/// The request as the authorizer decides it: an exec is `create`, whatever its method.
pub fn authorized_as(mut info: RequestInfo) -> RequestInfo {
    if is_exec(&info) {
        info.verb = "create".to_string();
    }
    info
}

/// The exec's options from the query, parsed as kube-apiserver's parameter codec reads them.
struct Options {
    command: Vec<String>,
    container: Option<String>,
    stdin: bool,
    stdout: bool,
    stderr: bool,
    tty: bool,
}

impl Options {
    fn parse(raw: Option<&str>) -> Self {
        let query = Query::parse(raw);
        let tty = query.flag("tty");
        Self {
            command: query_values(raw, "command"),
            container: query.get("container").map(String::from),
            stdin: query.flag("stdin"),
            stdout: query.flag("stdout"),
            // A terminal merges stderr into stdout (the kubelet drops stderr with a TTY).
            stderr: query.flag("stderr") && !tty,
            tty,
        }
    }
}

/// A message-sized container name.
fn shown(name: &str) -> String {
    name.chars().take(SHOWN_NAME_CHARS).collect()
}

/// Answers an exec request: a refusal, or `101 Switching Protocols` with the session started
/// on the upgraded connection.
pub fn upgrade(
    api: &Arc<ApiServer>,
    mut req: Request<Incoming>,
    namespace: &str,
    name: &str,
) -> Result<Response<Body>, ApiError> {
    let options = Options::parse(req.uri().query());
    let stored = api
        .store
        .get("pods", namespace, name)
        .ok_or_else(|| ApiError::not_found(Subject { group: "", resource: "pods", kind: "Pod", name }))?;
    let pod: Pod = serde_json::from_value(Value::clone(&stored))
        .map_err(|e| ApiError::internal(format!("the stored pod {name} cannot be read: {e}")))?;
    let container = pick_container(&pod, name, options.container.as_deref())?;
    let node = pod.spec.as_ref().and_then(|s| s.node_name.as_deref()).unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::bad_request(format!("pod {name} does not have a host assigned")));
    }
    if let Some(address) = lost_node_address(api, node) {
        return Err(ApiError::plain(format!("error dialing backend: dial tcp {address}:10250: i/o timeout")));
    }
    let websocket = requested_upgrade(req.headers())?;
    if !options.stdin && !options.stdout && !options.stderr {
        return Err(ApiError::bad_request("you must specify at least 1 of stdin, stdout, stderr"));
    }
    if options.command.is_empty() {
        return Err(ApiError::bad_request("you must specify at least one command for the container"));
    }
    ensure_running(&pod, &container.name)?;
    let protocol = handshake(req.method(), req.headers(), &websocket)?;
    let env = exec_env::container_env(&pod, &container, &StoreData(&api.store)).map_err(|e| {
        ApiError::internal(format!(
            "the environment of container {} cannot be built: {e}; the simulated kubelet reads env references \
             at every exec, so recreate what is missing or mark the reference optional",
            shown(&container.name)
        ))
    })?;

    let spec = ExecSpec {
        pod_uid: pod.metadata.uid.clone().unwrap_or_default(),
        argv: options.command,
        env,
        working_dir: container.working_dir.clone(),
        hostname: pod.spec.as_ref().and_then(|s| s.hostname.clone()).unwrap_or_else(|| name.to_string()),
        stdin: options.stdin,
        stdout: options.stdout,
        stderr: options.stderr,
        tty: options.tty,
        main_process: MainProcess::of(&pod),
    };
    let response = switching_protocols(&websocket.key, protocol)?;
    let on_upgrade = hyper::upgrade::on(&mut req);
    let host = api.exec.clone();
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let ws = WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
                remote_command::serve(ws, protocol, host, spec).await;
            }
            Err(e) => tracing::debug!(error = %e, "the exec connection was not upgraded"),
        }
    });
    Ok(response)
}

/// The InternalIP of node `name` when the node is lost (its Ready condition `Unknown`, as the
/// node lifecycle controller marks a node whose kubelet stopped answering): the API server
/// cannot dial that kubelet.
fn lost_node_address(api: &ApiServer, name: &str) -> Option<String> {
    let node = api.store.get("nodes", "", name)?;
    let conditions = node.pointer("/status/conditions")?.as_array()?;
    let ready = conditions.iter().find(|c| c["type"] == "Ready")?;
    if ready["status"] != "Unknown" {
        return None;
    }
    let addresses = node.pointer("/status/addresses")?.as_array()?;
    let internal = addresses.iter().find(|a| a["type"] == "InternalIP")?;
    internal["address"].as_str().map(str::to_string)
}

/// The container an exec runs in, chosen as `streamLocation` chooses it
/// ([`ContainerNames::addressed`]).
fn pick_container(pod: &Pod, name: &str, wanted: Option<&str>) -> Result<Container, ApiError> {
    let spec = pod.spec.as_ref();
    let regular = spec.map(|s| s.containers.as_slice()).unwrap_or_default();
    let init = spec.and_then(|s| s.init_containers.as_deref()).unwrap_or_default();
    let ephemeral = spec.and_then(|s| s.ephemeral_containers.as_deref()).unwrap_or_default();
    let names = ContainerNames {
        containers: regular.iter().map(|c| c.name.as_str()).collect(),
        init: init.iter().map(|c| c.name.as_str()).collect(),
        ephemeral: ephemeral.iter().map(|c| c.name.as_str()).collect(),
    };
    let chosen = names.addressed(name, wanted).map_err(ApiError::bad_request)?;
    let as_container = || {
        let found = ephemeral.iter().find(|c| c.name == chosen)?;
        serde_json::to_value(found).ok().and_then(|v| serde_json::from_value::<Container>(v).ok())
    };
    regular
        .iter()
        .chain(init)
        .find(|c| c.name == chosen)
        .cloned()
        .or_else(as_container)
        .ok_or_else(|| ApiError::internal(format!("container {chosen} vanished")))
}

/// Refuses a pod that has completed and a container that is not running now.
fn ensure_running(pod: &Pod, container: &str) -> Result<(), ApiError> {
    let status = pod.status.clone().unwrap_or_default();
    if let Some(phase @ ("Succeeded" | "Failed")) = status.phase.as_deref() {
        return Err(ApiError::bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let statuses = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .chain(status.ephemeral_container_statuses.iter().flatten());
    let running =
        statuses.filter(|s| s.name == container).any(|s| s.state.as_ref().is_some_and(|st| st.running.is_some()));
    if running {
        Ok(())
    } else {
        Err(ApiError::bad_request(format!(
            "unable to upgrade connection: container not found (\"{}\")",
            shown(container)
        )))
    }
}

/// The WebSocket handshake's key, from a request that asks for one.
struct WebSocketUpgrade {
    key: String,
}

/// Whether the request upgrades, and to what: only a WebSocket is served.
fn requested_upgrade(headers: &HeaderMap) -> Result<WebSocketUpgrade, ApiError> {
    let upgrade = headers.get(header::UPGRADE).and_then(|v| v.to_str().ok()).unwrap_or_default().trim();
    let connection_upgrades = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    if upgrade.is_empty() || !connection_upgrades {
        return Err(ApiError::bad_request("Upgrade request required"));
    }
    if !upgrade.eq_ignore_ascii_case("websocket") {
        let shown_upgrade: String = upgrade.chars().take(32).collect();
        return Err(ApiError::bad_request(format!(
            "the embedded cluster serves pods/exec over WebSocket only, not {shown_upgrade}: use kubectl 1.30 or newer \
             without KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false, or a WebSocket client (v5.channel.k8s.io, v4.channel.k8s.io)"
        )));
    }
    let key = headers.get(header::SEC_WEBSOCKET_KEY).and_then(|v| v.to_str().ok()).unwrap_or_default().trim();
    Ok(WebSocketUpgrade { key: key.to_string() })
}

/// The rest of the WebSocket handshake, and the subprotocol.
fn handshake(method: &Method, headers: &HeaderMap, websocket: &WebSocketUpgrade) -> Result<Protocol, ApiError> {
    if method != Method::GET {
        return Err(ApiError::method_not_allowed("a WebSocket handshake must be a GET request"));
    }
    let version = headers.get(header::SEC_WEBSOCKET_VERSION).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if version.trim() != "13" {
        return Err(ApiError::bad_request(format!(
            "the WebSocket handshake asks for version {}; the server speaks 13 (RFC 6455)",
            contract::quote(version)
        )));
    }
    if websocket.key.is_empty() {
        return Err(ApiError::bad_request("the WebSocket handshake has no Sec-WebSocket-Key"));
    }
    let offered: Vec<&str> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    Protocol::negotiate(offered.iter().copied()).ok_or_else(|| {
        let asked = contract::quote(&offered.join(" ")).to_string();
        let served: Vec<&str> = Protocol::SERVED.iter().map(|p| p.name()).collect();
        ApiError::forbidden(format!(
            "requested protocol(s) are not supported: {asked}; supports [{}]: offer one of them in Sec-WebSocket-Protocol",
            served.join(" ")
        ))
    })
}

/// `101 Switching Protocols` for the negotiated subprotocol.
fn switching_protocols(key: &str, protocol: Protocol) -> Result<Response<Body>, ApiError> {
    let accept = HeaderValue::from_str(&derive_accept_key(key.as_bytes()))
        .map_err(|e| ApiError::internal(format!("cannot answer the WebSocket handshake: {e}")))?;
    let mut response = Response::new(Empty::new().boxed());
    *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let headers = response.headers_mut();
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    headers.insert(header::SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(protocol.name()));
    Ok(response)
}

/// Secrets and ConfigMaps as the store holds them (Secret data is base64 there).
struct StoreData<'a>(&'a Store);

impl StoreData<'_> {
    fn data(&self, storage: &str, namespace: &str, name: &str, decode: bool) -> Option<BTreeMap<String, Vec<u8>>> {
        let object = self.0.get(storage, namespace, name)?;
        let data = object.get("data").and_then(Value::as_object);
        let values = data.into_iter().flatten().filter_map(|(key, value)| {
            let text = value.as_str()?;
            let bytes = if decode {
                base64::engine::general_purpose::STANDARD.decode(text).ok()?
            } else {
                text.as_bytes().to_vec()
            };
            Some((key.clone(), bytes))
        });
        Some(values.collect())
    }
}

impl ConfigData for StoreData<'_> {
    fn secret(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        self.data("secrets", namespace, name, true)
    }

    fn config_map(&self, namespace: &str, name: &str) -> Option<BTreeMap<String, Vec<u8>>> {
        self.data("configmaps", namespace, name, false)
    }
}

/// Follows pod deletions for the life of the cluster: a deleted pod's execs are killed and its
/// directory removed. After a lagging feed (deletions missed), every pod not in the store is.
pub async fn clean_up_after_deleted_pods(api: Arc<ApiServer>) {
    loop {
        let interest = Interest { storage: "pods", route: FeedRoute::Table };
        let Ok((_, _, mut feed)) = api.store.subscribe_from(interest, None) else { return };
        let (_, pods) = api.store.list("pods", None);
        let live: HashSet<String> =
            pods.iter().filter_map(|p| p.pointer("/metadata/uid").and_then(Value::as_str).map(String::from)).collect();
        api.exec.keep_only(&live);
        loop {
            match feed.recv().await {
                Ok(event) if event.kind == EventType::Deleted => {
                    if let Some(uid) = event.object.pointer("/metadata/uid").and_then(Value::as_str) {
                        api.exec.pod_deleted(uid);
                    }
                }
                Ok(_) => {}
                Err(FeedEnd::Lagged) => break,
                Err(FeedEnd::Closed) => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(spec: Value, status: Value) -> Pod {
        serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec, "status": status}))
            .expect("test pod")
    }

    fn two_containers() -> Pod {
        pod(
            json!({"containers": [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}],
                   "initContainers": [{"name": "init", "image": "x"}]}),
            json!({"phase": "Running", "containerStatuses": [
                {"name": "a", "image": "x", "imageID": "", "ready": true, "restartCount": 0, "state": {"running": {}}},
                {"name": "b", "image": "x", "imageID": "", "ready": false, "restartCount": 0,
                 "state": {"waiting": {"reason": "ContainerCreating"}}}]}),
        )
    }

    #[test]
    fn containers_are_chosen_and_refused_as_upstream_does() {
        let p = two_containers();
        let message = |r: Result<Container, ApiError>| r.map(|c| c.name).map_err(|e| (e.code, e.message));
        assert_eq!(
            message(pick_container(&p, "p", None)),
            Err((400, "a container name must be specified for pod p, choose one of: [a b] or one of the init containers: [init]".into()))
        );
        assert_eq!(message(pick_container(&p, "p", Some("b"))), Ok("b".to_string()));
        assert_eq!(message(pick_container(&p, "p", Some("init"))), Ok("init".to_string()));
        assert_eq!(
            message(pick_container(&p, "p", Some("zz"))),
            Err((400, "container zz is not valid for pod p".into()))
        );
        let single = pod(json!({"containers": [{"name": "only", "image": "x"}]}), json!({}));
        assert_eq!(message(pick_container(&single, "p", None)), Ok("only".to_string()));
    }

    #[test]
    fn only_running_containers_of_live_pods_take_an_exec() {
        let p = two_containers();
        assert!(ensure_running(&p, "a").is_ok());
        let err = ensure_running(&p, "b").expect_err("waiting");
        assert_eq!(
            (err.code, err.message.as_str()),
            (400, "unable to upgrade connection: container not found (\"b\")")
        );
        let done = pod(json!({"containers": [{"name": "a", "image": "x"}]}), json!({"phase": "Succeeded"}));
        let err = ensure_running(&done, "a").expect_err("completed");
        assert_eq!(err.message, "cannot exec into a container in a completed pod; current phase is Succeeded");
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        h
    }

    #[test]
    fn the_upgrade_is_a_websocket_with_a_served_subprotocol() {
        let ws = [("upgrade", "websocket"), ("connection", "keep-alive, Upgrade")];
        assert_eq!(requested_upgrade(&headers(&[])).err().map(|e| e.message), Some("Upgrade request required".into()));
        let spdy = requested_upgrade(&headers(&[("upgrade", "SPDY/3.1"), ("connection", "Upgrade")]));
        assert!(spdy.err().is_some_and(|e| e.code == 400 && e.message.contains("over WebSocket only, not SPDY/3.1")));
        let mut all = ws.to_vec();
        all.extend([("sec-websocket-version", "13"), ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")]);
        let decide = |extra: &[(&'static str, &'static str)]| {
            let mut pairs = all.clone();
            pairs.extend_from_slice(extra);
            let h = headers(&pairs);
            let up = requested_upgrade(&h).map_err(|e| e.code)?;
            handshake(&Method::GET, &h, &up).map_err(|e| e.code)
        };
        assert_eq!(decide(&[("sec-websocket-protocol", "v4.channel.k8s.io, v5.channel.k8s.io")]), Ok(Protocol::V5));
        assert_eq!(
            decide(&[("sec-websocket-protocol", "x"), ("sec-websocket-protocol", "v4.channel.k8s.io")]),
            Ok(Protocol::V4)
        );
        assert_eq!(decide(&[("sec-websocket-protocol", "channel.k8s.io")]), Err(403));
        assert_eq!(decide(&[]), Err(403));
        let accept = switching_protocols("dGhlIHNhbXBsZSBub25jZQ==", Protocol::V5).expect("101");
        assert_eq!(accept.headers()["sec-websocket-accept"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(accept.headers()["sec-websocket-protocol"], "v5.channel.k8s.io");
    }

    #[test]
    fn options_read_repeated_commands_and_booleans_like_the_parameter_codec() {
        let o = Options::parse(Some(
            "command=sh&command=-c&command=echo+hi%3B+exit+2&stdout=true&stderr=1&tty=false&stdin=false",
        ));
        assert_eq!(o.command, ["sh", "-c", "echo hi; exit 2"]);
        assert!(o.stdout && o.stderr && !o.stdin && !o.tty);
        let t = Options::parse(Some("command=x&stderr=true&tty=true"));
        assert!(t.tty && !t.stderr, "a TTY merges stderr into stdout");
    }

    #[test]
    fn exec_is_authorized_as_create() {
        let info = |m: Method, p: &str| authorized_as(RequestInfo::new(&m, p, &Query::default())).verb;
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods/p/exec"), "create");
        assert_eq!(info(Method::POST, "/api/v1/namespaces/a/pods/p/exec"), "create");
        assert_eq!(info(Method::GET, "/api/v1/namespaces/a/pods/p/log"), "get");
    }
}
