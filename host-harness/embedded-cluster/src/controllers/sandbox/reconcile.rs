//! The thin I/O loop: discover the served version, watch Sandboxes and their dependents,
//! observe, ask [`plan`](super::plan) what to do, and do it through the API server.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use contract::k8s::agent_sandbox;
use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery;
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::model::{Sandbox, SandboxVersion};
use super::plan::{Action, Failure, Observed, Plan, plan, status_after_failure};
use super::pod_index::PodIndex;
use super::status::status_merge_patch;
use super::{GROUP, KIND, NAME_HASH_LABEL, PLURAL, POD_NAME_ANNOTATION, name_hash};
use crate::clock::Clock;

/// Real time between discovery attempts while the API group is not served yet.
const DISCOVERY_RETRY: Duration = Duration::from_secs(1);
/// Real time before retrying a reconcile that failed.
const ERROR_RETRY: Duration = Duration::from_millis(500);
/// Passes of observe → plan → act per reconcile when a create finds the object exists.
const MAX_PASSES: usize = 3;

/// Shared by every reconcile.
struct Context {
    client: Client,
    clock: Arc<Clock>,
    resource: ApiResource,
    version: SandboxVersion,
    /// Informer caches, as controller-runtime's cached client gives the real controller: a
    /// reconcile reads them instead of the API server, and falls back to fresh reads only when
    /// a create shows the cache was behind.
    caches: Caches,
}

/// The watch-fed caches a reconcile reads.
struct Caches {
    sandboxes: Store<DynamicObject>,
    pods: Store<Pod>,
    /// The pods' names by Sandbox name hash, fed by the pod cache's own watch.
    pods_by_hash: PodIndex,
    services: Store<Service>,
    claims: Store<PersistentVolumeClaim>,
}

/// A reflector over one child kind (labelled with the name hash): its cache, and the stream of
/// changed objects that triggers reconciles only after the cache (and `observe`) applied them.
fn cached_stream<K>(
    api: Api<K>,
    config: watcher::Config,
    observe: impl Fn(&watcher::Event<K>) + Send + 'static,
) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static)
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher::watcher(api, config))
        .inspect(move |event| {
            if let Ok(event) = event {
                observe(event);
            }
        })
        .default_backoff()
        .touched_objects();
    (reader, stream)
}

/// A reconcile failure, with its anyhow context chain, in the shape kube's controller wants.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct ReconcileError(anyhow::Error);

/// Runs until the future is dropped or a fatal error occurs.
///
/// Waits until `agents.x-k8s.io` is served (preferring v1beta1 over v1alpha1), then drives
/// every Sandbox in every namespace. Besides watch events, every manual jump of `clock`
/// re-reconciles all Sandboxes, and `shutdownTime` deadlines are requeued in cluster time.
pub async fn run(client: Client, clock: Arc<Clock>) -> anyhow::Result<()> {
    let (resource, version) = discover(&client).await;
    info!(version = version.version(), "sandbox controller started");
    let children = watcher::Config::default().labels(NAME_HASH_LABEL);
    let pods_by_hash = PodIndex::default();
    let index = pods_by_hash.clone();
    let (pods, pod_events) =
        cached_stream(Api::<Pod>::all(client.clone()), children.clone(), move |event| index.observe(event));
    let (services, service_events) = cached_stream(Api::<Service>::all(client.clone()), children.clone(), |_| {});
    let (claims, claim_events) = cached_stream(Api::<PersistentVolumeClaim>::all(client.clone()), children, |_| {});
    let controller = Controller::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &resource),
        watcher::Config::default(),
        resource.clone(),
    )
    .watches_stream(pod_events, owner_of(resource.clone()))
    .watches_stream(service_events, owner_of(resource.clone()))
    .watches_stream(claim_events, owner_of(resource.clone()));
    let caches = Caches { sandboxes: controller.store(), pods, pods_by_hash, services, claims };
    let context = Arc::new(Context { client, clock: clock.clone(), resource, version, caches });
    controller
        .reconcile_all_on(clock_jumps(clock.advances()))
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((object, _)) => debug!(sandbox = %object, "reconciled"),
                // A dependent's event can name a Sandbox that was just deleted: nothing to do.
                Err(kube::runtime::controller::Error::ObjectNotFound(object)) => {
                    debug!(sandbox = %object, "dependent changed after its Sandbox was deleted")
                }
                Err(error) => warn!(%error, "sandbox controller error"),
            }
        })
        .await;
    Ok(())
}

/// Finds the Sandbox resource, retrying while the group is not served (the CRD may be
/// installed after the controller starts).
async fn discover(client: &Client) -> (ApiResource, SandboxVersion) {
    let mut attempts: u64 = 0;
    loop {
        match try_discover(client).await {
            Ok(found) => return found,
            Err(error) => {
                if attempts.is_multiple_of(30) {
                    warn!(error = %format!("{error:#}"), "waiting for the {GROUP} API group");
                }
                attempts += 1;
                tokio::time::sleep(DISCOVERY_RETRY).await;
            }
        }
    }
}

async fn try_discover(client: &Client) -> anyhow::Result<(ApiResource, SandboxVersion)> {
    let group = discovery::group(client, GROUP).await.with_context(|| format!("discovering API group {GROUP}"))?;
    let served: Vec<&str> = group.versions().collect();
    let version = SandboxVersion::PREFERENCE
        .into_iter()
        .find(|v| served.contains(&v.version()))
        .with_context(|| format!("{GROUP} serves neither v1beta1 nor v1alpha1 (serves {served:?})"))?;
    let resource = group
        .versioned_resources(version.version())
        .into_iter()
        .map(|(resource, _)| resource)
        .find(|r| r.kind == KIND)
        .unwrap_or_else(|| {
            let gvk = kube::api::GroupVersionKind::gvk(GROUP, version.version(), KIND);
            ApiResource::from_gvk_with_plural(&gvk, PLURAL)
        });
    Ok((resource, version))
}

/// Maps a pod, Service or PVC event to the Sandbox it belongs to: its controller if that is
/// a Sandbox, else (an adoption candidate) the Sandbox named like it.
fn owner_of<K: Resource>(resource: ApiResource) -> impl Fn(K) -> Option<ObjectRef<DynamicObject>> + Send + Sync {
    move |child: K| {
        let namespace = child.namespace()?;
        let meta = child.meta();
        let controller = meta.owner_references.iter().flatten().find(|r| r.controller == Some(true));
        let name = match controller {
            Some(r) if r.kind == KIND && r.api_version.starts_with(&format!("{GROUP}/")) => r.name.clone(),
            Some(_) => return None,
            None => meta.name.clone()?,
        };
        Some(ObjectRef::new_with(&name, resource.clone()).within(&namespace))
    }
}

/// A stream that yields whenever the clock is advanced by hand.
fn clock_jumps(receiver: watch::Receiver<u64>) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.changed().await.ok()?;
        Some(((), receiver))
    })
}

fn error_policy(object: Arc<DynamicObject>, error: &ReconcileError, _: Arc<Context>) -> Requeue {
    warn!(sandbox = %format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any()), %error, "reconcile failed");
    Requeue::requeue(ERROR_RETRY)
}

async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let name = object.name_any();
    let Some(namespace) = object.namespace() else {
        return Ok(Requeue::await_change());
    };
    reconcile_sandbox(&context, &namespace, &name)
        .await
        .with_context(|| format!("reconciling Sandbox {namespace}/{name}"))
        .map_err(ReconcileError)
}

/// How executing a plan ended.
enum Outcome {
    /// Done; requeue as the plan says.
    Done,
    /// A create found the object already there: observe again.
    Replan,
    /// The Sandbox disappeared under us.
    Gone,
}

async fn reconcile_sandbox(context: &Context, namespace: &str, name: &str) -> anyhow::Result<Requeue> {
    for pass in 0..MAX_PASSES {
        // The first pass reads the caches; a create that found its object already there means
        // the caches were behind, so later passes read the API server.
        let observed = if pass == 0 {
            observe_cached(context, namespace, name)
        } else {
            observe(context, namespace, name).await?
        };
        let Some(observed) = observed else {
            return Ok(Requeue::await_change());
        };
        let plan = plan(&observed);
        match execute(context, &observed, &plan).await? {
            Outcome::Done => {
                return Ok(match plan.requeue_after {
                    Some(after) => Requeue::requeue(context.clock.real_duration(after).max(Duration::from_millis(1))),
                    None => Requeue::await_change(),
                });
            }
            Outcome::Gone => return Ok(Requeue::await_change()),
            Outcome::Replan => continue,
        }
    }
    Ok(Requeue::requeue(ERROR_RETRY))
}

fn sandboxes(context: &Context, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(context.client.clone(), namespace, &context.resource)
}

/// Reads the Sandbox and everything the plan needs from the informer caches; `None` when the
/// Sandbox is gone (or malformed: a fresh read then reports why).
fn observe_cached(context: &Context, namespace: &str, name: &str) -> Option<Observed> {
    let caches = &context.caches;
    let object = caches.sandboxes.get(&ObjectRef::new_with(name, context.resource.clone()).within(namespace))?;
    let sandbox = Sandbox::from_dynamic(&object, context.version).ok()?;
    let pod_named = |n: &str| caches.pods.get(&ObjectRef::new(n).within(namespace)).map(|p| (*p).clone());
    let tracked = sandbox.tracked_pod_name().to_string();
    let mut pod = pod_named(&tracked);
    if pod.is_none() && tracked != sandbox.name {
        pod = pod_named(&sandbox.name);
    }
    let hash = name_hash(&sandbox.name);
    let labelled_pods = caches
        .pods_by_hash
        .names(namespace, &hash)
        .into_iter()
        .filter_map(|n| caches.pods.get(&ObjectRef::new(&n).within(namespace)))
        .filter(|p| p.labels().get(NAME_HASH_LABEL) == Some(&hash))
        .map(|p| (*p).clone())
        .collect();
    let service = caches.services.get(&ObjectRef::new(&sandbox.name).within(namespace)).map(|s| (*s).clone());
    let mut pvcs = BTreeMap::new();
    if let Ok(spec) = &sandbox.spec {
        for template in &spec.volume_claim_templates {
            let pvc = agent_sandbox::volume_claim_name(&template.metadata.name, &sandbox.name);
            if let Some(found) = caches.claims.get(&ObjectRef::new(&pvc).within(namespace)) {
                pvcs.insert(pvc, (*found).clone());
            }
        }
    }
    Some(Observed { sandbox, pod, labelled_pods, service, pvcs, now: context.clock.now() })
}

/// Reads the Sandbox and everything the plan needs from the API server; `None` when the
/// Sandbox is gone.
async fn observe(context: &Context, namespace: &str, name: &str) -> anyhow::Result<Option<Observed>> {
    let Some(object) = sandboxes(context, namespace).get_opt(name).await.context("reading the Sandbox")? else {
        return Ok(None);
    };
    let sandbox = Sandbox::from_dynamic(&object, context.version)?;
    let pods: Api<Pod> = Api::namespaced(context.client.clone(), namespace);
    let tracked = sandbox.tracked_pod_name().to_string();
    let mut pod = pods.get_opt(&tracked).await.with_context(|| format!("reading pod {tracked}"))?;
    if pod.is_none() && tracked != sandbox.name {
        pod = pods.get_opt(&sandbox.name).await.with_context(|| format!("reading pod {}", sandbox.name))?;
    }
    let labelled_pods = pods
        .list(&ListParams::default().labels(&format!("{NAME_HASH_LABEL}={}", name_hash(&sandbox.name))))
        .await
        .context("listing the Sandbox's pods")?
        .items;
    let service = Api::<Service>::namespaced(context.client.clone(), namespace)
        .get_opt(&sandbox.name)
        .await
        .context("reading the Service")?;
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(context.client.clone(), namespace);
    let mut pvcs = BTreeMap::new();
    if let Ok(spec) = &sandbox.spec {
        for template in &spec.volume_claim_templates {
            let pvc = agent_sandbox::volume_claim_name(&template.metadata.name, &sandbox.name);
            if let Some(found) = claims.get_opt(&pvc).await.with_context(|| format!("reading PVC {pvc}"))? {
                pvcs.insert(pvc, found);
            }
        }
    }
    Ok(Some(Observed { sandbox, pod, labelled_pods, service, pvcs, now: context.clock.now() }))
}

/// What one action did.
enum Applied {
    Done,
    AlreadyExists,
    SandboxGone,
}

/// Runs the plan's actions in order, then writes the status if it changed. On the first
/// failure the status shows it (Ready=ReconcilerError) and the error is returned for a retry.
async fn execute(context: &Context, observed: &Observed, plan: &Plan) -> anyhow::Result<Outcome> {
    let sandbox = &observed.sandbox;
    for (index, action) in plan.actions.iter().enumerate() {
        match apply(context, sandbox, action).await {
            Ok(Applied::Done) => {}
            Ok(Applied::AlreadyExists) => {
                info!(sandbox = %sandbox.name, namespace = %sandbox.namespace, ?action, "object already exists, re-reading");
                return Ok(Outcome::Replan);
            }
            Ok(Applied::SandboxGone) => return Ok(Outcome::Gone),
            Err(error) => {
                let failure = Failure {
                    pod_unknown: plan.actions[index..].iter().any(Action::settles_pod),
                    message: format!("{error:#}"),
                };
                if let Some(status) = status_after_failure(observed, &failure)
                    && let Err(status_error) = write_status(context, observed, &status).await
                {
                    warn!(error = %format!("{status_error:#}"), "could not record the failure in the status");
                }
                return Err(error);
            }
        }
    }
    if let Some(status) = &plan.status {
        write_status(context, observed, status).await?;
    }
    Ok(Outcome::Done)
}

/// Writes the status through the `status` subresource with a merge patch, only if it differs
/// from the observed one (so recomputing an unchanged state never loops).
async fn write_status(
    context: &Context,
    observed: &Observed,
    status: &super::model::SandboxStatus,
) -> anyhow::Result<()> {
    let sandbox = &observed.sandbox;
    let Some(patch) = status_merge_patch(sandbox.version, &sandbox.status, status) else {
        return Ok(());
    };
    debug!(sandbox = %sandbox.name, namespace = %sandbox.namespace, %patch, "writing status");
    match sandboxes(context, &sandbox.namespace)
        .patch_status(&sandbox.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(()),
        Err(error) => Err(error).context("writing the Sandbox status"),
    }
}

fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_not_found())
}

fn is_already_exists(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.is_already_exists() || status.code == 409)
}

/// Creation result: a 409 means someone else got there first.
fn created<T>(result: Result<T, kube::Error>, what: &str) -> anyhow::Result<Applied> {
    match result {
        Ok(_) => Ok(Applied::Done),
        Err(error) if is_already_exists(&error) => Ok(Applied::AlreadyExists),
        Err(error) => Err(error).with_context(|| format!("creating {what}")),
    }
}

/// Deletion result: a 404 means it is already gone, which is what we wanted.
fn deleted<T>(result: Result<T, kube::Error>, what: &str) -> anyhow::Result<Applied> {
    match result {
        Ok(_) => Ok(Applied::Done),
        Err(error) if is_not_found(&error) => Ok(Applied::Done),
        Err(error) => Err(error).with_context(|| format!("deleting {what}")),
    }
}

async fn apply(context: &Context, sandbox: &Sandbox, action: &Action) -> anyhow::Result<Applied> {
    let client = context.client.clone();
    let namespace = sandbox.namespace.as_str();
    let merge = PatchParams::default();
    let post = PostParams::default();
    match action {
        Action::CreatePvc(pvc) => {
            let name = pvc.name_any();
            info!(%namespace, sandbox = %sandbox.name, pvc = %name, "creating PVC");
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client, namespace);
            created(api.create(&post, pvc).await, &format!("PVC {name}"))
        }
        Action::PatchPvc { name, patch } => {
            info!(%namespace, sandbox = %sandbox.name, pvc = %name, "adopting PVC");
            let api: Api<PersistentVolumeClaim> = Api::namespaced(client, namespace);
            api.patch(name, &merge, &Patch::Merge(patch)).await.with_context(|| format!("patching PVC {name}"))?;
            Ok(Applied::Done)
        }
        Action::CreatePod(pod) => {
            let name = pod.name_any();
            info!(%namespace, sandbox = %sandbox.name, pod = %name, "creating pod");
            let api: Api<Pod> = Api::namespaced(client, namespace);
            created(api.create(&post, pod).await, &format!("pod {name}"))
        }
        Action::PatchPod { name, patch } => {
            info!(%namespace, sandbox = %sandbox.name, pod = %name, "patching pod metadata");
            let api: Api<Pod> = Api::namespaced(client, namespace);
            api.patch(name, &merge, &Patch::Merge(patch)).await.with_context(|| format!("patching pod {name}"))?;
            Ok(Applied::Done)
        }
        Action::DeletePod { name } => {
            info!(%namespace, sandbox = %sandbox.name, pod = %name, "deleting pod");
            let api: Api<Pod> = Api::namespaced(client, namespace);
            deleted(api.delete(name, &DeleteParams::default()).await, &format!("pod {name}"))
        }
        Action::SetPodNameAnnotation(value) => {
            info!(%namespace, sandbox = %sandbox.name, pod = ?value, "setting the pod-name annotation");
            let patch = json!({ "metadata": { "annotations": { POD_NAME_ANNOTATION: value } } });
            match sandboxes(context, namespace).patch(&sandbox.name, &merge, &Patch::Merge(&patch)).await {
                Ok(_) => Ok(Applied::Done),
                Err(error) if is_not_found(&error) => Ok(Applied::SandboxGone),
                Err(error) => Err(error).context("annotating the Sandbox with its pod name"),
            }
        }
        Action::CreateService(service) => {
            let name = service.name_any();
            info!(%namespace, sandbox = %sandbox.name, service = %name, "creating headless Service");
            let api: Api<Service> = Api::namespaced(client, namespace);
            created(api.create(&post, service).await, &format!("Service {name}"))
        }
        Action::PatchService { name, patch } => {
            info!(%namespace, sandbox = %sandbox.name, service = %name, "patching Service");
            let api: Api<Service> = Api::namespaced(client, namespace);
            api.patch(name, &merge, &Patch::Merge(patch)).await.with_context(|| format!("patching Service {name}"))?;
            Ok(Applied::Done)
        }
        Action::DeleteService { name } => {
            info!(%namespace, sandbox = %sandbox.name, service = %name, "deleting Service");
            let api: Api<Service> = Api::namespaced(client, namespace);
            deleted(api.delete(name, &DeleteParams::default()).await, &format!("Service {name}"))
        }
        Action::DeleteSandbox => {
            info!(%namespace, sandbox = %sandbox.name, "shutdownTime reached with policy Delete: deleting the Sandbox");
            let result = sandboxes(context, namespace).delete(&sandbox.name, &DeleteParams::default()).await;
            deleted(result, "the expired Sandbox")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource() -> ApiResource {
        let gvk = kube::api::GroupVersionKind::gvk(GROUP, "v1beta1", KIND);
        ApiResource::from_gvk_with_plural(&gvk, PLURAL)
    }

    fn pod(name: &str, owner: Option<(&str, &str, &str)>) -> Pod {
        let mut metadata = json!({ "name": name, "namespace": "ns" });
        if let Some((api_version, kind, owner_name)) = owner {
            metadata["ownerReferences"] = json!([{
                "apiVersion": api_version, "kind": kind, "name": owner_name,
                "uid": "u", "controller": true
            }]);
        }
        serde_json::from_value(json!({ "metadata": metadata })).expect("valid pod")
    }

    #[test]
    fn children_map_to_their_controlling_sandbox_or_their_own_name() {
        let map = owner_of::<Pod>(resource());
        let owned =
            map(pod("box", Some(("agents.x-k8s.io/v1alpha1", "Sandbox", "other-box")))).expect("mapped to its owner");
        assert_eq!(owned.name, "other-box");
        assert_eq!(owned.namespace.as_deref(), Some("ns"));
        let unowned = map(pod("box", None)).expect("mapped by name");
        assert_eq!(unowned.name, "box");
        assert!(map(pod("box", Some(("apps/v1", "ReplicaSet", "rs")))).is_none());
    }

    #[tokio::test]
    async fn clock_jumps_yield_on_every_manual_advance() {
        let clock = Clock::real();
        let mut jumps = Box::pin(clock_jumps(clock.advances()));
        clock.advance(Duration::from_secs(60));
        let next = tokio::time::timeout(Duration::from_secs(5), jumps.next()).await;
        assert_eq!(next, Ok(Some(())));
        drop(clock);
        let end = tokio::time::timeout(Duration::from_secs(5), jumps.next()).await;
        assert_eq!(end, Ok(None), "the stream ends with the clock");
    }
}
