//! The contract suite: what every sandbox-provider component must prove, runnable against any
//! component that exports the provider world (`sandbox-host contract`, and `tests/`).
//!
//! Each scenario runs on a fresh host under an owner id of its own, so everything the provider
//! creates in it carries that id and the leak audit ([`audit`]) can find it: after the scenario
//! every lease it made is destroyed once more, and once garbage collection settles nothing may
//! remain, and nothing may ever have existed without an owner or an expiry. Scenarios use only
//! the contract and, where they say so, the cluster: a component that declares no `kube` access
//! is held to the contract alone, and the Kubernetes-only scenarios say they were skipped.

pub mod audit;
pub mod cluster;
pub mod context;
pub mod report;
mod scenarios;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use kube::core::{ApiResource, GroupVersion};
use provider_host::policy::{AccessVerb, Policy};
use provider_host::{ComponentSource, HostOptions, Limits, ProviderHost};

pub use cluster::Cluster;
pub use report::{Record, Report, Verdict};

use crate::audit::Observer;
use crate::context::Ctx;
use crate::scenarios::{Scenario, Stop};

/// How long a scenario may run before it fails as stuck.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// How long garbage collection may take to remove what a scenario left.
const SETTLE: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// The component (`.wasm`).
    pub component: PathBuf,
    /// Provider configs (JSON text); every scenario runs once per config.
    pub configs: Vec<String>,
    /// The namespace the suite's policy allows (and creates when missing); the configs must
    /// name it.
    pub namespace: String,
    /// Where precompiled components are cached.
    pub cache_dir: Option<PathBuf>,
    /// Run only the scenarios with these names; all when empty.
    pub only: Vec<String>,
    /// The host's per-call limits.
    pub limits: Limits,
}

/// The configs to hold a component to when none are given: for the Kubernetes provider one per
/// backend in `namespace`, for any other the empty config.
pub fn default_configs(driver: &str, namespace: &str) -> Vec<String> {
    match driver {
        "kubernetes" => ["sandbox", "job"]
            .iter()
            .map(|backend| {
                serde_json::json!({"namespace": namespace, "backend": backend, "image": "busybox:1.36"}).to_string()
            })
            .collect(),
        _ => vec!["{}".to_string()],
    }
}

/// The names of every scenario, in the order they run.
pub fn scenario_names() -> Vec<&'static str> {
    scenarios::all().iter().map(|s| s.name).collect()
}

/// The types a component may create under `policy`, as the cluster serves them (one version
/// per type, the policy's first that is served): what the leak audit watches.
async fn created_types(admin: &kube::Client, policy: &Policy) -> Vec<ApiResource> {
    let mut out = Vec::new();
    for rule in policy.resources.iter().filter(|r| r.namespaced && r.allows(AccessVerb::Create)) {
        for version in &rule.versions {
            let gv = GroupVersion::gv(&rule.group, version);
            let Ok(group) = kube::discovery::pinned_group(admin, &gv).await else {
                continue;
            };
            if let Some((resource, _)) =
                group.resources_by_stability().into_iter().find(|(r, _)| r.plural == rule.plural)
            {
                out.push(resource);
                break;
            }
        }
    }
    out
}

/// A short random tag, lowercase hex, for unique owner ids and acquisition ids.
fn tag() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..6].to_string()
}

/// Runs every scenario for every config and returns the report; `progress` sees each record
/// as it is made.
pub async fn run(
    cluster: &Cluster<'_>,
    options: &SuiteOptions,
    progress: &mut (dyn FnMut(&Record) + Send),
) -> anyhow::Result<Report> {
    let host_options = |owner_id: String| HostOptions {
        policy: Policy { owner_id, ..Policy::kubernetes_default([options.namespace.clone()]) },
        limits: options.limits.clone(),
        cache_dir: options.cache_dir.clone(),
    };
    let source = || ComponentSource::File(options.component.clone());
    let probe = ProviderHost::load_without_cluster(source(), host_options("contract-probe".into()))
        .await
        .context("load the component")?;
    let info = probe.describe().await.context("describe the component")?;
    let uses_cluster = !probe.grants().effective.resources.is_empty();
    let admin = if uses_cluster {
        cluster.ensure_namespace(&options.namespace).await?;
        Some(cluster.admin().await?)
    } else {
        None
    };
    let mut report = Report::default();
    for (n, config) in options.configs.iter().enumerate() {
        for scenario in
            scenarios::all().into_iter().filter(|s| options.only.is_empty() || options.only.iter().any(|o| o == s.name))
        {
            let record = match skip_reason(&scenario, uses_cluster, cluster) {
                Some(why) => {
                    Record { scenario: scenario.name.into(), backend: "-".into(), verdict: Verdict::Skip, why }
                }
                None => {
                    let owner_id = format!("contract-{}", tag());
                    let host =
                        ProviderHost::load(source(), cluster.host_client().await?, host_options(owner_id.clone()))
                            .await
                            .context("load the component")?;
                    let observer = match &admin {
                        Some(admin) => {
                            let types = created_types(admin, &host.grants().effective).await;
                            Some(Observer::start(admin.clone(), &options.namespace, &owner_id, types).await)
                        }
                        None => None,
                    };
                    let ctx = Ctx::new(
                        host,
                        cluster,
                        config.clone(),
                        options.namespace.clone(),
                        owner_id,
                        info.driver_key.clone(),
                        observer,
                        admin.clone(),
                        format!("c{n}{}", tag()),
                    );
                    run_one(&scenario, &ctx).await
                }
            };
            progress(&record);
            report.records.push(record);
        }
    }
    Ok(report)
}

fn skip_reason(scenario: &Scenario, uses_cluster: bool, cluster: &Cluster<'_>) -> Option<String> {
    if scenario.needs_cluster && !uses_cluster {
        return Some("Kubernetes-only: the component declares no kube access".to_string());
    }
    if scenario.needs_embedded && cluster.embedded().is_none() {
        return Some("needs the embedded cluster (its clock or its fault injection)".to_string());
    }
    None
}

/// Runs a scenario, destroys every lease it made once more, and audits what is left.
async fn run_one(scenario: &Scenario, ctx: &Ctx<'_>) -> Record {
    let outcome = match tokio::time::timeout(SCENARIO_TIMEOUT, (scenario.run)(ctx)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Stop::Fail(format!("did not finish within {} s", SCENARIO_TIMEOUT.as_secs()))),
    };
    let mut cleanup = Vec::new();
    for lease in ctx.leases() {
        if let Err(e) = ctx.host.destroy(lease.clone()).await {
            cleanup.push(format!("the follow-up destroy of {} failed: {e}", lease.lease.provider_lease_id));
        }
    }
    if let Some(observer) = &ctx.observer {
        if let Err(left) = observer.settled(SETTLE).await {
            cleanup.push(left);
        }
        let unguarded = observer.unguarded();
        if !unguarded.is_empty() {
            cleanup.push(format!("created with neither an owner nor an expiry: {}", unguarded.join(", ")));
        }
    }
    let (verdict, why) = match outcome {
        Err(Stop::Skip(why)) => (Verdict::Skip, why),
        Err(Stop::Fail(why)) => (Verdict::Fail, why),
        Ok(_) if !cleanup.is_empty() => (Verdict::Fail, format!("leak audit: {}", cleanup.join("; "))),
        Ok(checked) => (Verdict::Pass, checked),
    };
    Record { scenario: scenario.name.to_string(), backend: ctx.backend(), verdict, why }
}
