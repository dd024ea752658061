//! `sandbox-host cluster` and `sandbox-host simulate`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use embedded_cluster::clock::Clock;
use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster, SandboxVersions, controllers};

/// Options of `sandbox-host cluster`.
#[derive(Args)]
pub struct ClusterArgs {
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Where to write the admin kubeconfig.
    #[arg(long, default_value = "target/cluster/kubeconfig")]
    kubeconfig: PathBuf,
    /// Serve plain HTTP instead of HTTPS (debugging only).
    #[arg(long)]
    plain_http: bool,
    /// Which Sandbox API versions to serve: both, v1beta1 or v1alpha1.
    #[arg(long, default_value = "both")]
    sandbox_versions: SandboxVersions,
    /// Controllers to run in-process.
    #[arg(long, value_delimiter = ',', default_value = "sandbox,job,kubelet,gc")]
    controllers: Vec<ControllerKind>,
    /// Run cluster time this many times faster than real time.
    #[arg(long, default_value_t = 1.0)]
    time_scale: f64,
}

/// Serves the embedded cluster until Ctrl-C.
pub async fn serve(args: ClusterArgs) -> anyhow::Result<()> {
    let cluster = EmbeddedCluster::start(ClusterConfig {
        port: args.port,
        tls: !args.plain_http,
        sandbox_versions: args.sandbox_versions,
        time_scale: args.time_scale,
        controllers: args.controllers,
        ..Default::default()
    })
    .await?;
    cluster.write_kubeconfig(&args.kubeconfig)?;
    println!("embedded cluster serving at {}", cluster.url());
    println!("kubeconfig written to {}", args.kubeconfig.display());
    println!("try: kubectl --kubeconfig {} get namespaces", args.kubeconfig.display());
    tokio::signal::ctrl_c().await.context("wait for Ctrl-C")?;
    println!("stopping");
    Ok(())
}

/// Runs the chosen controllers against the cluster of a kubeconfig until Ctrl-C.
pub async fn simulate(kubeconfig: &Path, kinds: &[ControllerKind], time_scale: f64) -> anyhow::Result<()> {
    let yaml = std::fs::read_to_string(kubeconfig).with_context(|| format!("read {}", kubeconfig.display()))?;
    let client = embedded_cluster::tls::client_from_kubeconfig(&yaml).await?;
    let version = client.apiserver_version().await.context("reach the API server")?;
    println!(
        "simulating {} against Kubernetes {}",
        kinds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        version.git_version
    );
    let clock = Arc::new(Clock::scaled(time_scale));
    let mut tasks = Vec::new();
    for kind in kinds {
        tasks.push(tokio::spawn(controllers::run_forever(*kind, client.clone(), clock.clone(), Default::default())));
    }
    tokio::signal::ctrl_c().await.context("wait for Ctrl-C")?;
    for t in tasks {
        t.abort();
    }
    Ok(())
}
