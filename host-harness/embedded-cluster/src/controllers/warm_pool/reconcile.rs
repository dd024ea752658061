//! The thin I/O loop: discover the served versions, watch pools, their templates and the
//! Sandboxes they own, observe, ask [`plan`](super::plan) what to do, and do it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use contract::k8s::agent_sandbox::{WARM_POOL_KIND, WARM_POOL_LABEL};
use futures::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use serde_json::json;
use tracing::{debug, info, warn};

use super::model::{Pool, PoolStatus};
use super::plan::{Observed, Plan, desired_member, plan};
use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::caches::{
    self, in_namespace, is_not_found, key_of, named, owner_requests, reflect,
};
use crate::controllers::extensions::discovery::{Apis, discover};
use crate::controllers::extensions::name_hash;
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::triggers::OwnerTriggers;

/// Real time before retrying a reconcile that failed.
const ERROR_RETRY: Duration = Duration::from_millis(500);
/// Real time between looks while the template is missing (its watch normally brings it sooner).
const TEMPLATE_RETRY: Duration = Duration::from_secs(30);

/// Shared by every reconcile.
struct Context {
    client: Client,
    apis: Apis,
    pools: Store<DynamicObject>,
    templates: Store<DynamicObject>,
    sandboxes: Store<DynamicObject>,
    /// Whether `status.observedGeneration` survives the CRD's pruning (v0.5's CRD has no such
    /// field): once a status write shows it dropped, it is no longer sent, so an unchanged pool
    /// costs no write.
    observed_generation_kept: AtomicBool,
}

/// A reconcile failure, with its anyhow context chain, in the shape kube's controller wants.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct ReconcileError(anyhow::Error);

/// Runs until the future is dropped: waits for agent-sandbox's groups, then keeps every warm
/// pool in every namespace at its size.
pub async fn run(client: Client) -> anyhow::Result<()> {
    let apis = discover(&client, "warm pool").await;
    info!(extensions = apis.version.version(), sandboxes = %apis.sandboxes.version, "warm pool controller started");
    let (sandboxes, sandbox_events) = reflect(&client, &apis.sandboxes);
    let (templates, template_events) = reflect(&client, &apis.templates);
    let controller = Controller::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &apis.pools),
        watcher::Config::default(),
        apis.pools.clone(),
    );
    let pools = controller.store();
    let by_template = pools.clone();
    let pool_resource = apis.pools.clone();
    let controller = controller
        .reconcile_on(owner_requests(sandbox_events, OwnerTriggers::new(WARM_POOL_KIND, apis.pools.clone())))
        .watches_stream_with(
            template_events.touched_objects(),
            move |template: DynamicObject| pools_of_template(&by_template, &pool_resource, &template),
            apis.templates.clone(),
        );
    let context = Arc::new(Context {
        client,
        apis,
        pools,
        templates,
        sandboxes,
        observed_generation_kept: AtomicBool::new(true),
    });
    controller
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((pool, _)) => debug!(pool = %pool, "reconciled"),
                Err(kube::runtime::controller::Error::ObjectNotFound(pool)) => {
                    debug!(pool = %pool, "a member changed after its pool was deleted")
                }
                Err(error) => warn!(%error, "warm pool controller error"),
            }
        })
        .await;
    Ok(())
}

/// The pools in a template's namespace that use it.
fn pools_of_template(
    pools: &Store<DynamicObject>,
    resource: &kube::api::ApiResource,
    template: &DynamicObject,
) -> Vec<kube::runtime::reflector::ObjectRef<DynamicObject>> {
    let (Some(namespace), Some(name)) = (template.metadata.namespace.as_deref(), template.metadata.name.as_deref())
    else {
        return Vec::new();
    };
    in_namespace(pools, namespace, |p| {
        p.data.pointer("/spec/sandboxTemplateRef/name").and_then(|n| n.as_str()) == Some(name)
    })
    .iter()
    .map(|p| caches::request(resource, namespace, &p.name_any()))
    .collect()
}

fn error_policy(pool: Arc<DynamicObject>, error: &ReconcileError, _: Arc<Context>) -> Requeue {
    warn!(pool = %key_of(&pool), %error, "reconcile failed");
    Requeue::requeue(ERROR_RETRY)
}

async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let Some(namespace) = object.namespace() else {
        return Ok(Requeue::await_change());
    };
    let name = object.name_any();
    reconcile_pool(&context, &namespace, &name)
        .await
        .with_context(|| format!("reconciling SandboxWarmPool {namespace}/{name}"))
        .map_err(ReconcileError)
}

async fn reconcile_pool(context: &Context, namespace: &str, name: &str) -> anyhow::Result<Requeue> {
    let Some(observed) = observe_cached(context, namespace, name)? else {
        return Ok(Requeue::await_change());
    };
    // The status always comes from the caches: they only move forward, so the counts never
    // go back to an older state than a previous pass reported.
    let cached = plan(&observed);
    if cached.acts() {
        // The caches may be behind this controller's own writes: create and delete only on
        // what the API server says now.
        let Some(fresh) = observe(context, namespace, name).await? else {
            return Ok(Requeue::await_change());
        };
        execute(context, &fresh, &plan(&fresh)).await?;
    }
    if let Some(status) = &cached.status {
        write_status(context, &observed.pool, status).await?;
    }
    Ok(if observed.template.is_none() { Requeue::requeue(TEMPLATE_RETRY) } else { Requeue::await_change() })
}

fn parse_template(pool: &Pool, template: Option<DynamicObject>) -> Option<Template> {
    let template = template?;
    match Template::from_dynamic(&template) {
        Ok(t) => Some(t),
        Err(why) => {
            warn!(pool = %format!("{}/{}", pool.namespace, pool.name), template = %pool.template, %why, "unusable template");
            None
        }
    }
}

/// The pool, its template and its labelled Sandboxes from the caches; `None` when the pool is gone.
fn observe_cached(context: &Context, namespace: &str, name: &str) -> anyhow::Result<Option<Observed>> {
    let Some(object) = named(&context.pools, &context.apis.pools, namespace, name) else {
        return Ok(None);
    };
    let pool = Pool::from_dynamic(&object)?;
    let template = named(&context.templates, &context.apis.templates, namespace, &pool.template);
    let template = parse_template(&pool, template);
    let hash = name_hash(&pool.name);
    let sandboxes = in_namespace(&context.sandboxes, namespace, |s| {
        s.metadata.labels.as_ref().and_then(|l| l.get(WARM_POOL_LABEL)) == Some(&hash)
    })
    .iter()
    .filter_map(|s| SandboxView::from_dynamic(s))
    .collect();
    Ok(Some(Observed { pool, template, sandboxes }))
}

/// The same from the API server.
async fn observe(context: &Context, namespace: &str, name: &str) -> anyhow::Result<Option<Observed>> {
    let pools: Api<DynamicObject> = Api::namespaced_with(context.client.clone(), namespace, &context.apis.pools);
    let Some(object) = pools.get_opt(name).await.context("reading the pool")? else {
        return Ok(None);
    };
    let pool = Pool::from_dynamic(&object)?;
    let templates: Api<DynamicObject> =
        Api::namespaced_with(context.client.clone(), namespace, &context.apis.templates);
    let template = if pool.template.is_empty() {
        None
    } else {
        templates.get_opt(&pool.template).await.with_context(|| format!("reading template {}", pool.template))?
    };
    let template = parse_template(&pool, template);
    let selector = super::plan::member_selector(&pool.name);
    let sandboxes = sandboxes(context, namespace)
        .list(&ListParams::default().labels(&selector))
        .await
        .context("listing the pool's Sandboxes")?
        .items
        .iter()
        .filter_map(SandboxView::from_dynamic)
        .collect();
    Ok(Some(Observed { pool, template, sandboxes }))
}

fn sandboxes(context: &Context, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(context.client.clone(), namespace, &context.apis.sandboxes)
}

/// Deletes, then creates in batches that double while they succeed (upstream's slow start:
/// one failing create costs one call, a healthy pool of 100 fills in seven rounds).
async fn execute(context: &Context, observed: &Observed, plan: &Plan) -> anyhow::Result<()> {
    let pool = &observed.pool;
    let api = sandboxes(context, &pool.namespace);
    let deletes = plan.delete.iter().map(|doomed| {
        let api = api.clone();
        async move {
            info!(pool = %pool.name, namespace = %pool.namespace, sandbox = %doomed.name, why = ?doomed.why, "deleting member");
            let params = DeleteParams { preconditions: Some(doomed.preconditions()), ..DeleteParams::default() };
            match api.delete(&doomed.name, &params).await {
                Ok(_) => Ok(()),
                // 409: replaced, or changed since the fresh list (a claim may be adopting it):
                // left alone, the next pass plans on what it is now.
                Err(error) if caches::is_conflict(&error) => {
                    debug!(pool = %pool.name, sandbox = %doomed.name, "member changed since planned; not deleting it");
                    Ok(())
                }
                Err(error) if is_not_found(&error) => Ok(()),
                Err(error) => Err(error).with_context(|| format!("deleting member {}", doomed.name)),
            }
        }
    });
    for result in futures::future::join_all(deletes).await {
        result?;
    }
    let Some(template) = observed.template.as_ref().filter(|_| plan.create > 0) else {
        return Ok(());
    };
    let member: DynamicObject =
        serde_json::from_value(desired_member(pool, template, &context.apis)).context("building a member")?;
    info!(pool = %pool.name, namespace = %pool.namespace, count = plan.create, "creating members");
    let mut created = 0;
    let mut batch = 1;
    while created < plan.create {
        let size = batch.min(plan.create - created);
        let post = PostParams::default();
        let results = futures::future::join_all((0..size).map(|_| api.create(&post, &member))).await;
        let failed = results.into_iter().find_map(Result::err);
        created += size;
        if let Some(error) = failed {
            return Err(error).context("creating a member");
        }
        batch *= 2;
    }
    Ok(())
}

/// Writes the status with a merge patch on the status subresource, only when it changed.
async fn write_status(context: &Context, pool: &Pool, desired: &PoolStatus) -> anyhow::Result<()> {
    let mut desired = desired.clone();
    if !context.observed_generation_kept.load(Ordering::Relaxed) {
        desired.observed_generation = None;
    }
    if desired == pool.status {
        return Ok(());
    }
    let patch = json!({ "status": desired });
    let pools: Api<DynamicObject> = Api::namespaced_with(context.client.clone(), &pool.namespace, &context.apis.pools);
    match pools.patch_status(&pool.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(written) => {
            if desired.observed_generation.is_some() && written.data.pointer("/status/observedGeneration").is_none() {
                debug!("the SandboxWarmPool CRD prunes status.observedGeneration; no longer writing it");
                context.observed_generation_kept.store(false, Ordering::Relaxed);
            }
            Ok(())
        }
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(error).context("writing the pool's status"),
    }
}
