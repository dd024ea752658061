//! Resume-check right after release. A reusable lease must come back with its sandbox even
//! while the old pod is still stopping (a real kubelet holds a deleted pod until its main
//! process ends, up to the grace period): a provider that resumed a Sandbox in that window lost
//! it, and the lease with it, on any resume within about 30 s of release. A lease that is not
//! reusable is gone once released: `expired`.
//!
//! For the Kubernetes provider's Sandbox backend the scenario asks for a workspace volume (what
//! makes a Sandbox lease reusable) and, on the embedded cluster, for pods that take seconds to
//! stop, so the window is there on every run.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::Api;
use provider_host::HostError;
use provider_host::records::{Lease, LeaseRef, ResumeOutcome};
use serde_json::{Value, json};

use super::{Outcome, Stop, ensure, failed, scenario, sh};
use crate::CLUSTER_WAIT;
use crate::context::Ctx;

scenario!(RESUME_RIGHT_AFTER_RELEASE, "resume-right-after-release", cluster: false, simulator: false, right_after_release);

/// How long a pod takes to stop on a simulated cluster in this scenario.
const STOPPING: Duration = Duration::from_secs(3);

/// The scenario's config: the suite's, with a workspace volume and slow-stopping pods where
/// the provider is the Kubernetes one.
fn config(ctx: &Ctx<'_>) -> String {
    let Ok(mut config) = serde_json::from_str::<Value>(&ctx.config) else {
        return ctx.config.clone();
    };
    if ctx.driver != "kubernetes" || !config.is_object() {
        return ctx.config.clone();
    }
    if config["backend"] == "sandbox" && config.pointer("/sandbox/workspaceVolume").is_none() {
        config["sandbox"]["workspaceVolume"] = json!({"size": "1Gi"});
    }
    if let Some(simulator) = ctx.cluster.simulator() {
        let (key, value) = simulator.slow_stop(STOPPING);
        config["annotations"][key] = json!(value);
    }
    config.to_string()
}

/// Waits until the released sandbox's pod is being deleted (or gone), where the suite sees
/// the cluster: the resume-check that follows then meets the old pod stopping, as it does on a
/// real node for up to the grace period.
async fn old_pod_stopping(ctx: &Ctx<'_>, lease: &Lease) -> Result<(), Stop> {
    let (Ok(admin), Some(name)) = (ctx.admin(), lease.pod_name.as_deref()) else {
        return Ok(());
    };
    let pods: Api<Pod> = Api::namespaced(admin.clone(), &lease.namespace);
    let deadline = tokio::time::Instant::now() + CLUSTER_WAIT;
    loop {
        match pods.get_opt(name).await {
            Ok(None) => return Ok(()),
            Ok(Some(pod)) if pod.metadata.deletion_timestamp.is_some() => return Ok(()),
            Ok(Some(_)) | Err(_) => {}
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{} s after releasing a reusable lease its pod {name} is not being deleted: release did not suspend it",
            CLUSTER_WAIT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn right_after_release(ctx: &Ctx<'_>) -> Outcome {
    let config = config(ctx);
    let mut request = ctx.request(&ctx.acquisition_id());
    request.config = config.clone();
    request.reusable = true;
    let lease = ctx.acquire(request).await.map_err(|e| failed("acquire", e))?;
    let stored = LeaseRef { lease: lease.clone(), config };
    ctx.host.release(stored.clone()).await.map_err(|e| failed("release", e))?;
    if lease.reusable {
        old_pod_stopping(ctx, &lease).await?;
    }
    let answer =
        ctx.host.resume_check(stored.clone()).await.map_err(|e| failed("resume-check right after release", e))?;
    match (lease.reusable, answer) {
        (true, ResumeOutcome::Resumable(fresh)) => {
            let runs = match ctx.host.execute(ctx.stored(&fresh), sh("true", None)).await {
                Err(HostError::Provider(e)) if e.kind() == "unsupported" => "",
                Err(e) => return Err(failed("execute in the resumed sandbox", e)),
                Ok(ran) => {
                    ensure!(ran.exit_code == Some(0), "the resumed sandbox ran `true` as {ran:?}");
                    ", and runs commands"
                }
            };
            ctx.host.destroy(stored).await.map_err(|e| failed("destroy", e))?;
            Ok(format!("a reusable lease resumed right after its release{runs}"))
        }
        (true, ResumeOutcome::Expired(why)) => {
            Err(format!("a reusable lease resumed right after its release was expired: {why}").into())
        }
        (false, ResumeOutcome::Expired(_)) => Ok("a lease that is not reusable is expired once released".to_string()),
        (false, ResumeOutcome::Resumable(_)) => {
            Err("a lease that is not reusable was resumable after its release".to_string().into())
        }
    }
}
