//! `sandbox-host pool create|status|delete NAME`: set up, inspect and remove a warm pool (a
//! `SandboxTemplate` and a `SandboxWarmPool` of it) with the kubeconfig's own credentials, as an
//! operator would, so the `claim` backend has something to claim from. Shaped like kubectl:
//! the pool's name after the verb, `-n/--namespace` and `--kubeconfig` anywhere (the older
//! `pool --name NAME create` still works).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use contract_suite::warm_pool::{self, PoolSpec};

/// `sandbox-host pool ...`
#[derive(Args)]
pub struct PoolArgs {
    /// Kubeconfig of the cluster (default: as kubectl finds one: `KUBECONFIG`,
    /// `~/.kube/config`, in-cluster).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Namespace of the pool, its template and its Sandboxes.
    #[arg(short = 'n', long, global = true, default_value = "default")]
    namespace: String,
    /// The pool's name, as the older form gave it (`pool --name NAME create`).
    #[arg(long = "name", global = true, hide = true, value_name = "NAME")]
    name_option: Option<String>,
    #[command(subcommand)]
    command: PoolCommand,
}

#[derive(Subcommand)]
enum PoolCommand {
    /// Create the template and the pool, or update them (a new --replicas scales the pool).
    Create {
        /// The pool's name.
        name: Option<String>,
        /// The template's name (default: the pool's).
        #[arg(long)]
        template: Option<String>,
        /// How many Ready Sandboxes the pool keeps.
        #[arg(long, default_value_t = 3)]
        replicas: u32,
        /// The sandbox image.
        #[arg(long, default_value = "busybox:1.36")]
        image: String,
        /// Wait until every member is Ready, at most this many seconds (0: do not wait).
        #[arg(long, default_value_t = 120)]
        wait_seconds: u64,
    },
    /// How many members the pool has, and how many are Ready.
    Status {
        /// The pool's name.
        name: Option<String>,
    },
    /// Delete the pool (its unclaimed members go with it; claimed ones stay their claims').
    Delete {
        /// The pool's name.
        name: Option<String>,
        /// Delete this template too.
        #[arg(long)]
        template: Option<String>,
    },
}

impl PoolCommand {
    /// The verb, for messages.
    fn verb(&self) -> &'static str {
        match self {
            Self::Create { .. } => "create",
            Self::Status { .. } => "status",
            Self::Delete { .. } => "delete",
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            Self::Create { name, .. } | Self::Status { name } | Self::Delete { name, .. } => name.as_deref(),
        }
    }
}

/// Runs a `pool` command.
pub async fn run(args: PoolArgs) -> anyhow::Result<()> {
    let name = match (args.command.name(), args.name_option.as_deref()) {
        (Some(given), Some(option)) if given != option => {
            anyhow::bail!("the pool is named twice, {given} and --name {option}: give its name once, after the verb")
        }
        (Some(name), _) | (None, Some(name)) => name.to_string(),
        (None, None) => anyhow::bail!("name the pool: sandbox-host pool {} NAME", args.command.verb()),
    };
    let client = kube::Client::try_from(provider_host::kubeconfig::find(args.kubeconfig.as_deref()).await?)?;
    let (namespace, name) = (args.namespace.as_str(), name.as_str());
    match args.command {
        PoolCommand::Create { template, replicas, image, wait_seconds, .. } => {
            let spec = PoolSpec {
                namespace: namespace.to_string(),
                name: name.to_string(),
                template: template.unwrap_or_else(|| name.to_string()),
                replicas,
                image,
            };
            warm_pool::apply(&client, &spec).await?;
            crate::outln!(
                "SandboxTemplate {namespace}/{} and SandboxWarmPool {namespace}/{name} applied",
                spec.template
            );
            if wait_seconds > 0 {
                let status =
                    warm_pool::wait_ready(&client, namespace, name, replicas, Duration::from_secs(wait_seconds))
                        .await?;
                crate::outln!("{}", line(name, &status));
            }
        }
        PoolCommand::Status { .. } => match warm_pool::status(&client, namespace, name).await? {
            Some(status) => crate::outln!("{}", line(name, &status)),
            None => anyhow::bail!("no SandboxWarmPool {namespace}/{name}"),
        },
        PoolCommand::Delete { template, .. } => {
            warm_pool::delete(&client, namespace, name, template.as_deref()).await?;
            crate::outln!("SandboxWarmPool {namespace}/{name} deleted");
        }
    }
    Ok(())
}

fn line(name: &str, s: &warm_pool::PoolStatus) -> String {
    format!("pool {name}: {}/{} Ready ({} members) from template {}", s.ready, s.desired, s.members, s.template)
}
