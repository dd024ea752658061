//! A lease's whole life: acquire, resume-check (resumable), renew (the expiry moves), release,
//! resume-check (expired), destroy. The secret value never shows in a lease.

use provider_host::records::ResumeOutcome;

use super::{Outcome, ensure, failed, scenario};
use crate::context::{Ctx, SECRET_VALUE, now_millis};

scenario!(LIFECYCLE, "lifecycle", cluster: false, simulator: false, lifecycle);

async fn lifecycle(ctx: &Ctx<'_>) -> Outcome {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let shown = serde_json::to_string(&lease).unwrap_or_default();
    ensure!(!shown.contains(SECRET_VALUE), "the lease holds the secret value: {shown}");
    if ctx.observer.is_some() {
        ensure!(ctx.usable(&lease).await?, "acquire returned, but the cluster says the sandbox is not usable");
    }
    let stored = ctx.stored(&lease);
    match ctx.host.resume_check(stored.clone()).await.map_err(|e| failed("resume-check", e))? {
        ResumeOutcome::Resumable(l) => ensure!(
            l.provider_lease_id == lease.provider_lease_id,
            "resume-check answered another lease id: {}",
            l.provider_lease_id
        ),
        ResumeOutcome::Expired(why) => {
            return Err(format!("resume-check right after acquire said expired: {why}").into());
        }
    }
    let wanted = now_millis() + 1_800_000;
    match ctx.host.renew(stored.clone(), wanted).await.map_err(|e| failed("renew", e))? {
        ResumeOutcome::Resumable(l) => {
            let expiry = l.expires_at.unwrap_or(i64::MAX);
            ensure!(expiry <= wanted, "renew to {wanted} gave an expiry after it: {expiry}");
            ensure!(l.expires_at != lease.expires_at, "renew did not move the expiry ({expiry})");
        }
        ResumeOutcome::Expired(why) => return Err(format!("renew of a live lease said expired: {why}").into()),
    }
    ctx.host.release(stored.clone()).await.map_err(|e| failed("release", e))?;
    let after_release = if ctx.observer.is_some() {
        match ctx.host.resume_check(stored.clone()).await.map_err(|e| failed("resume-check after release", e))? {
            ResumeOutcome::Expired(_) => "resume-check (expired)",
            ResumeOutcome::Resumable(_) => {
                return Err("resume-check after releasing an ephemeral lease said resumable".to_string().into());
            }
        }
    } else {
        // A provider with no cluster keeps its state in the lease, which release cannot change.
        "resume-check after release not asserted (the component keeps no state outside the lease)"
    };
    ctx.host.destroy(stored).await.map_err(|e| failed("destroy", e))?;
    Ok(format!("acquire, resume-check, renew, release, {after_release}, destroy"))
}
