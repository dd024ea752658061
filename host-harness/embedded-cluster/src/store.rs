//! The object store: every object, a cluster-wide resourceVersion, and a bounded event history.
//!
//! All writes go through one short critical section ([`Store::write`]), so a read-modify-write
//! (update with a resourceVersion check, patch, a namespace deletion that touches many objects)
//! is atomic, and the event stream is totally ordered by resourceVersion, as etcd gives the real
//! API server. Watches replay the history from a resourceVersion and then follow their
//! [`Feed`], which the [`Fanout`] fills with the events they can concern.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::fanout::{Fanout, Feed, Interest};
use crate::status::ApiError;

/// What happened to an object, as a watch reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change in the store.
#[derive(Debug)]
pub struct StoredEvent {
    pub rv: u64,
    pub storage: &'static str,
    pub kind: EventType,
    /// The object after the change (for a deletion: as it was, with the deletion's resourceVersion).
    pub object: Arc<Value>,
    /// The object before the change, so a filtered watch can tell "left the selection" from "changed".
    pub previous: Option<Arc<Value>>,
}

type Key = (String, String);

#[derive(Default)]
struct Inner {
    rv: u64,
    tables: HashMap<&'static str, BTreeMap<Key, Arc<Value>>>,
    history: VecDeque<Arc<StoredEvent>>,
    /// Highest resourceVersion dropped from the history: a watch must start at or after it.
    compacted: u64,
    /// The resourceVersion at which the watch cache started: history before it was never kept.
    watch_start: u64,
}

impl Inner {
    /// A table's objects in key order, optionally of one namespace (a range scan, not a filter).
    fn items(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        let Some(table) = self.tables.get(storage) else {
            return Vec::new();
        };
        match namespace {
            None => table.values().cloned().collect(),
            Some(ns) => table
                .range((ns.to_string(), String::new())..)
                .take_while(|((n, _), _)| n == ns)
                .map(|(_, v)| v.clone())
                .collect(),
        }
    }
}

/// The store shared by every request handler.
pub struct Store {
    inner: Mutex<Inner>,
    history_cap: usize,
    fanout: Fanout,
}

/// What a watch starts from: the current resourceVersion, the events to replay, and the live feed.
pub type Subscription = (u64, Vec<Arc<StoredEvent>>, Feed);

/// A write transaction: reads see earlier writes of the same transaction.
pub struct Txn<'a> {
    inner: &'a mut Inner,
    history_cap: usize,
    fanout: &'a Fanout,
}

/// The resourceVersion of an object as a number (0 when absent or malformed).
pub fn object_rv(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion").and_then(Value::as_str).and_then(|s| s.parse().ok()).unwrap_or(0)
}

fn key_of(obj: &Value) -> Key {
    let meta = &obj["metadata"];
    (meta["namespace"].as_str().unwrap_or_default().to_string(), meta["name"].as_str().unwrap_or_default().to_string())
}

impl Store {
    /// A store that keeps the last `history_cap` events for watches to resume from.
    pub fn new(history_cap: usize) -> Self {
        Self {
            inner: Mutex::new(Inner::default()),
            history_cap: history_cap.max(1),
            fanout: Fanout::new(history_cap.clamp(1024, 65536)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current cluster-wide resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// One object.
    pub fn get(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let inner = self.lock();
        inner.tables.get(storage)?.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    /// A consistent snapshot of a table (optionally one namespace), in key order, with its resourceVersion.
    pub fn list(&self, storage: &str, namespace: Option<&str>) -> (u64, Vec<Arc<Value>>) {
        let inner = self.lock();
        (inner.rv, inner.items(storage, namespace))
    }

    /// Counts objects per storage key (for memory figures and tests).
    pub fn count(&self, storage: &str) -> usize {
        self.lock().tables.get(storage).map_or(0, BTreeMap::len)
    }

    /// Runs `f` atomically. `f` must check everything before its first write: a transaction that
    /// returns an error after writing keeps those writes.
    pub fn write<T>(&self, f: impl FnOnce(&mut Txn<'_>) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let mut inner = self.lock();
        let mut txn = Txn { inner: &mut inner, history_cap: self.history_cap, fanout: &self.fanout };
        f(&mut txn)
    }

    /// A table's objects (optionally one namespace) and a feed of every later event `interest`
    /// names, taken atomically, so a watch that starts "now" misses and repeats nothing.
    pub fn snapshot_and_subscribe(&self, interest: Interest, namespace: Option<&str>) -> (u64, Vec<Arc<Value>>, Feed) {
        let inner = self.lock();
        let items = inner.items(interest.storage, namespace);
        (inner.rv, items, self.fanout.subscribe(interest))
    }

    /// Starts the watch cache at the current resourceVersion, as kube-apiserver's starts at the
    /// version its first list saw: a watch from an older version is answered 410, never with
    /// history from before (the bootstrap objects were written "before the server started").
    pub fn start_watch_cache(&self) {
        let mut inner = self.lock();
        inner.watch_start = inner.rv;
    }

    /// The events after `rv` that the history still holds, and a feed of the later ones
    /// `interest` names. `None` starts at the current state (no replay). A too-old `rv` is 410 Gone.
    pub fn subscribe_from(&self, interest: Interest, rv: Option<u64>) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let Some(rv) = rv else {
            return Ok((inner.rv, Vec::new(), self.fanout.subscribe(interest)));
        };
        let oldest = inner.compacted.max(inner.watch_start);
        if rv < oldest {
            // The watch cache's wording (`watch_cache.go`): the version asked for, then the oldest
            // one it can still start from.
            return Err(ApiError::gone(format!("too old resource version: {rv} ({oldest})")));
        }
        let replay = inner.history.iter().filter(|e| e.rv > rv).cloned().collect();
        Ok((inner.rv, replay, self.fanout.subscribe(interest)))
    }
}

/// Reading stored objects, outside a transaction or inside one (where [`Store`]'s own reads
/// would wait for the lock the transaction holds), for code that runs in both places.
pub trait Objects {
    /// One object.
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>>;
    /// Every object of a table in one namespace (or all namespaces), in key order.
    fn objects(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>>;
}

impl Objects for Store {
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.get(storage, namespace, name)
    }

    fn objects(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list(storage, namespace).1
    }
}

impl Objects for Txn<'_> {
    fn object(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.get(storage, namespace, name)
    }

    fn objects(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.list(storage, namespace)
    }
}

impl Txn<'_> {
    /// One object, as this transaction sees it.
    pub fn get(&self, storage: &str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        self.inner.tables.get(storage)?.get(&(namespace.to_string(), name.to_string())).cloned()
    }

    /// Every object of a table in one namespace (or all namespaces).
    pub fn list(&self, storage: &str, namespace: Option<&str>) -> Vec<Arc<Value>> {
        self.inner.items(storage, namespace)
    }

    /// Creates or replaces an object, stamping the next resourceVersion.
    pub fn put(&mut self, storage: &'static str, mut obj: Value) -> Arc<Value> {
        self.inner.rv += 1;
        let rv = self.inner.rv;
        obj["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let obj = Arc::new(obj);
        let previous = self.inner.tables.entry(storage).or_default().insert(key_of(&obj), obj.clone());
        let kind = if previous.is_some() { EventType::Modified } else { EventType::Added };
        self.emit(StoredEvent { rv, storage, kind, object: obj.clone(), previous });
        obj
    }

    /// Removes an object; the DELETED event carries the deletion's resourceVersion.
    pub fn remove(&mut self, storage: &'static str, namespace: &str, name: &str) -> Option<Arc<Value>> {
        let previous = self.inner.tables.get_mut(storage)?.remove(&(namespace.to_string(), name.to_string()))?;
        self.inner.rv += 1;
        let rv = self.inner.rv;
        let mut last = (*previous).clone();
        last["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        let last = Arc::new(last);
        self.emit(StoredEvent {
            rv,
            storage,
            kind: EventType::Deleted,
            object: last.clone(),
            previous: Some(previous),
        });
        Some(last)
    }

    fn emit(&mut self, event: StoredEvent) {
        let event = Arc::new(event);
        self.inner.history.push_back(event.clone());
        while self.inner.history.len() > self.history_cap {
            if let Some(dropped) = self.inner.history.pop_front() {
                self.inner.compacted = dropped.rv;
            }
        }
        self.fanout.publish(&event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(ns: &str, name: &str) -> Value {
        json!({"metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn resource_versions_increase_across_tables() {
        let store = Store::new(10);
        let a = store.write(|t| Ok(t.put("pods", obj("a", "x")))).expect("write");
        let b = store.write(|t| Ok(t.put("secrets", obj("a", "y")))).expect("write");
        assert!(object_rv(&b) > object_rv(&a));
        assert_eq!(store.current_rv(), object_rv(&b));
    }

    #[test]
    fn list_by_namespace_is_exact() {
        let store = Store::new(10);
        store
            .write(|t| {
                t.put("pods", obj("a", "1"));
                t.put("pods", obj("ab", "2"));
                t.put("pods", obj("a", "3"));
                Ok(())
            })
            .expect("write");
        assert_eq!(store.list("pods", Some("a")).1.len(), 2);
        assert_eq!(store.list("pods", None).1.len(), 3);
    }

    #[test]
    fn old_resource_versions_are_gone() {
        let store = Store::new(2);
        for i in 0..5 {
            store.write(|t| Ok(t.put("pods", obj("a", &i.to_string())))).expect("write");
        }
        let err = store.subscribe_from(Interest::table("pods"), Some(1)).expect_err("410");
        assert_eq!(err.code, 410);
        let (_, replay, _) = store.subscribe_from(Interest::table("pods"), Some(3)).expect("recent rv");
        assert_eq!(replay.iter().map(|e| e.rv).collect::<Vec<_>>(), vec![4, 5]);
    }

    #[tokio::test]
    async fn deletion_event_carries_new_rv_and_previous() {
        let store = Store::new(10);
        store.write(|t| Ok(t.put("pods", obj("a", "x")))).expect("write");
        let (_, _, mut feed) = store.subscribe_from(Interest::table("pods"), None).expect("subscribe");
        store.write(|t| Ok(t.remove("pods", "a", "x"))).expect("remove");
        let ev = feed.recv().await.expect("event");
        assert_eq!(ev.kind, EventType::Deleted);
        assert_eq!(object_rv(&ev.object), 2);
        assert!(ev.previous.is_some());
        assert!(store.get("pods", "a", "x").is_none());
    }
}
