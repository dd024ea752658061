//! Load: many acquire -> destroy lifecycles at a fixed concurrency against one in-process
//! embedded cluster and one host, then the leak audit. The same runner, with a share of the API
//! requests failing with 503 (seeded), gives the faults-under-load row.
//!
//! A failed acquire is not retried: it must leave nothing behind by itself. A destroy that fails
//! retryably is retried, as every caller of an idempotent destroy does.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::{EmbeddedCluster, PROVIDER_USER};
use futures::StreamExt;
use provider_host::{HostError, Limits, ProviderHost};

use crate::audit;
use crate::memory;
use crate::stats::Samples;
use crate::world;

/// How long garbage collection gets to settle before the audit counts leftovers.
pub const SETTLE: Duration = Duration::from_secs(60);

/// Nodes of the load cluster: room for the most pods one run can hold (each node takes 110;
/// terminating pods still hold theirs).
pub const NODES: usize = 12;

/// The load host: as many call slots as the highest concurrency, so the host is not what caps it.
pub fn limits(max_concurrency: usize) -> Limits {
    Limits { max_concurrent_calls: u32::try_from(max_concurrency).unwrap_or(u32::MAX), ..Limits::default() }
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Run {
    pub concurrency: usize,
    pub lifecycles: usize,
    pub completed: usize,
    pub elapsed: Duration,
    pub acquire: Samples,
    /// Failed acquires and destroys by error class.
    pub errors: BTreeMap<String, usize>,
    pub rss_before: u64,
    pub peak_rss: u64,
    pub rss_after: u64,
    pub leaks: Vec<String>,
}

impl Run {
    /// Lifecycles completed per second.
    pub fn rate(&self) -> f64 {
        self.completed as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Peak memory above the start, per lifecycle in flight.
    pub fn per_in_flight(&self) -> u64 {
        self.peak_rss.saturating_sub(self.rss_before) / self.concurrency.max(1) as u64
    }
}

/// A short name for what went wrong, for counting: the provider error's WIT case, or the
/// host's own failure.
pub fn class(e: &HostError) -> String {
    match e {
        HostError::Provider(p) => format!("provider {}", p.kind()),
        other => format!("host {}", format!("{other:?}").split(['(', ' ', '{']).next().unwrap_or("error")),
    }
}

/// Adds a rule failing `rate` of the provider's API requests with 503 (Retry-After 1 s).
pub fn inject_503(cluster: &EmbeddedCluster, rate: f64) -> u64 {
    cluster.faults().add(Rule {
        matches: Match { user: Some(PROVIDER_USER.to_string()), ..Match::default() },
        action: Action::Error {
            code: 503,
            reason: "ServiceUnavailable".into(),
            message: Some("injected by the benchmark".into()),
            retry_after_seconds: Some(1),
        },
        after: 0,
        times: None,
        probability: Some(rate),
    })
}

/// Runs `lifecycles` acquire -> destroy lifecycles, `concurrency` at a time, on `backend`, then
/// audits the namespace for what they left.
pub async fn run(
    cluster: &EmbeddedCluster,
    host: &Arc<ProviderHost>,
    backend: &str,
    lifecycles: usize,
    concurrency: usize,
    tag: &str,
) -> anyhow::Result<Run> {
    let mut run = drive(host, backend, lifecycles, concurrency, tag).await;
    run.leaks = audit::leftovers(cluster, SETTLE).await?;
    run.rss_after = memory::rss_bytes();
    Ok(run)
}

/// The lifecycles of [`run`] without the audit: for a cluster this process cannot look into.
pub async fn drive(host: &Arc<ProviderHost>, backend: &str, lifecycles: usize, concurrency: usize, tag: &str) -> Run {
    let config = Arc::new(world::config(backend));
    let rss_before = memory::rss_bytes();
    memory::reset_peak();
    let started = Instant::now();
    let outcomes: Vec<Result<Duration, String>> = futures::stream::iter(0..lifecycles)
        .map(|i| {
            let host = host.clone();
            let config = config.clone();
            let id = format!("{tag}-{i}");
            async move { lifecycle(&host, &config, &id).await }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    let elapsed = started.elapsed();
    // The last calls' teardowns follow their results: the memory after is read once they are done.
    host.settled().await;
    let peak_rss = memory::peak_rss_bytes();
    let mut errors = BTreeMap::new();
    let mut acquire = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(took) => acquire.push(took),
            Err(class) => *errors.entry(class).or_insert(0) += 1,
        }
    }
    Run {
        concurrency,
        lifecycles,
        completed: acquire.len(),
        elapsed,
        acquire: Samples::new(acquire),
        errors,
        rss_before,
        peak_rss,
        rss_after: memory::rss_bytes(),
        leaks: Vec::new(),
    }
}

/// One lifecycle: the acquire's duration, or the class of what failed.
async fn lifecycle(host: &ProviderHost, config: &str, id: &str) -> Result<Duration, String> {
    let started = Instant::now();
    let lease = host.acquire(world::request(config, id)).await.map_err(|e| format!("acquire: {}", class(&e)))?;
    let took = started.elapsed();
    let lease_ref = world::lease_ref(&lease, config);
    let mut attempt = 0;
    loop {
        match host.destroy(lease_ref.clone()).await {
            Ok(_) => return Ok(took),
            Err(e) if e.retryable() && attempt < 10 => {
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(100 * attempt)).await;
            }
            Err(e) => return Err(format!("destroy: {}", class(&e))),
        }
    }
}
