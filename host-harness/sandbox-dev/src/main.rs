//! `sandbox-dev`: the test bed's binary. It serves the embedded Kubernetes cluster (`cluster`),
//! runs its simulated controllers against any API server (`simulate`), steers a running
//! embedded cluster (`fault`, `requests`, `advance-clock`), runs the demo and the contract suite
//! with its fault matrix, and runs every `sandbox-host` command, against a fresh in-process
//! embedded cluster with `--embedded`.
//!
//! None of it ships to operators: `sandbox-host` is the product, and links none of this.

mod admin_cmd;
mod cluster_cmd;
mod contract_cmd;
mod demo;

use std::path::PathBuf;

use anyhow::bail;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster, PROVIDER_USER, SandboxVersions};
use sandbox_host::component_args::ComponentArgs;
use sandbox_host::{HostCommand, cli_io, exit_code, help_groups, log_filter};

/// The reference provider `make component` builds beside the Kubernetes one.
const REFERENCE_COMPONENT: &str = "target/wasm32-wasip2/component/reference_provider.wasm";

#[derive(Parser)]
#[command(
    name = "sandbox-dev",
    version,
    about = "The embedded Kubernetes cluster, its tools, the demo and the contract suite's fault matrix"
)]
struct Cli {
    /// Run a `sandbox-host` command against a fresh embedded cluster in this process, for as
    /// long as the command runs.
    #[arg(long, global = true)]
    embedded: bool,
    /// How log lines are written on stderr: `text` for a person, `json` for a log collector.
    #[arg(long, global = true, value_enum, default_value_t)]
    log_format: log_filter::LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the embedded cluster on 127.0.0.1 (API server and all controllers) in the foreground.
    Cluster(cluster_cmd::ClusterArgs),
    /// Run the simulated controllers against a cluster (e.g. a kube-apiserver with no nodes).
    Simulate {
        /// Kubeconfig of the target cluster.
        #[arg(long)]
        kubeconfig: PathBuf,
        /// Controllers to run.
        #[arg(long, value_delimiter = ',', default_value = "sandbox,job,kubelet,gc,template,warmpool,claim")]
        controllers: Vec<ControllerKind>,
        /// Run cluster time this many times faster than real time (delays and deadlines).
        #[arg(long, default_value_t = 1.0)]
        time_scale: f64,
        /// Whether the cluster runs kube-controller-manager (whose Job controller and garbage
        /// collector simulate then leaves alone): found out by default.
        #[arg(long, value_enum, default_value = "auto")]
        controller_manager: cluster_cmd::ControllerManager,
    },
    /// Inject faults into a running embedded cluster.
    Fault(admin_cmd::FaultArgs),
    /// Show the request log of a running embedded cluster.
    Requests(admin_cmd::RequestsArgs),
    /// Move a running embedded cluster's clock forward.
    AdvanceClock(admin_cmd::AdvanceArgs),
    /// The provider's full lease lifecycle on each backend, step by step, on the embedded
    /// cluster (or a real one with --kubeconfig).
    Demo {
        #[command(flatten)]
        component: ComponentArgs,
        /// The reference provider component, shown in the same host after it.
        #[arg(long, default_value = REFERENCE_COMPONENT)]
        reference_component: PathBuf,
        /// Use this cluster instead of starting the embedded one.
        #[arg(long, env = "SANDBOX_DEMO_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Sandbox versions the embedded cluster serves.
        #[arg(long, default_value = "both")]
        sandbox_versions: SandboxVersions,
        /// Leave what the demo made (its warm pools, their template and, when the demo made it,
        /// its namespace) on the cluster, to look at with kubectl; the demo says how to remove it.
        #[arg(long)]
        keep: bool,
    },
    /// Hold a provider component to the contract: every scenario and the fault matrix on the
    /// embedded cluster (or the scenarios on a real one), a non-zero exit code on any failure.
    Contract(contract_cmd::DevContractArgs),
    #[command(flatten)]
    Host(Box<HostCommand>),
}

/// Runs a `sandbox-host` command; with `embedded`, against a fresh in-process embedded cluster
/// that lives as long as the command.
async fn host_command(mut command: HostCommand, embedded: bool) -> anyhow::Result<i32> {
    if !embedded {
        return command.run().await;
    }
    let Some(host) = command.host_args_mut() else {
        bail!("--embedded applies to the commands that load a provider component");
    };
    if host.kubeconfig.is_some() || host.no_cluster {
        bail!("--embedded cannot be used with --kubeconfig or --no-cluster: each names the cluster");
    }
    let cluster = EmbeddedCluster::start(ClusterConfig::default()).await?;
    host.given_kubeconfig = Some(cluster.kubeconfig(PROVIDER_USER)?);
    let code = command.run().await;
    drop(cluster);
    code
}

async fn run(cli: Cli) -> anyhow::Result<i32> {
    let done = |r: anyhow::Result<()>| r.map(|()| 0);
    if cli.embedded && !matches!(cli.command, Command::Host(_) | Command::Contract(_)) {
        bail!("--embedded applies to the provider commands and `contract`");
    }
    match cli.command {
        Command::Cluster(args) => done(cluster_cmd::serve(args).await),
        Command::Simulate { kubeconfig, controllers, time_scale, controller_manager } => {
            done(cluster_cmd::simulate(&kubeconfig, &controllers, time_scale, controller_manager).await)
        }
        Command::Fault(args) => done(admin_cmd::fault(args).await),
        Command::Requests(args) => done(admin_cmd::requests(args).await),
        Command::AdvanceClock(args) => done(admin_cmd::advance(args).await),
        Command::Demo { component, reference_component, kubeconfig, sandbox_versions, keep } => {
            done(demo::run(&component, &reference_component, kubeconfig.as_deref(), sandbox_versions, keep).await)
        }
        Command::Contract(args) => {
            if cli.embedded && args.suite.kubeconfig.is_some() {
                bail!("--embedded cannot be used with --kubeconfig: each names the cluster");
            }
            contract_cmd::run(args).await
        }
        Command::Host(command) => host_command(*command, cli.embedded).await,
    }
}

/// The test bed's own commands, shown before `sandbox-host`'s groups.
const TEST_BED: help_groups::Group<'static> =
    ("Test bed", &["cluster", "simulate", "fault", "requests", "advance-clock", "demo", "contract"]);

fn main() {
    let groups: Vec<help_groups::Group<'_>> =
        [TEST_BED].into_iter().chain(help_groups::HOST_GROUPS.iter().copied()).collect();
    let matches = help_groups::grouped(Cli::command(), &groups).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // The contract suite provokes failures by the hundred and reports each one in its table.
    let default_filter = if matches!(cli.command, Command::Contract(_)) { "off" } else { log_filter::DEFAULT };
    // RUST_LOG (or the default), with frame-level logs of the wire capped: they carry secrets.
    log_filter::init(default_filter, cli.log_format);
    let result = tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| exit_code(runtime.block_on(run(cli))));
    std::process::exit(cli_io::exit_code_of(result))
}
