//! `sandbox-host serve`: the host as a long-running process, the component loaded once and
//! calls taken concurrently as JSON lines on stdin, replies on stdout (the protocol is
//! documented in `provider_host::serve`). Logs and the closing summary go to stderr, so stdout
//! carries replies only.

use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use provider_host::metrics::HostMetrics;
use provider_host::serve::{ServeOptions, StopReason, serve};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use crate::metrics_server;
use crate::session::{HostArgs, session};

/// Options of `serve`.
#[derive(Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub host: HostArgs,
    /// How long calls in flight may go on after end of input or a stop signal before they are
    /// cancelled, in milliseconds (default: long enough for each to wait for a call slot and
    /// run to its deadline, so every call answers). A second SIGTERM or SIGINT cancels them at
    /// once.
    #[arg(long, value_name = "MS")]
    pub shutdown_grace_ms: Option<u64>,
    /// Serve the host's metrics in the Prometheus text format at http://ADDR/metrics (e.g.
    /// 127.0.0.1:9464; port 0 picks a free one, printed on stderr). The README lists them.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
}

/// Serves until end of input or a stop signal; the exit code is 0 unless reading stdin failed.
pub async fn run(args: ServeArgs) -> anyhow::Result<i32> {
    let mut host = session(&args.host, None).await?.host;
    let metrics = match args.metrics_addr {
        Some(addr) => {
            let metrics = Arc::new(HostMetrics::new());
            host.record_metrics(Arc::clone(&metrics));
            let bound = metrics_server::start(addr, Arc::clone(&metrics)).await?;
            eprintln!("sandbox-host serve: metrics at http://{bound}/metrics");
            Some(metrics)
        }
        None => None,
    };
    let host = Arc::new(host);
    let mut options = ServeOptions { metrics, ..ServeOptions::for_host(&host) };
    if let Some(ms) = args.shutdown_grace_ms {
        options.shutdown_grace = Some(Duration::from_millis(ms));
    }
    let (signals, stop) = mpsc::unbounded_channel();
    let mut terminate = signal(SignalKind::terminate())?;
    let mut interrupt = signal(SignalKind::interrupt())?;
    tokio::spawn(async move {
        loop {
            let name = tokio::select! {
                Some(()) = terminate.recv() => "SIGTERM",
                Some(()) = interrupt.recv() => "SIGINT",
                else => return,
            };
            if signals.send(name.to_string()).is_err() {
                return;
            }
        }
    });
    eprintln!(
        "sandbox-host serve: {} (contract {}) ready; one JSON request per line on stdin",
        args.host.component.shown(),
        host.contract_version()
    );
    let summary = serve(host, tokio::io::stdin(), tokio::io::stdout(), stop, options).await;
    eprintln!(
        "sandbox-host serve: stopped ({}): {} replies; of the calls in flight at the stop, {} finished and {} were \
         cancelled",
        summary.reason, summary.replies, summary.finished_after_stop, summary.cancelled
    );
    Ok(if matches!(summary.reason, StopReason::InputFailed(_)) { 1 } else { 0 })
}
