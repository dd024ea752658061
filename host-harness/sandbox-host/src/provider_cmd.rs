//! The provider commands: `describe`, `validate-config`, `probe`, `acquire`, `resume-check`,
//! `renew`, `release` and `destroy`, each loading a provider component into the host and
//! running one call against a cluster (kubeconfig, in-cluster, or one the program embedding
//! these commands names, such as `sandbox-dev`'s embedded cluster).

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use provider_host::Limits;
use provider_host::created_objects::CreatedObject;
use provider_host::error::HostError;
use provider_host::records::{AcquireRequest, Lease, LeaseRef, ResumeOutcome};
use provider_host::runner::{HostOptions, ProviderHost};

use crate::component_args::ComponentArgs;
use crate::env_args::EnvArgs;
use crate::namespace_args::{self, NamespaceArg, TargetNamespace};
use crate::policy_cmd::PolicyArgs;
use crate::untrusted_kubeconfig;

/// Exit code of `resume-check` when the lease is expired (an answer, not an error).
pub const EXIT_EXPIRED: i32 = 3;
/// Exit code when the provider (or the host around it) failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code of a command stopped by Ctrl-C (SIGINT), as a shell reports one.
pub const EXIT_INTERRUPTED: i32 = 130;
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

/// Reads a document the command line names (a config, a lease, a policy, limits) as JSON text:
/// the file in JSON, or in YAML (a mapping, as kubectl takes either), or with `-` standard
/// input. JSON is passed on as written; YAML as the JSON it stands for.
pub fn read_document(path: &Path, what: &str) -> anyhow::Result<String> {
    let (text, shown) = if path == Path::new("-") {
        if STDIN_READ.swap(true, std::sync::atomic::Ordering::SeqCst) {
            bail!("the {what} cannot come from standard input too: only one file can be `-`");
        }
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .with_context(|| format!("read the {what} from standard input"))?;
        (text, "from standard input".to_string())
    } else {
        let text = std::fs::read_to_string(path).with_context(|| format!("read the {what} file {}", path.display()))?;
        (text, format!("file {}", path.display()))
    };
    let json_error = match serde_json::from_str::<serde_json::Value>(&text) {
        Ok(_) => return Ok(text),
        Err(e) => e,
    };
    match serde_yaml_ng::from_str::<serde_json::Value>(&text) {
        Ok(value @ serde_json::Value::Object(_)) => Ok(value.to_string()),
        // Text that starts like JSON is meant as JSON: its error says more than YAML's.
        _ if text.trim_start().starts_with(['{', '[']) => {
            Err(anyhow::Error::new(json_error).context(format!("the {what} {shown} is not JSON")))
        }
        Ok(_) => bail!("the {what} {shown} is neither a JSON object nor a YAML mapping"),
        Err(e) => Err(anyhow::Error::new(e).context(format!("the {what} {shown} is neither JSON nor YAML"))),
    }
}

/// Whether standard input was read already (by a `-` argument).
static STDIN_READ: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

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
    let host = match cluster {
        Cluster::Found(config, _) => ProviderHost::load_for_config(source, *config, options).await?,
        Cluster::Refused => ProviderHost::load_without_cluster(source, options).await?,
        Cluster::Missing(missing) => {
            let host = ProviderHost::load_without_cluster(source, options).await?;
            if offline != Offline::Allowed && !host.grants().declared.as_ref().is_some_and(Vec::is_empty) {
                return Err(anyhow::Error::new(missing));
            }
            host
        }
    };
    Ok(Session { host, namespace: target })
}

/// Shows a spinner on stderr while `fut` runs, only when stderr is a terminal.
pub async fn with_progress<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    if !std::io::stderr().is_terminal() {
        return fut.await;
    }
    let bar = indicatif::ProgressBar::new_spinner().with_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    let out = fut.await;
    bar.finish_and_clear();
    out
}

/// Prints a host error and returns the process exit code.
pub fn report_error(err: &HostError) -> i32 {
    report_error_hiding(err, str::to_string)
}

/// Prints a host error passed through `hide` (which replaces what must not be shown, such as
/// the request's env names) and returns the process exit code.
pub fn report_error_hiding(err: &HostError, hide: impl Fn(&str) -> String) -> i32 {
    match err {
        HostError::Provider(e) => {
            eprintln!("error ({}{}): {}", e.kind(), if e.retryable() { ", retryable" } else { "" }, hide(e.message()))
        }
        other => eprintln!("error: {}", hide(&other.to_string())),
    }
    EXIT_FAILED
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    crate::outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A value's word in the JSON output (`job`, `already-gone`, `failed: why`), so a person reads
/// the words a script reads: the serde form of a unit variant, or of a one-field one.
fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(word)) => word,
        Ok(serde_json::Value::Object(map)) if map.len() == 1 => {
            let (key, detail) = map.into_iter().next().unwrap_or_default();
            match detail {
                serde_json::Value::String(text) => format!("{key}: {text}"),
                other => format!("{key}: {other}"),
            }
        }
        Ok(other) => other.to_string(),
        Err(e) => format!("(unprintable: {e})"),
    }
}

fn millis_to_rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| ms.to_string())
}

/// Prints a lease for a person.
pub fn print_lease(lease: &Lease) {
    crate::outln!("lease      {}", lease.provider_lease_id);
    crate::outln!("backend    {} ({})", word(&lease.backend), lease.api_version);
    crate::outln!("namespace  {}", lease.namespace);
    crate::outln!("workload   uid {}", lease.workload_uid);
    crate::outln!(
        "pod        {} (uid {}, ip {})",
        lease.pod_name.as_deref().unwrap_or("-"),
        lease.pod_uid.as_deref().unwrap_or("-"),
        lease.pod_ip.as_deref().unwrap_or("-")
    );
    crate::outln!("expires    {}", lease.expires_at.map(millis_to_rfc3339).unwrap_or_else(|| "never".into()));
    crate::outln!("reusable   {}", lease.reusable);
}

/// `describe`
pub async fn describe(target: Target) -> anyhow::Result<i32> {
    let host = session_with(&target.host, target.namespace.given()?, Offline::Allowed).await?.host;
    let info = match host.describe().await {
        Ok(i) => i,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&info)?;
    } else {
        crate::outln!("{} ({}) {}", info.display_name, info.driver_key, info.version);
        let backends: Vec<String> = info.backends.iter().map(word).collect();
        crate::outln!("backends: {}; reusable leases: {}", backends.join(", "), info.reusable_leases);
        crate::outln!("config schema: {} bytes of JSON Schema (use --json to see it)", info.config_schema.len());
    }
    Ok(0)
}

/// `validate-config`
pub async fn validate_config(target: Target, config: &Path) -> anyhow::Result<i32> {
    let config = read_document(config, "config")?;
    let session = session_with(&target.host, target.namespace.given()?, Offline::Allowed).await?;
    let config = session.config(config)?;
    let v = match session.host.validate_config(&config).await {
        Ok(v) => v,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&v)?;
    } else {
        for w in &v.warnings {
            crate::outln!("warning {}: {}", w.path, w.message);
        }
        for e in &v.errors {
            crate::outln!("error   {}: {}", e.path, e.message);
        }
        crate::outln!("{}", if v.ok { "config is valid" } else { "config is invalid" });
    }
    Ok(if v.ok { 0 } else { EXIT_FAILED })
}

/// `probe`
pub async fn probe(target: Target, config: &Path) -> anyhow::Result<i32> {
    let config = read_document(config, "config")?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let config = session.config(config)?;
    let p = match session.host.probe(&config).await {
        Ok(p) => p,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&p)?;
    } else {
        crate::outln!("{}", p.summary);
        for d in &p.diagnostics {
            crate::outln!("  {:<8} {:<28} {}", word(&d.severity), d.code, d.message);
        }
    }
    Ok(if p.ok { 0 } else { EXIT_FAILED })
}

/// Options of `acquire`.
#[derive(Args)]
pub struct AcquireArgs {
    /// Provider config (JSON or YAML; `-` reads standard input).
    #[arg(long)]
    pub config: PathBuf,
    /// The idempotency key: acquire again with the same id and you get the same sandbox. It
    /// names the workload (the config's namePrefix and the id: a DNS label). Generated and
    /// printed when omitted.
    #[arg(long)]
    pub acquisition_id: Option<String>,
    /// The run the sandbox is for, recorded on its objects. Generated when omitted.
    #[arg(long)]
    pub run_id: Option<String>,
    /// The agent the sandbox is for, recorded on its objects.
    #[arg(long)]
    pub agent_id: Option<String>,
    /// Bound the sandbox's life to this many seconds from now.
    #[arg(long)]
    pub expires_in: Option<u64>,
    #[command(flatten)]
    pub env: EnvArgs,
    /// Ask for a lease that `release` suspends instead of destroying.
    #[arg(long)]
    pub reusable: bool,
    /// Also write the lease (JSON) to this file, for `--lease` of the later commands.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Epoch millis `seconds` from now; an error naming `option` when no time stamp reaches that far.
fn expiry_from_now(option: &str, seconds: u64) -> anyhow::Result<i64> {
    let now_ms = jiff::Timestamp::now().as_millisecond();
    i64::try_from(seconds).ok().and_then(|s| s.checked_mul(1000)).and_then(|ms| now_ms.checked_add(ms)).with_context(
        || {
            format!(
                "{option} {seconds} is further from now than any time stamp can hold; ask for at most the config's \
                 leaseTtlSeconds, where the provider caps a lease anyway"
            )
        },
    )
}

/// Says on stderr when the lease ends earlier than `--expires-in` asked (by more than the
/// rounding to a whole second): the provider caps a lease at the config's `leaseTtlSeconds`
/// from now, and a person who asked for more should not find out when the sandbox is gone.
fn note_capped(requested: Option<i64>, lease: &Lease) {
    if let (Some(requested), Some(granted)) = (requested, lease.expires_at)
        && granted < requested.saturating_sub(1000)
    {
        eprintln!(
            "note: the lease expires at {}, earlier than --expires-in asked ({}): a lease lasts at most the config's \
             leaseTtlSeconds from now. Renew it before then, or raise leaseTtlSeconds.",
            millis_to_rfc3339(granted),
            millis_to_rfc3339(requested)
        );
    }
}

/// An id for an acquire run by hand that names none: the clock's nanoseconds mixed with the
/// process id, so two at once on one machine differ; lowercase hex, so it stays a DNS label.
fn generated_id(prefix: &str) -> String {
    let nanos = jiff::Timestamp::now().as_nanosecond().unsigned_abs();
    let mixed = nanos ^ (u128::from(std::process::id()) << 40);
    format!("{prefix}{:08x}", (mixed ^ (mixed >> 32)) as u32)
}

/// Says on stderr what an acquire stopped by Ctrl-C left in the cluster (the provider had no
/// chance to clean up) and the command that removes it.
fn report_interrupted(acquisition_id: &str, created: &[CreatedObject], target: &Target) {
    if created.is_empty() {
        eprintln!(
            "interrupted: the acquire of acquisition id {acquisition_id} stopped before it created anything; nothing \
             is left in the cluster"
        );
        return;
    }
    eprintln!(
        "interrupted: the acquire of acquisition id {acquisition_id} stopped before it finished, and the provider did \
         not get to clean up. It created (or was creating) these, which stay until the cluster deletes them at the \
         lease's expiry:"
    );
    for object in created {
        let resource =
            if object.group.is_empty() { object.plural.clone() } else { format!("{}.{}", object.plural, object.group) };
        let namespace = object.namespace.as_deref().map(|ns| format!("{ns}/")).unwrap_or_default();
        eprintln!("  {resource} {namespace}{}", object.name);
    }
    let workload = created.iter().find_map(|object| {
        let backend = contract::Backend::of_workload(&object.group, &object.plural)?;
        let namespace = object.namespace.clone()?;
        Some(contract::lease_id::LeaseId { backend, namespace, name: object.name.clone(), workspace_pvc: false })
    });
    match workload {
        Some(id) => {
            let mut command = vec!["sandbox-host".to_string(), "destroy".into(), "--lease-id".into(), id.to_string()];
            if let Some(component) = &target.host.component.component {
                command.extend(["--component".into(), component.display().to_string()]);
            }
            if let Some(kubeconfig) = &target.host.kubeconfig {
                command.extend(["--kubeconfig".into(), kubeconfig.display().to_string()]);
            }
            let shown = shlex::try_join(command.iter().map(String::as_str)).unwrap_or_else(|_| command.join(" "));
            eprintln!("Remove them with: {shown}");
        }
        None => eprintln!("None of them is a workload a lease id names: delete them with kubectl."),
    }
    eprintln!("Or acquire again with --acquisition-id {acquisition_id} to use the sandbox: acquire adopts it.");
}

/// `acquire`; its arguments are checked before the cluster is reached.
pub async fn acquire(target: Target, args: AcquireArgs) -> anyhow::Result<i32> {
    let config = read_document(&args.config, "config")?;
    let env = args.env.parse()?;
    let requested_expires_at = args.expires_in.map(|s| expiry_from_now("--expires-in", s)).transpose()?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let config = session.config(config)?;
    let mut host = session.host;
    let created = host.record_created();
    let acquisition_id = args.acquisition_id.unwrap_or_else(|| {
        let id = generated_id("cli-");
        eprintln!(
            "note: no --acquisition-id given; using {id} (acquire again with --acquisition-id {id} to get this sandbox)"
        );
        id
    });
    let request = AcquireRequest {
        config,
        run_id: args.run_id.unwrap_or_else(|| generated_id("cli-run-")),
        acquisition_id: acquisition_id.clone(),
        agent_id: args.agent_id,
        requested_expires_at,
        env: env.vars.clone(),
        reusable: args.reusable,
    };
    let acquiring = with_progress("acquiring a sandbox (waiting for readiness)", host.acquire(request));
    let result = tokio::select! {
        result = acquiring => result,
        _ = tokio::signal::ctrl_c() => {
            report_interrupted(&acquisition_id, &created.list(), &target);
            return Ok(EXIT_INTERRUPTED);
        }
    };
    let lease = match result {
        Ok(l) => l,
        Err(e) => return Ok(report_error_hiding(&e, |message| env.hide_names(message))),
    };
    note_capped(requested_expires_at, &lease);
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&lease)?)
            .with_context(|| format!("write {}", out.display()))?;
    }
    if target.json {
        print_json(&lease)?;
    } else {
        print_lease(&lease);
    }
    Ok(0)
}

/// Reads a stored lease and the config it was made with.
pub fn lease_ref(lease: &Path, config: &Path) -> anyhow::Result<LeaseRef> {
    let lease = match read_lease(lease)? {
        StoredLease::Whole(lease) => *lease,
        StoredLease::IdOnly { id, missing } => bail!(
            "the lease file holds the lease id {} but not the rest of the lease ({missing}): pass the lease as \
             `acquire --json` printed it; only `destroy` works from the id alone (--lease-id)",
            contract::quote(&id)
        ),
    };
    Ok(LeaseRef { lease, config: read_document(config, "config")? })
}

/// A lease file's content: the whole lease, or only its id (all `destroy` needs).
enum StoredLease {
    Whole(Box<Lease>),
    IdOnly {
        /// The `provider-lease-id`.
        id: String,
        /// What the lease lacks, as serde says it.
        missing: String,
    },
}

/// Reads a lease file (`-`: standard input).
fn read_lease(path: &Path) -> anyhow::Result<StoredLease> {
    let text = read_document(path, "lease")?;
    let whole_error = match serde_json::from_str::<Lease>(&text) {
        Ok(lease) => return Ok(StoredLease::Whole(Box::new(lease))),
        Err(e) => e,
    };
    let id = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|value| value.get("provider-lease-id").and_then(|id| id.as_str()).map(str::to_string));
    match id {
        Some(id) => Ok(StoredLease::IdOnly { id, missing: whole_error.to_string() }),
        None => Err(anyhow::Error::new(whole_error).context(
            "the lease file is not a lease (as `acquire --json` prints it, or `{\"provider-lease-id\": ...}`)",
        )),
    }
}

/// Options of the commands that take a stored lease.
#[derive(Args)]
pub struct LeaseArgs {
    /// The lease (JSON, as written by `acquire --out` or printed by `acquire --json`; `-` reads
    /// standard input).
    #[arg(long)]
    pub lease: PathBuf,
    /// The provider config the lease was made with (JSON or YAML; `-` reads standard input).
    #[arg(long)]
    pub config: PathBuf,
}

/// `resume-check`
pub async fn resume_check(target: Target, args: LeaseArgs) -> anyhow::Result<i32> {
    let r = lease_ref(&args.lease, &args.config)?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    let outcome = match with_progress("checking the lease", session.host.resume_check(r)).await {
        Ok(o) => o,
        Err(e) => return Ok(report_error(&e)),
    };
    print_outcome(&outcome, target.json)
}

/// Prints a resume-check or renew answer; the exit code tells resumable (0) from expired (3).
fn print_outcome(outcome: &ResumeOutcome, json: bool) -> anyhow::Result<i32> {
    if json {
        print_json(outcome)?;
    }
    Ok(match outcome {
        ResumeOutcome::Resumable(lease) => {
            if !json {
                crate::outln!("resumable");
                print_lease(lease);
            }
            0
        }
        ResumeOutcome::Expired(reason) => {
            if !json {
                crate::outln!("expired: {reason}");
            }
            EXIT_EXPIRED
        }
    })
}

/// `renew`; its arguments are checked before the cluster is reached.
pub async fn renew(target: Target, args: LeaseArgs, expires_in: u64) -> anyhow::Result<i32> {
    let r = lease_ref(&args.lease, &args.config)?;
    let at = expiry_from_now("--expires-in", expires_in)?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    let outcome = match session.host.renew(r, at).await {
        Ok(o) => o,
        Err(e) => return Ok(report_error(&e)),
    };
    if let ResumeOutcome::Resumable(lease) = &outcome {
        note_capped(Some(at), lease);
    }
    print_outcome(&outcome, target.json)
}

/// `release`
pub async fn release(target: Target, args: LeaseArgs) -> anyhow::Result<i32> {
    let r = lease_ref(&args.lease, &args.config)?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    match session.host.release(r).await {
        Ok(()) => {
            if target.json {
                crate::outln!("null");
            } else {
                crate::outln!("released");
            }
            Ok(0)
        }
        Err(e) => Ok(report_error(&e)),
    }
}

/// Options of `destroy`: a stored lease, or its id alone.
#[derive(Args)]
pub struct DestroyArgs {
    /// The lease (JSON, as written by `acquire --out` or printed by `acquire --json`; `-` reads
    /// standard input); a file with only its `provider-lease-id` will do.
    #[arg(long, required_unless_present = "lease_id")]
    pub lease: Option<PathBuf>,
    /// The lease's id alone (`k8s:job:default:pc-a-1`, as acquire printed it), when the lease
    /// file is lost. Without the stored workload uid, destroy deletes whatever holds the name,
    /// even a newer sandbox of the same acquisition id.
    #[arg(long, value_name = "ID", conflicts_with = "lease")]
    pub lease_id: Option<String>,
    /// The provider config the lease was made with (JSON or YAML; `-` reads standard input);
    /// the Kubernetes provider destroys from the lease id and does not need it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The lease a bare id makes, for `destroy`; an id of another provider is refused, as only the
/// Kubernetes provider's ids say where their objects are.
fn lease_of_id(id: &str) -> anyhow::Result<Lease> {
    let parsed = contract::lease_id::LeaseId::parse(id)
        .map_err(|e| anyhow::anyhow!("{e}: pass the whole lease with --lease instead"))?;
    Ok(parsed.bare_lease())
}

impl DestroyArgs {
    /// The lease and config to destroy, read before the cluster is reached.
    fn lease_ref(&self) -> anyhow::Result<LeaseRef> {
        let lease = match (&self.lease, &self.lease_id) {
            (_, Some(id)) => lease_of_id(id)?,
            (Some(path), None) => match read_lease(path)? {
                StoredLease::Whole(lease) => *lease,
                StoredLease::IdOnly { id, .. } => lease_of_id(&id)?,
            },
            (None, None) => bail!("name the lease: --lease FILE or --lease-id ID"),
        };
        let config = match &self.config {
            Some(path) => read_document(path, "config")?,
            None => "{}".to_string(),
        };
        Ok(LeaseRef { lease, config })
    }
}

/// `destroy`
pub async fn destroy(target: Target, args: DestroyArgs) -> anyhow::Result<i32> {
    let r = args.lease_ref()?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    match session.host.destroy(r).await {
        Ok(report) => {
            if target.json {
                print_json(&report)?;
            } else {
                for o in &report.objects {
                    crate::outln!("{:<10} {:<40} {}", o.kind, o.name, word(&o.outcome));
                }
            }
            Ok(0)
        }
        Err(e) => Ok(report_error(&e)),
    }
}
