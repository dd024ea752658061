//! The load, faults-under-load and cold-start sections: their clusters, and their tables.

use std::sync::Arc;
use std::time::Duration;

use crate::charts::ChartData;
use crate::cold_start;
use crate::load::{self, Run};
use crate::stats::{fmt_bytes, fmt_duration};
use crate::table::Table;
use crate::world;

/// The share of API requests failed in the faults section.
pub const FAULT_RATE: f64 = 0.05;
/// The concurrency of the faults section.
pub const FAULT_CONCURRENCY: usize = 128;

/// The one level the Job backend runs at too.
const JOB_CONCURRENCY: usize = 128;

/// Lifecycles run before the load levels, not reported.
const WARM_UP: usize = 1000;

/// How much load.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    pub lifecycles: usize,
    pub concurrency: Vec<usize>,
}

fn errors(run: &Run) -> String {
    if run.errors.is_empty() {
        return "none".into();
    }
    run.errors.iter().map(|(class, n)| format!("{class} x{n}")).collect::<Vec<_>>().join(", ")
}

fn leaks(run: &Run) -> String {
    match run.leaks.len() {
        0 => "0".into(),
        n => format!("{n}: {}", run.leaks.iter().take(4).cloned().collect::<Vec<_>>().join(", ")),
    }
}

/// Every concurrency level on the Sandbox backend (and 128 on the Job backend), one cluster and
/// one host for all, in order: the RSS columns show whether memory comes back between runs.
pub async fn load(options: &LoadOptions, charts: &mut ChartData) -> anyhow::Result<Vec<Table>> {
    let max = options.concurrency.iter().copied().max().unwrap_or(1);
    let cluster = world::cluster(load::NODES, Duration::from_millis(50)).await?;
    let host = Arc::new(world::load(&cluster, &world::provider_component()?, load::limits(max)).await?);
    // Fill the cluster's bounded caches (watch history, request log) first, so that the first
    // level's memory is not the caches filling.
    load::run(&cluster, &host, "sandbox", WARM_UP.min(options.lifecycles), 16, "warm-up").await?;
    let mut table = Table::new(
        "Load: acquire -> destroy lifecycles, one cluster and one host",
        &[
            "backend",
            "concurrency",
            "lifecycles",
            "completed",
            "lifecycles/s",
            "acquire p50",
            "acquire p99",
            "peak RSS",
            "per in flight",
            "RSS after",
            "errors",
            "leaks",
        ],
    );
    // Every level on the Sandbox backend; the Job backend at 128 for comparison.
    let mut levels: Vec<(&str, usize)> = options.concurrency.iter().map(|c| ("sandbox", *c)).collect();
    levels.extend(options.concurrency.iter().filter(|c| **c == JOB_CONCURRENCY).map(|c| ("job", *c)));
    for (backend, c) in levels {
        let run = load::run(&cluster, &host, backend, options.lifecycles, c, &format!("load-{backend}-{c}")).await?;
        if backend == "sandbox" {
            charts.latency.push((c, run.acquire.p50(), run.acquire.p99()));
        }
        table.row([
            backend.to_string(),
            c.to_string(),
            run.lifecycles.to_string(),
            run.completed.to_string(),
            format!("{:.1}", run.rate()),
            fmt_duration(run.acquire.p50()),
            fmt_duration(run.acquire.p99()),
            fmt_bytes(run.peak_rss),
            fmt_bytes(run.per_in_flight()),
            fmt_bytes(run.rss_after),
            errors(&run),
            leaks(&run),
        ]);
    }
    table.note(format!(
        "Host call slots: {max}; cluster: {} simulated nodes, kubelet delays 50 ms + 50 ms; {} lifecycles at concurrency \
         16 ran first (not shown) to fill the cluster's bounded caches. Leaks: what remains in the \
         namespace after {} s of garbage collection. \"Per in flight\": peak RSS above the run's start, divided by the \
         concurrency. RSS is the whole process: cluster, controllers and host.",
        load::NODES,
        WARM_UP.min(options.lifecycles),
        load::SETTLE.as_secs()
    ));
    Ok(vec![table])
}

/// The same lifecycles with 5 % of the provider's API requests failing with 503, per backend.
pub async fn faults(options: &LoadOptions) -> anyhow::Result<Table> {
    let mut table = Table::new(
        "Faults under load: 5 % of the provider's API requests answered 503 (seeded)",
        &[
            "backend",
            "concurrency",
            "lifecycles",
            "completed",
            "completion",
            "acquire p50",
            "acquire p99",
            "errors",
            "leaks",
        ],
    );
    for backend in world::BACKENDS {
        let cluster = world::cluster(load::NODES, Duration::from_millis(50)).await?;
        let host =
            Arc::new(world::load(&cluster, &world::provider_component()?, load::limits(FAULT_CONCURRENCY)).await?);
        load::inject_503(&cluster, FAULT_RATE);
        let run =
            load::run(&cluster, &host, backend, options.lifecycles, FAULT_CONCURRENCY, &format!("faults-{backend}"))
                .await?;
        table.row([
            backend.to_string(),
            FAULT_CONCURRENCY.to_string(),
            run.lifecycles.to_string(),
            run.completed.to_string(),
            format!("{:.1} %", 100.0 * run.completed as f64 / run.lifecycles.max(1) as f64),
            fmt_duration(run.acquire.p50()),
            fmt_duration(run.acquire.p99()),
            errors(&run),
            leaks(&run),
        ]);
    }
    table.note(
        "A failed acquire is not retried (it must leave nothing behind by itself); a destroy that fails retryably is \
         retried. Only the provider's requests are faulted: the controllers and the audit are not.",
    );
    Ok(table)
}

/// The CLI's cold start, against a cluster holding one live lease.
pub async fn cold_start(rounds: usize) -> anyhow::Result<Table> {
    let cluster = world::cluster(1, Duration::from_millis(10)).await?;
    let host = world::load(&cluster, &world::provider_component()?, provider_host::Limits::default()).await?;
    let config = world::config("sandbox");
    let lease = host.acquire(world::request(&config, "cold-start")).await?;
    let table = cold_start::measure(&cluster, &lease, rounds).await?;
    host.destroy(world::lease_ref(&lease, &config)).await?;
    Ok(table)
}
