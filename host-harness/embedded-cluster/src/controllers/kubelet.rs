//! The simulated scheduler and kubelet (in the spirit of KWOK): nodes that exist only as API
//! objects, and pods on them that "run" according to their behaviour knobs.
//!
//! It is a pure API client (it reaches the server only through `kube::Client`), so it runs the
//! same against the embedded API server and against a real kube-apiserver that has no nodes.
//! The one exception is `pods/exec`, which only the embedded API server serves: it runs the
//! command as a local process (`kubelet/exec.rs`: on the host, not in an image), inside a PID
//! namespace of the pod's (`kubelet/pid_namespace.rs`).
//!
//! ## What happens to a pod
//! * Scheduling: pending pods (`default-scheduler`) are bound through pods/binding to the
//!   least-loaded node that is not cordoned, whose taints they tolerate and whose labels match
//!   their nodeSelector and required node affinity; otherwise `PodScheduled=False`,
//!   `Unschedulable`, retried whenever anything changes.
//! * Start: after the start delay the sandbox exists (pod IP); the containers run unless the
//!   image cannot be pulled (`ErrImagePull`, then `ImagePullBackOff` forever) or a referenced
//!   Secret/ConfigMap is missing (`CreateContainerConfigError` until it appears). Init
//!   containers complete at once; every regular container shares the pod's fate.
//! * Exit: `run-duration`/`exit-code`/`crash-loop` end the containers, and `restartPolicy`
//!   decides between a terminal phase and a restart after the crash back-off (10 s doubling to
//!   5 min, reset after 10 min of running; the restart count rises when the back-off starts).
//!   `evict-after` fails the pod as `Evicted`; `activeDeadlineSeconds` as `DeadlineExceeded`;
//!   `delete-after` issues an ordinary DELETE.
//! * Deletion: containers stop as the main process answers SIGTERM (`kubelet/pid_namespace.rs`):
//!   as PID 1 it ignores it and is killed when the grace period ends (137); beside a pause
//!   (`shareProcessNamespace`) it ends at once (143). `termination-delay` overrides: the
//!   process exits by itself (0) after it, or is killed when the grace period is shorter. The
//!   pod gets a terminal phase, then the kubelet deletes it with grace period 0 and a UID
//!   precondition.
//! * Node loss (`node-lost-after`): the node's conditions turn `Unknown` (`NodeStatusUnknown`)
//!   and the pod's `Ready` turns False. From then on the pod is frozen, as behind a real
//!   unreachable kubelet: its status never changes again (not even when its containers would
//!   have exited) and a graceful deletion is never finished, so the pod stays `Terminating`
//!   until someone force-deletes it (grace period 0). Only `delete-after`, which stands for a
//!   person, still acts. The node turns Ready again once no lost pod remains on it. The node
//!   is not tainted and keeps running its other pods and receiving new ones, so one test's
//!   lost node does not disturb the others; no taint-based eviction follows.

mod api;
mod caches;
mod config_refs;
mod events;
pub(crate) mod exec;
pub(crate) mod exec_env;
mod exec_sessions;
mod ip_pool;
mod merge_patch;
mod node;
pub(crate) mod pid_limit;
pub(crate) mod pid_namespace;
mod pod_state;
mod pod_status;
mod runner;
mod scheduler;
mod volumes;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use crate::clock::Clock;

/// Default timings when no knob says otherwise (cluster time), and the nodes to simulate.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    /// Nodes to register and run pods on; pods bound elsewhere are left alone.
    pub node_names: Vec<String>,
    /// Binding to containers running, unless the `start-delay` knob says otherwise.
    pub start_delay: Duration,
    /// Running to Ready, unless the `ready-delay` knob says otherwise.
    pub ready_delay: Duration,
    /// The first two octets of the pod network, a /16 (for example `10.244.`); pod IPs are
    /// unique among live pods and handed out lowest first.
    pub pod_cidr_prefix: String,
    /// Bind Pending claims on the node the scheduler picks (a local provisioner); off where
    /// the cluster provisions its own volumes.
    pub provision_volumes: bool,
    /// The most processes a pod may have (a kubelet's `podPidsLimit`), zombies included; none
    /// by default, as a kubelet's. Needs a writable pids cgroup hierarchy (root).
    pub pod_pids_limit: Option<u32>,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            node_names: vec!["embedded-node-1".to_string()],
            start_delay: Duration::from_millis(50),
            ready_delay: Duration::from_millis(50),
            pod_cidr_prefix: "10.244.".to_string(),
            provision_volumes: true,
            pod_pids_limit: None,
        }
    }
}

/// Registers the nodes and runs scheduler + kubelet until dropped or a fatal error.
///
/// Fatal errors are the ones a kubelet cannot work around: no node names, nodes that cannot be
/// registered, or pods/nodes that cannot be listed. After start-up, failed writes are logged
/// and retried, and 404/409 answers are taken as the cluster having moved on.
pub async fn run(client: kube::Client, clock: Arc<Clock>, config: KubeletConfig) -> anyhow::Result<()> {
    anyhow::ensure!(!config.node_names.is_empty(), "the kubelet needs at least one node name");
    let unique: HashSet<&String> = config.node_names.iter().collect();
    anyhow::ensure!(unique.len() == config.node_names.len(), "node names must be unique: {:?}", config.node_names);
    let server = client.apiserver_version().await.context("reading the API server's version")?;
    let version = node::kubelet_version(&server.git_version);
    api::register_nodes(&client, &config.node_names, || clock.now(), &version).await?;
    let caches = caches::Caches::start(&client).await.context("starting the kubelet's watches")?;
    tracing::info!(nodes = ?config.node_names, %version, "simulated scheduler and kubelet running");
    runner::Runner::new(client, clock, &config, caches, version).run().await
}
