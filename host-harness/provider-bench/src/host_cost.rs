//! Host cost apart from the simulator: acquire -> destroy lifecycles with the embedded cluster in
//! another process (`sandbox-dev cluster`), so that this process is the host alone. Its CPU
//! time per lifecycle and the lifecycles one core of it serves per second are then the
//! product's figures, not the simulated API server's and controllers'; its memory is the
//! host's: before the host is loaded, at each run's peak, after the runs, and once the host is
//! dropped (what stays with a loaded host: the compiled component, the instance pool's slots,
//! the client's connections).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde_json::json;

use crate::load::{self, Run};
use crate::memory;
use crate::stats::{fmt_bytes, fmt_duration};
use crate::table::Table;
use crate::world;

/// The concurrency levels: a single simulated node takes 110 pods, terminating ones included.
const LEVELS: [usize; 2] = [16, 64];

/// Lifecycles run first, not reported: the connections, the compile cache and the pool warm.
const WARM_UP: usize = 100;

/// How long the cluster process gets to write its kubeconfig.
const START_DEADLINE: Duration = Duration::from_secs(120);

/// The release `sandbox-dev` `make bench` builds.
fn dev_cli() -> anyhow::Result<PathBuf> {
    let path = world::workspace_root().join("target/release/sandbox-dev");
    anyhow::ensure!(
        path.exists(),
        "no test bed CLI at {}: `make bench` builds it (cargo build --release -p sandbox-dev)",
        path.display()
    );
    Ok(path)
}

/// The cluster process, stopped with SIGTERM (so it removes its pods' processes) when dropped.
struct ClusterProcess(Child);

impl ClusterProcess {
    fn start(kubeconfig: &Path) -> anyhow::Result<Self> {
        let _ = std::fs::remove_file(kubeconfig);
        let child = Command::new(dev_cli()?)
            .args(["cluster", "--kubeconfig"])
            .arg(kubeconfig)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start `sandbox-dev cluster`")?;
        Ok(Self(child))
    }
}

impl Drop for ClusterProcess {
    fn drop(&mut self) {
        let pid = rustix::process::Pid::from_child(&self.0);
        if rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_err() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// This process's CPU time, user and system, all threads (`/proc/self/stat`, in the kernel's
/// 100 Hz `USER_HZ` ticks).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses and may hold spaces.
    let fields: Vec<&str> =
        stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// A client of the cluster process, from the kubeconfig it writes once it serves.
async fn client(cluster: &mut ClusterProcess, kubeconfig: &Path) -> anyhow::Result<kube::Client> {
    let started = Instant::now();
    while !std::fs::metadata(kubeconfig).is_ok_and(|m| m.len() > 0) {
        if let Some(status) = cluster.0.try_wait()? {
            anyhow::bail!("`sandbox-dev cluster` exited ({status}) before it wrote its kubeconfig");
        }
        anyhow::ensure!(
            started.elapsed() < START_DEADLINE,
            "`sandbox-dev cluster` wrote no kubeconfig at {} within {} s",
            kubeconfig.display(),
            START_DEADLINE.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config =
        kube::Config::from_custom_kubeconfig(Kubeconfig::read_from(kubeconfig)?, &KubeConfigOptions::default())
            .await
            .context("read the cluster process's kubeconfig")?;
    Ok(provider_host::client_from_config(config)?)
}

/// The rows at each level, on the Sandbox backend.
pub async fn measure(lifecycles: usize) -> anyhow::Result<Table> {
    let rss_start = memory::rss_bytes();
    let dir = world::workspace_root().join("target/bench-host-cost");
    std::fs::create_dir_all(&dir)?;
    let kubeconfig = dir.join("kubeconfig");
    let mut cluster = ClusterProcess::start(&kubeconfig)?;
    let client = client(&mut cluster, &kubeconfig).await?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(&PostParams::default(), &serde_json::from_value(json!({"metadata": {"name": world::NAMESPACE}}))?)
        .await
        .context("create the benchmark's namespace in the cluster process")?;
    let max = LEVELS.iter().copied().max().unwrap_or(1);
    let host = Arc::new(world::load_with_client(client, &world::provider_component()?, load::limits(max)).await?);
    let rss_loaded = memory::rss_bytes();
    load::drive(&host, "sandbox", WARM_UP.min(lifecycles), 16, "host-cost-warm-up").await;

    let mut table = Table::new(
        "Host cost: the load with the embedded cluster in another process",
        &[
            "concurrency",
            "lifecycles",
            "completed",
            "lifecycles/s",
            "host CPU per lifecycle",
            "lifecycles/s per host core",
            "acquire p50",
            "peak RSS, above start",
            "RSS after, above start",
            "errors",
        ],
    );
    for c in LEVELS {
        let cpu = cpu_time();
        let run: Run = load::drive(&host, "sandbox", lifecycles, c, &format!("host-cost-{c}")).await;
        let used = cpu_time().saturating_sub(cpu);
        let per_lifecycle = used / u32::try_from(run.completed.max(1)).unwrap_or(u32::MAX);
        table.row([
            c.to_string(),
            run.lifecycles.to_string(),
            run.completed.to_string(),
            format!("{:.1}", run.rate()),
            fmt_duration(per_lifecycle),
            format!("{:.0}", run.completed as f64 / used.as_secs_f64().max(1e-9)),
            fmt_duration(run.acquire.p50()),
            fmt_bytes(run.peak_rss.saturating_sub(rss_start)),
            fmt_bytes(run.rss_after.saturating_sub(rss_start)),
            if run.errors.is_empty() { "none".to_string() } else { format!("{:?}", run.errors) },
        ]);
    }
    let rss_after_runs = memory::rss_bytes();
    drop(host);
    let rss_dropped = memory::rss_bytes();
    table.note(format!(
        "The cluster (API server, controllers, simulated kubelet with one node, delays 50 ms + 50 ms) runs as \
         `sandbox-dev cluster`, a separate process; these figures are this process's alone: the host (wasmtime, \
         the component, the kube client) and the benchmark's driver. Host CPU: user and system time of this process \
         over the run, per completed lifecycle (acquire, destroy); per host core: lifecycles per CPU second. \
         {WARM_UP} lifecycles at concurrency 16 ran first (not shown)."
    ));
    table.note(format!(
        "Memory of this process, above its resident size when the section started ({}, what the earlier \
         sections' clusters left with the allocator): {} with the host loaded, {} after the runs, {} once the host \
         was dropped. A loaded host holds the compiled component, the pooling allocator's slots (reserved, mostly \
         not resident) and the client's connections; what the runs add beyond that stays with the allocator while \
         the host lives.",
        fmt_bytes(rss_start),
        fmt_bytes(rss_loaded.saturating_sub(rss_start)),
        fmt_bytes(rss_after_runs.saturating_sub(rss_start)),
        fmt_bytes(rss_dropped.saturating_sub(rss_start))
    ));
    Ok(table)
}
