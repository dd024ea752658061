//! Destroy is total and idempotent: three times in a row and three at once, of a lease whose
//! sandbox never existed, and from the lease id alone with its metadata and config missing or
//! garbage.

use provider_host::records::{DeleteOutcome, Lease};

use super::{Outcome, ensure, failed, scenario};
use crate::context::Ctx;

scenario!(REPEATED_DESTROY, "repeated-destroy", cluster: false, simulator: false, repeated_destroy);
scenario!(DESTROY_OF_NOTHING, "destroy-of-nothing", cluster: false, simulator: false, destroy_of_nothing);
scenario!(DESTROY_WITH_BAD_METADATA, "destroy-bad-metadata", cluster: false, simulator: false, destroy_with_bad_metadata);

async fn repeated_destroy(ctx: &Ctx<'_>) -> Outcome {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    for n in 1..=3 {
        ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed(&format!("destroy #{n}"), e))?;
    }
    let other = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let at_once = (0..3).map(|_| ctx.host.destroy(ctx.stored(&other)));
    for (n, result) in futures::future::join_all(at_once).await.into_iter().enumerate() {
        result.map_err(|e| failed(&format!("concurrent destroy #{}", n + 1), e))?;
    }
    Ok("destroy three times in a row and three times at once".to_string())
}

async fn destroy_of_nothing(ctx: &Ctx<'_>) -> Outcome {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed("destroy", e))?;
    let again = ctx.host.destroy(ctx.stored(&lease)).await.map_err(|e| failed("destroy of a destroyed lease", e))?;
    if ctx.observer.is_some() {
        ensure!(
            again.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone),
            "destroy of what is gone reported deletions: {again:?}"
        );
    }
    let mut checked = "destroy of a lease whose sandbox is gone".to_string();
    if ctx.driver == "kubernetes" {
        // This provider's lease ids name their objects, so one can name a sandbox that never was.
        let never = Lease {
            provider_lease_id: format!("k8s:job:{}:pc-never-{}", ctx.namespace, ctx.acquisition_id()),
            ..lease.clone()
        };
        let report = ctx.host.destroy(ctx.stored(&never)).await.map_err(|e| failed("destroy of a never-made id", e))?;
        ensure!(
            report.objects.iter().all(|o| o.outcome == DeleteOutcome::AlreadyGone),
            "destroy of an id that never existed reported deletions: {report:?}"
        );
        checked.push_str(", and of an id that never existed");
    }
    Ok(checked)
}

async fn destroy_with_bad_metadata(ctx: &Ctx<'_>) -> Outcome {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    for (metadata, config) in [("", "not json"), ("{{{ garbage", ""), ("[1,2,3]", "{}")] {
        let mut stored = ctx.stored(&lease);
        stored.lease.metadata = metadata.to_string();
        stored.config = config.to_string();
        ctx.host.destroy(stored).await.map_err(|e| failed(&format!("destroy with metadata {metadata:?}"), e))?;
    }
    Ok("destroy works from the lease id alone, with missing or garbage metadata and config".to_string())
}
