//! Resume-check against what happens behind the provider's back: the workload deleted, its pod
//! deleted, the workload recreated under the same name (a new uid: by someone else, or by this
//! installation), the workload terminating. Gone, replaced or terminating is `expired`, never
//! an error and never `resumable`; a `resumable` answer must describe a sandbox the cluster
//! says is usable.

use std::time::Duration;

use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use provider_host::policy::MANAGED_BY_LABEL;
use provider_host::records::{Lease, ResumeOutcome};
use serde_json::json;

use super::{Outcome, ensure, failed, scenario};
use crate::CLUSTER_WAIT;
use crate::context::{Ctx, Workload};

scenario!(WORKLOAD_DELETED, "resume-after-workload-deleted", cluster: true, simulator: false, workload_deleted);
scenario!(POD_DELETED, "resume-after-pod-deleted", cluster: true, simulator: false, pod_deleted);
scenario!(WORKLOAD_RECREATED, "resume-after-recreate", cluster: true, simulator: false, workload_recreated);
scenario!(WHILE_TERMINATING, "resume-while-terminating", cluster: true, simulator: false, while_terminating);

/// The finalizer that holds a workload in its terminating state.
const HOLD: &str = "contract.sandbox.paperclip.io/hold";

async fn acquired(ctx: &Ctx<'_>) -> Result<(Lease, Workload), super::Stop> {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let workload = ctx.workload(&lease).await?.ok_or("the lease's workload is not in the cluster".to_string())?;
    Ok((lease, workload))
}

fn api(ctx: &Ctx<'_>, lease: &Lease, workload: &Workload) -> Result<Api<DynamicObject>, String> {
    Ok(Api::namespaced_with(ctx.admin()?.clone(), &lease.namespace, &workload.resource))
}

/// Deletes the workload and waits until the cluster no longer has it.
async fn delete_and_wait(api: &Api<DynamicObject>, name: &str) -> Result<(), String> {
    api.delete(name, &DeleteParams::background()).await.map_err(|e| e.to_string())?;
    let deadline = tokio::time::Instant::now() + CLUSTER_WAIT;
    while api.get_opt(name).await.map_err(|e| e.to_string())?.is_some() {
        if tokio::time::Instant::now() >= deadline {
            return Err(format!("{name} was not deleted within {} s", CLUSTER_WAIT.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Resume-check must answer `expired`.
async fn expired(ctx: &Ctx<'_>, lease: &Lease, when: &str) -> Result<(), super::Stop> {
    match ctx.host.resume_check(ctx.stored(lease)).await.map_err(|e| failed(&format!("resume-check {when}"), e))? {
        ResumeOutcome::Expired(_) => Ok(()),
        ResumeOutcome::Resumable(_) => Err(format!("resume-check {when} said resumable").into()),
    }
}

async fn workload_deleted(ctx: &Ctx<'_>) -> Outcome {
    let (lease, workload) = acquired(ctx).await?;
    let name = workload.object.metadata.name.clone().unwrap_or_default();
    delete_and_wait(&api(ctx, &lease, &workload)?, &name).await?;
    expired(ctx, &lease, "after the workload was deleted").await?;
    ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed("destroy", e))?;
    Ok("the workload deleted behind the provider's back is expired, and destroy succeeds".to_string())
}

async fn pod_deleted(ctx: &Ctx<'_>) -> Outcome {
    let (lease, _) = acquired(ctx).await?;
    let pod = lease.pod_name.clone().ok_or("the lease names no pod".to_string())?;
    let pods: Api<k8s_openapi::api::core::v1::Pod> = Api::namespaced(ctx.admin()?.clone(), &lease.namespace);
    pods.delete(&pod, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .map_err(|e| format!("delete the pod: {e}"))?;
    match ctx.host.resume_check(ctx.stored(&lease)).await.map_err(|e| failed("resume-check", e))? {
        ResumeOutcome::Resumable(fresh) => {
            ensure!(fresh.pod_uid != lease.pod_uid, "resumable with the deleted pod {:?}", lease.pod_uid);
            ensure!(ctx.usable(&fresh).await?, "resumable, but the cluster says the new pod is not usable");
            Ok("a deleted pod is replaced: resumable with the new pod, which is usable".to_string())
        }
        ResumeOutcome::Expired(why) => Ok(format!("a deleted pod ends the sandbox: expired ({why})")),
    }
}

async fn workload_recreated(ctx: &Ctx<'_>) -> Outcome {
    let (lease, workload) = acquired(ctx).await?;
    let api = api(ctx, &lease, &workload)?;
    let name = workload.object.metadata.name.clone().unwrap_or_default();
    for (who, labelled) in [("someone else", false), ("this installation", true)] {
        delete_and_wait(&api, &name).await?;
        let copy = recreation(&workload.object, labelled);
        let made = api.create(&PostParams::default(), &copy).await.map_err(|e| format!("recreate: {e}"))?;
        let uid = made.metadata.uid.clone();
        expired(ctx, &lease, &format!("after {who} recreated the workload")).await?;
        ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed("destroy of the stale lease", e))?;
        let still = api.get_opt(&name).await.map_err(|e| e.to_string())?;
        ensure!(
            still.is_some_and(|o| o.metadata.uid == uid && o.metadata.deletion_timestamp.is_none()),
            "destroy of the stale lease deleted the object {who} recreated under its name"
        );
    }
    delete_and_wait(&api, &name).await?;
    Ok("a workload recreated under the same name, by someone else or this installation, is expired, and destroy of \
        the stale lease leaves it alone"
        .to_string())
}

/// A new object like `original` under its name, as someone would make it (with or without this
/// installation's owner label): server fields and fields a controller derived are left out.
pub(crate) fn recreation(original: &DynamicObject, labelled: bool) -> DynamicObject {
    let mut copy = original.clone();
    let meta = &mut copy.metadata;
    (meta.uid, meta.resource_version, meta.creation_timestamp, meta.managed_fields) = (None, None, None, None);
    (meta.owner_references, meta.deletion_timestamp, meta.finalizers, meta.generation) = (None, None, None, None);
    if let Some(labels) = meta.labels.as_mut().filter(|_| !labelled) {
        labels.remove(MANAGED_BY_LABEL);
    }
    if let Some(data) = copy.data.as_object_mut() {
        data.remove("status");
    }
    // A claim's controller wrote which Sandbox it adopted.
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(contract::k8s::agent_sandbox::ASSIGNED_SANDBOX_ANNOTATION);
    }
    // A Job's controller wrote its selector and the matching template labels.
    if let Some(spec) = copy.data.get_mut("spec").and_then(|s| s.as_object_mut()) {
        spec.remove("selector");
    }
    if let Some(labels) = copy.data.pointer_mut("/spec/template/metadata/labels").and_then(|l| l.as_object_mut()) {
        for derived in
            ["controller-uid", "batch.kubernetes.io/controller-uid", "job-name", "batch.kubernetes.io/job-name"]
        {
            labels.remove(derived);
        }
    }
    copy
}

async fn while_terminating(ctx: &Ctx<'_>) -> Outcome {
    let (lease, workload) = acquired(ctx).await?;
    let api = api(ctx, &lease, &workload)?;
    let name = workload.object.metadata.name.clone().unwrap_or_default();
    let hold = json!({"metadata": {"finalizers": [HOLD]}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&hold)).await.map_err(|e| format!("hold: {e}"))?;
    api.delete(&name, &DeleteParams::background()).await.map_err(|e| format!("delete: {e}"))?;
    let checked = async {
        expired(ctx, &lease, "while the workload is terminating").await?;
        let renewed = ctx.host.renew(ctx.stored(&lease), crate::context::now_millis() + 600_000).await;
        ensure!(
            matches!(renewed, Ok(ResumeOutcome::Expired(_))),
            "renew of a terminating workload: {renewed:?} (expected expired)"
        );
        ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed("destroy", e))?;
        Ok::<(), super::Stop>(())
    }
    .await;
    let release = json!({"metadata": {"finalizers": null}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&release)).await.map_err(|e| format!("let go: {e}"))?;
    checked?;
    Ok("a terminating workload is expired for resume-check and renew, and destroy succeeds".to_string())
}
