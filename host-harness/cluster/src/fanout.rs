//! Routing the store's events to the watches they concern.
//!
//! Most watches are about one object: a client waiting for its Sandbox to be Ready watches with
//! `fieldSelector=metadata.name=N`. Offering every event to every watch costs each write one wake-up
//! and one selector check per open watch, so with hundreds of such watches open the server spent
//! more time discarding events than serving them. Events are routed instead: a watch pinned to a
//! name hears only the events of objects with that name, any other watch only its own table's.
//! The watch still applies its namespace and selectors; routing only skips what cannot match.
//!
//! A watch that falls `capacity` events behind is cut after the events it already holds, and its
//! [`Feed`] ends with [`FeedEnd::Lagged`], which the watch reports as 410 Gone, as kube-apiserver's
//! watch cache does with a watcher too slow to keep up
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#410-gone-responses>).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::store::StoredEvent;

/// What a watch wants to hear about: one table, optionally only the objects of one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    /// The table (storage key) watched.
    pub storage: &'static str,
    /// The one name the watch is pinned to, if any (by the URL or a `metadata.name=` selector).
    pub name: Option<String>,
}

impl Interest {
    /// Every event of a table.
    #[cfg(test)]
    pub fn table(storage: &'static str) -> Self {
        Self { storage, name: None }
    }
}

/// Why a feed ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeedEnd {
    /// The watch fell too far behind and was cut; it must start again from a list.
    Lagged,
    /// The store is gone.
    Closed,
}

struct Sink {
    id: u64,
    tx: mpsc::Sender<Arc<StoredEvent>>,
    lagged: Arc<AtomicBool>,
}

#[derive(Default)]
struct Routes {
    by_table: HashMap<&'static str, Vec<Sink>>,
    by_name: HashMap<(&'static str, String), Vec<Sink>>,
}

impl Routes {
    fn sinks(&mut self, interest: &Interest) -> Option<&mut Vec<Sink>> {
        match &interest.name {
            None => self.by_table.get_mut(interest.storage),
            Some(name) => self.by_name.get_mut(&(interest.storage, name.clone())),
        }
    }

    fn remove(&mut self, interest: &Interest, id: u64) {
        let Some(sinks) = self.sinks(interest) else {
            return;
        };
        sinks.retain(|s| s.id != id);
        if sinks.is_empty() {
            match &interest.name {
                None => self.by_table.remove(interest.storage),
                Some(name) => self.by_name.remove(&(interest.storage, name.clone())),
            };
        }
    }
}

/// Offers each event to the sinks of its table and of its object's name; drops the sinks whose
/// watch is gone or full (marking the full ones lagged). Returns whether the list is now empty.
fn offer(sinks: &mut Vec<Sink>, event: &Arc<StoredEvent>) -> bool {
    sinks.retain(|sink| match sink.tx.try_send(event.clone()) {
        Ok(()) => true,
        Err(TrySendError::Full(_)) => {
            sink.lagged.store(true, Ordering::Release);
            false
        }
        Err(TrySendError::Closed(_)) => false,
    });
    sinks.is_empty()
}

/// The routing table between the store and its watches.
pub struct Fanout {
    routes: Arc<Mutex<Routes>>,
    capacity: usize,
    next_id: AtomicU64,
}

fn lock(routes: &Mutex<Routes>) -> MutexGuard<'_, Routes> {
    routes.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Fanout {
    /// A fan-out that lets each watch hold up to `capacity` undelivered events.
    pub fn new(capacity: usize) -> Self {
        Self { routes: Arc::default(), capacity: capacity.max(1), next_id: AtomicU64::new(0) }
    }

    /// A feed of every later event matching `interest`.
    pub fn subscribe(&self, interest: Interest) -> Feed {
        let (tx, rx) = mpsc::channel(self.capacity);
        let lagged = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let sink = Sink { id, tx, lagged: lagged.clone() };
        let mut routes = lock(&self.routes);
        match &interest.name {
            None => routes.by_table.entry(interest.storage).or_default().push(sink),
            Some(name) => routes.by_name.entry((interest.storage, name.clone())).or_default().push(sink),
        }
        Feed { rx, lagged, id, interest, routes: Arc::downgrade(&self.routes) }
    }

    /// Delivers one event to the watches it concerns, without waiting for any of them.
    pub fn publish(&self, event: &Arc<StoredEvent>) {
        let mut routes = lock(&self.routes);
        if let Some(sinks) = routes.by_table.get_mut(event.storage)
            && offer(sinks, event)
        {
            routes.by_table.remove(event.storage);
        }
        if routes.by_name.is_empty() {
            return;
        }
        let Some(name) = event.object.pointer("/metadata/name").and_then(serde_json::Value::as_str) else {
            return;
        };
        let key = (event.storage, name.to_string());
        if let Some(sinks) = routes.by_name.get_mut(&key)
            && offer(sinks, event)
        {
            routes.by_name.remove(&key);
        }
    }

    /// How many watches are routed.
    #[cfg(test)]
    pub fn watches(&self) -> usize {
        let routes = lock(&self.routes);
        routes.by_table.values().chain(routes.by_name.values()).map(Vec::len).sum()
    }
}

/// One watch's events, in resourceVersion order; dropping it unroutes the watch.
#[derive(Debug)]
pub struct Feed {
    rx: mpsc::Receiver<Arc<StoredEvent>>,
    lagged: Arc<AtomicBool>,
    id: u64,
    interest: Interest,
    routes: Weak<Mutex<Routes>>,
}

impl Feed {
    /// The next event, or why there will be none.
    pub async fn recv(&mut self) -> Result<Arc<StoredEvent>, FeedEnd> {
        match self.rx.recv().await {
            Some(event) => Ok(event),
            None if self.lagged.load(Ordering::Acquire) => Err(FeedEnd::Lagged),
            None => Err(FeedEnd::Closed),
        }
    }

    /// Whether no event is waiting (a bookmark is only sent when the watch is caught up).
    pub fn is_empty(&self) -> bool {
        self.rx.is_empty()
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        if let Some(routes) = self.routes.upgrade() {
            lock(&routes).remove(&self.interest, self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::EventType;
    use serde_json::json;

    fn event(rv: u64, storage: &'static str, name: &str) -> Arc<StoredEvent> {
        Arc::new(StoredEvent {
            rv,
            storage,
            kind: EventType::Added,
            object: Arc::new(json!({"metadata": {"namespace": "a", "name": name}})),
            previous: None,
        })
    }

    fn pinned(storage: &'static str, name: &str) -> Interest {
        Interest { storage, name: Some(name.to_string()) }
    }

    #[tokio::test]
    async fn a_watch_pinned_to_a_name_hears_only_that_names_events() {
        let fanout = Fanout::new(16);
        let mut mine = fanout.subscribe(pinned("sandboxes", "x"));
        fanout.publish(&event(1, "sandboxes", "y"));
        fanout.publish(&event(2, "pods", "x"));
        assert!(mine.is_empty(), "another object's events and another table's were queued");
        fanout.publish(&event(3, "sandboxes", "x"));
        assert_eq!(mine.recv().await.expect("event").rv, 3);
        assert!(mine.is_empty());
    }

    #[tokio::test]
    async fn a_table_watch_hears_every_event_of_its_table_and_no_other() {
        let fanout = Fanout::new(16);
        let mut all = fanout.subscribe(Interest::table("pods"));
        let _pinned = fanout.subscribe(pinned("pods", "p"));
        for (rv, storage, name) in [(1, "pods", "p"), (2, "secrets", "p"), (3, "pods", "q")] {
            fanout.publish(&event(rv, storage, name));
        }
        assert_eq!(all.recv().await.expect("first").rv, 1);
        assert_eq!(all.recv().await.expect("second").rv, 3);
        assert!(all.is_empty());
    }

    #[tokio::test]
    async fn a_watch_that_falls_behind_gets_what_it_holds_then_lagged() {
        let fanout = Fanout::new(2);
        let mut slow = fanout.subscribe(Interest::table("pods"));
        for rv in 1..=3 {
            fanout.publish(&event(rv, "pods", "p"));
        }
        assert_eq!(fanout.watches(), 0, "the lagging watch is unrouted");
        assert_eq!(slow.recv().await.expect("first").rv, 1);
        assert_eq!(slow.recv().await.expect("second").rv, 2);
        assert_eq!(slow.recv().await.expect_err("cut"), FeedEnd::Lagged);
    }

    #[tokio::test]
    async fn a_dropped_watch_is_unrouted_even_if_its_object_never_changes_again() {
        let fanout = Fanout::new(4);
        let a = fanout.subscribe(pinned("sandboxes", "x"));
        let b = fanout.subscribe(Interest::table("sandboxes"));
        assert_eq!(fanout.watches(), 2);
        drop(a);
        drop(b);
        assert_eq!(fanout.watches(), 0);
    }

    #[tokio::test]
    async fn a_feed_whose_store_is_gone_is_closed() {
        let fanout = Fanout::new(4);
        let mut feed = fanout.subscribe(Interest::table("pods"));
        drop(fanout);
        assert_eq!(feed.recv().await.expect_err("closed"), FeedEnd::Closed);
    }
}
