//! The simulated controllers. Each is a Kubernetes client with its own identity that reaches
//! the API server only through HTTP, so the same code runs inside the embedded cluster and,
//! through `sandbox-dev simulate`, against a real kube-apiserver that has no nodes.

pub mod claim;
pub mod extensions;
pub mod gc;
pub mod job;
pub mod kubelet;
pub mod sandbox;
pub mod template;
pub mod warm_pool;

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
    /// agent-sandbox's SandboxTemplate controller (the template's managed NetworkPolicy).
    Template,
    /// agent-sandbox's SandboxWarmPool controller.
    WarmPool,
    /// agent-sandbox's SandboxClaim controller.
    Claim,
}

impl ControllerKind {
    /// All of them, in start order.
    pub const ALL: [ControllerKind; 7] = [
        ControllerKind::Kubelet,
        ControllerKind::Gc,
        ControllerKind::Job,
        ControllerKind::Sandbox,
        ControllerKind::Template,
        ControllerKind::WarmPool,
        ControllerKind::Claim,
    ];

    /// The user the controller authenticates as (so the request log tells its calls apart).
    /// Upstream runs the extension controllers in the Sandbox controller's process, as its
    /// ServiceAccount; here each has an account of its own in the same namespace, so a test can
    /// tell a pool's writes from a claim's.
    pub fn user(self) -> &'static str {
        match self {
            ControllerKind::Sandbox => "system:serviceaccount:agent-sandbox-system:agent-sandbox-controller",
            ControllerKind::Job => "system:serviceaccount:kube-system:job-controller",
            ControllerKind::Kubelet => "system:node:embedded-node-1",
            ControllerKind::Gc => "system:serviceaccount:kube-system:generic-garbage-collector",
            ControllerKind::Template => "system:serviceaccount:agent-sandbox-system:sandbox-template-controller",
            ControllerKind::WarmPool => "system:serviceaccount:agent-sandbox-system:sandbox-warm-pool-controller",
            ControllerKind::Claim => "system:serviceaccount:agent-sandbox-system:sandbox-claim-controller",
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
            ControllerKind::Template => "template",
            ControllerKind::WarmPool => "warmpool",
            ControllerKind::Claim => "claim",
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
            "template" => Ok(Self::Template),
            "warmpool" | "warm-pool" => Ok(Self::WarmPool),
            "claim" => Ok(Self::Claim),
            other => Err(format!(
                "unknown controller {other:?}: choose from sandbox, job, kubelet, gc, template, warmpool, claim"
            )),
        }
    }
}

/// The Sandbox resource the cluster serves, preferring v1beta1 (None if agent-sandbox is absent).
pub async fn served_sandbox_resource(client: &kube::Client) -> Option<ApiResource> {
    use contract::k8s::agent_sandbox::{GROUP, SANDBOX_VERSIONS, SANDBOXES};
    let group = kube::discovery::group(client, GROUP).await.ok()?;
    for version in SANDBOX_VERSIONS {
        if let Some((ar, _)) = group.versioned_resources(version).into_iter().find(|(ar, _)| ar.plural == SANDBOXES) {
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
            ControllerKind::Template => template::run(client.clone()).await,
            ControllerKind::WarmPool => warm_pool::run(client.clone()).await,
            ControllerKind::Claim => claim::run(client.clone(), clock.clone()).await,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_controller_has_a_name_and_a_user_of_its_own() {
        let mut users = std::collections::HashSet::new();
        for kind in ControllerKind::ALL {
            assert_eq!(kind.to_string().parse::<ControllerKind>(), Ok(kind));
            assert!(users.insert(kind.user()), "{kind} shares its user");
        }
        assert_eq!("warm-pool".parse::<ControllerKind>(), Ok(ControllerKind::WarmPool));
        assert!("pool".parse::<ControllerKind>().is_err());
        assert_eq!(
            ControllerKind::Claim.groups(),
            ["system:serviceaccounts", "system:serviceaccounts:agent-sandbox-system"]
        );
    }
}
