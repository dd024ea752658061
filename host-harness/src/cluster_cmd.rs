//! `sandbox-host cluster` and `sandbox-host simulate`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use embedded_cluster::clock::Clock;
use embedded_cluster::{ClusterConfig, ControllerKind, EmbeddedCluster, SandboxVersions, controllers};

/// A progress line on stdout. These commands run until stopped, and a reader that went away
/// (`simulate | head`) must not stop the cluster: `println!` would panic on the broken pipe.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

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
    #[arg(long, value_delimiter = ',', default_value = "sandbox,job,kubelet,gc,template,warmpool,claim")]
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
    say!("embedded cluster serving at {}", cluster.url());
    say!("kubeconfig written to {}", args.kubeconfig.display());
    say!("try: kubectl --kubeconfig {} get namespaces", args.kubeconfig.display());
    let why = stop_signal().await?;
    say!("stopping ({why})");
    // Dropping the cluster stops it in order: its pods' processes are killed, its files removed.
    drop(cluster);
    Ok(())
}

/// Waits for SIGINT (Ctrl-C) or SIGTERM (what a supervisor or a test harness sends), and says which.
async fn stop_signal() -> anyhow::Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("listen for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.map(|()| "SIGINT").context("wait for Ctrl-C"),
        _ = terminate.recv() => Ok("SIGTERM"),
    }
}

/// Runs the chosen controllers against the cluster of a kubeconfig until Ctrl-C or SIGTERM.
pub async fn simulate(kubeconfig: &Path, kinds: &[ControllerKind], time_scale: f64) -> anyhow::Result<()> {
    let yaml = std::fs::read_to_string(kubeconfig).with_context(|| format!("read {}", kubeconfig.display()))?;
    let config = embedded_cluster::tls::config_from_kubeconfig(&yaml).await?;
    let client = kube::Client::try_from(config.clone()).context("build the client")?;
    let version = client.apiserver_version().await.context("reach the API server")?;
    say!(
        "simulating {} against Kubernetes {}",
        kinds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        version.git_version
    );
    let clock = Arc::new(Clock::scaled(time_scale));
    let mut tasks = Vec::new();
    let manager = controller_manager(&client).await;
    for kind in kinds {
        if let (Some(why), ControllerKind::Job | ControllerKind::Gc) = (&manager, kind) {
            say!("not starting {kind}: {why}, and it runs its own");
            continue;
        }
        let own = match impersonating(&config, *kind).await {
            Ok(own) => {
                say!("{kind} acts as {}", kind.user());
                own
            }
            Err(why) => {
                say!("{kind} acts as the kubeconfig's user: {why:#}");
                client.clone()
            }
        };
        // Where kube-controller-manager runs, the cluster's own provisioners bind claims.
        let kubelet =
            controllers::kubelet::KubeletConfig { provision_volumes: manager.is_none(), ..Default::default() };
        if *kind == ControllerKind::Kubelet && !kubelet.provision_volumes {
            say!("kubelet leaves claims to the cluster's provisioners");
        }
        tasks.push(tokio::spawn(controllers::run_forever(*kind, own, clock.clone(), kubelet)));
    }
    stop_signal().await?;
    for t in tasks {
        t.abort();
    }
    Ok(())
}

/// A client that acts as the controller's own user (by impersonation), so that a real API
/// server's audit log, managed fields and events tell the simulated controllers apart, as the
/// embedded cluster's request log does. A node-less API server has no RBAC for them, so they
/// also take the `system:masters` group; a kubeconfig user that may not impersonate gets an
/// error here, and the controller then acts as that user.
async fn impersonating(config: &kube::Config, kind: ControllerKind) -> anyhow::Result<kube::Client> {
    let mut config = config.clone();
    config.auth_info.impersonate = Some(kind.user().to_string());
    let mut groups = kind.groups();
    groups.push("system:masters".to_string());
    config.auth_info.impersonate_groups = Some(groups);
    let client = kube::Client::try_from(config).context("build the impersonating client")?;
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client.clone());
    namespaces
        .list(&kube::api::ListParams::default().limit(1))
        .await
        .context("the kubeconfig's user may not impersonate the controller")?;
    Ok(client)
}

/// Why kube-controller-manager is taken to be running (its leader-election Lease in
/// kube-system renewed within the last minute), or `None`. Two Job controllers or garbage
/// collectors on one cluster fight (status conflicts, finalizers left on pods), so simulate
/// starts neither where the server already has them. A server without the Lease (or without
/// coordination.k8s.io) has none.
async fn controller_manager(client: &kube::Client) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "kube-system");
    let lease = match leases.get_opt("kube-controller-manager").await {
        Ok(lease) => lease?,
        Err(e) => {
            say!("could not read kube-system/kube-controller-manager's Lease ({e}); assuming no controller manager");
            return None;
        }
    };
    let renewed = lease.spec.and_then(|s| s.renew_time).map(|t| t.0)?;
    let age = jiff::Timestamp::now().duration_since(renewed).as_secs();
    (age < 60).then(|| format!("kube-controller-manager holds its leader Lease (renewed {age} s ago)"))
}
