//! Informer caches of dynamic resources and the streams that drive reconciles from them, as
//! controller-runtime's cached client and watches give the real controllers.
//!
//! Every stream here yields an event only after the cache applied it, so a reconcile the event
//! triggers reads a cache at least as new as the event.

use futures::{Stream, StreamExt, future, stream};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource};

use super::triggers::OwnerTriggers;

/// A watch event, after the cache applied it.
pub type Event = Result<watcher::Event<DynamicObject>, watcher::Error>;

/// A cache of every object of `resource`, and its event stream (which must be polled, by a
/// controller's trigger, for the cache to fill).
pub fn reflect(
    client: &Client,
    resource: &ApiResource,
) -> (Store<DynamicObject>, impl Stream<Item = Event> + Send + 'static) {
    let writer = reflector::store::Writer::new(resource.clone());
    let reader = writer.as_reader();
    let api = Api::<DynamicObject>::all_with(client.clone(), resource);
    let events = reflector::reflector(writer, watcher::watcher(api, watcher::Config::default())).default_backoff();
    (reader, events)
}

/// The owners (of the controller's resource) that Sandbox events concern, one reconcile
/// request per owner and event.
pub fn owner_requests(
    events: impl Stream<Item = Event> + Send + 'static,
    triggers: OwnerTriggers,
) -> impl Stream<Item = ObjectRef<DynamicObject>> + Send + 'static {
    events
        .scan(triggers, |triggers, event| {
            let owners = match event {
                Ok(event) => triggers.on_event(&event),
                Err(error) => {
                    tracing::debug!(%error, "watch error");
                    Vec::new()
                }
            };
            future::ready(Some(owners))
        })
        .flat_map(stream::iter)
}

/// The cached objects of `store` in one namespace that `keep` selects.
pub fn in_namespace(
    store: &Store<DynamicObject>,
    namespace: &str,
    keep: impl Fn(&DynamicObject) -> bool,
) -> Vec<std::sync::Arc<DynamicObject>> {
    store.state_filter(|o| o.metadata.namespace.as_deref() == Some(namespace) && keep(o))
}

/// The cached object of `store` named `name` in `namespace`.
pub fn named(
    store: &Store<DynamicObject>,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
) -> Option<DynamicObject> {
    store.get(&ObjectRef::new_with(name, resource.clone()).within(namespace)).map(|o| (*o).clone())
}

/// A reference to a namespaced object of the controller's resource, for a reconcile request.
pub fn request(resource: &ApiResource, namespace: &str, name: &str) -> ObjectRef<DynamicObject> {
    ObjectRef::new_with(name, resource.clone()).within(namespace)
}

/// Whether a kube error is the API's 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

/// Whether a kube error is the API's 409 (a stale resourceVersion or an existing name).
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// The namespace and name of an object, for logs.
pub fn key_of(obj: &DynamicObject) -> String {
    format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or_default(),
        obj.meta().name.as_deref().unwrap_or_default()
    )
}
