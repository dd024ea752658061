//! Cold start of a CLI call: a new `sandbox-host` process, the component loaded from the
//! host's cache of precompiled components, one operation, exit. That is what a script calling
//! the CLI pays for every step. Beside it, the same operations as JSON lines to one running
//! `sandbox-host serve`, which is what a host in another language (the Paperclip plugin) pays.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use embedded_cluster::{EmbeddedCluster, PROVIDER_USER};
use provider_host::records::Lease;

use crate::stats::{Samples, fmt_duration};
use crate::table::Table;
use crate::world::{self, NAMESPACE};

/// The release CLI `make bench` builds.
pub fn cli() -> anyhow::Result<PathBuf> {
    let path = world::workspace_root().join("target/release/sandbox-host");
    anyhow::ensure!(
        path.exists(),
        "no CLI at {}: `make bench` builds it (cargo build --release -p sandbox-host)",
        path.display()
    );
    Ok(path)
}

fn time(cli: &Path, args: &[&str]) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let out = Command::new(cli).args(args).output()?;
    let took = started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "sandbox-host {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(took)
}

/// `describe` (no request to the cluster) and `resume-check` (one GET) as new processes,
/// `rounds` times each after one call that fills the cache.
pub async fn measure(cluster: &EmbeddedCluster, lease: &Lease, rounds: usize) -> anyhow::Result<Table> {
    let cli = cli()?;
    let dir = world::workspace_root().join("target/bench-cli");
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, cluster.kubeconfig(PROVIDER_USER)?)?;
    let lease_file = dir.join("lease.json");
    std::fs::write(&lease_file, serde_json::to_string(lease)?)?;
    let config_file = dir.join("config.json");
    std::fs::write(&config_file, world::config("sandbox"))?;
    let component = world::provider_component()?;
    let cache = world::cache_dir();
    let [component, cache, kubeconfig, lease_file, config] =
        [component, cache, kubeconfig, lease_file, config_file].map(|p| p.display().to_string());
    let describe: Vec<&str> =
        vec!["describe", "--component", &component, "--cache-dir", &cache, "--kubeconfig", &kubeconfig];
    let resume: Vec<&str> = vec![
        "resume-check",
        "--component",
        &component,
        "--cache-dir",
        &cache,
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        NAMESPACE,
        "--lease",
        &lease_file,
        "--config",
        &config,
    ];
    let mut table = Table::new("Cold start of a CLI call", &["command", "p50", "p99", "runs"]);
    for (name, args) in [("sandbox-host describe", &describe), ("sandbox-host resume-check (one GET)", &resume)] {
        let cli = cli.clone();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let samples = tokio::task::spawn_blocking(move || -> anyhow::Result<Samples> {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            time(&cli, &args)?;
            Ok(Samples::new((0..rounds).map(|_| time(&cli, &args)).collect::<Result<_, _>>()?))
        })
        .await??;
        table.row([
            name.to_string(),
            fmt_duration(samples.p50()),
            fmt_duration(samples.p99()),
            samples.len().to_string(),
        ]);
    }
    let serve_args: Vec<String> =
        describe[1..].iter().chain(&["--allow-namespace", NAMESPACE]).map(|a| a.to_string()).collect();
    let requests = [
        ("sandbox-host serve: describe (one line each way)", serde_json::json!({"method": "describe"})),
        (
            "sandbox-host serve: resume-check (one GET)",
            serde_json::json!({"method": "resume-check", "params": {"lease": lease, "config": config_text(&config)?}}),
        ),
    ];
    let serve_samples =
        tokio::task::spawn_blocking(move || serve_round_trips(&cli, &serve_args, &requests, rounds)).await??;
    for (name, samples) in serve_samples {
        table.row([
            name.to_string(),
            fmt_duration(samples.p50()),
            fmt_duration(samples.p99()),
            samples.len().to_string(),
        ]);
    }
    table.note("Process start, policy and kubeconfig read, the component loaded from the cache, one call, exit.");
    table.note("serve: one process for all calls; a request line written, its reply line read, one call at a time.");
    Ok(table)
}

fn config_text(path: &str) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(path)?)
}

/// Round trips of each request through one `sandbox-host serve`, after one that warms it.
fn serve_round_trips(
    cli: &Path,
    args: &[String],
    requests: &[(&'static str, serde_json::Value)],
    rounds: usize,
) -> anyhow::Result<Vec<(&'static str, Samples)>> {
    let mut child = Command::new(cli)
        .arg("serve")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut input = child.stdin.take().ok_or_else(|| anyhow::anyhow!("serve has no stdin"))?;
    let mut output = BufReader::new(child.stdout.take().ok_or_else(|| anyhow::anyhow!("serve has no stdout"))?);
    let mut id = 0u64;
    let mut all = Vec::new();
    let mut round_trip = |request: &serde_json::Value| -> anyhow::Result<Duration> {
        id += 1;
        let mut request = request.clone();
        request["id"] = id.into();
        let started = Instant::now();
        writeln!(input, "{request}")?;
        let mut line = String::new();
        output.read_line(&mut line)?;
        let took = started.elapsed();
        let reply: serde_json::Value = serde_json::from_str(&line)?;
        anyhow::ensure!(reply.get("result").is_some(), "serve answered {line}");
        Ok(took)
    };
    for (name, request) in requests {
        round_trip(request)?;
        all.push((*name, Samples::new((0..rounds).map(|_| round_trip(request)).collect::<Result<_, _>>()?)));
    }
    // End of input: serve stops.
    drop(input);
    child.wait()?;
    Ok(all)
}
