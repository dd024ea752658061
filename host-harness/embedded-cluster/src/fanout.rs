//! Routing the store's events to the watches they concern.
//!
//! Most watches are about a few objects: a client waiting for its Sandbox watches it with
//! `fieldSelector=metadata.name=N`, and its pods with `labelSelector=<hash label>=<hash>`.
//! Offering every event to every watch costs each write one wake-up and one selector check per
//! open watch, so with hundreds of such watches open the server spent more time discarding events
//! than serving them. Events are routed instead: a watch pinned to a name hears only the events of
//! objects with that name; one whose label selector requires `key=value` only those of objects
//! that have or had that label; any other watch its whole table. The watch still applies its
//! namespace and selectors; routing only skips what cannot match.
//!
//! A watch that falls `capacity` events behind is cut after the events it already holds, and its
//! [`Feed`] ends with [`FeedEnd::Lagged`], which the watch reports as 410 Gone, as kube-apiserver's
//! watch cache does with a watcher too slow to keep up
//! (<https://kubernetes.io/docs/reference/using-api/api-concepts/#410-gone-responses>).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TrySendError;

use crate::store::StoredEvent;

/// How a watch is routed: by the narrowest thing every object it selects must have.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Route {
    /// Every event of the table.
    Table,
    /// The events of objects with this name (the URL's name or a `metadata.name=` selector).
    Name(String),
    /// The events of objects that carry this label with this value, or carried it before the
    /// change (so the watch hears an object leave its selection): an equality term of the
    /// watch's label selector.
    Label(String, String),
}

/// What a watch wants to hear about: one table, routed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interest {
    /// The table (storage key) watched.
    pub storage: &'static str,
    /// Which of the table's events can concern the watch.
    pub route: Route,
}

impl Interest {
    /// Every event of a table.
    #[cfg(test)]
    pub fn table(storage: &'static str) -> Self {
        Self { storage, route: Route::Table }
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

type Routes = HashMap<(&'static str, Route), Vec<Sink>>;

/// The routes an event can concern: its table, its object's name, and every label its object
/// has or had before the change.
fn routes_of(event: &StoredEvent) -> Vec<Route> {
    let object = &event.object;
    let mut routes = vec![Route::Table];
    if let Some(name) = object.pointer("/metadata/name").and_then(Value::as_str) {
        routes.push(Route::Name(name.to_string()));
    }
    let labels = |o: &Value| {
        o.pointer("/metadata/labels")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
            .collect::<Vec<_>>()
    };
    let mut pairs: BTreeSet<(String, String)> = labels(object).into_iter().collect();
    if let Some(previous) = &event.previous {
        pairs.extend(labels(previous));
    }
    routes.extend(pairs.into_iter().map(|(k, v)| Route::Label(k, v)));
    routes
}

/// Offers an event to the sinks of one route; drops the sinks whose watch is gone or full
/// (marking the full ones lagged). Returns whether the route has no sink left.
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
        lock(&self.routes).entry((interest.storage, interest.route.clone())).or_default().push(sink);
        Feed { rx, lagged, id, interest, routes: Arc::downgrade(&self.routes) }
    }

    /// Delivers one event to the watches it concerns, without waiting for any of them.
    pub fn publish(&self, event: &Arc<StoredEvent>) {
        let mut routes = lock(&self.routes);
        if routes.is_empty() {
            return;
        }
        for route in routes_of(event) {
            let key = (event.storage, route);
            if let Some(sinks) = routes.get_mut(&key)
                && offer(sinks, event)
            {
                routes.remove(&key);
            }
        }
    }

    /// How many watches are routed.
    #[cfg(test)]
    pub fn watches(&self) -> usize {
        lock(&self.routes).values().map(Vec::len).sum()
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
        let Some(routes) = self.routes.upgrade() else {
            return;
        };
        let mut routes = lock(&routes);
        let key = (self.interest.storage, self.interest.route.clone());
        if let Some(sinks) = routes.get_mut(&key) {
            sinks.retain(|s| s.id != self.id);
            if sinks.is_empty() {
                routes.remove(&key);
            }
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
        Interest { storage, route: Route::Name(name.to_string()) }
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

    fn labelled(rv: u64, name: &str, labels: Value, previous: Option<Value>) -> Arc<StoredEvent> {
        Arc::new(StoredEvent {
            rv,
            storage: "pods",
            kind: if previous.is_some() { EventType::Modified } else { EventType::Added },
            object: Arc::new(json!({"metadata": {"namespace": "a", "name": name, "labels": labels}})),
            previous: previous.map(|l| Arc::new(json!({"metadata": {"namespace": "a", "name": name, "labels": l}}))),
        })
    }

    #[tokio::test]
    async fn a_watch_routed_by_label_hears_objects_that_have_or_had_it_once_each() {
        let fanout = Fanout::new(16);
        let route = Route::Label("app".into(), "x".into());
        let mut mine = fanout.subscribe(Interest { storage: "pods", route });
        fanout.publish(&labelled(1, "other", json!({"app": "y"}), None));
        assert!(mine.is_empty(), "an object without the label was queued");
        fanout.publish(&labelled(2, "p", json!({"app": "x", "tier": "x"}), None));
        fanout.publish(&labelled(3, "p", json!({"app": "x"}), Some(json!({"app": "x"}))));
        fanout.publish(&labelled(4, "p", json!({"app": "y"}), Some(json!({"app": "x"}))));
        for rv in [2, 3, 4] {
            assert_eq!(mine.recv().await.expect("event").rv, rv);
        }
        assert!(mine.is_empty(), "an event was delivered twice");
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
