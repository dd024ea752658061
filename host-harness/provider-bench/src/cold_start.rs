//! Cold start of a CLI call: a new `sandbox-host` process, the component loaded from the
//! host's cache of precompiled components, one operation, exit. That is what a script calling
//! the CLI pays for every step. Beside it, the same operations as JSON lines to one running
//! `sandbox-host serve`, which is what a host in another language (the Paperclip plugin) pays,
//! and what that host pays once per child: the start to `hello`, and its first call.

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
    let resume_request =
        serde_json::json!({"method": "resume-check", "params": {"lease": lease, "config": config_text(&config)?}});
    let requests = [
        ("sandbox-host serve: describe (one line each way)", serde_json::json!({"method": "describe"})),
        ("sandbox-host serve: resume-check (one GET)", resume_request.clone()),
    ];
    let serve_samples = tokio::task::spawn_blocking(move || -> anyhow::Result<_> {
        let mut samples = serve_starts(&cli, &serve_args, &resume_request, rounds)?;
        samples.extend(serve_round_trips(&cli, &serve_args, &requests, rounds)?);
        Ok(samples)
    })
    .await??;
    for (name, samples) in serve_samples {
        table.row([
            name.to_string(),
            fmt_duration(samples.p50()),
            fmt_duration(samples.p99()),
            samples.len().to_string(),
        ]);
    }
    table.note("Process start, policy and kubeconfig read, the component loaded from the cache, one call, exit.");
    table.note(
        "serve start: a new process to its `hello` reply (policy, kubeconfig, the component from the cache), \
         then its first call (what a plugin's first acquire after a child's start pays beyond a warm one).",
    );
    table.note("serve: one process for all calls; a request line written, its reply line read, one call at a time.");
    Ok(table)
}

fn config_text(path: &str) -> anyhow::Result<String> {
    Ok(std::fs::read_to_string(path)?)
}

/// A new `sandbox-host serve` per round, as a client starts one: the time from the spawn to its
/// `hello` reply, then the round trip of `first`, its first call.
fn serve_starts(
    cli: &Path,
    args: &[String],
    first: &serde_json::Value,
    rounds: usize,
) -> anyhow::Result<Vec<(&'static str, Samples)>> {
    let (mut hello, mut first_call) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    // One start before the samples, as the other rows warm: the component's cache file is written.
    for round in 0..=rounds {
        let started = Instant::now();
        let mut serve = Serve::start(cli, args)?;
        serve.round_trip(&serde_json::json!({"method": "hello"}))?;
        let to_hello = started.elapsed();
        let call = serve.round_trip(first)?;
        serve.stop()?;
        if round > 0 {
            hello.push(to_hello);
            first_call.push(call);
        }
    }
    Ok(vec![
        ("sandbox-host serve: start -> hello", Samples::new(hello)),
        ("sandbox-host serve: first resume-check after start", Samples::new(first_call)),
    ])
}

/// Round trips of each request through one `sandbox-host serve`, after one that warms it.
fn serve_round_trips(
    cli: &Path,
    args: &[String],
    requests: &[(&'static str, serde_json::Value)],
    rounds: usize,
) -> anyhow::Result<Vec<(&'static str, Samples)>> {
    let mut serve = Serve::start(cli, args)?;
    let mut all = Vec::new();
    for (name, request) in requests {
        serve.round_trip(request)?;
        let samples = (0..rounds).map(|_| serve.round_trip(request)).collect::<Result<_, _>>()?;
        all.push((*name, Samples::new(samples)));
    }
    serve.stop()?;
    Ok(all)
}

/// One `sandbox-host serve` child and its request lines.
struct Serve {
    child: std::process::Child,
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
    id: u64,
}

impl Serve {
    fn start(cli: &Path, args: &[String]) -> anyhow::Result<Self> {
        let mut child = Command::new(cli)
            .arg("serve")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()?;
        let input = child.stdin.take().ok_or_else(|| anyhow::anyhow!("serve has no stdin"))?;
        let output = BufReader::new(child.stdout.take().ok_or_else(|| anyhow::anyhow!("serve has no stdout"))?);
        Ok(Self { child, input, output, id: 0 })
    }

    /// Writes `request` (with the next id) and reads its reply line: the time between.
    fn round_trip(&mut self, request: &serde_json::Value) -> anyhow::Result<Duration> {
        self.id += 1;
        let mut request = request.clone();
        request["id"] = self.id.into();
        let started = Instant::now();
        writeln!(self.input, "{request}")?;
        let mut line = String::new();
        self.output.read_line(&mut line)?;
        let took = started.elapsed();
        let reply: serde_json::Value = serde_json::from_str(&line)?;
        anyhow::ensure!(reply.get("result").is_some(), "serve answered {line}");
        Ok(took)
    }

    /// End of input: serve stops once its calls have finished.
    fn stop(self) -> anyhow::Result<()> {
        let Self { mut child, input, .. } = self;
        drop(input);
        child.wait()?;
        Ok(())
    }
}
