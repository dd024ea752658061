//! `sandbox-host`: serves the embedded Kubernetes cluster, runs its simulated controllers
//! against any cluster, steers faults, the request log and the clock, and runs the demo.

mod admin_cmd;
mod cluster_cmd;
mod contract_cmd;
mod demo;
mod env_args;
mod exec_cmd;
mod log_filter;
mod policy_cmd;
mod pool_cmd;
mod provider_cmd;
mod serve_cmd;
mod untrusted_kubeconfig;

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
    /// Set up, inspect or remove a warm pool (a SandboxTemplate and a SandboxWarmPool) for the
    /// claim backend.
    Pool(pool_cmd::PoolArgs),
    /// The provider's full lease lifecycle on each backend, step by step, on the embedded
    /// cluster (or a real one with --kubeconfig).
    Demo {
        /// The provider component (.wasm).
        #[arg(long, default_value = provider_cmd::DEFAULT_COMPONENT)]
        component: PathBuf,
        /// The reference provider component, shown in the same host after it.
        #[arg(long, default_value = provider_cmd::REFERENCE_COMPONENT)]
        reference_component: PathBuf,
        /// Use this cluster instead of starting the embedded one.
        #[arg(long, env = "SANDBOX_DEMO_KUBECONFIG")]
        kubeconfig: Option<PathBuf>,
        /// Sandbox versions the embedded cluster serves.
        #[arg(long, default_value = "both")]
        sandbox_versions: SandboxVersions,
    },
    /// Show the provider's identity, capabilities and config schema.
    Describe {
        #[command(flatten)]
        target: provider_cmd::Target,
    },
    /// Check a provider config: every problem with its path, and the normalized config.
    ValidateConfig {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[arg(long)]
        config: PathBuf,
    },
    /// Check that a config can work against the cluster.
    Probe {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[arg(long)]
        config: PathBuf,
    },
    /// Provision a sandbox and wait until it is ready; prints the lease.
    Acquire {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[command(flatten)]
        args: provider_cmd::AcquireArgs,
    },
    /// Whether a stored lease can be used again (exit code 3: expired).
    ResumeCheck {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[command(flatten)]
        lease: provider_cmd::LeaseArgs,
    },
    /// Move a lease's expiry (exit code 3: the lease expired).
    Renew {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[command(flatten)]
        lease: provider_cmd::LeaseArgs,
        /// New expiry, in seconds from now.
        #[arg(long)]
        expires_in: u64,
    },
    /// End a run: destroy an ephemeral lease, suspend a reusable one.
    Release {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[command(flatten)]
        lease: provider_cmd::LeaseArgs,
    },
    /// Delete everything a lease could own (idempotent).
    Destroy {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[command(flatten)]
        lease: provider_cmd::LeaseArgs,
    },
    /// Run a command in a lease's sandbox: its output, and its exit code as this command's
    /// (124: killed at its timeout).
    Exec {
        #[command(flatten)]
        target: provider_cmd::Target,
        #[command(flatten)]
        args: exec_cmd::ExecArgs,
    },
    /// Serve the provider as a long-running process: concurrent calls as JSON lines on stdin,
    /// replies on stdout (for hosts in other languages, such as a Paperclip plugin worker).
    Serve(serve_cmd::ServeArgs),
    /// Hold a provider component to the contract: every scenario, a pass/fail table, a
    /// non-zero exit code on any failure.
    Contract(contract_cmd::ContractArgs),
    /// The operator's policy and what it grants a component.
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// Print the ServiceAccount, Role and RoleBinding (YAML) for exactly the access the host
    /// grants the component: no wildcard, no ClusterRole, nothing unused.
    Rbac {
        #[command(flatten)]
        inspect: policy_cmd::InspectArgs,
        /// Name of the ServiceAccount (and of the Roles and RoleBindings); it lives in the first
        /// allowed namespace.
        #[arg(long, default_value = "sandbox-host")]
        service_account: String,
    },
    /// Print the NetworkPolicy (YAML) that isolates the sandboxes' pods in a namespace: no
    /// ingress, egress to the cluster DNS and the policy's `egress` only.
    NetworkPolicy {
        #[command(flatten)]
        policy: policy_cmd::PolicyArgs,
        /// Name of the NetworkPolicy.
        #[arg(long, default_value = provider_host::network_policy::DEFAULT_NAME)]
        name: String,
    },
}

#[derive(Subcommand)]
enum PolicyCommand {
    /// What the component declares, what the operator's policy grants, and what the host
    /// enforces (their intersection), with what was refused.
    Show {
        #[command(flatten)]
        inspect: policy_cmd::InspectArgs,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The contract suite provokes failures by the hundred and reports each one in its table;
    // the host's and the provider's log lines about them would only bury it (RUST_LOG still
    // turns them on).
    let default_filter = if matches!(cli.command, Command::Contract(_)) { "off" } else { "warn" };
    // RUST_LOG (or the default), with frame-level logs of the wire capped: they carry secrets.
    log_filter::init(default_filter);
    let runtime = tokio::runtime::Runtime::new()?;
    let code = runtime.block_on(async move {
        let done = |r: anyhow::Result<()>| r.map(|()| 0);
        match cli.command {
            Command::Cluster(args) => done(cluster_cmd::serve(args).await),
            Command::Simulate { kubeconfig, controllers, time_scale, controller_manager } => {
                done(cluster_cmd::simulate(&kubeconfig, &controllers, time_scale, controller_manager).await)
            }
            Command::Fault(args) => done(admin_cmd::fault(args).await),
            Command::Requests(args) => done(admin_cmd::requests(args).await),
            Command::AdvanceClock(args) => done(admin_cmd::advance(args).await),
            Command::Pool(args) => done(pool_cmd::run(args).await),
            Command::Demo { component, reference_component, kubeconfig, sandbox_versions } => {
                done(demo::run(&component, &reference_component, kubeconfig.as_deref(), sandbox_versions).await)
            }
            Command::Describe { target } => provider_cmd::describe(target).await,
            Command::ValidateConfig { target, config } => provider_cmd::validate_config(target, &config).await,
            Command::Probe { target, config } => provider_cmd::probe(target, &config).await,
            Command::Acquire { target, args } => provider_cmd::acquire(target, args).await,
            Command::ResumeCheck { target, lease } => provider_cmd::resume_check(target, lease).await,
            Command::Renew { target, lease, expires_in } => provider_cmd::renew(target, lease, expires_in).await,
            Command::Release { target, lease } => provider_cmd::release(target, lease).await,
            Command::Destroy { target, lease } => provider_cmd::destroy(target, lease).await,
            Command::Exec { target, args } => exec_cmd::run(target, args).await,
            Command::Serve(args) => serve_cmd::run(args).await,
            Command::Contract(args) => contract_cmd::run(args).await,
            Command::Policy { command: PolicyCommand::Show { inspect, json } } => {
                done(policy_cmd::show(inspect, json).await)
            }
            Command::Rbac { inspect, service_account } => done(policy_cmd::rbac(inspect, &service_account).await),
            Command::NetworkPolicy { policy, name } => done(policy_cmd::network_policy(&policy, &name)),
        }
    });
    let code = match code {
        Ok(code) => code,
        Err(e) if e.downcast_ref::<provider_cmd::UnusableKubeconfig>().is_some() => {
            eprintln!("Error: {e:#}");
            provider_cmd::EXIT_BAD_KUBECONFIG
        }
        Err(e) => return Err(e),
    };
    std::process::exit(code)
}
