//! An open watch: the response body of a `?watch=true` request, read one JSON line at a time.
//!
//! `next` waits at most the guest's timeout and is cancel-safe: bytes already received stay in
//! the buffer when the wait runs out, so no event is lost between two calls. An ERROR event
//! (410 Expired inside a 200 stream) ends the watch with the mapped error; so does the stream
//! ending, as `transport`, which the contract defines as "resume from your last version".

use std::time::Duration;

use http_body_util::BodyExt;
use kube::client::Body;
use serde_json::Value;

use crate::bindings::kube::{KubeError, ResourceType, WatchEvent};
use crate::kube_errors;

/// Longest event line accepted; a larger one means a broken or hostile stream.
const MAX_LINE: usize = 32 * 1024 * 1024;

/// A watch held for the guest (the host side of the WIT `watch` resource).
pub struct WatchStream {
    body: Body,
    buffer: Vec<u8>,
    ended: Option<KubeError>,
    what: String,
    resource: ResourceType,
}

impl WatchStream {
    /// Wraps a successful watch response body; `what` names the watch in messages; `resource`
    /// is what it watches, for deciding which events the provider may see.
    pub(crate) fn new(body: Body, what: String, resource: ResourceType) -> Self {
        Self { body, buffer: Vec::new(), ended: None, what, resource }
    }

    /// What the watch is of, for messages.
    pub(crate) fn what(&self) -> &str {
        &self.what
    }

    /// The resource type it watches.
    pub(crate) fn resource(&self) -> &ResourceType {
        &self.resource
    }

    /// The next event, waiting at most `timeout`; `Ok(None)` when none came in time. Once an
    /// error was returned, every later call returns it again.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<WatchEvent>, KubeError> {
        if let Some(err) = &self.ended {
            return Err(err.clone());
        }
        match tokio::time::timeout(timeout, self.next_event()).await {
            Err(_) => Ok(None),
            Ok(Ok(event)) => Ok(Some(event)),
            Ok(Err(err)) => {
                self.ended = Some(err.clone());
                Err(err)
            }
        }
    }

    async fn next_event(&mut self) -> Result<WatchEvent, KubeError> {
        loop {
            let line = self.next_line().await?;
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            return self.parse(&line);
        }
    }

    /// One complete line; the only await is on the body, and a received frame is moved into
    /// the buffer before the next await, so dropping this future loses nothing.
    async fn next_line(&mut self) -> Result<Vec<u8>, KubeError> {
        loop {
            if let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
                let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
                line.pop();
                return Ok(line);
            }
            if self.buffer.len() > MAX_LINE {
                return Err(KubeError::Transport(format!(
                    "{}: a watch event exceeded {MAX_LINE} bytes; resume the watch",
                    self.what
                )));
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.buffer.extend_from_slice(&data);
                    }
                }
                Some(Err(err)) => {
                    let mapped = kube_errors::from_client_error(&err);
                    return Err(match mapped {
                        KubeError::Transport(m) => KubeError::Transport(format!("{}: the watch broke: {m}", self.what)),
                        other => other,
                    });
                }
                None => {
                    return Err(KubeError::Transport(format!(
                        "{}: the server ended the watch; resume from the last resourceVersion seen",
                        self.what
                    )));
                }
            }
        }
    }

    fn parse(&self, line: &[u8]) -> Result<WatchEvent, KubeError> {
        let unreadable = |detail: String| {
            KubeError::Transport(format!("{}: unreadable watch event ({detail}); resume the watch", self.what))
        };
        let mut event: Value = serde_json::from_slice(line).map_err(|e| unreadable(e.to_string()))?;
        let object = event.get_mut("object").map(Value::take).unwrap_or(Value::Null);
        let text = || serde_json::to_string(&object).map_err(|e| unreadable(e.to_string()));
        match event["type"].as_str().unwrap_or_default() {
            "ADDED" => Ok(WatchEvent::Added(text()?)),
            "MODIFIED" => Ok(WatchEvent::Modified(text()?)),
            "DELETED" => Ok(WatchEvent::Deleted(text()?)),
            "BOOKMARK" => match object["metadata"]["resourceVersion"].as_str() {
                Some(rv) => Ok(WatchEvent::Bookmark(rv.to_string())),
                None => Err(unreadable("a bookmark without metadata.resourceVersion".to_string())),
            },
            "ERROR" => Err(kube_errors::from_status(500, &object, None)),
            other => Err(unreadable(format!("unknown event type {other:?}"))),
        }
    }
}
