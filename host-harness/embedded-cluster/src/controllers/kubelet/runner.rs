//! The reconcile loop: one pass schedules pending pods, advances every pod on the simulated
//! nodes and tends the nodes, then sleeps until a watch event, a clock advance or the earliest
//! moment anything changes by itself. The decisions live in the pure modules; this file only
//! reads caches and performs the writes they ask for.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Node, Pod, PodStatus};
use kube::Client;
use kube::runtime::reflector::ObjectRef;
use serde_json::Value;

use super::api::{self, Outcome};
use super::caches::Caches;
use super::config_refs::{NotSynced, config_errors};
use super::events::{self, Component, Recorder};
use super::ip_pool::IpPool;
use super::pod_state::{self, Action, Defaults, PodBook, PodFacts, after};
use super::pod_status::status_patch;
use super::scheduler::{self, Placement};
use super::volumes::{self, Claims};
use super::{KubeletConfig, node};
use crate::behaviour::Behaviour;
use crate::clock::Clock;

/// Cluster time between node heartbeats (the kubelet's node-status-update-frequency).
const HEARTBEAT: Duration = Duration::from_secs(10);
/// Real time between heartbeats at least, so a fast clock does not flood the API server.
const HEARTBEAT_MIN_REAL: Duration = Duration::from_secs(1);
/// Real time before a failed write is tried again.
const RETRY_REAL: Duration = Duration::from_millis(500);
/// Real time between attempts to re-register a node that disappeared.
const REREGISTER_REAL: Duration = Duration::from_secs(2);

/// A status patch this loop sent, so it is not re-sent while the watch still shows the
/// object as it was before (or as the server stored it, if the server normalised it).
struct Written {
    patch: Value,
    before: Option<String>,
    after: Option<String>,
}

impl Written {
    fn covers(written: Option<&Self>, patch: &Value, version: Option<&String>) -> bool {
        written.is_some_and(|w| &w.patch == patch && (w.before.as_ref() == version || w.after.as_ref() == version))
    }
}

/// A pod on one of our nodes.
struct Tracked {
    book: PodBook,
    node: String,
    /// The pool address this pod holds, until it finishes or goes away.
    ip_held: Option<String>,
    written: Option<Written>,
    /// The status last written, which events are told against (the cache may lag it).
    reported: Option<PodStatus>,
}

/// One of our nodes.
struct NodeEntry {
    name: String,
    index: usize,
    host_ip: String,
    /// Cluster and real time of the last heartbeat written.
    heartbeat: Option<(Timestamp, Instant)>,
    registered: Instant,
}

/// The loop's state: caches, per-pod books and what was written.
pub(crate) struct Runner {
    client: Client,
    clock: Arc<Clock>,
    defaults: Defaults,
    caches: Caches,
    pool: IpPool,
    pods: HashMap<String, Tracked>,
    nodes: Vec<NodeEntry>,
    /// Pods bound by this scheduler that the cache still shows unbound, by UID, with the node.
    binding: HashMap<String, String>,
    /// `PodScheduled=False` messages written (as the `patch` of `Written`), by UID.
    unschedulable: HashMap<String, Written>,
    /// A write failed: run again soon even if nothing else happens.
    retry_soon: bool,
    /// The version the nodes report: the API server's.
    version: String,
    /// Whether Pending claims are bound here (the local provisioner).
    provision: bool,
    /// Where the scheduler's and the kubelet's events go.
    events: Recorder,
}

impl Runner {
    /// A loop for the nodes in `config`, which must already be registered.
    pub(crate) fn new(
        client: Client,
        clock: Arc<Clock>,
        config: &KubeletConfig,
        caches: Caches,
        version: String,
    ) -> Self {
        let nodes = config
            .node_names
            .iter()
            .enumerate()
            .map(|(index, name)| NodeEntry {
                name: name.clone(),
                index,
                host_ip: node::internal_ip(index),
                heartbeat: None,
                registered: Instant::now(),
            })
            .collect();
        Self {
            events: Recorder::start(client.clone()),
            client,
            clock,
            defaults: Defaults { start_delay: config.start_delay, ready_delay: config.ready_delay },
            caches,
            pool: IpPool::new(&config.pod_cidr_prefix),
            pods: HashMap::new(),
            nodes,
            binding: HashMap::new(),
            unschedulable: HashMap::new(),
            retry_soon: false,
            version,
            provision: config.provision_volumes,
        }
    }

    /// Reconciles forever; failures of single writes are logged and retried.
    pub(crate) async fn run(mut self) -> anyhow::Result<()> {
        let mut advances = self.clock.advances();
        loop {
            let now = self.clock.now();
            self.retry_soon = false;
            self.schedule(now).await;
            let mut wake = after(now, HEARTBEAT);
            for next in [self.run_pods(now).await, self.tend_nodes(now).await].into_iter().flatten() {
                wake = wake.min(next);
            }
            if self.retry_soon {
                wake = wake.min(after(now, self.cluster(RETRY_REAL)));
            }
            if wake <= now {
                tokio::task::yield_now().await;
                continue;
            }
            tokio::select! {
                () = self.caches.changed.notified() => {}
                _ = advances.changed() => {}
                () = self.clock.sleep_until(wake) => {}
            }
        }
    }

    /// Cluster time that passes during `real` time.
    fn cluster(&self, real: Duration) -> Duration {
        real.mul_f64(self.clock.scale())
    }

    fn behaviour(&self, pod: &Pod) -> Behaviour {
        let namespace = pod.metadata.namespace.as_deref().and_then(|ns| self.caches.namespace(ns));
        let ns_annotations = namespace.as_ref().and_then(|n| n.metadata.annotations.as_ref());
        Behaviour::from_annotations(ns_annotations, pod.metadata.annotations.as_ref())
    }

    /// Binds every pending pod that fits somewhere and marks the others unschedulable.
    async fn schedule(&mut self, now: Timestamp) {
        let pods = self.caches.pods.store.state();
        let nodes = self.caches.nodes.store.state();
        let nodes: Vec<&Node> = nodes.iter().map(AsRef::as_ref).collect();
        let pending: Vec<&Pod> = pods.iter().map(AsRef::as_ref).filter(|p| scheduler::wants_scheduling(p)).collect();
        let pending_uids: HashSet<&str> = pending.iter().filter_map(|p| p.metadata.uid.as_deref()).collect();
        self.binding.retain(|uid, _| pending_uids.contains(uid.as_str()));
        self.unschedulable.retain(|uid, _| pending_uids.contains(uid.as_str()));

        let mut load: HashMap<String, usize> = HashMap::new();
        for pod in &pods {
            let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
            let node = pod.spec.as_ref().and_then(|s| s.node_name.clone());
            if let (Some(node), false) = (node, matches!(phase, Some("Succeeded" | "Failed"))) {
                *load.entry(node).or_default() += 1;
            }
        }
        for node in self.binding.values() {
            *load.entry(node.clone()).or_default() += 1;
        }

        for pod in pending {
            let Some(uid) = pod.metadata.uid.clone() else {
                continue;
            };
            if self.binding.contains_key(&uid) {
                continue;
            }
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            let placement = match volumes::claims(pod, &self.caches.claims) {
                Claims::Missing(claim) => Placement::Unschedulable(volumes::missing_message(&claim, nodes.len())),
                Claims::Unbound(_) if !self.provision => {
                    Placement::Unschedulable(volumes::unbound_message(nodes.len()))
                }
                claims => {
                    let load_of = |n: &str| load.get(n).copied().unwrap_or(0);
                    let placement = scheduler::place(pod, &self.behaviour(pod), &nodes, load_of);
                    if let (Placement::Bind(node), Claims::Unbound(pending)) = (&placement, &claims) {
                        // Bind the claims first; the pod follows once the caches show them Bound.
                        for pvc in pending {
                            match volumes::provision(&self.client, pvc, node).await {
                                Ok(_) => tracing::info!(pod = name, namespace, node, "provisioned a claim"),
                                Err(error) => self.failed(&error),
                            }
                        }
                        continue;
                    }
                    placement
                }
            };
            match placement {
                Placement::Bind(node) => match api::bind(&self.client, pod, &node).await {
                    Ok(Outcome::Done(_)) => {
                        tracing::info!(pod = name, namespace, node, "bound pod");
                        self.events.record(pod, events::scheduled(pod, &node), Component::Scheduler, None, now);
                        *load.entry(node.clone()).or_default() += 1;
                        self.binding.insert(uid, node);
                    }
                    Ok(Outcome::Moot) => {
                        tracing::debug!(pod = name, namespace, "pod gone or bound elsewhere")
                    }
                    Err(error) => self.failed(&error),
                },
                Placement::Unschedulable(message) => {
                    let Some(patch) = scheduler::unschedulable_patch(pod, &message, now) else {
                        continue;
                    };
                    // The patch carries a fresh transition time while the cache lags, so the
                    // message is what identifies a write already made.
                    let version = pod.metadata.resource_version.as_ref();
                    let key = Value::String(message.clone());
                    if Written::covers(self.unschedulable.get(&uid), &key, version) {
                        continue;
                    }
                    match api::patch_pod_status(&self.client, pod, &patch).await {
                        Ok(Outcome::Done(after)) => {
                            tracing::info!(pod = name, namespace, message, "pod is unschedulable");
                            let event = events::failed_scheduling(&message);
                            self.events.record(pod, event, Component::Scheduler, None, now);
                            self.unschedulable.insert(uid, Written { patch: key, before: version.cloned(), after });
                        }
                        Ok(Outcome::Moot) => {}
                        Err(error) => self.failed(&error),
                    }
                }
            }
        }
    }

    /// Advances every pod bound to our nodes; returns the earliest time one changes by itself.
    async fn run_pods(&mut self, now: Timestamp) -> Option<Timestamp> {
        let pods = self.caches.pods.store.state();
        let hosts: HashMap<String, String> = self.nodes.iter().map(|n| (n.name.clone(), n.host_ip.clone())).collect();
        let mut live = HashSet::new();
        let mut wake: Option<Timestamp> = None;
        for pod in &pods {
            let Some(node) = pod.spec.as_ref().and_then(|s| s.node_name.as_ref()) else {
                continue;
            };
            let (Some(host_ip), Some(uid)) = (hosts.get(node), pod.metadata.uid.as_ref()) else {
                continue;
            };
            live.insert(uid.clone());
            if let Some(next) = self.run_pod(pod, uid, node, host_ip, now).await {
                wake = Some(wake.map_or(next, |w| w.min(next)));
            }
        }
        let gone: Vec<String> = self.pods.keys().filter(|uid| !live.contains(*uid)).cloned().collect();
        for uid in gone {
            if let Some(ip) = self.pods.remove(&uid).and_then(|t| t.ip_held) {
                self.pool.release(&ip);
            }
        }
        wake
    }

    async fn run_pod(&mut self, pod: &Pod, uid: &str, node: &str, host_ip: &str, now: Timestamp) -> Option<Timestamp> {
        let behaviour = self.behaviour(pod);
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let tracked = self.pods.entry(uid.to_string()).or_insert_with(|| {
            tracing::debug!(pod = name, namespace, node, "pod arrived on node");
            Tracked {
                book: PodBook::new(pod, now),
                node: node.to_string(),
                ip_held: None,
                written: None,
                reported: None,
            }
        });
        let synced_at = behaviour.config_sync_delay.map(|delay| after(tracked.book.seen_at, delay));
        let (errors, sync_wake) = match synced_at {
            Some(at) if now < at => (config_errors(pod, &NotSynced), Some(at)),
            _ => (config_errors(pod, &self.caches), None),
        };
        if tracked.book.pod_ip.is_none() && !tracked.book.is_finished() {
            let observed = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
            match observed {
                Some(ip) => {
                    if self.pool.reserve(&ip) {
                        tracked.ip_held = Some(ip.clone());
                    }
                    tracked.book.pod_ip = Some(ip);
                }
                None => match self.pool.allocate() {
                    Some(ip) => {
                        tracked.ip_held = Some(ip.clone());
                        tracked.book.pod_ip = Some(ip);
                    }
                    None => {
                        tracing::warn!(pod = name, namespace, "no free pod IP; the sandbox waits")
                    }
                },
            }
        }

        let facts = PodFacts { behaviour: &behaviour, defaults: self.defaults, config_errors: &errors, host_ip };
        let step = pod_state::step(pod, &facts, &mut tracked.book, now);
        if tracked.book.is_finished()
            && let Some(ip) = tracked.ip_held.take()
        {
            self.pool.release(&ip);
        }

        if let Some(status) = &step.status {
            let version = pod.metadata.resource_version.as_ref();
            match status_patch(pod.status.as_ref(), status) {
                Ok(Some(patch)) if !Written::covers(tracked.written.as_ref(), &patch, version) => {
                    match api::patch_pod_status(&self.client, pod, &patch).await {
                        Ok(Outcome::Done(after)) => {
                            let phase = status.phase.as_deref().unwrap_or_default();
                            tracing::debug!(pod = name, namespace, phase, "wrote pod status");
                            let before = tracked.reported.as_ref().or(pod.status.as_ref());
                            for event in events::kubelet_events(pod, before, status) {
                                self.events.record(pod, event, Component::Kubelet, Some(node), now);
                            }
                            tracked.reported = Some(status.clone());
                            tracked.written = Some(Written { patch, before: version.cloned(), after });
                        }
                        Ok(Outcome::Moot) => {}
                        Err(error) => {
                            tracing::warn!(error = %format!("{error:#}"), "write failed; retrying");
                            self.retry_soon = true;
                        }
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::error!(pod = name, namespace, error = %format!("{error:#}"), "cannot build the status patch")
                }
            }
        }

        for action in &step.actions {
            let result = match action {
                Action::Delete => {
                    tracing::info!(pod = name, namespace, "deleting pod (delete-after)");
                    api::delete_pod(&self.client, pod).await
                }
                Action::FinishDeletion => {
                    tracing::info!(pod = name, namespace, "containers stopped; finishing deletion");
                    api::finish_deletion(&self.client, pod).await
                }
            };
            if let Err(error) = result {
                tracing::warn!(error = %format!("{error:#}"), "write failed; retrying");
                self.retry_soon = true;
                match action {
                    Action::Delete => tracked.book.delete_requested = false,
                    Action::FinishDeletion => tracked.book.final_delete_sent = false,
                }
            }
        }
        [step.wake, sync_wake].into_iter().flatten().min()
    }

    /// Heartbeats, node loss and recovery, and re-registration of deleted nodes; returns the
    /// next heartbeat time.
    async fn tend_nodes(&mut self, now: Timestamp) -> Option<Timestamp> {
        let lost: HashSet<&str> =
            self.pods.values().filter(|t| t.book.lost_at.is_some()).map(|t| t.node.as_str()).collect();
        let min_gap = self.cluster(HEARTBEAT_MIN_REAL);
        let mut wake: Option<Timestamp> = None;
        let mut failed = false;
        for entry in &mut self.nodes {
            let Some(observed) = self.caches.nodes.store.get(&ObjectRef::new(&entry.name)) else {
                if entry.registered.elapsed() >= REREGISTER_REAL {
                    entry.registered = Instant::now();
                    tracing::info!(node = entry.name, "node object missing; registering it again");
                    if let Err(error) =
                        api::register_node(&self.client, &entry.name, entry.index, now, &self.version).await
                    {
                        tracing::warn!(error = %format!("{error:#}"), "re-registration failed; retrying");
                        failed = true;
                    }
                }
                continue;
            };
            let is_lost = lost.contains(entry.name.as_str());
            let due = entry
                .heartbeat
                .is_none_or(|(cluster, real)| now >= after(cluster, HEARTBEAT) && real.elapsed() >= HEARTBEAT_MIN_REAL);
            if let Some(patch) =
                node::status_patch(&entry.name, entry.index, is_lost, observed.status.as_ref(), now, due, &self.version)
            {
                match api::patch_node_status(&self.client, &entry.name, &patch).await {
                    Ok(_) if is_lost => {
                        tracing::info!(node = entry.name, "node lost: Ready is Unknown")
                    }
                    Ok(_) if due => entry.heartbeat = Some((now, Instant::now())),
                    Ok(_) => tracing::info!(node = entry.name, "node status restored"),
                    Err(error) => {
                        tracing::warn!(error = %format!("{error:#}"), "write failed; retrying");
                        failed = true;
                    }
                }
            }
            if !is_lost && let Some((cluster, _)) = entry.heartbeat {
                let next = after(cluster, HEARTBEAT).max(after(now, min_gap));
                wake = Some(wake.map_or(next, |w| w.min(next)));
            }
        }
        self.retry_soon |= failed;
        wake
    }

    fn failed(&mut self, error: &anyhow::Error) {
        tracing::warn!(error = %format!("{error:#}"), "write failed; retrying");
        self.retry_soon = true;
    }
}
