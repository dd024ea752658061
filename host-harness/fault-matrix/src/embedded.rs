//! The embedded cluster as the contract suite's [`Simulator`]: its request log, a fault rule
//! that holds an exec, and its kubelet's stop-delay annotation.

use std::time::Duration;

use contract_suite::simulator::{Hold, Identity, SeenRequest, Simulator};
use embedded_cluster::behaviour::TERMINATION_DELAY;
use embedded_cluster::faults::Rule;
use embedded_cluster::{ADMIN_USER, EmbeddedCluster, PROVIDER_USER};

/// An embedded cluster, seen through the suite's hooks.
pub struct Embedded<'c>(pub &'c EmbeddedCluster);

impl Simulator for Embedded<'_> {
    fn kubeconfig(&self, who: Identity) -> anyhow::Result<String> {
        self.0.kubeconfig(match who {
            Identity::Admin => ADMIN_USER,
            Identity::Provider => PROVIDER_USER,
        })
    }

    fn request_mark(&self) -> u64 {
        self.0.requests().mark()
    }

    fn requests_since(&self, mark: u64) -> Vec<SeenRequest> {
        let seen = |e: embedded_cluster::request_log::Entry| SeenRequest {
            verb: e.verb,
            resource: e.resource,
            namespace: e.namespace,
            name: e.name,
        };
        self.0.requests().since(mark).into_iter().map(seen).collect()
    }

    fn hold_exec(&self, namespace: &str, pod: &str, longest: Duration) -> Hold {
        Hold(self.0.faults().add(Rule::hold_exec(namespace, pod, longest)))
    }

    fn holding(&self, hold: Hold) -> bool {
        self.0.faults().holding(hold.0)
    }

    fn release(&self, hold: Hold) {
        self.0.faults().remove(hold.0);
    }

    fn slow_stop(&self, delay: Duration) -> (String, String) {
        (TERMINATION_DELAY.to_string(), format!("{}s", delay.as_secs()))
    }
}
