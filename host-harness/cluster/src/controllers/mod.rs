//! The simulated controllers. Each is a Kubernetes client with its own identity that reaches
//! the API server only through HTTP, so the same code runs inside the embedded cluster and,
//! through `sandbox-host simulate`, against a real kube-apiserver that has no nodes.

pub mod gc;
pub mod job;
pub mod kubelet;
pub mod sandbox;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use kube::core::ApiResource;

use crate::clock::Clock;

/// One simulated controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ControllerKind {
    /// agent-sandbox's Sandbox controller.
    Sandbox,
    /// kube-controller-manager's Job and TTL-after-finished controllers.
    Job,
    /// The scheduler and the kubelet of the simulated nodes.
    Kubelet,
    /// kube-controller-manager's garbage collector.
    Gc,
}

impl ControllerKind {
    /// All four, in start order.
    pub const ALL: [ControllerKind; 4] =
        [ControllerKind::Kubelet, ControllerKind::Gc, ControllerKind::Job, ControllerKind::Sandbox];

    /// The user the controller authenticates as (so the request log tells its calls apart).
    pub fn user(self) -> &'static str {
        match self {
            ControllerKind::Sandbox => "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller",
            ControllerKind::Job => "system:serviceaccount:kube-system:job-controller",
            ControllerKind::Kubelet => "system:node:embedded-node-1",
            ControllerKind::Gc => "system:serviceaccount:kube-system:generic-garbage-collector",
        }
    }
}

impl ControllerKind {
    /// The groups the controller's user belongs to on a real cluster.
    pub fn groups(self) -> Vec<String> {
        match self {
            ControllerKind::Kubelet => vec!["system:nodes".to_string()],
            other => {
                let namespace = other.user().split(':').nth(2).unwrap_or_default();
                vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")]
            }
        }
    }
}

impl fmt::Display for ControllerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ControllerKind::Sandbox => "sandbox",
            ControllerKind::Job => "job",
            ControllerKind::Kubelet => "kubelet",
            ControllerKind::Gc => "gc",
        })
    }
}

impl FromStr for ControllerKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "sandbox" => Ok(Self::Sandbox),
            "job" => Ok(Self::Job),
            "kubelet" => Ok(Self::Kubelet),
            "gc" => Ok(Self::Gc),
            other => Err(format!("unknown controller {other:?}: choose from sandbox, job, kubelet, gc")),
        }
    }
}

/// The Sandbox resource the cluster serves, preferring v1beta1 (None if agent-sandbox is absent).
pub async fn served_sandbox_resource(client: &kube::Client) -> Option<ApiResource> {
    let group = kube::discovery::group(client, "agents.x-k8s.io").await.ok()?;
    for version in ["v1beta1", "v1alpha1"] {
        if let Some((ar, _)) = group.versioned_resources(version).into_iter().find(|(ar, _)| ar.plural == "sandboxes") {
            return Some(ar);
        }
    }
    None
}

/// Runs one controller, restarting it after a failure (as a Deployment would), until dropped.
pub async fn run_forever(
    kind: ControllerKind,
    client: kube::Client,
    clock: Arc<Clock>,
    kubelet_config: kubelet::KubeletConfig,
) {
    loop {
        let result = match kind {
            ControllerKind::Gc => gc::run(client.clone()).await,
            ControllerKind::Sandbox => sandbox::run(client.clone(), clock.clone()).await,
            ControllerKind::Job => job::run(client.clone(), clock.clone()).await,
            ControllerKind::Kubelet => kubelet::run(client.clone(), clock.clone(), kubelet_config.clone()).await,
        };
        match result {
            Ok(()) => {
                tracing::warn!(controller = %kind, "controller stopped; restarting in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => {
                tracing::warn!(controller = %kind, error = %format!("{e:#}"), "controller failed; restarting in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
