//! Warm pool: how much faster a `claim` acquire is when a warm pool has a Ready Sandbox than
//! when the claim has to start one (and than the `sandbox` backend, which always starts one),
//! on one cluster and one host; then a burst as large as the pool (every acquire a warm hit,
//! nothing left after the destroys, the pool Ready again) and one larger than the pool (the
//! rest fall back to cold starts and still succeed).
//!
//! The kubelet's start and ready delays stand in for a real node's pod start; a warm hit pays
//! none of them, which is the point of the pool.

use std::sync::Arc;
use std::time::{Duration, Instant};

use contract_suite::warm_pool::{self, PoolSpec};
use futures::StreamExt;
use provider_host::ProviderHost;
use provider_host::records::{Lease, LeaseRef};
use serde_json::json;

use crate::stats::{Samples, fmt_duration};
use crate::table::Table;
use crate::{audit, load, world};

/// The pool every warm acquire claims from, and the empty one every cold claim names.
pub(crate) const POOL: &str = "bench-pool";
const EMPTY_POOL: &str = "bench-empty";
const TEMPLATE: &str = "bench-template";

/// The kubelet's start and ready delay: a cold start waits for both.
const KUBELET_DELAY: Duration = Duration::from_millis(50);

/// Nodes: room for a full pool, the cold starts of the larger burst, and what is terminating.
const NODES: usize = 4;

/// How long a pool may take to become Ready.
const POOL_READY: Duration = Duration::from_secs(120);

/// Sizes of one run: sequential rounds per row, the burst's pool and the larger burst.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub rounds: usize,
    pub pool: u32,
    pub larger_burst: usize,
}

impl Sizes {
    /// The full run (100 members, 150 in the larger burst) or a quick smoke run.
    pub fn new(quick: bool) -> Self {
        if quick {
            Self { rounds: 8, pool: 20, larger_burst: 30 }
        } else {
            Self { rounds: 30, pool: 100, larger_burst: 150 }
        }
    }
}

/// A claim lease's config: a Sandbox from `pool`, else a cold one from the bench's template.
pub(crate) fn claim_config(pool: &str) -> String {
    json!({"namespace": world::NAMESPACE, "backend": "claim", "claim": {"warmPool": pool, "template": TEMPLATE}})
        .to_string()
}

fn sandbox_config() -> String {
    json!({"namespace": world::NAMESPACE, "backend": "sandbox", "image": "busybox:1.36"}).to_string()
}

/// Makes (or resizes) the pool `name` of the bench's template, and waits for `replicas` Ready.
pub(crate) async fn set_pool(admin: &kube::Client, name: &str, replicas: u32) -> anyhow::Result<()> {
    let spec = PoolSpec {
        namespace: world::NAMESPACE.into(),
        name: name.into(),
        template: TEMPLATE.into(),
        replicas,
        image: "busybox:1.36".into(),
    };
    warm_pool::apply(admin, &spec).await?;
    warm_pool::wait_ready(admin, world::NAMESPACE, name, replicas, POOL_READY).await?;
    Ok(())
}

/// Whether the lease's Sandbox came from the warm pool.
fn warm(lease: &Lease) -> bool {
    lease.claimed_sandbox.as_ref().is_some_and(|s| s.warm)
}

/// `rounds` sequential acquire -> destroy lifecycles; the acquires' times and how many were warm.
async fn sequential(host: &ProviderHost, config: &str, tag: &str, rounds: usize) -> anyhow::Result<(Samples, usize)> {
    let mut times = Vec::new();
    let mut warm_hits = 0;
    for i in 0..rounds {
        let request = world::request(config, &format!("{tag}-{i}"));
        let started = Instant::now();
        let lease = host.acquire(request).await?;
        times.push(started.elapsed());
        warm_hits += usize::from(warm(&lease));
        host.destroy(LeaseRef { lease, config: config.to_string() }).await?;
    }
    Ok((Samples::new(times), warm_hits))
}

/// `count` concurrent acquires, then their destroys; the acquire times, warm hits and failures.
async fn burst(
    host: &Arc<ProviderHost>,
    config: &str,
    tag: &str,
    count: usize,
) -> anyhow::Result<(Samples, usize, usize)> {
    let results: Vec<_> = futures::stream::iter(0..count)
        .map(|i| {
            let host = host.clone();
            let request = world::request(config, &format!("{tag}-{i}"));
            async move {
                let started = Instant::now();
                let lease = host.acquire(request).await;
                (started.elapsed(), lease)
            }
        })
        .buffer_unordered(count)
        .collect()
        .await;
    let (mut times, mut warm_hits, mut failed, mut leases) = (Vec::new(), 0, 0, Vec::new());
    for (took, lease) in results {
        match lease {
            Ok(lease) => {
                times.push(took);
                warm_hits += usize::from(warm(&lease));
                leases.push(lease);
            }
            Err(_) => failed += 1,
        }
    }
    let destroys = leases.into_iter().map(|lease| {
        let host = host.clone();
        let config = config.to_string();
        async move { host.destroy(LeaseRef { lease, config }).await }
    });
    for result in futures::future::join_all(destroys).await {
        result?;
    }
    Ok((Samples::new(times), warm_hits, failed))
}

/// The warm-pool table.
pub async fn measure(sizes: Sizes) -> anyhow::Result<Table> {
    let cluster = world::cluster(NODES, KUBELET_DELAY).await?;
    let admin = cluster.client().await?;
    let limits = load::limits(sizes.larger_burst);
    let host = Arc::new(world::load(&cluster, &world::provider_component()?, limits).await?);
    set_pool(&admin, EMPTY_POOL, 0).await?;
    set_pool(&admin, POOL, u32::try_from(sizes.rounds).unwrap_or(u32::MAX)).await?;
    // The host is warm: one lifecycle of each kind before anything is timed.
    sequential(&host, &claim_config(POOL), "warm-up", 1).await?;
    sequential(&host, &sandbox_config(), "warm-up-sb", 1).await?;
    set_pool(&admin, POOL, u32::try_from(sizes.rounds).unwrap_or(u32::MAX)).await?;

    let mut table = Table::new(
        "Warm pool: claim acquires from a pool against cold starts, one cluster and one host",
        &["acquire", "n", "p50", "p99", "warm hits", "failed", "notes"],
    );
    let (warm_times, warm_hits) = sequential(&host, &claim_config(POOL), "warm", sizes.rounds).await?;
    let (cold_times, cold_hits) = sequential(&host, &claim_config(EMPTY_POOL), "cold", sizes.rounds).await?;
    let (sandbox_times, _) = sequential(&host, &sandbox_config(), "sb", sizes.rounds).await?;
    let row = |table: &mut Table, what: &str, s: &Samples, hits: String, failed: usize, note: String| {
        table.row([
            what.to_string(),
            s.len().to_string(),
            fmt_duration(s.p50()),
            fmt_duration(s.p99()),
            hits,
            failed.to_string(),
            note,
        ]);
    };
    row(
        &mut table,
        "claim, warm pool (sequential)",
        &warm_times,
        format!("{warm_hits}/{}", sizes.rounds),
        0,
        format!("a pool of {}: a member for every round, whatever the refill", sizes.rounds),
    );
    row(
        &mut table,
        "claim, empty pool (cold)",
        &cold_times,
        format!("{cold_hits}/{}", sizes.rounds),
        0,
        "the claim controller makes the Sandbox".into(),
    );
    row(&mut table, "sandbox backend (cold)", &sandbox_times, "-".into(), 0, "the provider makes the Sandbox".into());

    set_pool(&admin, POOL, sizes.pool).await?;
    let (burst_times, burst_hits, burst_failed) =
        burst(&host, &claim_config(POOL), "burst", usize::try_from(sizes.pool).unwrap_or(usize::MAX)).await?;
    let refill = Instant::now();
    warm_pool::wait_ready(&admin, world::NAMESPACE, POOL, sizes.pool, POOL_READY).await?;
    let refilled = refill.elapsed();
    let leaks = leftovers(&cluster).await?;
    row(
        &mut table,
        &format!("burst of {} on a pool of {}", sizes.pool, sizes.pool),
        &burst_times,
        format!("{burst_hits}/{}", sizes.pool),
        burst_failed,
        format!(
            "pool back to {} Ready {} after the destroys; leaks: {}",
            sizes.pool,
            fmt_duration(refilled),
            leak_text(&leaks)
        ),
    );

    let (larger_times, larger_hits, larger_failed) =
        burst(&host, &claim_config(POOL), "larger", sizes.larger_burst).await?;
    let leaks = leftovers(&cluster).await?;
    row(
        &mut table,
        &format!("burst of {} on a pool of {}", sizes.larger_burst, sizes.pool),
        &larger_times,
        format!("{larger_hits}/{}", sizes.larger_burst),
        larger_failed,
        format!(
            "{} started cold (members the pool replenished during the burst are adopted too); leaks: {}",
            sizes.larger_burst.saturating_sub(larger_failed + larger_hits),
            leak_text(&leaks)
        ),
    );

    let ratio = cold_times.p50().as_secs_f64() / warm_times.p50().as_secs_f64().max(1e-9);
    let sandbox_ratio = sandbox_times.p50().as_secs_f64() / warm_times.p50().as_secs_f64().max(1e-9);
    table.note(format!(
        "A warm hit's p50 is {ratio:.1}x faster than a cold claim's and {sandbox_ratio:.1}x faster than the sandbox \
         backend's (kubelet start and ready delay {} ms each).",
        KUBELET_DELAY.as_millis()
    ));
    table.note(
        "Leaks: claims, Secrets and claimed Sandboxes (with their pods) left once garbage collection settles; \
                pool members are the pool's.",
    );
    Ok(table)
}

/// What the provider made that is left: claims, owned Secrets, and Sandboxes (and pods) that a
/// claim owned.
async fn leftovers(cluster: &embedded_cluster::EmbeddedCluster) -> anyhow::Result<Vec<String>> {
    audit::claim_leftovers(cluster, load::SETTLE).await
}

fn leak_text(leaks: &[String]) -> String {
    match leaks.len() {
        0 => "0".into(),
        n => format!("{n}: {}", leaks.iter().take(4).cloned().collect::<Vec<_>>().join(", ")),
    }
}
