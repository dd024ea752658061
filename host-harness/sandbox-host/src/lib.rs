//! `sandbox-host`: what an operator or a plugin runs. It loads a provider component into the
//! wasmtime host and drives it against a cluster (one call per command, or `serve` for a
//! long-running host), shows and enforces the operator's policy (`policy`, `rbac`,
//! `network-policy`), sets up warm pools and holds a component to the contract on a real
//! cluster.
//!
//! It links no simulator: the embedded cluster, its controllers and its fault injection are the
//! test bed's, in `sandbox-dev`, which runs these same commands (this library's [`HostCommand`])
//! beside its own.

pub mod acquire_cmd;
pub mod acquire_progress;
pub mod cli_io;
pub mod component_args;
pub mod contract_cmd;
pub mod documents;
pub mod env_args;
pub mod exec_cmd;
pub mod help_groups;
pub mod kubeconfig_cmd;
pub mod lease_cmd;
pub mod leases_cmd;
pub mod log_filter;
pub mod metrics_server;
pub mod namespace_args;
pub mod policy_cmd;
pub mod pool_cmd;
pub mod provider_cmd;
pub mod serve_cmd;
pub mod session;
pub mod untrusted_kubeconfig;

use clap::Subcommand;

/// The commands of `sandbox-host`.
#[derive(Subcommand)]
pub enum Command {
    #[command(flatten)]
    Host(Box<HostCommand>),
    /// Hold a provider component to the contract on a cluster: every scenario, a pass/fail
    /// table, a non-zero exit code on any failure.
    Contract(contract_cmd::ContractArgs),
}

impl Command {
    /// The log filter when `RUST_LOG` names none: the contract suite provokes failures by the
    /// hundred and reports each one in its table, so the host's and the provider's log lines
    /// about them would only bury it.
    pub fn default_log_filter(&self) -> &'static str {
        if matches!(self, Self::Contract(_)) { "off" } else { log_filter::DEFAULT }
    }

    /// Runs the command; its exit code.
    pub async fn run(self) -> anyhow::Result<i32> {
        match self {
            Self::Host(command) => command.run().await,
            Self::Contract(args) => contract_cmd::run(args).await,
        }
    }
}

/// The commands `sandbox-host` and `sandbox-dev` share: all but `contract`, which `sandbox-dev`
/// runs with its fault matrix.
#[derive(Subcommand)]
pub enum HostCommand {
    /// Show the provider's identity, capabilities and config schema.
    Describe {
        #[command(flatten)]
        target: session::Target,
    },
    /// Check a provider config: every problem with its path, and the normalized config.
    ValidateConfig {
        #[command(flatten)]
        target: session::Target,
        /// Provider config (JSON or YAML; `-` reads standard input).
        #[arg(long)]
        config: std::path::PathBuf,
    },
    /// Check that a config can work against the cluster.
    Probe {
        #[command(flatten)]
        target: session::Target,
        /// Provider config (JSON or YAML; `-` reads standard input).
        #[arg(long)]
        config: std::path::PathBuf,
    },
    /// Provision a sandbox and wait until it is ready; prints the lease.
    Acquire {
        #[command(flatten)]
        target: session::Target,
        #[command(flatten)]
        args: acquire_cmd::AcquireArgs,
    },
    /// Whether a stored lease can be used again (exit code 3: expired).
    ResumeCheck {
        #[command(flatten)]
        target: session::Target,
        #[command(flatten)]
        lease: lease_cmd::LeaseArgs,
    },
    /// Move a lease's expiry (exit code 3: the lease expired).
    Renew {
        #[command(flatten)]
        target: session::Target,
        #[command(flatten)]
        lease: lease_cmd::LeaseArgs,
        /// New expiry, in seconds from now.
        #[arg(long)]
        expires_in: u64,
    },
    /// End a run: destroy an ephemeral lease, suspend a reusable one.
    Release {
        #[command(flatten)]
        target: session::Target,
        #[command(flatten)]
        lease: lease_cmd::LeaseArgs,
    },
    /// Delete everything a lease could own (idempotent), from the stored lease or its id alone.
    Destroy {
        #[command(flatten)]
        target: session::Target,
        #[command(flatten)]
        args: lease_cmd::DestroyArgs,
    },
    /// Run a command in a lease's sandbox: its output, and its exit code as this command's
    /// (124: killed at its timeout).
    Exec {
        #[command(flatten)]
        target: session::Target,
        #[command(flatten)]
        args: exec_cmd::ExecArgs,
    },
    /// This installation's leases on the cluster (`list`), and the clean-up of those that
    /// ended (`gc`).
    Leases(leases_cmd::LeasesArgs),
    /// Serve the provider as a long-running process: concurrent calls as JSON lines on stdin,
    /// replies on stdout (for hosts in other languages, such as a Paperclip plugin worker).
    Serve(serve_cmd::ServeArgs),
    /// Print a kubeconfig with inline credentials for a ServiceAccount (a bound token of the
    /// duration asked), such as a Paperclip environment takes.
    Kubeconfig(kubeconfig_cmd::KubeconfigArgs),
    /// Set up, inspect or remove a warm pool (a SandboxTemplate and a SandboxWarmPool) for the
    /// claim backend.
    Pool(pool_cmd::PoolArgs),
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
        /// Name of the ServiceAccount (and of the Roles and RoleBindings); it lives in -n's
        /// namespace, else in the first allowed one.
        #[arg(long, default_value = "sandbox-host")]
        service_account: String,
    },
    /// Print the NetworkPolicy (YAML) that isolates the sandboxes' pods in a namespace: no
    /// ingress, egress to the cluster DNS and the policy's `egress` only.
    NetworkPolicy {
        #[command(flatten)]
        policy: policy_cmd::PolicyArgs,
        #[command(flatten)]
        namespace: namespace_args::NamespaceArg,
        /// Name of the NetworkPolicy.
        #[arg(long, default_value = provider_host::network_policy::DEFAULT_NAME)]
        name: String,
    },
}

/// `policy ...`
#[derive(Subcommand)]
pub enum PolicyCommand {
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

impl HostCommand {
    /// Where a command that loads the component finds its cluster, for a program that
    /// supplies one ([`session::HostArgs::given_kubeconfig`]); `None` for the others.
    pub fn host_args_mut(&mut self) -> Option<&mut session::HostArgs> {
        match self {
            Self::Describe { target }
            | Self::ValidateConfig { target, .. }
            | Self::Probe { target, .. }
            | Self::Acquire { target, .. }
            | Self::ResumeCheck { target, .. }
            | Self::Renew { target, .. }
            | Self::Release { target, .. }
            | Self::Destroy { target, .. }
            | Self::Exec { target, .. } => Some(&mut target.host),
            Self::Serve(args) => Some(&mut args.host),
            Self::Leases(args) => Some(&mut args.target_mut().host),
            Self::Pool(_)
            | Self::Kubeconfig(_)
            | Self::Policy { .. }
            | Self::Rbac { .. }
            | Self::NetworkPolicy { .. } => None,
        }
    }

    /// Runs the command; its exit code.
    pub async fn run(self) -> anyhow::Result<i32> {
        let done = |r: anyhow::Result<()>| r.map(|()| 0);
        match self {
            Self::Describe { target } => provider_cmd::describe(target).await,
            Self::ValidateConfig { target, config } => provider_cmd::validate_config(target, &config).await,
            Self::Probe { target, config } => provider_cmd::probe(target, &config).await,
            Self::Acquire { target, args } => acquire_cmd::acquire(target, args).await,
            Self::ResumeCheck { target, lease } => lease_cmd::resume_check(target, lease).await,
            Self::Renew { target, lease, expires_in } => lease_cmd::renew(target, lease, expires_in).await,
            Self::Release { target, lease } => lease_cmd::release(target, lease).await,
            Self::Destroy { target, args } => lease_cmd::destroy(target, args).await,
            Self::Exec { target, args } => exec_cmd::run(target, args).await,
            Self::Serve(args) => serve_cmd::run(args).await,
            Self::Leases(args) => leases_cmd::run(args).await,
            Self::Pool(args) => done(pool_cmd::run(args).await),
            Self::Kubeconfig(args) => done(kubeconfig_cmd::run(args).await),
            Self::Policy { command: PolicyCommand::Show { inspect, json } } => {
                done(policy_cmd::show(inspect, json).await)
            }
            Self::Rbac { inspect, service_account } => done(policy_cmd::rbac(inspect, &service_account).await),
            Self::NetworkPolicy { policy, namespace, name } => {
                done(policy_cmd::network_policy(&policy, &namespace, &name))
            }
        }
    }
}

/// The exit code of a command's result, as both binaries report it: a kubeconfig that cannot be
/// used exits [`session::EXIT_BAD_KUBECONFIG`] with its message (a wrong setting, not a
/// crash), any other error is returned.
pub fn exit_code(result: anyhow::Result<i32>) -> anyhow::Result<i32> {
    match result {
        Ok(code) => Ok(code),
        Err(e) if e.downcast_ref::<session::UnusableKubeconfig>().is_some() => {
            eprintln!("Error: {e:#}");
            Ok(session::EXIT_BAD_KUBECONFIG)
        }
        Err(e) => Err(e),
    }
}
