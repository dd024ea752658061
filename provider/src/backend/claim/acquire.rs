//! Acquire with backend `claim`: one SandboxClaim on an agent-sandbox warm pool, and the wait
//! for the Sandbox it gets.
//!
//! The plan decides the claim before anything is written: the served SandboxClaim version
//! (discovered, preferring v1beta1) and what it needs of the config (see
//! `manifest::source`), the claim named like any workload (`naming::workload_name`, so
//! a retried acquire finds its own claim), the identity's labels and annotations with the spec
//! fingerprint, and the leak guard (`lifecycle.shutdownTime` at the lease's expiry,
//! `shutdownPolicy: Delete`). The lease's whole env goes into its Secret, owned by the claim,
//! never into the claim (see `secret` for why). The writes, the adoption of an earlier attempt's
//! claim (409) and the clean-up after a failure are acquire's own (`adoption`, `compensation`).
//!
//! The wait is `claim::readiness`: a warm pool's ready Sandbox is adopted at once; otherwise the
//! claim makes one from the template, and the wait is a cold start's. A claimed Sandbox is not
//! kept after release, so the lease is never reusable.

use std::time::Duration;

use contract::k8s::agent_sandbox::CLAIM_KIND;
use serde_json::{Value, json};

use crate::acquire::{self, AcquireRequest, Basics, Plan, Planned};
use crate::adoption::Workload;
use crate::api_versions::{self, ClaimVersion};
use crate::backend::claim::container;
use crate::backend::claim::manifest::{self, ClaimParams};
use crate::backend::claim::readiness::{ClaimTarget, wait_claimed};
use crate::clock::{Clock, Deadline};
use crate::config::Backend;
use crate::errors::ProviderError;
use crate::kube_api::Kube;
use crate::lease::Lease;
use crate::log::Log;
use crate::naming::ANNOTATION_SPEC_HASH;
use crate::readiness::WaitError;
use crate::rfc3339;
use crate::secret::{self, CLAIM_SECRET_PREFIX};

/// The fingerprint of the lease's env in the claim's spec hash: names, and plain values (a
/// retried acquire with other env is another spec); never a secret value.
fn env_material(data: &std::collections::BTreeMap<String, String>) -> Value {
    let entries: Vec<Value> = data
        .iter()
        .map(|(key, value)| if key.starts_with(CLAIM_SECRET_PREFIX) { json!([key]) } else { json!([key, value]) })
        .collect();
    Value::Array(entries)
}

/// Decides the claim and its Secret (see the module docs).
pub(crate) fn plan<K: Kube>(
    kube: &K,
    log: &dyn Log,
    request: &AcquireRequest,
    basics: Basics,
) -> Result<Plan, ProviderError> {
    let version = api_versions::resolve_claim(kube)?;
    let config = &basics.config;
    let name = &basics.name;
    let source = manifest::source(version, &config.claim)?;
    if version == ClaimVersion::V1beta1 && config.claim.template.is_some() {
        log.warn(
            "claim.template is not used: a SandboxClaim v1beta1 takes the template of its warm pool",
            &[("name", name)],
        );
    }
    if request.reusable {
        log.warn(
            "reusable lease not possible: a claimed Sandbox is not kept after release; the lease is ephemeral",
            &[("name", name)],
        );
    }
    let env = secret::plan_claim_env(&config.env, &request.env)?;
    let spec_hash = acquire::fingerprint(&json!({
        "backend": Backend::Claim.as_str(),
        "claim": manifest::spec_material(source),
        "env": env_material(&env),
    }));
    let mut claim_annotations = basics.annotations();
    claim_annotations.insert(ANNOTATION_SPEC_HASH.to_string(), spec_hash.clone());
    let workload = manifest::claim(&ClaimParams {
        name,
        namespace: &config.namespace,
        source,
        labels: &basics.labels(),
        annotations: &claim_annotations,
        shutdown_time: &rfc3339::format_seconds(basics.expiry_ms),
    })?;
    let planned = Planned {
        resource: version.resource(),
        version: None,
        kind: CLAIM_KIND,
        workload,
        spec_hash,
        secret_data: env,
        workspace_pvc: false,
        reusable: false,
    };
    acquire::assemble(basics, planned)
}

/// Waits for the claim's Sandbox and returns the lease: the claim's uid and version, the pod,
/// and the Sandbox (name, uid, version, warm or cold) in the metadata.
pub(crate) fn finish<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    plan: &Plan,
    workload: &Workload,
    started: Duration,
    deadline: Deadline,
) -> Result<Lease, ProviderError> {
    let target = ClaimTarget {
        namespace: &plan.config.namespace,
        name: &plan.name,
        resource: &plan.resource,
        uid: &workload.uid,
        sandbox_uid: None,
    };
    let expires_at = acquire::lease_expiry(plan, workload);
    let claimed = wait_claimed(kube, clock, log, &target, workload.object.clone(), deadline).map_err(|e| match e {
        WaitError::Failed(f) => acquire::wait_failure(clock, &target.describe(), expires_at, f),
        WaitError::Api(e) => e,
        WaitError::Timeout(why) => ProviderError::timeout(format!(
            "{} was not ready within {} s: {why}. The warm pool had no ready Sandbox and the one made from its \
             template is still starting (its image may be pulling), or the claim controller is slow; retry, grow \
             the pool, or raise readinessTimeoutSeconds (keeping it inside the host's call deadline).",
            target.describe(),
            acquire::elapsed_seconds(clock, started)
        )),
    })?;
    let launch = if claimed.sandbox.warm { "warm (adopted from the pool)" } else { "cold (made from the template)" };
    log.info(
        "claimed a sandbox",
        &[("claim", &target.describe()), ("sandbox", &claimed.sandbox.name), ("launch", launch)],
    );
    let mut metadata = acquire::metadata(clock, plan, workload);
    metadata.sandbox = Some(claimed.sandbox);
    metadata.container = container::record(&claimed.pod);
    Ok(acquire::lease(plan, workload, claimed.pod, expires_at, metadata))
}

#[cfg(test)]
mod tests;
