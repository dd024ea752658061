//! `sandbox-host contract`: runs the contract suite and its fault matrix against any provider
//! component and prints a pass/fail table (or JSON lines), exiting non-zero when a scenario or
//! a cell failed.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use contract_suite::{Cluster, Record, Report, SuiteOptions, Verdict, matrix, warm_pool};
use embedded_cluster::{ClusterConfig, EmbeddedCluster, SandboxVersions};
use provider_host::runner::{ComponentSource, HostOptions, ProviderHost};

use crate::provider_cmd::{DEFAULT_COMPONENT, read_json};

/// Options of `contract`.
#[derive(Args)]
pub struct ContractArgs {
    /// The provider component (.wasm) to hold to the contract.
    #[arg(long, default_value = DEFAULT_COMPONENT)]
    pub component: PathBuf,
    /// A provider config (JSON) to run every scenario and the matrix with (repeatable).
    /// Default: for the Kubernetes provider one per backend (in the matrix with a readiness
    /// timeout that fits its 10 s cells), for any other `{}`.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// Run against this cluster instead of the embedded one (fault cells are then skipped).
    #[arg(long, conflicts_with = "embedded")]
    pub kubeconfig: Option<PathBuf>,
    /// Run against a fresh embedded cluster (the default; says so explicitly in scripts).
    #[arg(long)]
    pub embedded: bool,
    /// Sandbox versions the embedded cluster serves.
    #[arg(long, default_value = "both")]
    pub sandbox_versions: SandboxVersions,
    /// The namespace the suite works in; created when missing; configs must name it.
    #[arg(long, default_value = "contract")]
    pub namespace: String,
    /// Only these scenarios (repeatable); `--list` shows their names.
    #[arg(long = "scenario")]
    pub only: Vec<String>,
    /// Leave out the fault matrix (the scenarios only).
    #[arg(long)]
    pub no_matrix: bool,
    /// Leave out the scenarios (the fault matrix only).
    #[arg(long)]
    pub no_scenarios: bool,
    /// Fail the requests of only these operations in the matrix (repeatable): acquire,
    /// resume-check, renew, release, destroy. Default: all.
    #[arg(long = "operation")]
    pub operations: Vec<String>,
    /// How many embedded clusters run matrix cells at once.
    #[arg(long, default_value_t = 8)]
    pub clusters: usize,
    /// List the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// One JSON record per scenario and per fault cell instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Where precompiled components are cached.
    #[arg(long, default_value = "target/provider-cache")]
    pub cache_dir: PathBuf,
    /// On a real cluster, delete the suite's own warm pool (`contract-pool`) and its template
    /// at the end; without it they stay for the next run, and the run says so.
    #[arg(long)]
    pub clean_up: bool,
}

/// The component's driver key, which chooses the default configs.
async fn driver(args: &ContractArgs) -> anyhow::Result<String> {
    let options = HostOptions { cache_dir: Some(args.cache_dir.clone()), ..Default::default() };
    let host = ProviderHost::load_without_cluster(ComponentSource::File(args.component.clone()), options).await?;
    Ok(host.describe().await?.driver_key)
}

/// `contract`
pub async fn run(args: ContractArgs) -> anyhow::Result<i32> {
    if args.list {
        for name in contract_suite::scenario_names() {
            println!("{name}");
        }
        return Ok(0);
    }
    if !args.component.exists() {
        anyhow::bail!("no provider component at {}: build it with `make component`", args.component.display());
    }
    let (configs, matrix_configs) = if args.configs.is_empty() {
        let driver = driver(&args).await?;
        (contract_suite::default_configs(&driver, &args.namespace), matrix::default_configs(&driver, &args.namespace))
    } else {
        let given: Vec<String> = args.configs.iter().map(|p| read_json(p, "config")).collect::<anyhow::Result<_>>()?;
        (given.clone(), given)
    };
    let operations = args.operations.iter().map(|o| o.parse::<matrix::Operation>()).collect::<Result<Vec<_>, _>>()?;
    let operations = if operations.is_empty() { matrix::Operation::ALL.to_vec() } else { operations };
    let embedded = match &args.kubeconfig {
        Some(_) => None,
        None => {
            let config = ClusterConfig { sandbox_versions: args.sandbox_versions, ..Default::default() };
            Some(EmbeddedCluster::start(config).await.context("start the embedded cluster")?)
        }
    };
    let cluster = match (&embedded, &args.kubeconfig) {
        (Some(c), _) => Cluster::Embedded(c),
        (None, path) => {
            let path = path.as_ref().context("no cluster: pass --kubeconfig, or leave it out for the embedded one")?;
            let kubeconfig = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
            Cluster::Real { kubeconfig }
        }
    };
    let options = SuiteOptions {
        component: args.component.clone(),
        configs,
        namespace: args.namespace.clone(),
        cache_dir: Some(args.cache_dir.clone()),
        only: args.only.clone(),
        limits: Default::default(),
    };
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(std::time::Duration::from_millis(100));
        bar
    });
    let mut done = 0usize;
    let mut progress = |r: &Record| {
        done += 1;
        if let Some(bar) = &bar {
            bar.set_message(format!("{done} scenarios and cells run; last: {} {}", r.scenario, r.verdict.as_str()));
        }
    };
    let mut report = if args.no_scenarios {
        Report::default()
    } else {
        contract_suite::run(&cluster, &options, &mut progress).await?
    };
    let mut matrices = Vec::new();
    if !args.no_matrix {
        let options = SuiteOptions { configs: matrix_configs, ..options };
        let (cells, tables) = matrix::run(&cluster, &options, &operations, args.clusters, &mut progress).await?;
        report.records.extend(cells.records);
        matrices = tables;
    }
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if let Cluster::Real { .. } = &cluster {
        suite_pool_left(&cluster, &args).await?;
    }
    if args.json {
        print!("{}", report.to_json_lines());
    } else {
        let (scenarios, cells): (Vec<Record>, Vec<Record>) =
            report.records.iter().cloned().partition(|r| !r.scenario.starts_with(matrix::PREFIX));
        println!("{}", Report { records: scenarios });
        for table in &matrices {
            println!("\n{table}");
        }
        let failed: Vec<Record> = cells.into_iter().filter(|r| r.verdict != Verdict::Pass).collect();
        if !failed.is_empty() {
            println!("\n{}", Report { records: failed });
        }
    }
    Ok(if report.passed() { 0 } else { 1 })
}

/// On a real cluster, the suite's own warm pool outlives the run (its members are running pods):
/// deleted with `--clean-up`, otherwise named on stderr with how to delete it. A pool a given
/// config names is the operator's and never deleted.
async fn suite_pool_left(cluster: &Cluster<'_>, args: &ContractArgs) -> anyhow::Result<()> {
    let admin = cluster.admin().await?;
    let pool = contract_suite::CONTRACT_POOL;
    let Ok(Some(status)) = warm_pool::status(&admin, &args.namespace, pool).await else {
        return Ok(());
    };
    let shown = format!("SandboxWarmPool {}/{pool} and its SandboxTemplate", args.namespace);
    if args.clean_up {
        warm_pool::delete(&admin, &args.namespace, pool, Some(&status.template)).await?;
        eprintln!("deleted {shown} (--clean-up)");
    } else {
        eprintln!(
            "left in place for the next run: {shown} ({} member Sandboxes); remove them with --clean-up, or \
             `sandbox-host pool --kubeconfig KUBECONFIG --namespace {} --name {pool} delete --template {}`",
            status.members, args.namespace, status.template
        );
    }
    Ok(())
}
