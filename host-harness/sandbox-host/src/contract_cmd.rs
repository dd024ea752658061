//! `sandbox-host contract`: runs the contract suite against any provider component on a cluster
//! and prints a pass/fail table (or JSON lines), exiting non-zero when a scenario failed.
//!
//! On a real cluster the scenarios that need a simulator's hooks are skipped and say so; the
//! fault matrix needs the embedded cluster's fault injection and runs in `sandbox-dev
//! contract`, which uses the pieces here for the rest.

use std::io::IsTerminal;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use contract_suite::{Cluster, Record, Report, SuiteOptions, Verdict, warm_pool};
use provider_host::runner::{HostOptions, ProviderHost};

use crate::component_args::ComponentArgs;
use crate::documents::read_document;

/// Options of `contract`.
#[derive(Args)]
pub struct ContractArgs {
    #[command(flatten)]
    pub component: ComponentArgs,
    /// A provider config (JSON) to run every scenario with (repeatable). Default: for the
    /// Kubernetes provider one per backend, for any other `{}`.
    #[arg(long = "config")]
    pub configs: Vec<PathBuf>,
    /// Kubeconfig of the cluster to run against (default: as kubectl finds one: `KUBECONFIG`,
    /// `~/.kube/config`, in-cluster).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// The namespace the suite works in; created when missing; configs must name it.
    #[arg(short = 'n', long, default_value = "contract")]
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
    /// On a real cluster, delete the suite's own warm pool (`contract-pool`) and its template
    /// at the end; without it they stay for the next run, and the run says so.
    #[arg(long)]
    pub clean_up: bool,
}

impl ContractArgs {
    /// The component's driver key, which chooses the default configs.
    pub async fn driver(&self) -> anyhow::Result<String> {
        let options = HostOptions { cache_dir: self.component.cache_dir(), ..Default::default() };
        let host = ProviderHost::load_without_cluster(self.component.source()?, options).await?;
        Ok(host.describe().await?.driver_key)
    }

    /// The configs given, or the suite's defaults for the component's driver.
    pub async fn configs(&self) -> anyhow::Result<Vec<String>> {
        if self.configs.is_empty() {
            return Ok(contract_suite::default_configs(&self.driver().await?, &self.namespace));
        }
        self.configs.iter().map(|p| read_document(p, "config")).collect()
    }

    /// What the suite runs with `configs`.
    pub fn options(&self, configs: Vec<String>) -> anyhow::Result<SuiteOptions> {
        Ok(SuiteOptions {
            component: self.component.source()?,
            configs,
            namespace: self.namespace.clone(),
            cache_dir: self.component.cache_dir(),
            only: self.only.clone(),
            limits: Default::default(),
        })
    }

    /// `--list`: prints the scenarios' names; whether it did (and the command is done).
    pub fn listed(&self) -> bool {
        if self.list {
            for name in contract_suite::scenario_names() {
                crate::outln!("{name}");
            }
        }
        self.list
    }
}

/// `contract`
pub async fn run(args: ContractArgs) -> anyhow::Result<i32> {
    if args.listed() {
        return Ok(0);
    }
    let config = provider_host::kubeconfig::find(args.kubeconfig.as_deref())
        .await
        .context("`sandbox-dev contract` runs the suite and its fault matrix on the embedded cluster")?;
    let cluster = Cluster::Real { config: &config };
    let options = args.options(args.configs().await?)?;
    let mut progress = Progress::start();
    let report = contract_suite::run(&cluster, &options, &mut |r| progress.saw(r)).await?;
    progress.finish();
    suite_pool_left(&cluster, &args).await?;
    print(&report, &Report::default(), &[], args.json);
    if !args.json {
        crate::outln!("\nthe fault matrix needs the embedded cluster's fault injection: `sandbox-dev contract`");
    }
    Ok(if report.passed() { 0 } else { 1 })
}

/// A spinner on stderr, when it is a terminal, counting what has run.
pub struct Progress {
    bar: Option<indicatif::ProgressBar>,
    done: usize,
}

impl Progress {
    /// Starts the spinner (or nothing, when stderr is not a terminal).
    pub fn start() -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(std::time::Duration::from_millis(100));
            bar
        });
        Self { bar, done: 0 }
    }

    /// One more scenario or cell has run.
    pub fn saw(&mut self, r: &Record) {
        self.done += 1;
        if let Some(bar) = &self.bar {
            bar.set_message(format!(
                "{} scenarios and cells run; last: {} {}",
                self.done,
                r.scenario,
                r.verdict.as_str()
            ));
        }
    }

    /// Clears the spinner.
    pub fn finish(self) {
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Prints what a run found: JSON lines, or the scenarios' table, then each of `tables` (the
/// fault matrix's), then the fault `cells` that did not pass.
pub fn print(scenarios: &Report, cells: &Report, tables: &[String], json: bool) {
    if json {
        crate::out!("{}", scenarios.to_json_lines());
        crate::out!("{}", cells.to_json_lines());
        return;
    }
    crate::outln!("{scenarios}");
    for table in tables {
        crate::outln!("\n{table}");
    }
    let failed: Vec<Record> = cells.records.iter().filter(|r| r.verdict != Verdict::Pass).cloned().collect();
    if !failed.is_empty() {
        crate::outln!("\n{}", Report { records: failed });
    }
}

/// On a real cluster, the suite's own warm pool outlives the run (its members are running pods):
/// deleted with `--clean-up`, otherwise named on stderr with how to delete it. A pool a given
/// config names is the operator's and never deleted.
pub async fn suite_pool_left(cluster: &Cluster<'_>, args: &ContractArgs) -> anyhow::Result<()> {
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
             `sandbox-host pool delete {pool} --kubeconfig KUBECONFIG -n {} --template {}`",
            status.members, args.namespace, status.template
        );
    }
    Ok(())
}
