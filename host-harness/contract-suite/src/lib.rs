//! The contract suite: what every sandbox-provider component must prove, runnable against any
//! component that exports the provider world (`sandbox-host contract`, and `tests/`).
//!
//! Each scenario runs on a fresh host under an owner id and an ownership key of its own, so
//! everything the provider creates in it carries that id and the leak audit ([`audit`]) can
//! find it: after the scenario every lease it made is destroyed once more, and once garbage
//! collection settles nothing may remain, and nothing may ever have existed without an owner
//! or an expiry. Scenarios use only the contract and, where they say so, the cluster: a
//! component that declares no `kube` access is held to the contract alone, and the
//! Kubernetes-only scenarios say they were skipped.

pub mod audit;
pub mod cluster;
pub mod context;
pub mod report;
mod scenarios;
pub mod simulator;
pub mod warm_pool;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use kube::core::{ApiResource, GroupVersion};
use provider_host::owner_signature::OwnershipKeys;
use provider_host::policy::{AccessVerb, Policy};
use provider_host::{ComponentSource, HostOptions, Limits, ProviderHost};

pub use cluster::Cluster;
pub use report::{Record, Report, Verdict};

use crate::audit::Observer;
use crate::context::Ctx;
use crate::scenarios::{Scenario, Stop};

/// How long a scenario may run before it fails as stuck.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// How long a scenario waits for the cluster to do what it does by itself (remove a deleted
/// object, end an expired one) where that wait is not what the scenario tests: a real
/// kubelet's default grace period of 30 s, with a margin for a loaded machine.
pub(crate) const CLUSTER_WAIT: Duration = Duration::from_secs(60);

/// How long garbage collection may take to remove what a scenario left.
const SETTLE: Duration = Duration::from_secs(30);

/// What to run.
#[derive(Debug, Clone)]
pub struct SuiteOptions {
    /// The component.
    pub component: ComponentSource,
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

/// The warm pool (and its template) the default `claim` config claims from; the suite sets it
/// up when it does not exist ([`warm_pool::apply`]).
pub const CONTRACT_POOL: &str = "contract-pool";

/// Members the suite's warm pool keeps: enough for the scenarios that hold several leases at
/// once to get warm ones, few enough that a drained pool sends the rest down the cold path.
const CONTRACT_POOL_MEMBERS: u32 = 3;

/// The configs to hold a component to when none are given: for the Kubernetes provider one per
/// backend in `namespace` (the claim backend on [`CONTRACT_POOL`]), for any other the empty
/// config.
pub fn default_configs(driver: &str, namespace: &str) -> Vec<String> {
    match driver {
        "kubernetes" => {
            let mut configs: Vec<String> = ["sandbox", "job"]
                .iter()
                .map(|backend| {
                    serde_json::json!({"namespace": namespace, "backend": backend, "image": "busybox:1.36"}).to_string()
                })
                .collect();
            configs.push(
                serde_json::json!({
                    "namespace": namespace, "backend": "claim",
                    "claim": {"warmPool": CONTRACT_POOL, "template": CONTRACT_POOL},
                })
                .to_string(),
            );
            configs
        }
        _ => vec!["{}".to_string()],
    }
}

/// Sets up the warm pool each `claim` config names, when the cluster has none of that name, and
/// waits for its members; a config that names no pool, or a pool that exists, is left alone.
async fn ensure_pools(admin: &kube::Client, configs: &[String], namespace: &str) -> anyhow::Result<()> {
    for config in configs {
        let Ok(config) = serde_json::from_str::<serde_json::Value>(config) else {
            continue;
        };
        let (Some("claim"), Some(pool)) =
            (config["backend"].as_str(), config.pointer("/claim/warmPool").and_then(|p| p.as_str()))
        else {
            continue;
        };
        if warm_pool::status(admin, namespace, pool).await?.is_some() {
            continue;
        }
        let template = config.pointer("/claim/template").and_then(|t| t.as_str()).unwrap_or(pool);
        let spec = warm_pool::PoolSpec {
            namespace: namespace.to_string(),
            name: pool.to_string(),
            template: template.to_string(),
            replicas: CONTRACT_POOL_MEMBERS,
            image: "busybox:1.36".to_string(),
        };
        warm_pool::apply(admin, &spec).await?;
        warm_pool::wait_ready(admin, namespace, pool, CONTRACT_POOL_MEMBERS, Duration::from_secs(60)).await?;
    }
    Ok(())
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

/// What every scenario and cell of a run shares: the cluster, the suite's own client, and what
/// the component said of itself.
pub struct World<'a> {
    cluster: Cluster<'a>,
    options: SuiteOptions,
    admin: Option<kube::Client>,
    driver: String,
    uses_cluster: bool,
}

impl<'a> World<'a> {
    /// Loads the component once to learn its driver and whether it uses the cluster, and makes
    /// the suite's namespace when it does.
    pub async fn new(cluster: Cluster<'a>, options: &SuiteOptions) -> anyhow::Result<Self> {
        let probe = ProviderHost::load_without_cluster(
            options.component.clone(),
            host_options(options, "contract-probe".into()),
        )
        .await
        .context("load the component")?;
        let info = probe.describe().await.context("describe the component")?;
        let uses_cluster = !probe.grants().effective.resources.is_empty();
        let admin = if uses_cluster {
            cluster.ensure_namespace(&options.namespace).await?;
            let admin = cluster.admin().await?;
            ensure_pools(&admin, &options.configs, &options.namespace).await.context("set up the warm pools")?;
            Some(admin)
        } else {
            None
        };
        Ok(Self { cluster, options: options.clone(), admin, driver: info.driver_key, uses_cluster })
    }

    /// A fresh host under an owner id of its own, with the audit watching what it creates.
    pub async fn context(&self, config: &str) -> anyhow::Result<Ctx<'_>> {
        let owner_id = format!("contract-{}", tag());
        let host = ProviderHost::load(
            self.options.component.clone(),
            self.cluster.host_client().await?,
            host_options(&self.options, owner_id.clone()),
        )
        .await
        .context("load the component")?;
        let observer = match &self.admin {
            Some(admin) => {
                let types = created_types(admin, &host.grants().effective).await;
                Some(Observer::start(admin.clone(), &self.options.namespace, &owner_id, types).await)
            }
            None => None,
        };
        Ok(Ctx::new(
            host,
            &self.cluster,
            config.to_string(),
            self.options.namespace.clone(),
            owner_id,
            self.driver.clone(),
            observer,
            self.admin.clone(),
            format!("c{}", tag()),
        ))
    }

    /// Whether the component declares `kube` access (a component without it has nothing a
    /// cluster could fail).
    pub fn uses_cluster(&self) -> bool {
        self.uses_cluster
    }

    /// A record of `name` for what `ctx` acquired.
    pub fn record(&self, name: &str, ctx: &Ctx<'_>, verdict: Verdict, why: String) -> Record {
        Record { scenario: name.to_string(), backend: ctx.backend(), verdict, why }
    }
}

/// A host's options: the suite's namespace, `owner_id`, and an ownership key of its own, so
/// every scenario runs with ownership proved by signature as an operator should run it.
fn host_options(options: &SuiteOptions, owner_id: String) -> HostOptions {
    let key = format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple());
    HostOptions {
        // The configs name the pools the suite claims from; the operator running it vouches for them.
        policy: Policy {
            owner_id,
            warm_pools: vec!["*".into()],
            claim_templates: vec!["*".into()],
            ownership_keys: Some(OwnershipKeys::parse(&key).expect("64 random hex characters make a key")),
            ..Policy::kubernetes_default([options.namespace.clone()])
        },
        limits: options.limits.clone(),
        cache_dir: options.cache_dir.clone(),
    }
}

/// Runs every scenario for every config and returns the report; `progress` sees each record
/// as it is made.
pub async fn run(
    cluster: &Cluster<'_>,
    options: &SuiteOptions,
    progress: &mut (dyn FnMut(&Record) + Send),
) -> anyhow::Result<Report> {
    let world = World::new(*cluster, options).await?;
    let mut report = Report::default();
    for config in &options.configs {
        let chosen = scenarios::all()
            .into_iter()
            .filter(|s| options.only.is_empty() || options.only.iter().any(|o| o == s.name));
        for scenario in chosen {
            let record = match skip_reason(&scenario, world.uses_cluster, cluster) {
                Some(why) => {
                    Record { scenario: scenario.name.into(), backend: "-".into(), verdict: Verdict::Skip, why }
                }
                None => run_one(&scenario, &world.context(config).await?).await,
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
    if scenario.needs_simulator && cluster.simulator().is_none() {
        return Some("needs a simulated cluster's hooks (its request log or a held request)".to_string());
    }
    None
}

/// Destroys every lease a scenario or cell made once more, then audits what is left: `Err`
/// says what broke the contract.
pub async fn follow_up(ctx: &Ctx<'_>) -> Result<(), String> {
    let mut problems = Vec::new();
    for lease in ctx.leases() {
        if let Err(e) = ctx.host.destroy(lease.clone()).await {
            problems.push(format!("the follow-up destroy of {} failed: {e}", lease.lease.provider_lease_id));
        }
    }
    if let Some(observer) = &ctx.observer {
        if let Err(left) = observer.settled(SETTLE).await {
            problems.push(left);
        }
        let unguarded = observer.unguarded();
        if !unguarded.is_empty() {
            problems.push(format!("created with neither an owner nor an expiry: {}", unguarded.join(", ")));
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// Runs a scenario, then its follow-up destroy and audit.
async fn run_one(scenario: &Scenario, ctx: &Ctx<'_>) -> Record {
    let outcome = match tokio::time::timeout(SCENARIO_TIMEOUT, (scenario.run)(ctx)).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Stop::Fail(format!("did not finish within {} s", SCENARIO_TIMEOUT.as_secs()))),
    };
    let audit = follow_up(ctx).await;
    let (verdict, why) = match (outcome, audit) {
        (Err(Stop::Skip(why)), _) => (Verdict::Skip, why),
        (Err(Stop::Fail(why)), _) => (Verdict::Fail, why),
        (Ok(_), Err(problems)) => (Verdict::Fail, format!("leak audit: {problems}")),
        (Ok(checked), Ok(())) => (Verdict::Pass, checked),
    };
    Record { scenario: scenario.name.to_string(), backend: ctx.backend(), verdict, why }
}
