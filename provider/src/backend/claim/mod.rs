//! The `claim` backend: a lease is one agent-sandbox `SandboxClaim` on a warm pool, and the
//! Sandbox the claim controller hands it (a Ready member at once, or one made from the pool's
//! template). Its pod is the template's, not this provider's, so every step that touches the
//! pod is its own: the wait (`readiness`, through the claim to its Sandbox), resume-check,
//! destroy (which proves the Sandbox goes with the claim, never deleting it by name), the
//! container commands run in (`container`), and the env, which lives only in the lease's
//! Secret. A claimed Sandbox is not kept after release, so release destroys.

pub(crate) mod acquire;
pub(crate) mod container;
pub(crate) mod destroy;
pub mod manifest;
mod probe;
pub mod readiness;
pub(crate) mod resume;
pub mod state;

use std::time::Duration;

use contract::k8s::agent_sandbox::CLAIM_KIND;
use serde_json::Value;

use crate::acquire::{AcquireRequest, Basics, Plan};
use crate::adoption::Workload;
use crate::api_versions::{self, SandboxVersion};
use crate::backend::{Ended, Existing, Needs, Steps};
use crate::clock::{Clock, Deadline};
use crate::config::Config;
use crate::destroy::DestroyReport;
use crate::errors::ProviderError;
use crate::kube_api::Kube;
use crate::lease::{Lease, LeaseMetadata, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::probe::Findings;
use crate::resume::{ResumeOutcome, ResumeWait};
use crate::rfc3339;
use crate::secret::{self, LeaseEnv};
use state::{ClaimState, claim_state};

/// The SandboxClaim API, for messages about a cluster that no longer serves it.
const API: &str = "agent-sandbox's extensions";

/// The steps of backend `claim`.
pub(crate) struct ClaimSteps;

impl<K: Kube> Steps<K> for ClaimSteps {
    fn kind(&self) -> &'static str {
        CLAIM_KIND
    }

    fn probe(&self, kube: &K, config: &Config, sandboxes: &[SandboxVersion], found: &mut Findings) -> Needs {
        probe::probe(kube, config, sandboxes, found)
    }

    fn plan(&self, kube: &K, log: &dyn Log, request: &AcquireRequest, basics: Basics) -> Result<Plan, ProviderError> {
        acquire::plan(kube, log, request, basics)
    }

    fn wait(
        &self,
        kube: &K,
        clock: &dyn Clock,
        log: &dyn Log,
        plan: &Plan,
        workload: &Workload,
        started: Duration,
        deadline: Deadline,
    ) -> Result<Lease, ProviderError> {
        acquire::finish(kube, clock, log, plan, workload, started, deadline)
    }

    fn resume_check(
        &self,
        kube: &K,
        clock: &dyn Clock,
        log: &dyn Log,
        lease_ref: &LeaseRef,
        id: &LeaseId,
        wait: ResumeWait,
    ) -> Result<ResumeOutcome, ProviderError> {
        resume::resume_check(kube, clock, log, lease_ref, id, wait)
    }

    fn existing(&self, kube: &K, lease: &Lease) -> Result<Existing, ProviderError> {
        Ok(match api_versions::claim_for_existing(kube, &lease.api_version)? {
            Some(version) => Existing::Served(version.resource()),
            None => Existing::NotServed(API),
        })
    }

    /// As resume-check reads it: a claim whose Sandbox is gone, or another, is over too.
    fn ended(&self, claim: &Value, lease: &Lease, what: &str) -> Option<Ended> {
        match claim_state(claim) {
            ClaimState::Deleting => Some(Ended::Because("is being deleted".to_string())),
            ClaimState::Failed(f) if f.ends_sandbox() => Some(Ended::Because(format!("has ended ({})", f.message))),
            _ => {
                let recorded = resume::recorded_sandbox_name(lease);
                resume::sandbox_lost(claim, what, recorded.as_deref()).map(Ended::Reason)
            }
        }
    }

    fn renew_patch(&self, _claim: &Value, expiry: i64, _now: i64) -> (Value, i64) {
        (manifest::shutdown_patch(&rfc3339::format_seconds(expiry)), expiry)
    }

    fn leak_guard(&self, what: &str, expires_at: i64, _config: &Config) -> String {
        format!(
            "the claim controller deletes {what} at its lifecycle.shutdownTime {} (shutdownPolicy Delete), and \
             garbage collection its Sandbox and pod",
            rfc3339::format_seconds(expires_at)
        )
    }

    fn destroy(&self, kube: &K, log: &dyn Log, id: &LeaseId, lease: &Lease) -> Result<DestroyReport, ProviderError> {
        destroy::destroy(kube, log, id, lease)
    }

    fn exec_container(&self, kube: &K, namespace: &str, pod: &str) -> Result<String, ProviderError> {
        container::claim_container(kube, namespace, pod)
    }

    fn recorded_container(&self, metadata: &LeaseMetadata, pod: &str) -> Option<String> {
        container::recorded_for(metadata, pod)
    }

    /// The pod has none of the lease's env: all of it comes from the Secret.
    fn exec_env(&self, what: &str, secret: &Value) -> Result<LeaseEnv, ProviderError> {
        secret::claim_env_of(what, secret)
    }
}
