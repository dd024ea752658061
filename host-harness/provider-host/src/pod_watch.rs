//! The host's watch of the pods of a namespace it execs in: what keeps its proofs of pods
//! current ([`crate::proven_pods`]), so that an exec into a proven pod opens without reading it
//! first.
//!
//! One watch per namespace, started by the first exec there and ended with the host: kube-rs's
//! [`watcher`] over metadata only (`PartialObjectMetadata`: names, uids and owner references are
//! all it needs), which lists, then watches from the list's resource version and resumes from
//! the last one it saw when the API server closes the watch. A complete list starts a session;
//! every added, changed and deleted pod goes to the proofs. When the watcher fails, the session
//! ends (no proof is current) and the watch starts over with a new list after a pause, doubling
//! up to [`MAX_PAUSE`]; a cluster that forbids the host to list or watch pods ends it for good,
//! and the host's execs read each pod first, as without a watch.
//!
//! The host watches as itself, like the reads it proves ownership with: its Role grants `list`
//! and `watch` on pods wherever the policy grants `exec` ([`crate::rbac`]).
//!
//! [`watcher`]: kube::runtime::watcher()

use std::collections::HashMap;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ObjectMeta, PartialObjectMeta};
use kube::runtime::watcher::{self, Event};
use serde_json::Value;

use crate::proven_pods::WatchFeed;

/// The first pause after a failed watch; each failure in a row doubles it.
const FIRST_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause between two attempts.
const MAX_PAUSE: Duration = Duration::from_secs(30);

/// Starts watching `feed`'s namespace through `client`; the task to end with the host, or
/// `None` outside a Tokio runtime (then no proof becomes current).
pub(crate) fn start(client: kube::Client, feed: WatchFeed) -> Option<tokio::task::AbortHandle> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(run(client, feed)).abort_handle())
}

/// Tells the proofs the watch ended however its task ends: refused, or dropped with its
/// runtime.
struct EndsWith {
    feed: WatchFeed,
    refused: bool,
}

impl Drop for EndsWith {
    fn drop(&mut self) {
        self.feed.ended(self.refused);
    }
}

async fn run(client: kube::Client, feed: WatchFeed) {
    let mut end = EndsWith { feed: feed.clone(), refused: false };
    let api: Api<PartialObjectMeta<Pod>> = Api::namespaced(client, feed.namespace());
    let mut pause = FIRST_PAUSE;
    loop {
        let ended = follow(&api, &feed, &mut pause).await;
        if !feed.lost() {
            return;
        }
        match ended {
            Ended::HostGone => return,
            Ended::Forbidden(why) => {
                end.refused = true;
                tracing::warn!(target: "provider_host::kube", namespace = feed.namespace(), reason = %why,
                    "the host may not watch pods here, so each exec reads its pod before it opens; grant the \
                     host list and watch on pods (`sandbox-host rbac` does)");
                return;
            }
            Ended::Failed(why) => {
                tracing::debug!(target: "provider_host::kube", namespace = feed.namespace(), reason = %why,
                    pause_ms = pause.as_millis() as u64, "the host's watch of pods failed; it lists them again");
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// Why one run of the watcher ended.
enum Ended {
    HostGone,
    Forbidden(String),
    Failed(String),
}

/// Follows one watcher from its first list until it fails; a complete list resets `pause`.
async fn follow(api: &Api<PartialObjectMeta<Pod>>, feed: &WatchFeed, pause: &mut Duration) -> Ended {
    let mut events = std::pin::pin!(kube::runtime::watcher(api.clone(), watcher::Config::default()));
    let mut listing: HashMap<String, String> = HashMap::new();
    while let Some(event) = events.next().await {
        let alive = match event {
            Ok(Event::Init) => {
                listing.clear();
                feed.lost()
            }
            Ok(Event::InitApply(pod)) => {
                if let Some((name, uid)) = name_and_uid(&pod.metadata) {
                    listing.insert(name.to_string(), uid.to_string());
                }
                true
            }
            Ok(Event::InitDone) => {
                *pause = FIRST_PAUSE;
                feed.listed(&std::mem::take(&mut listing))
            }
            Ok(Event::Apply(pod)) => match name_and_uid(&pod.metadata) {
                Some((name, uid)) => feed.applied(name, uid, &owners(&pod.metadata)),
                None => true,
            },
            Ok(Event::Delete(pod)) => match name_and_uid(&pod.metadata) {
                Some((name, uid)) => feed.deleted(name, uid),
                None => true,
            },
            Err(e) => {
                return if forbidden(&e) { Ended::Forbidden(e.to_string()) } else { Ended::Failed(e.to_string()) };
            }
        };
        if !alive {
            return Ended::HostGone;
        }
    }
    Ended::Failed("the watch stream ended".to_string())
}

fn name_and_uid(meta: &ObjectMeta) -> Option<(&str, &str)> {
    Some((meta.name.as_deref()?, meta.uid.as_deref()?))
}

/// The owner references as the proofs keep them: the JSON of the pod's `ownerReferences`.
fn owners(meta: &ObjectMeta) -> Value {
    meta.owner_references.as_ref().and_then(|refs| serde_json::to_value(refs).ok()).unwrap_or(Value::Null)
}

/// Whether the watcher failed because the API server refused the host (401 or 403): no retry
/// changes that.
fn forbidden(error: &watcher::Error) -> bool {
    let api = match error {
        watcher::Error::InitialListFailed(e) | watcher::Error::WatchStartFailed(e) | watcher::Error::WatchFailed(e) => {
            e
        }
        _ => return false,
    };
    matches!(api, kube::Error::Api(status) if status.code == 401 || status.code == 403)
}
