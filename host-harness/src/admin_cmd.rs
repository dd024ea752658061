//! `sandbox-host fault`, `requests` and `advance-clock`: steer a running embedded cluster
//! through its admin endpoints, authenticated with the kubeconfig's token.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};
use embedded_cluster::faults::{Action, Match, Rule};
use embedded_cluster::request_log::{Entry, RequestKind};
use serde_json::{Value, json};

#[derive(Args)]
struct Target {
    /// Kubeconfig of the embedded cluster (as written by `sandbox-host cluster`).
    #[arg(long, default_value = "target/cluster/kubeconfig")]
    kubeconfig: PathBuf,
}

/// `sandbox-host fault ...`
#[derive(Args)]
pub struct FaultArgs {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: FaultCommand,
}

#[derive(Subcommand)]
enum FaultCommand {
    /// Add a rule: matching requests fail, stall, lose their connection or end their watch.
    Add(Box<AddFault>),
    /// List the active rules.
    List,
    /// Remove every rule.
    Clear,
}

/// What `fault add` matches and does.
#[derive(Args)]
struct AddFault {
    #[arg(long)]
    verb: Option<String>,
    #[arg(long)]
    resource: Option<String>,
    #[arg(long)]
    subresource: Option<String>,
    #[arg(long)]
    namespace: Option<String>,
    /// Exact name or `*` glob.
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    user: Option<String>,
    /// Answer with this HTTP status code.
    #[arg(long, conflicts_with_all = ["delay_ms", "drop_connection", "end_watch"])]
    code: Option<u16>,
    /// Status reason for --code (default from the code).
    #[arg(long)]
    reason: Option<String>,
    /// Retry-After seconds for --code.
    #[arg(long)]
    retry_after: Option<u64>,
    /// Delay matching requests by this many milliseconds.
    #[arg(long)]
    delay_ms: Option<u64>,
    /// Close the connection without answering.
    #[arg(long)]
    drop_connection: bool,
    /// End matching watches after --after-events events (with an ERROR event of --code if given).
    #[arg(long)]
    end_watch: bool,
    #[arg(long, default_value_t = 0)]
    after_events: usize,
    /// Only for the next N matching requests.
    #[arg(long)]
    times: Option<u32>,
    /// Fire with this probability per matching request.
    #[arg(long)]
    probability: Option<f64>,
}

/// `sandbox-host requests`
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

/// `sandbox-host advance-clock`
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
    let client = embedded_cluster::tls::client_from_kubeconfig(&yaml).await?;
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
                verb,
                resource,
                subresource,
                namespace,
                name,
                user,
                code,
                reason,
                retry_after,
                delay_ms,
                drop_connection,
                end_watch,
                after_events,
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
            } else if drop_connection {
                Action::DropBeforeApply
            } else {
                anyhow::bail!("say what the fault does: --code, --delay-ms, --drop-connection or --end-watch");
            };
            let rule = Rule {
                matches: Match { verb, resource, subresource, namespace, name, user, ..Default::default() },
                action,
                after: 0,
                times,
                probability,
            };
            call(&args.target, http::Method::POST, "faults", Some(serde_json::to_value(rule)?)).await?
        }
        FaultCommand::List => call(&args.target, http::Method::GET, "faults", None).await?,
        FaultCommand::Clear => call(&args.target, http::Method::DELETE, "faults", None).await?,
    };
    println!("{}", serde_json::to_string_pretty(&answer)?);
    Ok(())
}

/// Prints the request log.
pub async fn requests(args: RequestsArgs) -> anyhow::Result<()> {
    let answer = call(&args.target, http::Method::GET, &format!("requests?since={}", args.since), None).await?;
    if args.counts {
        println!("{}", serde_json::to_string_pretty(&answer["counts"])?);
        return Ok(());
    }
    let entries: Vec<Entry> =
        serde_json::from_value(answer["entries"].clone()).context("read the request log's entries")?;
    println!(
        "{:>6}  {:<5} {:<10} {:<44} {:<16} {:<24} {:>8}  user",
        "seq", "code", "verb", "what", "namespace", "name", "µs"
    );
    for e in entries {
        println!(
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
    println!("cluster time is now {}", answer["now"].as_str().unwrap_or_default());
    Ok(())
}
