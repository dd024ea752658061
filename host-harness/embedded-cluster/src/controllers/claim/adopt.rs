//! Adoption, the one multi-step write of the claim controller, made safe against every race:
//!
//! 1. The claim records the member it is taking (annotation, locked on the claim's
//!    resourceVersion), so an interrupted adoption is finished later, never repeated with a
//!    second member.
//! 2. The member is moved to the claim with a merge patch locked on the member's
//!    resourceVersion, so of two claims racing for one member exactly one wins.
//! 3. A 409 or 404 on the member is settled by a fresh read: the move already happened (done),
//!    the member merely changed (retry on the fresh version), or someone else took it or it
//!    is gone (the annotation is removed, and the claim may look for another).

use anyhow::Context as _;
use contract::k8s::agent_sandbox::ASSIGNED_SANDBOX_ANNOTATION;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use serde_json::json;
use tracing::{debug, info};

use super::model::Claim;
use super::plan::{Candidate, in_pool};
use super::reconcile::Context;
use crate::controllers::extensions::caches::{is_conflict, is_not_found};
use crate::controllers::extensions::sandbox_view::SandboxView;

/// Writes retried on a conflict before the claim looks again from the start.
const ATTEMPTS: usize = 3;

/// How an adoption ended.
pub enum Adoption {
    /// The member is the claim's (as the API server returned it).
    Adopted(Box<SandboxView>),
    /// Another claim took it, or it is gone; the claim's annotation no longer names it.
    Lost,
    /// The claim changed under us (another member recorded, deleted, replaced): look again.
    ClaimChanged,
}

fn claims(context: &Context, claim: &Claim) -> Api<DynamicObject> {
    Api::namespaced_with(context.client.clone(), &claim.namespace, &context.apis.claims)
}

fn sandboxes(context: &Context, claim: &Claim) -> Api<DynamicObject> {
    Api::namespaced_with(context.client.clone(), &claim.namespace, &context.apis.sandboxes)
}

/// Records the member on the claim, then moves it.
pub async fn adopt(context: &Context, claim: &Claim, candidate: &Candidate) -> anyhow::Result<Adoption> {
    if !annotate(context, claim, &candidate.member.name).await? {
        return Ok(Adoption::ClaimChanged);
    }
    finish(context, claim, candidate).await
}

/// Step 1: the annotation, locked on the claim's resourceVersion; false if the claim now
/// names another member or is gone.
async fn annotate(context: &Context, claim: &Claim, member: &str) -> anyhow::Result<bool> {
    let api = claims(context, claim);
    let mut version = claim.resource_version.clone();
    for _ in 0..ATTEMPTS {
        let patch =
            json!({"metadata": {"resourceVersion": version, "annotations": {ASSIGNED_SANDBOX_ANNOTATION: member}}});
        match api.patch(&claim.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => return Ok(true),
            Err(error) if is_not_found(&error) => return Ok(false),
            Err(error) if is_conflict(&error) => {
                let Some(fresh) = api.get_opt(&claim.name).await.context("re-reading the claim")? else {
                    return Ok(false);
                };
                if fresh.metadata.uid.as_deref() != Some(claim.uid.as_str())
                    || fresh.metadata.deletion_timestamp.is_some()
                {
                    return Ok(false);
                }
                let recorded = fresh.metadata.annotations.as_ref().and_then(|a| a.get(ASSIGNED_SANDBOX_ANNOTATION));
                match recorded.map(String::as_str) {
                    Some(name) if name == member => return Ok(true),
                    Some(name) if !name.is_empty() => return Ok(false),
                    _ => version = fresh.metadata.resource_version.unwrap_or_default(),
                }
            }
            Err(error) => return Err(error).context("recording the adoption on the claim"),
        }
    }
    Ok(false)
}

/// Steps 2 and 3: moves the member the claim's annotation names.
pub async fn finish(context: &Context, claim: &Claim, candidate: &Candidate) -> anyhow::Result<Adoption> {
    let api = sandboxes(context, claim);
    let name = &candidate.member.name;
    let mut patch = candidate.patch.clone();
    for _ in 0..ATTEMPTS {
        match api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(moved) => {
                info!(claim = %claim.name, namespace = %claim.namespace, sandbox = %name, "adopted a warm Sandbox");
                return Ok(SandboxView::from_dynamic(&moved).map_or(Adoption::Lost, |v| Adoption::Adopted(Box::new(v))));
            }
            Err(error) if is_conflict(&error) || is_not_found(&error) => {
                let fresh = api.get_opt(name).await.context("re-reading the member")?;
                let Some(fresh) = fresh.as_ref().and_then(SandboxView::from_dynamic) else {
                    break;
                };
                if fresh.controlled_by(&claim.uid) {
                    return Ok(Adoption::Adopted(Box::new(fresh)));
                }
                if fresh.uid != candidate.member.uid || !in_pool(&fresh) {
                    break;
                }
                debug!(claim = %claim.name, sandbox = %name, "the member changed; moving it at its new version");
                patch["metadata"]["resourceVersion"] = json!(fresh.resource_version);
            }
            Err(error) => return Err(error).with_context(|| format!("moving Sandbox {name} to the claim")),
        }
    }
    debug!(claim = %claim.name, sandbox = %name, "the member went elsewhere; forgetting it");
    clear_assignment(context, claim).await?;
    Ok(Adoption::Lost)
}

/// Removes the adoption annotation (it names a Sandbox the claim will not get).
pub async fn clear_assignment(context: &Context, claim: &Claim) -> anyhow::Result<()> {
    let patch = json!({"metadata": {"annotations": {ASSIGNED_SANDBOX_ANNOTATION: null}}});
    match claims(context, claim).patch(&claim.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(error).context("removing the adoption annotation"),
    }
}
