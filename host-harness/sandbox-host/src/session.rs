//! How a provider command reaches its cluster and loads its component: `--kubeconfig` (trusted,
//! or `--untrusted-kubeconfig`), one the program embedding these commands supplies (such as
//! `sandbox-dev --embedded`), or as kubectl finds one; the operator's policy and limits; and the
//! namespace the command works in ([`crate::namespace_args`]).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use provider_host::Limits;
use provider_host::records::LeaseRef;
use provider_host::runner::{HostOptions, ProviderHost};

use crate::component_args::ComponentArgs;
use crate::documents::read_document;
use crate::namespace_args::{self, NamespaceArg, TargetNamespace};
use crate::policy_cmd::PolicyArgs;
use crate::untrusted_kubeconfig;

/// Exit code when the kubeconfig cannot be used: a wrong setting, not a failure that
/// starting again would cure (a client such as the Paperclip plugin reports it at its field).
pub const EXIT_BAD_KUBECONFIG: i32 = 4;

/// The kubeconfig named on the command line cannot be used; its message never quotes it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UnusableKubeconfig(String);

/// Where the provider runs and against which cluster: what every command that loads the
/// component shares, `serve` included.
#[derive(Args, Clone)]
pub struct HostArgs {
    #[command(flatten)]
    pub component: ComponentArgs,
    /// Kubeconfig of the cluster (default: in-cluster configuration, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Run with no cluster at all, not even an inferred one: every `kube` call the provider
    /// makes is `unavailable`. For calls that need none (`describe`, `validate-config`, which
    /// also run without a cluster when none is found), so that a host checking a config never
    /// uses ambient credentials.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub no_cluster: bool,
    /// The kubeconfig comes from someone trusted less than the operator (a Paperclip
    /// environment's config): refuse exec and auth-provider plugins, files it names and
    /// proxies, and never quote it in an error.
    #[arg(long, requires = "kubeconfig")]
    pub untrusted_kubeconfig: bool,
    /// A kubeconfig (YAML) that the program running this command supplies, such as
    /// `sandbox-dev --embedded` for its in-process cluster; it takes the place of every other
    /// way of finding a cluster.
    #[arg(skip)]
    pub given_kubeconfig: Option<String>,
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Per-call limits: a JSON or YAML object with any of memory-bytes, call-timeout-ms,
    /// kube-request-timeout-ms, max-open-watches, max-concurrent-calls, max-input-bytes,
    /// max-body-bytes, exec-timeout-ms, max-executes-per-lease, max-exec-output-bytes and pooling
    /// (the README's host limits say what each bounds); unset keys keep their defaults.
    #[arg(long, value_name = "FILE")]
    pub limits: Option<PathBuf>,
    /// The deadline of one provider call, in milliseconds, over the limits file's
    /// call-timeout-ms: a config's readinessTimeoutSeconds must fit inside it, with room to
    /// clean up after a failure.
    #[arg(long, value_name = "MS")]
    pub call_timeout_ms: Option<u64>,
}

impl HostArgs {
    /// The limits file's settings, or the defaults.
    fn limits(&self) -> anyhow::Result<Limits> {
        let mut limits = match &self.limits {
            None => Limits::default(),
            Some(path) => serde_json::from_str(&read_document(path, "limits")?)
                .with_context(|| format!("the limits file {} does not match the limits schema", path.display()))?,
        };
        if let Some(ms) = self.call_timeout_ms {
            limits.call_timeout_ms = ms;
        }
        Ok(limits)
    }
}

/// A one-shot provider command's target, and how it prints.
#[derive(Args, Clone)]
pub struct Target {
    #[command(flatten)]
    pub host: HostArgs,
    #[command(flatten)]
    pub namespace: NamespaceArg,
    /// Print the result as JSON mirroring the WIT records.
    #[arg(long)]
    pub json: bool,
}

/// Whether a command may run without a cluster when none is named and none can be found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offline {
    /// Only if the component declares no `kube` access (such as the reference provider).
    IfNoAccess,
    /// Always: the command makes no cluster call (`describe`, `validate-config`), so a config
    /// can be checked where no cluster is, as in a CI job that lints configs.
    Allowed,
}

/// A loaded component, and the namespace the command works in.
pub struct Session {
    /// The host with the component loaded.
    pub host: ProviderHost,
    /// `-n`'s namespace, else the kubeconfig context's; `None` without either.
    pub namespace: Option<TargetNamespace>,
    /// The cluster's configuration (its credentials included), for what the command reads for
    /// itself (such as `acquire`'s progress line, which builds a client only in a terminal);
    /// `None` without a cluster.
    pub cluster: Option<kube::Config>,
}

impl Session {
    /// A config read from the command line, with the target namespace where it names none.
    pub fn config(&self, config: String) -> anyhow::Result<String> {
        match &self.namespace {
            Some(target) => target.fill_config(config),
            None => Ok(config),
        }
    }

    /// A stored lease and its config, checked against `-n`; the config takes the lease's
    /// namespace where it names none.
    pub fn lease(&self, mut lease: LeaseRef) -> anyhow::Result<LeaseRef> {
        if let Some(target) = &self.namespace {
            target.check_lease(&lease.lease.namespace)?;
        }
        if !lease.lease.namespace.is_empty() {
            lease.config = namespace_args::with_namespace(lease.config, &lease.lease.namespace);
        }
        Ok(lease)
    }
}

/// Connects to the cluster, reads the operator's policy and loads the component; a component
/// that declares no `kube` access needs no cluster (see [`session_with`]). `namespace`: what
/// `-n` names.
pub async fn session(args: &HostArgs, namespace: Option<&str>) -> anyhow::Result<Session> {
    session_with(args, namespace, Offline::IfNoAccess).await
}

/// The cluster a command reaches: its configuration and whether the operator wrote it.
enum Cluster {
    /// Found; `trusted` unless `--untrusted-kubeconfig`.
    Found(Box<kube::Config>, bool),
    /// `--no-cluster`.
    Refused,
    /// None named and none found.
    Missing(provider_host::kubeconfig::KubeconfigError),
}

/// The cluster `args` name, or as kubectl finds one.
async fn cluster(args: &HostArgs) -> anyhow::Result<Cluster> {
    if args.no_cluster {
        return Ok(Cluster::Refused);
    }
    if let Some(yaml) = &args.given_kubeconfig {
        return Ok(Cluster::Found(Box::new(provider_host::kubeconfig::config(yaml).await?), true));
    }
    let Some(path) = &args.kubeconfig else {
        return Ok(match provider_host::kubeconfig::find(None).await {
            Ok(config) => Cluster::Found(Box::new(config), true),
            Err(missing) => Cluster::Missing(missing),
        });
    };
    let yaml = std::fs::read_to_string(path).with_context(|| format!("read {}", path.display()))?;
    if !args.untrusted_kubeconfig {
        let config = provider_host::kubeconfig::config(&yaml).await.map_err(|e| {
            UnusableKubeconfig(format!("the kubeconfig {}: {:#}", path.display(), anyhow::Error::new(e)))
        })?;
        return Ok(Cluster::Found(Box::new(config), true));
    }
    untrusted_kubeconfig::check(&yaml).map_err(|refused| UnusableKubeconfig(refused.to_string()))?;
    // What kube-rs says about a kubeconfig it cannot load may quote it: say only that.
    let config = provider_host::kubeconfig::config(&yaml).await.map_err(|_| {
        UnusableKubeconfig(
            "the kubeconfig could not be loaded (a context, cluster or user it names is missing, or inline data is \
             not base64); its contents are not shown: they may hold credentials"
                .to_string(),
        )
    })?;
    Ok(Cluster::Found(Box::new(config), false))
}

/// [`session`], running without a cluster as `offline` allows when none is named and none can
/// be inferred.
pub async fn session_with(args: &HostArgs, namespace: Option<&str>, offline: Offline) -> anyhow::Result<Session> {
    let source = args.component.source()?;
    let cluster = cluster(args).await?;
    let context = match &cluster {
        Cluster::Found(config, trusted) => Some((config.default_namespace.as_str(), *trusted)),
        Cluster::Refused | Cluster::Missing(_) => None,
    };
    let target = TargetNamespace::resolve(namespace, context);
    let options = HostOptions {
        policy: args.policy.policy(target.as_ref())?,
        limits: args.limits()?,
        cache_dir: args.component.cache_dir(),
    };
    let mut found = None;
    let host = match cluster {
        Cluster::Found(config, _) => {
            found = Some((*config).clone());
            ProviderHost::load_for_config(source, *config, options).await?
        }
        Cluster::Refused => ProviderHost::load_without_cluster(source, options).await?,
        Cluster::Missing(missing) => {
            let host = ProviderHost::load_without_cluster(source, options).await?;
            if offline != Offline::Allowed && !host.grants().declared.as_ref().is_some_and(Vec::is_empty) {
                return Err(anyhow::Error::new(missing));
            }
            host
        }
    };
    Ok(Session { host, namespace: target, cluster: found })
}
