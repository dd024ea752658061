//! Leases pointing at objects this installation did not create: one whose name someone else
//! took after the lease's sandbox was destroyed, and (for a provider whose lease ids name their
//! namespace) one rewritten into a namespace outside the policy. Every operation refuses or
//! answers expired, never resumable, and the objects are untouched: nothing the host sends for
//! them writes.

use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use provider_host::records::{Lease, LeaseRef, ResumeOutcome};
use serde_json::json;

use super::resume::recreation;
use super::{Outcome, Stop, ensure, failed, scenario};
use crate::context::{Ctx, now_millis};

scenario!(FOREIGN_OBJECT_UNDER_THE_NAME, "foreign-object-under-the-name", cluster: true, simulator: false, foreign_object);
scenario!(LEASE_INTO_ANOTHER_NAMESPACE, "lease-into-another-namespace", cluster: true, simulator: false, other_namespace);

/// Runs every lease operation; none may say resumable.
async fn every_operation(ctx: &Ctx<'_>, lease: &LeaseRef) -> Result<(), Stop> {
    let id = &lease.lease.provider_lease_id;
    if let Ok(ResumeOutcome::Resumable(_)) = ctx.host.resume_check(lease.clone()).await {
        return Err(format!("resume-check of {id} said resumable").into());
    }
    if let Ok(ResumeOutcome::Resumable(_)) = ctx.host.renew(lease.clone(), now_millis() + 600_000).await {
        return Err(format!("renew of {id} said resumable").into());
    }
    let _ = ctx.host.release(lease.clone()).await;
    let _ = ctx.host.destroy(lease.clone()).await;
    Ok(())
}

/// What of an object a provider could change.
fn fingerprint(o: &DynamicObject) -> serde_json::Value {
    json!([
        o.metadata.uid,
        o.metadata.generation,
        o.metadata.labels,
        o.metadata.annotations,
        o.data.get("spec"),
        o.metadata.deletion_timestamp
    ])
}

/// The object's fingerprint once its controllers are done with it (a claim's controller
/// adopts a Sandbox for the foreign claim too, and writes to it): unchanged for a while, or
/// whatever it is after a few seconds.
async fn settled(api: &Api<DynamicObject>, name: &str) -> Result<serde_json::Value, Stop> {
    let quiet = std::time::Duration::from_millis(300);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut last = fingerprint(&api.get(name).await.map_err(|e| e.to_string())?);
    loop {
        tokio::time::sleep(quiet).await;
        let now = fingerprint(&api.get(name).await.map_err(|e| e.to_string())?);
        if now == last || tokio::time::Instant::now() >= deadline {
            return Ok(now);
        }
        last = now;
    }
}

async fn foreign_object(ctx: &Ctx<'_>) -> Outcome {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let workload = ctx.workload(&lease).await?.ok_or("the lease's workload is not in the cluster".to_string())?;
    ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed("destroy", e))?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.admin()?.clone(), &lease.namespace, &workload.resource);
    let name = workload.object.metadata.name.clone().unwrap_or_default();
    let deadline = tokio::time::Instant::now() + crate::CLUSTER_WAIT;
    while api.get_opt(&name).await.map_err(|e| e.to_string())?.is_some() {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "destroy left {name} in place for {} s",
            crate::CLUSTER_WAIT.as_secs()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    api.create(&PostParams::default(), &recreation(&workload.object, false)).await.map_err(|e| e.to_string())?;
    let before = settled(&api, &name).await?;
    every_operation(ctx, &ctx.stored(&lease)).await?;
    let after = api.get(&name).await.map_err(|e| format!("the foreign object is gone: {e}"))?;
    ensure!(fingerprint(&after) == before, "the foreign object under the lease's name was changed");
    api.delete(&name, &DeleteParams::background()).await.map_err(|e| e.to_string())?;
    Ok("a lease whose name someone else now holds: nothing resumable, the object untouched".to_string())
}

async fn other_namespace(ctx: &Ctx<'_>) -> Outcome {
    if ctx.driver != "kubernetes" {
        return Err(Stop::Skip(format!("the lease ids of driver {:?} are not known to name a namespace", ctx.driver)));
    }
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let mut parts: Vec<String> = lease.provider_lease_id.split(':').map(str::to_string).collect();
    ensure!(parts.len() >= 4, "unexpected lease id {}", lease.provider_lease_id);
    parts[2] = "kube-system".to_string();
    let forged = Lease { provider_lease_id: parts.join(":"), namespace: "kube-system".to_string(), ..lease.clone() };
    let mark = ctx.cluster.simulator().map(|s| s.request_mark());
    every_operation(ctx, &ctx.stored(&forged)).await?;
    if let (Some(simulator), Some(mark)) = (ctx.cluster.simulator(), mark) {
        let sent: Vec<String> = simulator
            .requests_since(mark)
            .into_iter()
            .filter(|e| e.namespace == "kube-system")
            .map(|e| format!("{} {} {}", e.verb, e.resource, e.name))
            .collect();
        ensure!(sent.is_empty(), "requests reached kube-system: {sent:?}");
    }
    Ok("a lease rewritten into kube-system: nothing resumable, nothing sent there".to_string())
}
