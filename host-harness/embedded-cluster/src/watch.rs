//! Watch: newline-delimited JSON events over a chunked response, from a resourceVersion or from
//! the current state, with selectors, bookmarks, `timeoutSeconds`, and 410 Gone for versions the
//! bounded history no longer holds.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::StreamBody;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;

use crate::apiserver::{ApiServer, Filter};
use crate::conversion;
use crate::fanout::{Feed, FeedEnd, Interest, Route};
use crate::request::Query;
use crate::resources::ResourceType;
use crate::status::ApiError;
use crate::store::{EventType, StoredEvent};
use crate::table::{self, Include, Rendering};

/// A watch's response body.
pub type WatchBody = StreamBody<ReceiverStream<Result<Frame<Bytes>, Infallible>>>;

/// A fault that ends a watch early.
#[derive(Debug, Clone)]
pub struct WatchCut {
    /// Send this error as an ERROR event first (e.g. 410 Expired); `None` just closes the stream.
    pub error: Option<ApiError>,
    /// Cut after this many events have been sent.
    pub after_events: usize,
}

/// Everything a watch needs, owned, so it can outlive the request handler.
pub struct WatchRequest {
    pub rt: ResourceType,
    pub namespace: Option<String>,
    pub name: Option<String>,
    pub query: Query,
    pub cut: Option<WatchCut>,
    pub bookmark_interval: Duration,
    /// Objects as the client's `Accept` asks: themselves, one-row Tables, or their metadata.
    pub rendering: Rendering,
    pub include: Include,
}

/// One event as a line of JSON, written straight from the object (no copy of it first).
fn event_line(kind: &str, object: &Value) -> Frame<Bytes> {
    #[derive(serde::Serialize)]
    struct Event<'a> {
        r#type: &'a str,
        object: &'a Value,
    }
    let mut line = serde_json::to_vec(&Event { r#type: kind, object }).unwrap_or_default();
    line.push(b'\n');
    Frame::data(Bytes::from(line))
}

fn bookmark(rt: &ResourceType, rv: u64, initial_end: bool) -> Frame<Bytes> {
    let mut meta = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    event_line("BOOKMARK", &json!({"kind": rt.kind, "apiVersion": rt.api_version(), "metadata": meta}))
}

/// Starts a watch; errors found before streaming (bad selectors, too-old version) are returned
/// as ordinary error responses.
pub fn start(server: Arc<ApiServer>, req: WatchRequest) -> Result<WatchBody, ApiError> {
    let filter = Filter::from_query(&req.rt, &req.query)?;
    let rv_param = req.query.get("resourceVersion").map(String::from);
    let send_initial = req.query.flag("sendInitialEvents");
    let bookmarks = req.query.flag("allowWatchBookmarks");
    let timeout = req.query.int("timeoutSeconds")?.filter(|t| *t > 0).map(|t| t as u64).unwrap_or(1800);
    let from: Option<u64> = match rv_param.as_deref() {
        None | Some("0") => None,
        Some(v) => Some(v.parse().map_err(|_| ApiError::bad_request(format!("invalid resource version: {v}")))?),
    };
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(256);
    let ns = req.namespace.clone();
    let route = match (req.name.as_deref().or(filter.exact_name()), filter.required_label()) {
        (Some(name), _) => Route::Name(name.to_string()),
        (None, Some((key, value))) => Route::Label(key.to_string(), value.to_string()),
        (None, None) => Route::Table,
    };
    let interest = Interest { storage: req.rt.storage, route };
    let (initial, replay, events, start_rv) = match (from, send_initial) {
        (Some(rv), false) => match server.store.subscribe_from(interest, Some(rv)) {
            Ok((current, replay, events)) => (Vec::new(), replay, events, current),
            Err(gone) => {
                // A real watch cache answers a too-old version with an ERROR event inside a 200.
                let frame = event_line("ERROR", &gone.to_status());
                let _ = tx.try_send(Ok(frame));
                return Ok(StreamBody::new(ReceiverStream::new(rx)));
            }
        },
        _ => {
            let (rv, items, events) = server.store.snapshot_and_subscribe(interest, ns.as_deref());
            (items, Vec::new(), events, rv)
        }
    };
    let name = req.name.clone();
    tokio::spawn(async move {
        let mut w = Watcher {
            tx,
            rt: req.rt,
            filter,
            ns,
            name,
            sent: 0,
            cut: req.cut,
            rendering: req.rendering,
            include: req.include,
            server: server.clone(),
        };
        let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
        for obj in &initial {
            if w.selected(obj) && !w.send("ADDED", obj).await {
                return;
            }
        }
        if send_initial && !w.emit(bookmark(&w.rt, start_rv, true)).await {
            return;
        }
        for ev in &replay {
            if !w.forward(ev).await {
                return;
            }
        }
        w.follow(events, deadline, bookmarks, req.bookmark_interval).await;
    });
    Ok(StreamBody::new(ReceiverStream::new(rx)))
}

struct Watcher {
    tx: mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
    rt: ResourceType,
    filter: Filter,
    ns: Option<String>,
    name: Option<String>,
    sent: usize,
    cut: Option<WatchCut>,
    rendering: Rendering,
    include: Include,
    server: Arc<ApiServer>,
}

impl Watcher {
    fn in_scope(&self, obj: &Value) -> bool {
        let meta = &obj["metadata"];
        self.ns.as_deref().is_none_or(|ns| meta["namespace"].as_str() == Some(ns))
            && self.name.as_deref().is_none_or(|n| meta["name"].as_str() == Some(n))
    }

    fn selected(&self, obj: &Value) -> bool {
        self.in_scope(obj) && self.filter.matches(obj)
    }

    /// Sends one frame; false when the client is gone or a cut fault fired.
    async fn emit(&mut self, frame: Frame<Bytes>) -> bool {
        self.tx.send(Ok(frame)).await.is_ok()
    }

    /// Fires an injected cut once its event budget is spent; true when the watch must end.
    async fn cut_due(&mut self) -> bool {
        let Some(cut) = &self.cut else {
            return false;
        };
        if self.sent < cut.after_events {
            return false;
        }
        if let Some(err) = &cut.error {
            let _ = self.tx.send(Ok(event_line("ERROR", &err.to_status()))).await;
        }
        true
    }

    async fn send(&mut self, kind: &str, obj: &Value) -> bool {
        if self.cut_due().await {
            return false;
        }
        self.sent += 1;
        let object = conversion::served(&self.rt, obj);
        let frame = if self.rendering == Rendering::Object {
            event_line(kind, &object)
        } else {
            let columns = self.server.schemas.printer_columns(&self.rt);
            let now = self.server.clock.now();
            event_line(kind, &table::render(&self.rt, columns, &object, self.rendering, self.include, now))
        };
        self.emit(frame).await
    }

    /// Translates a store event into what this watch should see, selectors included: an object
    /// that stops matching is DELETED for this watch, one that starts matching is ADDED.
    async fn forward(&mut self, ev: &StoredEvent) -> bool {
        if ev.storage != self.rt.storage || !self.in_scope(&ev.object) {
            return true;
        }
        let now = self.filter.matches(&ev.object);
        let before = ev.previous.as_deref().is_some_and(|p| self.filter.matches(p));
        let kind = match ev.kind {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if before || now => "DELETED",
            _ => return true,
        };
        self.send(kind, &ev.object).await
    }

    async fn follow(&mut self, mut events: Feed, deadline: tokio::time::Instant, bookmarks: bool, interval: Duration) {
        if self.cut_due().await {
            return;
        }
        let mut ticker = tokio::time::interval(interval.max(Duration::from_millis(10)));
        ticker.tick().await;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {
                    if bookmarks {
                        let rv = self.server.store.current_rv();
                        if events.is_empty() {
                            let _ = self.emit(bookmark(&self.rt, rv, false)).await;
                        }
                    }
                    return;
                }
                _ = ticker.tick(), if bookmarks => {
                    let rv = self.server.store.current_rv();
                    if events.is_empty() && !self.emit(bookmark(&self.rt, rv, false)).await {
                        return;
                    }
                }
                _ = self.tx.closed() => return,
                ev = events.recv() => match ev {
                    Ok(ev) => {
                        if !self.forward(&ev).await {
                            return;
                        }
                    }
                    Err(FeedEnd::Lagged) => {
                        let gone = ApiError::gone("too old resource version: the watch fell behind and must be restarted");
                        let _ = self.emit(event_line("ERROR", &gone.to_status())).await;
                        return;
                    }
                    Err(FeedEnd::Closed) => return,
                },
            }
        }
    }
}
