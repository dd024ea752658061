//! `sandbox-host contract`: runs the contract suite against any provider component and prints
//! a pass/fail table (or JSON lines), exiting non-zero when a scenario failed.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use contract_suite::{Cluster, Record, SuiteOptions};
use embedded_cluster::{ClusterConfig, EmbeddedCluster};
use provider_host::runner::{ComponentSource, HostOptions, ProviderHost};

use crate::provider_cmd::{DEFAULT_COMPONENT, read_json};

/// Options of `contract`.
#[derive(Args)]
pub struct ContractArgs {
    /// The provider component (.wasm) to hold to the contract.
    #[arg(long, default_value = DEFAULT_COMPONENT)]
    pub component: PathBuf,
    /// A provider config (JSON) to run every scenario with (repeatable). Default: for the
    /// Kubernetes provider one per backend, for any other `{}`.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// Run against this cluster instead of the embedded one (fault cells are then skipped).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace the suite works in; created when missing; configs must name it.
    #[arg(long, default_value = "contract")]
    pub namespace: String,
    /// Only these scenarios (repeatable); `--list` shows their names.
    #[arg(long = "scenario")]
    pub only: Vec<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// One JSON record per scenario instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Where precompiled components are cached.
    #[arg(long, default_value = "target/provider-cache")]
    pub cache_dir: PathBuf,
}

/// The configs to use when none are given.
async fn default_configs(args: &ContractArgs) -> anyhow::Result<Vec<String>> {
    let options = HostOptions { cache_dir: Some(args.cache_dir.clone()), ..Default::default() };
    let host = ProviderHost::load_without_cluster(ComponentSource::File(args.component.clone()), options).await?;
    let info = host.describe().await?;
    Ok(contract_suite::default_configs(&info.driver_key, &args.namespace))
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
    let configs = if args.configs.is_empty() {
        default_configs(&args).await?
    } else {
        args.configs.iter().map(|p| read_json(p, "config")).collect::<anyhow::Result<_>>()?
    };
    let embedded = match &args.kubeconfig {
        Some(_) => None,
        None => Some(EmbeddedCluster::start(ClusterConfig::default()).await.context("start the embedded cluster")?),
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
            bar.set_message(format!("{done} scenarios run; last: {} {}", r.scenario, r.verdict.as_str()));
        }
    };
    let report = contract_suite::run(&cluster, &options, &mut progress).await?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if args.json {
        print!("{}", report.to_json_lines());
    } else {
        println!("{report}");
    }
    Ok(if report.passed() { 0 } else { 1 })
}
