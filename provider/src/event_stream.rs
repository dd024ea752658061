//! A watch that survives disconnects: it resumes from the last resourceVersion seen, re-lists
//! when the version is too old (410 Gone, which can also arrive as an ERROR event inside a
//! 200, or for an expired list continue token), and backs off under the one retry policy
//! (see `retry`) when the watch cannot be (re)opened or read.

use std::time::Duration;

use serde_json::Value;

use crate::clock::{Clock, Deadline};
use crate::errors::ProviderError;
use crate::kube_api::{Kube, KubeError, ListOptions, ResourceType, Watch, WatchEvent, WatchOptions};
use crate::log::Log;
use crate::object;
use crate::retry::Retrier;

/// Page size of a re-list.
const LIST_PAGE: u32 = 500;

/// One change seen by an [`EventStream`].
pub enum Change {
    Upsert(Value),
    Deleted(Value),
    /// The watch expired (410) and the current state was listed instead: replace what you knew.
    Relisted(Vec<Value>),
}

/// A watch that survives disconnects: resumes from the last resourceVersion, re-lists on 410.
pub struct EventStream<'k, K: Kube> {
    kube: &'k K,
    resource: ResourceType,
    namespace: String,
    label_selector: Option<String>,
    field_selector: Option<String>,
    watch: Option<K::Watch>,
    cursor: Option<String>,
    retrier: Retrier,
}

impl<'k, K: Kube> EventStream<'k, K> {
    /// A stream over `resource` in `namespace`; nothing is opened until [`Self::next`].
    pub fn new(
        kube: &'k K,
        resource: ResourceType,
        namespace: &str,
        label_selector: Option<String>,
        field_selector: Option<String>,
    ) -> Self {
        Self {
            kube,
            resource,
            namespace: namespace.to_string(),
            label_selector,
            field_selector,
            watch: None,
            cursor: None,
            retrier: Retrier::new(),
        }
    }

    fn what(&self) -> String {
        format!("{} in namespace {}", self.resource.plural, self.namespace)
    }

    /// Starts (or restarts) after `resource_version`.
    pub fn resume_from(&mut self, resource_version: &str) {
        self.watch = None;
        self.cursor = Some(resource_version.to_string());
    }

    /// Lists the current state (every page) and restarts the watch after it.
    pub fn relist(&mut self, clock: &dyn Clock, deadline: Deadline) -> Result<Vec<Value>, ProviderError> {
        self.watch = None;
        let mut items = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let options = ListOptions {
                label_selector: self.label_selector.clone(),
                field_selector: self.field_selector.clone(),
                limit: Some(LIST_PAGE),
                continue_token: token.clone(),
                resource_version: None,
            };
            let mut list = match self.kube.list(&self.resource, Some(&self.namespace), &options) {
                // The continue token expired mid-way: start the list again.
                Err(KubeError::Gone(_)) if token.is_some() => {
                    items.clear();
                    token = None;
                    continue;
                }
                Err(e) => {
                    let what = self.what();
                    self.retrier.failed(clock, deadline, e).map_err(|g| g.into_error(&format!("list {what}")))?;
                    continue;
                }
                Ok(list) => {
                    self.retrier.succeeded();
                    list
                }
            };
            items.extend(object::list_items(&mut list));
            let rv = object::str_at(&list, "/metadata/resourceVersion").map(str::to_string);
            match object::str_at(&list, "/metadata/continue") {
                Some(next) => token = Some(next.to_string()),
                None => {
                    self.cursor = rv;
                    return Ok(items);
                }
            }
        }
    }

    /// The next change, or `None` once the deadline has passed.
    pub fn next(
        &mut self,
        clock: &dyn Clock,
        log: &dyn Log,
        deadline: Deadline,
    ) -> Result<Option<Change>, ProviderError> {
        loop {
            let remaining = deadline.remaining(clock);
            if remaining.is_zero() {
                return Ok(None);
            }
            let Some(watch) = self.watch.as_mut() else {
                let Some(cursor) = self.cursor.clone() else {
                    return Ok(Some(Change::Relisted(self.relist(clock, deadline)?)));
                };
                let options = WatchOptions {
                    label_selector: self.label_selector.clone(),
                    field_selector: self.field_selector.clone(),
                    resource_version: Some(cursor),
                    timeout_seconds: Some(u32::try_from(remaining.as_secs() + 1).unwrap_or(u32::MAX)),
                    allow_bookmarks: true,
                };
                match self.kube.watch(&self.resource, Some(&self.namespace), &options) {
                    // An open watch shows the cluster answers, but is not progress yet: a watch
                    // that keeps ending before its first event keeps backing off.
                    Ok(w) => {
                        self.retrier.answered();
                        self.watch = Some(w);
                    }
                    Err(KubeError::Gone(_)) => {
                        log.debug("watch start is too old (410); re-listing", &[("resource", &self.resource.plural)]);
                        return Ok(Some(Change::Relisted(self.relist(clock, deadline)?)));
                    }
                    Err(e) => {
                        log.debug("could not open the watch", &[("error", &e.to_string())]);
                        let what = self.what();
                        self.retrier.failed(clock, deadline, e).map_err(|g| g.into_error(&format!("watch {what}")))?;
                    }
                }
                continue;
            };
            let wait_ms = u32::try_from(remaining.as_millis()).unwrap_or(u32::MAX);
            match watch.next(Duration::from_millis(u64::from(wait_ms))) {
                Ok(None) => {}
                Ok(Some(event)) => {
                    self.retrier.succeeded();
                    let (change, rv) = match event {
                        WatchEvent::Bookmark(rv) => (None, Some(rv)),
                        WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                            let rv = object::resource_version(&o).map(str::to_string);
                            (Some(Change::Upsert(o)), rv)
                        }
                        WatchEvent::Deleted(o) => {
                            let rv = object::resource_version(&o).map(str::to_string);
                            (Some(Change::Deleted(o)), rv)
                        }
                    };
                    if rv.is_some() {
                        self.cursor = rv;
                    }
                    if let Some(change) = change {
                        return Ok(Some(change));
                    }
                }
                Err(KubeError::Gone(_)) => {
                    log.debug("watch expired (410); re-listing", &[("resource", &self.resource.plural)]);
                    return Ok(Some(Change::Relisted(self.relist(clock, deadline)?)));
                }
                Err(e) => {
                    log.debug(
                        "watch dropped; resuming from the last version seen",
                        &[("error", &e.to_string()), ("resourceVersion", self.cursor.as_deref().unwrap_or(""))],
                    );
                    self.watch = None;
                    let what = self.what();
                    self.retrier.failed(clock, deadline, e).map_err(|g| g.into_error(&format!("watch {what}")))?;
                }
            }
        }
    }
}
