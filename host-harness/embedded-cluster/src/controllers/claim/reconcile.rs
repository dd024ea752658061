//! The thin I/O loop: watch claims and what they depend on (Sandboxes, pools, templates),
//! observe from the caches, ask [`plan`](super::plan) for one step, and take it. A step that
//! rests on something being absent (create a Sandbox, drop a reference) is first confirmed
//! with fresh reads, as the caches may be behind this controller's own writes.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use contract::k8s::agent_sandbox::{ASSIGNED_SANDBOX_ANNOTATION, CLAIM_KIND, READY, WARM_POOL_LABEL, claim_reason};
use futures::{Stream, StreamExt};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, Preconditions, PropagationPolicy,
};
use kube::runtime::WatchStreamExt;
use kube::runtime::controller::{Action as Requeue, Controller};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use tokio::sync::watch;
use tracing::{debug, info, warn};

use super::adopt::{Adoption, adopt, clear_assignment, finish};
use super::model::{Claim, ClaimStatus};
use super::plan::{Observed, Step, in_pool, plan, template_name};
use super::reservations::Reservations;
use super::status::{status_patch, tracked};
use crate::clock::Clock;
use crate::controllers::extensions::blueprint::Template;
use crate::controllers::extensions::caches::{
    in_namespace, is_conflict, is_not_found, key_of, named, reflect, request,
};
use crate::controllers::extensions::discovery::{Apis, ExtensionsVersion, discover};
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::extensions::{controller_of, is_extension_kind};
use crate::controllers::warm_pool::model::Pool;

/// Real time before retrying a reconcile that failed.
const ERROR_RETRY: Duration = Duration::from_millis(500);
/// Real time before looking again when every pass of a reconcile found the cluster moving.
const AGAIN_RETRY: Duration = Duration::from_millis(50);
/// Real time between looks while the pool or template is missing (their watches normally
/// bring them sooner).
const NOT_FOUND_RETRY: Duration = Duration::from_secs(30);
/// Passes of observe → plan → act per reconcile.
const MAX_PASSES: usize = 4;
/// Candidates one pass tries before it looks again.
const CANDIDATES_PER_PASS: usize = 3;

/// Shared by every reconcile.
pub(super) struct Context {
    pub(super) client: Client,
    clock: Arc<Clock>,
    pub(super) apis: Apis,
    claims: Store<DynamicObject>,
    pools: Store<DynamicObject>,
    templates: Store<DynamicObject>,
    sandboxes: Store<DynamicObject>,
    reservations: Reservations,
}

/// A reconcile failure, with its anyhow context chain, in the shape kube's controller wants.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
struct ReconcileError(anyhow::Error);

/// Runs until the future is dropped: waits for agent-sandbox's groups, then gives every claim
/// in every namespace its Sandbox. Besides watch events, every manual jump of `clock`
/// re-reconciles all claims, and lifecycle deadlines are requeued in cluster time.
pub async fn run(client: Client, clock: Arc<Clock>) -> anyhow::Result<()> {
    let apis = discover(&client, "claim").await;
    info!(extensions = apis.version.version(), sandboxes = %apis.sandboxes.version, "claim controller started");
    let (sandboxes, sandbox_events) = reflect(&client, &apis.sandboxes);
    let (pools, pool_events) = reflect(&client, &apis.pools);
    let (templates, template_events) = reflect(&client, &apis.templates);
    let controller = Controller::new_with(
        Api::<DynamicObject>::all_with(client.clone(), &apis.claims),
        watcher::Config::default(),
        apis.claims.clone(),
    );
    let claims = controller.store();
    let (claim_resource, for_pools, for_templates) = (apis.claims.clone(), claims.clone(), claims.clone());
    let (pool_claims, template_claims) = (apis.claims.clone(), apis.claims.clone());
    let controller = controller
        .watches_stream_with(
            sandbox_events.touched_objects(),
            move |sandbox: DynamicObject| claims_of_sandbox(&claim_resource, &sandbox),
            apis.sandboxes.clone(),
        )
        .watches_stream_with(
            pool_events.touched_objects(),
            move |pool: DynamicObject| {
                waiting(
                    &for_pools,
                    &pool_claims,
                    &pool,
                    &[claim_reason::WARM_POOL_NOT_FOUND, claim_reason::TEMPLATE_NOT_FOUND],
                )
            },
            apis.pools.clone(),
        )
        .watches_stream_with(
            template_events.touched_objects(),
            move |template: DynamicObject| {
                waiting(&for_templates, &template_claims, &template, &[claim_reason::TEMPLATE_NOT_FOUND])
            },
            apis.templates.clone(),
        )
        .reconcile_all_on(clock_jumps(clock.advances()));
    let context = Arc::new(Context {
        client,
        clock,
        apis,
        claims,
        pools,
        templates,
        sandboxes,
        reservations: Reservations::default(),
    });
    controller
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                Ok((claim, _)) => debug!(claim = %claim, "reconciled"),
                Err(kube::runtime::controller::Error::ObjectNotFound(claim)) => {
                    debug!(claim = %claim, "a Sandbox changed after its claim was deleted")
                }
                Err(error) => warn!(%error, "claim controller error"),
            }
        })
        .await;
    Ok(())
}

/// The claims a Sandbox event concerns: the claim controlling it, or for a Sandbox no claim
/// or pool controls, the claim named like it (which reports it as someone else's).
fn claims_of_sandbox(claims: &ApiResource, sandbox: &DynamicObject) -> Option<ObjectRef<DynamicObject>> {
    let namespace = sandbox.metadata.namespace.as_deref()?;
    match controller_of(&sandbox.metadata) {
        Some(owner) if is_extension_kind(owner, CLAIM_KIND) => Some(request(claims, namespace, &owner.name)),
        Some(owner) if owner.api_version.starts_with(crate::controllers::extensions::EXTENSIONS_GROUP) => None,
        _ => Some(request(claims, namespace, sandbox.metadata.name.as_deref()?)),
    }
}

/// The claims in an object's namespace whose `Ready` says one of `reasons` (they wait for
/// a pool or template to appear).
fn waiting(
    claims: &Store<DynamicObject>,
    resource: &ApiResource,
    obj: &DynamicObject,
    reasons: &[&str],
) -> Vec<ObjectRef<DynamicObject>> {
    let Some(namespace) = obj.metadata.namespace.as_deref() else {
        return Vec::new();
    };
    in_namespace(claims, namespace, |claim| {
        claim.data["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"] == READY && reasons.iter().any(|r| c["reason"] == *r))
    })
    .iter()
    .map(|claim| request(resource, namespace, &claim.name_any()))
    .collect()
}

/// A stream that yields whenever the clock is advanced by hand.
fn clock_jumps(receiver: watch::Receiver<u64>) -> impl Stream<Item = ()> + Send {
    futures::stream::unfold(receiver, |mut receiver| async move {
        receiver.changed().await.ok()?;
        Some(((), receiver))
    })
}

fn error_policy(claim: Arc<DynamicObject>, error: &ReconcileError, _: Arc<Context>) -> Requeue {
    warn!(claim = %key_of(&claim), %error, "reconcile failed");
    Requeue::requeue(ERROR_RETRY)
}

async fn reconcile(object: Arc<DynamicObject>, context: Arc<Context>) -> Result<Requeue, ReconcileError> {
    let Some(namespace) = object.namespace() else {
        return Ok(Requeue::await_change());
    };
    let name = object.name_any();
    reconcile_claim(&context, &namespace, &name)
        .await
        .with_context(|| format!("reconciling SandboxClaim {namespace}/{name}"))
        .map_err(ReconcileError)
}

/// How taking a step ended.
enum Outcome {
    /// Done; look again after this much real time, or on the next change.
    Done(Option<Duration>),
    /// The cluster moved under the step: observe again.
    Again,
}

async fn reconcile_claim(context: &Context, namespace: &str, name: &str) -> anyhow::Result<Requeue> {
    for pass in 0..MAX_PASSES {
        let fresh = pass > 0;
        let Some(observed) = observe(context, namespace, name, fresh).await? else {
            return Ok(Requeue::await_change());
        };
        let decided = plan(&observed, &context.apis);
        if !fresh && decided.step.needs_confirmation() {
            continue;
        }
        match take(context, &observed, decided.step).await? {
            Outcome::Again => continue,
            Outcome::Done(after) => {
                let expiry = decided.expires_in.map(|d| context.clock.real_duration(d));
                let next = match (after, expiry) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                return Ok(
                    next.map_or_else(Requeue::await_change, |d| Requeue::requeue(d.max(Duration::from_millis(1))))
                );
            }
        }
    }
    Ok(Requeue::requeue(AGAIN_RETRY))
}

/// Reads one object from the cache, or (`fresh`) from the API server.
async fn read(
    context: &Context,
    store: &Store<DynamicObject>,
    resource: &ApiResource,
    namespace: &str,
    name: &str,
    fresh: bool,
) -> anyhow::Result<Option<DynamicObject>> {
    if name.is_empty() {
        return Ok(None);
    }
    if !fresh {
        return Ok(named(store, resource, namespace, name));
    }
    let api: Api<DynamicObject> = Api::namespaced_with(context.client.clone(), namespace, resource);
    api.get_opt(name).await.with_context(|| format!("reading {} {name}", resource.kind))
}

async fn observe(context: &Context, namespace: &str, name: &str, fresh: bool) -> anyhow::Result<Option<Observed>> {
    let apis = &context.apis;
    let Some(object) = read(context, &context.claims, &apis.claims, namespace, name, fresh).await? else {
        return Ok(None);
    };
    let claim = Claim::from_dynamic(&object, apis.version == ExtensionsVersion::V1alpha1)?;
    let pools: Vec<Pool> =
        in_namespace(&context.pools, namespace, |_| true).iter().filter_map(|p| Pool::from_dynamic(p).ok()).collect();
    let mut observed = Observed {
        pool: None,
        pools,
        template: None,
        recorded: None,
        assigned: None,
        same_name: None,
        members: Vec::new(),
        reserved: Default::default(),
        now: context.clock.now(),
        claim,
    };
    let Ok(spec) = &observed.claim.spec else {
        return Ok(Some(observed));
    };
    if let super::model::Source::Pool(pool) = &spec.source {
        observed.pool = read(context, &context.pools, &apis.pools, namespace, pool, fresh)
            .await?
            .and_then(|p| Pool::from_dynamic(&p).ok());
    }
    if let Some(template) = template_name(spec, observed.pool.as_ref()) {
        let found = read(context, &context.templates, &apis.templates, namespace, &template, fresh).await?;
        observed.template = found.and_then(|t| match Template::from_dynamic(&t) {
            Ok(t) => Some(t),
            Err(why) => {
                warn!(claim = %name, %namespace, %template, %why, "unusable template");
                None
            }
        });
    }
    let sandbox = |n: String| async move {
        read(context, &context.sandboxes, &apis.sandboxes, namespace, &n, fresh)
            .await
            .map(|s| s.as_ref().and_then(SandboxView::from_dynamic))
    };
    let claim = &observed.claim;
    let assigned = claim.annotations.get(ASSIGNED_SANDBOX_ANNOTATION).cloned().unwrap_or_default();
    observed.recorded = sandbox(claim.status.sandbox.name.clone()).await?;
    observed.assigned = sandbox(assigned).await?;
    observed.same_name = sandbox(claim.name.clone()).await?;
    observed.members = in_namespace(&context.sandboxes, namespace, |s| {
        s.metadata.labels.as_ref().is_some_and(|l| l.contains_key(WARM_POOL_LABEL))
    })
    .iter()
    .filter_map(|s| SandboxView::from_dynamic(s))
    .collect();
    let members = &observed.members;
    observed.reserved = context
        .reservations
        .held_by_others(&observed.claim.uid, |uid| members.iter().any(|m| m.uid == uid && in_pool(m)));
    Ok(Some(observed))
}

fn claims_api(context: &Context, claim: &Claim) -> Api<DynamicObject> {
    Api::namespaced_with(context.client.clone(), &claim.namespace, &context.apis.claims)
}

fn sandboxes_api(context: &Context, claim: &Claim) -> Api<DynamicObject> {
    Api::namespaced_with(context.client.clone(), &claim.namespace, &context.apis.sandboxes)
}

async fn take(context: &Context, observed: &Observed, step: Step) -> anyhow::Result<Outcome> {
    let claim = &observed.claim;
    match step {
        Step::Nothing => Ok(Outcome::Done(None)),
        Step::DeleteClaim { foreground } => {
            info!(claim = %claim.name, namespace = %claim.namespace, foreground, "the claim expired: deleting it");
            let params = DeleteParams {
                propagation_policy: foreground.then_some(PropagationPolicy::Foreground),
                preconditions: Some(Preconditions { uid: Some(claim.uid.clone()), resource_version: None }),
                ..DeleteParams::default()
            };
            match claims_api(context, claim).delete(&claim.name, &params).await {
                Ok(_) => Ok(Outcome::Done(None)),
                Err(error) if is_not_found(&error) || is_conflict(&error) => Ok(Outcome::Done(None)),
                Err(error) => Err(error).context("deleting the expired claim"),
            }
        }
        Step::Expire { sandbox, status } => {
            if let Some((name, uid)) = sandbox {
                info!(claim = %claim.name, namespace = %claim.namespace, sandbox = %name, "the claim expired: deleting its Sandbox");
                let params = DeleteParams {
                    preconditions: Some(Preconditions { uid: Some(uid), resource_version: None }),
                    ..DeleteParams::default()
                };
                match sandboxes_api(context, claim).delete(&name, &params).await {
                    Ok(_) => {}
                    Err(error) if is_not_found(&error) || is_conflict(&error) => {}
                    Err(error) => return Err(error).context("deleting the expired claim's Sandbox"),
                }
            }
            write_status(context, claim, &status).await?;
            Ok(Outcome::Done(None))
        }
        Step::Status(status) => {
            write_status(context, claim, &status).await?;
            let waiting = status.condition(READY).is_some_and(|c| {
                matches!(c.reason.as_str(), claim_reason::WARM_POOL_NOT_FOUND | claim_reason::TEMPLATE_NOT_FOUND)
            });
            Ok(Outcome::Done(waiting.then_some(NOT_FOUND_RETRY)))
        }
        Step::ClearAssignment => {
            clear_assignment(context, claim).await?;
            Ok(Outcome::Again)
        }
        Step::Finish(candidate) => match finish(context, claim, &candidate).await? {
            Adoption::Adopted(sandbox) => adopted(context, observed, &sandbox).await,
            Adoption::Lost | Adoption::ClaimChanged => Ok(Outcome::Again),
        },
        Step::Adopt(candidates) => {
            let mut tried = 0;
            for candidate in &candidates {
                if tried == CANDIDATES_PER_PASS {
                    break;
                }
                if !context.reservations.reserve(&candidate.member.uid, &claim.uid) {
                    continue;
                }
                tried += 1;
                match adopt(context, claim, candidate).await {
                    Ok(Adoption::Adopted(sandbox)) => return adopted(context, observed, &sandbox).await,
                    Ok(Adoption::Lost) => context.reservations.release(&candidate.member.uid),
                    Ok(Adoption::ClaimChanged) => {
                        context.reservations.release(&candidate.member.uid);
                        return Ok(Outcome::Again);
                    }
                    Err(error) => {
                        context.reservations.release(&candidate.member.uid);
                        return Err(error);
                    }
                }
            }
            Ok(Outcome::Again)
        }
        Step::Wait(after) => Ok(Outcome::Done(Some(context.clock.real_duration(after)))),
        Step::Create(sandbox) => {
            let sandbox: DynamicObject = serde_json::from_value(sandbox).context("building the Sandbox")?;
            info!(claim = %claim.name, namespace = %claim.namespace, "starting a Sandbox cold");
            match sandboxes_api(context, claim).create(&PostParams::default(), &sandbox).await {
                Ok(created) => match SandboxView::from_dynamic(&created) {
                    Some(view) => {
                        write_status(context, claim, &tracked(claim, &view, context.clock.now())).await?;
                        Ok(Outcome::Done(None))
                    }
                    None => Ok(Outcome::Again),
                },
                Err(error) if is_conflict(&error) => Ok(Outcome::Again),
                Err(error) => Err(error).context("creating the claim's Sandbox"),
            }
        }
    }
}

/// Records an adopted Sandbox in the claim's status.
async fn adopted(context: &Context, observed: &Observed, sandbox: &SandboxView) -> anyhow::Result<Outcome> {
    let claim = &observed.claim;
    write_status(context, claim, &tracked(claim, sandbox, context.clock.now())).await?;
    Ok(Outcome::Done(None))
}

/// Writes the status with a merge patch on the status subresource, only when it changed.
async fn write_status(context: &Context, claim: &Claim, status: &ClaimStatus) -> anyhow::Result<()> {
    let Some(patch) = status_patch(&claim.status, status) else {
        return Ok(());
    };
    match claims_api(context, claim).patch_status(&claim.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(error).context("writing the claim's status"),
    }
}
