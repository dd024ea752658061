//! `sandbox-dev fault`, `requests` and `advance-clock`: steer a running embedded cluster
//! through its admin endpoints, authenticated with the kubeconfig's token.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::request_log::{Entry, RequestKind};
use serde_json::{Value, json};

#[derive(Args)]
struct Target {
    /// Kubeconfig of the embedded cluster (as written by `sandbox-dev cluster`).
    #[arg(long, default_value = "target/cluster/kubeconfig")]
    kubeconfig: PathBuf,
}

/// `sandbox-dev fault ...`
#[derive(Args)]
pub struct FaultArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: FaultCommand,
}

#[derive(Subcommand)]
enum FaultCommand {
    /// Add a rule: matching requests fail, stall, lose their connection (before or after they
    /// are applied) or end their watch.
    Add(Box<AddFault>),
    /// List the active rules.
    List,
    /// Remove every rule.
    Clear,
}

/// What `fault add` matches and does.
#[derive(Args)]
struct AddFault {
    #[command(flatten)]
    matches: MatchArgs,
    /// Answer with this HTTP status code.
    #[arg(long, conflicts_with_all = ["delay_ms", "drop_before_apply", "drop_after_apply"])]
    code: Option<u16>,
    /// Status reason for --code (default from the code).
    #[arg(long)]
    reason: Option<String>,
    /// Retry-After seconds for --code.
    #[arg(long)]
    retry_after: Option<u64>,
    /// Delay matching requests by this many milliseconds.
    #[arg(long, conflicts_with_all = ["drop_before_apply", "drop_after_apply", "end_watch"])]
    delay_ms: Option<u64>,
    /// Close the connection before the request is applied: nothing changes.
    #[arg(long, conflicts_with_all = ["drop_after_apply", "end_watch"])]
    drop_before_apply: bool,
    /// Apply the request in full, then close the connection instead of answering.
    #[arg(long, conflicts_with = "end_watch")]
    drop_after_apply: bool,
    /// End matching watches after --after-events events (with an ERROR event of --code if given).
    #[arg(long)]
    end_watch: bool,
    #[arg(long, default_value_t = 0)]
    after_events: usize,
    /// Let the first N matching requests through first (`--after 1 --times 1` fires on the
    /// second match alone).
    #[arg(long, default_value_t = 0)]
    after: u32,
    /// Only for the next N matching requests (after the --after ones).
    #[arg(long)]
    times: Option<u32>,
    /// Fire with this probability per matching request.
    #[arg(long)]
    probability: Option<f64>,
}

/// Which requests `fault add` is about; every one given must hold. Without --kind or --path
/// only resource requests match.
#[derive(Args)]
struct MatchArgs {
    /// resource, discovery, version, openApi, health or other.
    #[arg(long, value_parser = request_kind)]
    kind: Option<RequestKind>,
    /// A Kubernetes verb, or the lowercase HTTP method of a non-resource request.
    #[arg(long)]
    verb: Option<String>,
    /// API group ("" for the core group).
    #[arg(long)]
    group: Option<String>,
    /// API version (`v1beta1`).
    #[arg(long)]
    api_version: Option<String>,
    #[arg(long)]
    resource: Option<String>,
    #[arg(long)]
    subresource: Option<String>,
    #[arg(long)]
    namespace: Option<String>,
    /// Exact name or `*` glob.
    #[arg(long)]
    name: Option<String>,
    /// URL path without the query: exact or `*` glob.
    #[arg(long)]
    path: Option<String>,
    #[arg(long)]
    user: Option<String>,
}

impl From<MatchArgs> for Match {
    fn from(m: MatchArgs) -> Self {
        let MatchArgs { kind, verb, group, api_version, resource, subresource, namespace, name, path, user } = m;
        Match { kind, verb, group, version: api_version, resource, subresource, namespace, name, path, user }
    }
}

/// A request kind by the name the admin endpoint and the request log use.
fn request_kind(name: &str) -> Result<RequestKind, String> {
    serde_json::from_value(Value::String(name.to_string()))
        .map_err(|_| format!("unknown kind {name:?}: use resource, discovery, version, openApi, health or other"))
}

/// `sandbox-dev requests`
#[derive(Args)]
pub struct RequestsArgs {
    #[command(flatten)]
    target: Target,
    /// Only entries after this sequence number.
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// Print per-verb counts instead of entries.
    #[arg(long)]
    counts: bool,
}

/// `sandbox-dev advance-clock`
#[derive(Args)]
pub struct AdvanceArgs {
    #[command(flatten)]
    target: Target,
    /// Seconds of cluster time to skip.
    seconds: f64,
}

fn default_reason(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        409 => "Conflict",
        410 => "Expired",
        422 => "Invalid",
        429 => "TooManyRequests",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "InternalError",
    }
}

async fn call(target: &Target, method: http::Method, path: &str, body: Option<Value>) -> anyhow::Result<Value> {
    let yaml =
        std::fs::read_to_string(&target.kubeconfig).with_context(|| format!("read {}", target.kubeconfig.display()))?;
    let client = provider_host::kubeconfig::client(&yaml).await?;
    let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
    let req = http::Request::builder()
        .method(method)
        .uri(format!("/embedded-cluster/{path}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(bytes)
        .context("build the request")?;
    let text = client.request_text(req).await.context("call the embedded cluster's admin endpoint")?;
    serde_json::from_str(&text).context("parse the answer")
}

/// Adds, lists or clears fault rules.
pub async fn fault(args: FaultArgs) -> anyhow::Result<()> {
    let answer = match args.command {
        FaultCommand::Add(add) => {
            let AddFault {
                matches,
                code,
                reason,
                retry_after,
                delay_ms,
                drop_before_apply,
                drop_after_apply,
                end_watch,
                after_events,
                after,
                times,
                probability,
            } = *add;
            let action = if end_watch {
                Action::EndWatch { code, after_events }
            } else if let Some(code) = code {
                Action::Error {
                    code,
                    reason: reason.unwrap_or_else(|| default_reason(code).to_string()),
                    message: None,
                    retry_after_seconds: retry_after,
                }
            } else if let Some(millis) = delay_ms {
                Action::Delay { millis }
            } else if drop_before_apply {
                Action::DropBeforeApply
            } else if drop_after_apply {
                Action::DropAfterApply
            } else {
                anyhow::bail!(
                    "say what the fault does: --code, --delay-ms, --drop-before-apply, --drop-after-apply or --end-watch"
                );
            };
            let rule = Rule { matches: matches.into(), action, after, times, probability };
            call(&args.target, http::Method::POST, "faults", Some(serde_json::to_value(rule)?)).await?
        }
        FaultCommand::List => call(&args.target, http::Method::GET, "faults", None).await?,
        FaultCommand::Clear => call(&args.target, http::Method::DELETE, "faults", None).await?,
    };
    sandbox_host::outln!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

/// Prints the request log.
pub async fn requests(args: RequestsArgs) -> anyhow::Result<()> {
    let answer = call(&args.target, http::Method::GET, &format!("requests?since={}", args.since), None).await?;
    if args.counts {
        sandbox_host::outln!("{}", serde_json::to_string_pretty(&answer["counts"])?);
        return Ok(());
    }
    let entries: Vec<Entry> =
        serde_json::from_value(answer["entries"].clone()).context("read the request log's entries")?;
    sandbox_host::outln!(
        "{:>6}  {:<5} {:<10} {:<44} {:<16} {:<24} {:>8}  user",
        "seq",
        "code",
        "verb",
        "what",
        "namespace",
        "name",
        "µs"
    );
    for e in entries {
        sandbox_host::outln!(
            "{:>6}  {:<5} {:<10} {:<44} {:<16} {:<24} {:>8}  {}",
            e.seq,
            e.code,
            e.verb,
            what(&e),
            e.namespace,
            e.name,
            e.latency_micros,
            e.user
        );
    }
    Ok(())
}

/// A resource request as kubectl spells a fully qualified resource (`pods.v1`,
/// `sandboxes.v1beta1.agents.x-k8s.io/status`); any other request by its path.
fn what(e: &Entry) -> String {
    if e.kind != RequestKind::Resource {
        return e.path.clone();
    }
    let mut out = format!("{}.{}", e.resource, e.version);
    if !e.group.is_empty() {
        out = format!("{out}.{}", e.group);
    }
    if !e.subresource.is_empty() {
        out = format!("{out}/{}", e.subresource);
    }
    out
}

/// Moves the cluster clock forward.
pub async fn advance(args: AdvanceArgs) -> anyhow::Result<()> {
    let answer =
        call(&args.target, http::Method::POST, "clock/advance", Some(json!({"seconds": args.seconds}))).await?;
    sandbox_host::outln!("cluster time is now {}", answer["now"].as_str().unwrap_or_default());
    Ok(())
}
