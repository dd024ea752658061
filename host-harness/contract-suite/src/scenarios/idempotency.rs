//! Acquire is idempotent on the acquisition id: a retry gets the same sandbox, and ten
//! concurrent attempts converge (all succeed on one sandbox, or all fail retryably, and
//! nothing is left: the audit checks that).

use provider_host::HostError;

use super::{Outcome, ensure, failed, scenario};
use crate::context::Ctx;

scenario!(RETRIED_ACQUIRE, "retried-acquire", cluster: false, simulator: false, retried_acquire);
scenario!(CONCURRENT_ACQUIRES, "concurrent-acquires", cluster: false, simulator: false, concurrent_acquires);

async fn retried_acquire(ctx: &Ctx<'_>) -> Outcome {
    let id = ctx.acquisition_id();
    let first = ctx.acquire(ctx.request(&id)).await.map_err(|e| failed("acquire", e))?;
    let second = ctx.acquire(ctx.request(&id)).await.map_err(|e| failed("the retried acquire", e))?;
    ensure!(
        second.provider_lease_id == first.provider_lease_id,
        "a retried acquire got another lease: {} then {}",
        first.provider_lease_id,
        second.provider_lease_id
    );
    ensure!(
        second.workload_uid == first.workload_uid,
        "a retried acquire got another sandbox (workload uid {} then {})",
        first.workload_uid,
        second.workload_uid
    );
    Ok("a retried acquire returns the same lease and sandbox".to_string())
}

async fn concurrent_acquires(ctx: &Ctx<'_>) -> Outcome {
    let id = ctx.acquisition_id();
    let attempts = (0..10).map(|_| ctx.acquire(ctx.request(&id)));
    let results: Vec<Result<_, HostError>> = futures::future::join_all(attempts).await;
    let (ok, failed_ones): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
    let ok: Vec<_> = ok.into_iter().filter_map(Result::ok).collect();
    let errors: Vec<HostError> = failed_ones.into_iter().filter_map(Result::err).collect();
    if errors.is_empty() {
        let ids: std::collections::BTreeSet<_> = ok.iter().map(|l| (&l.provider_lease_id, &l.workload_uid)).collect();
        ensure!(ids.len() == 1, "ten acquires of one id made {} sandboxes: {ids:?}", ids.len());
        return Ok("ten concurrent acquires of one id all got the same sandbox".to_string());
    }
    ensure!(
        ok.is_empty(),
        "{} of 10 concurrent acquires succeeded and {} failed: they must converge",
        ok.len(),
        errors.len()
    );
    let final_ones: Vec<String> = errors.iter().filter(|e| !e.retryable()).map(ToString::to_string).collect();
    ensure!(final_ones.is_empty(), "concurrent acquires failed for good: {}", final_ones.join("; "));
    Ok("ten concurrent acquires of one id all failed retryably".to_string())
}
