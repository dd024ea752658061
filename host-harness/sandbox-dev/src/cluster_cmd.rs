//! `sandbox-dev cluster` and `sandbox-dev simulate`.

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

/// Options of `sandbox-dev cluster`.
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

/// What the operator says of the target cluster's kube-controller-manager (`simulate
/// --controller-manager`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ControllerManager {
    /// Look for it: its leader Lease, its pod in kube-system, its port on the API server's host.
    Auto,
    /// It runs (however started): leave Jobs and garbage collection to it.
    Running,
    /// None runs: simulate its Job controller and garbage collector too.
    Absent,
}

/// Runs the chosen controllers against the cluster of a kubeconfig until Ctrl-C or SIGTERM.
pub async fn simulate(
    kubeconfig: &Path,
    kinds: &[ControllerKind],
    time_scale: f64,
    said: ControllerManager,
) -> anyhow::Result<()> {
    let yaml = std::fs::read_to_string(kubeconfig).with_context(|| format!("read {}", kubeconfig.display()))?;
    let config = provider_host::kubeconfig::config(&yaml).await?;
    let client = kube::Client::try_from(config.clone()).context("build the client")?;
    let version = client.apiserver_version().await.context("reach the API server")?;
    say!(
        "simulating {} against Kubernetes {}",
        kinds.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        version.git_version
    );
    let clock = Arc::new(Clock::scaled(time_scale));
    let mut tasks = Vec::new();
    let manager = match said {
        ControllerManager::Auto => controller_manager(&client, &config).await,
        ControllerManager::Running => {
            Some("--controller-manager running says kube-controller-manager runs".to_string())
        }
        ControllerManager::Absent => None,
    };
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

/// kube-controller-manager's secure port, where it serves `/healthz`.
const CONTROLLER_MANAGER_PORT: u16 = 10257;

/// Why kube-controller-manager is taken to be running, or `None`: its leader-election Lease in
/// kube-system renewed within the last minute; else a Running pod of it in kube-system (a
/// kubeadm static pod, labelled `component: kube-controller-manager`); else its secure port
/// (10257) open on the API server's host (one started with `--leader-elect=false` as a plain
/// process holds no Lease and has no pod). Two Job controllers or garbage collectors on one
/// cluster fight (status conflicts, finalizers left on pods), so simulate starts neither where
/// the server already has them; `--controller-manager` overrides what is found.
async fn controller_manager(client: &kube::Client, config: &kube::Config) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Pod;
    let leases: kube::Api<Lease> = kube::Api::namespaced(client.clone(), "kube-system");
    match leases.get_opt("kube-controller-manager").await {
        Ok(Some(lease)) => {
            if let Some(renewed) = lease.spec.and_then(|s| s.renew_time).map(|t| t.0) {
                let age = jiff::Timestamp::now().duration_since(renewed).as_secs();
                if age < 60 {
                    return Some(format!("kube-controller-manager holds its leader Lease (renewed {age} s ago)"));
                }
            }
        }
        Ok(None) => {}
        Err(e) => say!("could not read kube-system/kube-controller-manager's Lease ({e}); looking further"),
    }
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "kube-system");
    let labelled = kube::api::ListParams::default().labels("component=kube-controller-manager");
    match pods.list(&labelled).await {
        Ok(list) => {
            let running =
                list.items.iter().find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"));
            if let Some(pod) = running {
                return Some(format!(
                    "kube-controller-manager runs as pod kube-system/{}",
                    pod.metadata.name.as_deref().unwrap_or("?")
                ));
            }
        }
        Err(e) => say!("could not list kube-system's pods ({e}); looking further"),
    }
    let host = config.cluster_url.host()?.to_string();
    let address = format!("{host}:{CONTROLLER_MANAGER_PORT}");
    let connect = tokio::net::TcpStream::connect(address.as_str());
    match tokio::time::timeout(std::time::Duration::from_secs(2), connect).await {
        Ok(Ok(_)) => Some(format!(
            "kube-controller-manager's port {CONTROLLER_MANAGER_PORT} is open on the API server's host {host} (say \
             --controller-manager absent if that is something else)"
        )),
        _ => None,
    }
}
