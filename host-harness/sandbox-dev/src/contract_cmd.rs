//! `sandbox-dev contract`: the contract suite on a fresh embedded cluster (or a real one through
//! `--kubeconfig`), and its fault matrix on embedded clusters, printed as tables (or JSON lines);
//! non-zero when a scenario or a cell failed. The suite's options and printing are
//! `sandbox-host contract`'s.

use anyhow::Context;
use clap::Args;
use contract_suite::{Cluster, Report};
use embedded_cluster::{ClusterConfig, EmbeddedCluster, SandboxVersions};
use fault_matrix::{Embedded, Operation};
use sandbox_host::contract_cmd::{ContractArgs, Progress, print, suite_pool_left};

/// Options of `sandbox-dev contract`.
#[derive(Args)]
pub struct DevContractArgs {
    #[command(flatten)]
    pub suite: ContractArgs,
    /// Sandbox versions the embedded cluster serves.
    #[arg(long, default_value = "both")]
    pub sandbox_versions: SandboxVersions,
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
}

/// `contract`
pub async fn run(args: DevContractArgs) -> anyhow::Result<i32> {
    let suite = &args.suite;
    if suite.listed() {
        return Ok(0);
    }
    let operations = args.operations.iter().map(|o| o.parse::<Operation>()).collect::<Result<Vec<_>, _>>()?;
    let operations = if operations.is_empty() { Operation::ALL.to_vec() } else { operations };
    let configs = suite.configs().await?;
    let matrix_configs = if suite.configs.is_empty() {
        fault_matrix::default_configs(&suite.driver().await?, &suite.namespace)
    } else {
        configs.clone()
    };
    let options = suite.options(configs)?;
    let real = match &suite.kubeconfig {
        Some(path) => Some(provider_host::kubeconfig::find(Some(path)).await?),
        None => None,
    };
    let embedded = match real {
        Some(_) => None,
        None => {
            let config = ClusterConfig { sandbox_versions: args.sandbox_versions, ..Default::default() };
            Some(EmbeddedCluster::start(config).await.context("start the embedded cluster")?)
        }
    };
    let bed = embedded.as_ref().map(Embedded);
    let cluster = match (&bed, &real) {
        (Some(bed), _) => Cluster::Simulated(bed),
        (None, Some(config)) => Cluster::Real { config },
        (None, None) => anyhow::bail!("no cluster to run the suite on"),
    };
    let mut progress = Progress::start();
    let scenarios = if args.no_scenarios {
        Report::default()
    } else {
        contract_suite::run(&cluster, &options, &mut |r| progress.saw(r)).await?
    };
    let (cells, tables) = match (&embedded, args.no_matrix) {
        (_, true) => (Report::default(), Vec::new()),
        (Some(main), false) => {
            let options = contract_suite::SuiteOptions { configs: matrix_configs, ..options };
            fault_matrix::run(main, &options, &operations, args.clusters, &mut |r| progress.saw(r)).await?
        }
        (None, false) => {
            let why = "fault cells need the embedded cluster's fault injection; skipped on a real cluster";
            (fault_matrix::skipped(&operations, why, &mut |r| progress.saw(r)), Vec::new())
        }
    };
    progress.finish();
    if let Cluster::Real { .. } = cluster {
        suite_pool_left(&cluster, suite).await?;
    }
    let tables: Vec<String> = tables.iter().map(ToString::to_string).collect();
    print(&scenarios, &cells, &tables, suite.json);
    Ok(if scenarios.passed() && cells.passed() { 0 } else { 1 })
}
