//! Expiry: a requested expiry bounds the lease (its expiry is at or before it) and renew moves
//! it; once a lease's expiry passes, the cluster ends the sandbox on its own and resume-check
//! answers expired. (Real time, not the embedded cluster's clock: a moved cluster clock would
//! make every later sandbox look expired at birth.)

use std::time::Duration;

use provider_host::records::ResumeOutcome;

use super::{Outcome, ensure, failed, scenario};
use crate::CLUSTER_WAIT;
use crate::context::{Ctx, now_millis};

scenario!(REQUESTED_EXPIRY, "requested-expiry", cluster: false, simulator: false, requested_expiry);
scenario!(AFTER_EXPIRY, "resume-after-expiry", cluster: true, simulator: false, after_expiry);

async fn requested_expiry(ctx: &Ctx<'_>) -> Outcome {
    let mut request = ctx.request(&ctx.acquisition_id());
    let asked = now_millis() + 600_000;
    request.requested_expires_at = Some(asked);
    let lease = ctx.acquire(request).await.map_err(|e| failed("acquire", e))?;
    let Some(expiry) = lease.expires_at else {
        return Err("a lease asked to expire has no expiry (the host must fail closed)".to_string().into());
    };
    ensure!(expiry <= asked, "the lease expires at {expiry}, after the requested {asked}");
    ensure!(expiry > now_millis(), "the lease expires at {expiry}, already past");
    let later = now_millis() + 1_200_000;
    match ctx.host.renew(ctx.stored(&lease), later).await.map_err(|e| failed("renew", e))? {
        ResumeOutcome::Resumable(renewed) => {
            let moved = renewed.expires_at.unwrap_or(i64::MAX);
            ensure!(moved > expiry && moved <= later, "renew to {later} moved the expiry from {expiry} to {moved}");
        }
        ResumeOutcome::Expired(why) => return Err(format!("renew of a live lease said expired: {why}").into()),
    }
    Ok("the expiry is at or before the requested one, and renew moves it".to_string())
}

async fn after_expiry(ctx: &Ctx<'_>) -> Outcome {
    let mut request = ctx.request(&ctx.acquisition_id());
    request.requested_expires_at = Some(now_millis() + 4_000);
    let lease = ctx.acquire(request).await.map_err(|e| failed("acquire", e))?;
    ensure!(lease.expires_at.is_some(), "the lease has no expiry");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(4) + CLUSTER_WAIT;
    loop {
        if !ctx.usable(&lease).await? {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the cluster kept the sandbox {} s past its expiry",
            CLUSTER_WAIT.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    match ctx.host.resume_check(ctx.stored(&lease)).await.map_err(|e| failed("resume-check", e))? {
        ResumeOutcome::Expired(_) => {
            Ok("past its expiry the cluster ended the sandbox and resume-check says expired".to_string())
        }
        ResumeOutcome::Resumable(_) => Err("resume-check after the expiry said resumable".to_string().into()),
    }
}
