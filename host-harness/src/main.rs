//! `sandbox-host`: serves the embedded Kubernetes cluster, runs its simulated controllers
//! against any cluster, steers faults, the request log and the clock, and runs the demo.

mod admin_cmd;
mod cluster_cmd;
mod demo;

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use embedded_cluster::{ControllerKind, SandboxVersions};

#[derive(Parser)]
#[command(name = "sandbox-host", version, about = "Kubernetes sandbox provider host and embedded cluster")]
struct Cli {
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
        #[arg(long, value_delimiter = ',', default_value = "sandbox,job,kubelet,gc")]
        controllers: Vec<ControllerKind>,
        /// Run cluster time this many times faster than real time (delays and deadlines).
        #[arg(long, default_value_t = 1.0)]
        time_scale: f64,
    },
    /// Inject faults into a running embedded cluster.
    Fault(admin_cmd::FaultArgs),
    /// Show the request log of a running embedded cluster.
    Requests(admin_cmd::RequestsArgs),
    /// Move a running embedded cluster's clock forward.
    AdvanceClock(admin_cmd::AdvanceArgs),
    /// Show a Sandbox's and a Job's life on the embedded cluster (or a real one), step by step.
    Demo {
        /// Use this cluster instead of starting the embedded one.
        #[arg(long, env = "SANDBOX_DEMO_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Sandbox versions the embedded cluster serves.
        #[arg(long, default_value = "both")]
        sandbox_versions: SandboxVersions,
    },
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        match cli.command {
            Command::Cluster(args) => cluster_cmd::serve(args).await,
            Command::Simulate { kubeconfig, controllers, time_scale } => {
                cluster_cmd::simulate(&kubeconfig, &controllers, time_scale).await
            }
            Command::Fault(args) => admin_cmd::fault(args).await,
            Command::Requests(args) => admin_cmd::requests(args).await,
            Command::AdvanceClock(args) => admin_cmd::advance(args).await,
            Command::Demo { kubeconfig, sandbox_versions } => demo::run(kubeconfig.as_deref(), sandbox_versions).await,
        }
    })
}
