//! The three backends behind one trait: what each lifecycle step does for a lease whose
//! workload is an agent-sandbox `Sandbox` ([`sandbox`]), a `batch/v1` Job ([`job`]), or a
//! `SandboxClaim` on a warm pool ([`claim`]).
//!
//! The lifecycle modules (`probe`, `acquire` with `adoption` and `compensation`, `resume`,
//! `renew`, `release`, `destroy`, `execute`) hold what every backend does the same way (checks,
//! writes, clean-up, the report) and ask [`steps`] for the rest. Calls go one way: a backend
//! module calls the shared steps, the shared modules call a backend only through [`Steps`], and
//! no backend calls another. The Sandbox and the Job run a pod this provider specifies, so they
//! share the pod steps (`readiness`, `acquire::plan_pod` and `wait_pod`,
//! `resume::read_pod_workload` and `wait_pod_workload`, `destroy::pod_workload`); a claim's pod
//! comes from its warm pool's template and has steps of its own.

pub(crate) mod claim;
pub(crate) mod job;
pub(crate) mod sandbox;

use std::time::Duration;

use serde_json::Value;

use crate::acquire::{AcquireRequest, Basics, Plan};
use crate::adoption::Workload;
use crate::api_versions::SandboxVersion;
use crate::clock::{Clock, Deadline};
use crate::config::{Backend, Config};
use crate::destroy::DestroyReport;
use crate::errors::ProviderError;
use crate::kube_api::{Kube, ResourceType};
use crate::lease::{Lease, LeaseMetadata, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::probe::Findings;
use crate::resume::{ResumeOutcome, ResumeWait};
use crate::secret::LeaseEnv;

/// Where a lease's workload is, for the calls after acquire.
pub(crate) enum Existing {
    /// The resource to read and patch it through.
    Served(ResourceType),
    /// The cluster no longer serves the kind: the workload cannot exist. The API's name, for
    /// messages ("agent-sandbox").
    NotServed(&'static str),
}

/// Why renew finds a workload over although it is still there.
pub(crate) enum Ended {
    /// What completes "`<kind> <ns/name>` …", e.g. "is being deleted".
    Because(String),
    /// A whole reason of its own.
    Reason(String),
}

/// What a backend needs of the cluster, as its probe found it: the resources whose access probe
/// checks besides pods (every backend reads and watches those) and the lease's Secret.
pub(crate) struct Needs {
    /// Resources its calls read or write, with the verbs, checked after pods.
    pub(crate) resources: Vec<(ResourceType, &'static str)>,
    /// Resources it also watches.
    pub(crate) watched: Vec<ResourceType>,
    /// Resources it only deletes (a Sandbox's workspace claim), checked after the Secret.
    pub(crate) deleted: Vec<ResourceType>,
    /// The API version acquire would use, for the summary (", Sandbox v1beta1"); may be empty.
    pub(crate) uses: String,
}

/// Each lifecycle step where the backends differ. `K` is the cluster access of the call.
pub(crate) trait Steps<K: Kube> {
    /// The workload's kind, for messages and reports ("Sandbox", "Job", "SandboxClaim").
    fn kind(&self) -> &'static str;

    /// Probe: whether the cluster serves what the backend needs, as diagnostics in `found`;
    /// `sandboxes` are the Sandbox versions the cluster serves.
    fn probe(&self, kube: &K, config: &Config, sandboxes: &[SandboxVersion], found: &mut Findings) -> Needs;

    /// Acquire: decides the workload, its Secret and the lease id, before anything is written.
    fn plan(&self, kube: &K, log: &dyn Log, request: &AcquireRequest, basics: Basics) -> Result<Plan, ProviderError>;

    /// Acquire: waits until the workload just created or adopted has a ready sandbox, and
    /// returns its lease. `started` is the call's start, for messages.
    #[allow(clippy::too_many_arguments)]
    fn wait(
        &self,
        kube: &K,
        clock: &dyn Clock,
        log: &dyn Log,
        plan: &Plan,
        workload: &Workload,
        started: Duration,
        deadline: Deadline,
    ) -> Result<Lease, ProviderError>;

    /// Resume-check of a stored lease.
    fn resume_check(
        &self,
        kube: &K,
        clock: &dyn Clock,
        log: &dyn Log,
        lease_ref: &LeaseRef,
        id: &LeaseId,
        wait: ResumeWait,
    ) -> Result<ResumeOutcome, ProviderError>;

    /// The resource an existing lease's workload is read through (its recorded version while
    /// the cluster serves it).
    fn existing(&self, kube: &K, lease: &Lease) -> Result<Existing, ProviderError>;

    /// Renew: why the lease's live workload is over all the same, if it is.
    fn ended(&self, workload: &Value, lease: &Lease, what: &str) -> Option<Ended>;

    /// Renew: the merge patch that moves the workload's leak guard to `expiry`, and the expiry
    /// it really gives (epoch millis; `now` for a guard counted from the workload's start).
    fn renew_patch(&self, workload: &Value, expiry: i64, now: i64) -> (Value, i64);

    /// Clean-up after a failed acquire: what the cluster does by itself with the workload `what`
    /// that clean-up could not delete (its leak guard fires at `expires_at`, epoch millis).
    fn leak_guard(&self, what: &str, expires_at: i64, config: &Config) -> String;

    /// Release: ends the run. Destroys the lease unless the backend keeps something for later.
    fn release(&self, kube: &K, log: &dyn Log, lease_ref: &LeaseRef, id: &LeaseId) -> Result<(), ProviderError> {
        self.destroy(kube, log, id, &lease_ref.lease).map(|_| ())
    }

    /// Destroy: deletes everything the lease can own, from its id (see `destroy`).
    fn destroy(&self, kube: &K, log: &dyn Log, id: &LeaseId, lease: &Lease) -> Result<DestroyReport, ProviderError>;

    /// Execute: the container of the lease's pod `namespace/pod` that commands run in.
    fn exec_container(&self, kube: &K, namespace: &str, pod: &str) -> Result<String, ProviderError>;

    /// Execute: the container that the lease's `metadata` records for `pod`, for a backend that
    /// records one (so that [`Steps::exec_container`] need not read the pod); none by default.
    fn recorded_container(&self, _metadata: &LeaseMetadata, _pod: &str) -> Option<String> {
        None
    }

    /// Execute: what the lease's Secret `secret` (named by `what`) gives a command: variables to
    /// export and values to redact.
    fn exec_env(&self, what: &str, secret: &Value) -> Result<LeaseEnv, ProviderError>;
}

/// The steps of `backend`, for the cluster access of a call that lives for `'k`.
pub(crate) fn steps<'k, K: Kube + 'k>(backend: Backend) -> &'k (dyn Steps<K> + 'k) {
    match backend {
        Backend::Sandbox => &sandbox::SandboxSteps,
        Backend::Job => &job::JobSteps,
        Backend::Claim => &claim::ClaimSteps,
    }
}

#[cfg(test)]
mod tests {
    /// The lifecycle modules, which hold what every backend shares.
    const SHARED: [(&str, &str); 9] = [
        ("acquire.rs", include_str!("../acquire.rs")),
        ("resume.rs", include_str!("../resume.rs")),
        ("renew.rs", include_str!("../renew.rs")),
        ("release.rs", include_str!("../release.rs")),
        ("destroy.rs", include_str!("../destroy.rs")),
        ("execute.rs", include_str!("../execute.rs")),
        ("probe.rs", include_str!("../probe.rs")),
        ("adoption.rs", include_str!("../adoption.rs")),
        ("compensation.rs", include_str!("../compensation.rs")),
    ];

    /// Calls go one way: a lifecycle module branches on no backend and calls none by name,
    /// only through `Steps` (its docs and tests may name backends).
    #[test]
    fn the_lifecycle_modules_reach_a_backend_only_through_its_steps() {
        for (file, source) in SHARED {
            let before_tests = source.split("#[cfg(test)]").next().unwrap_or(source);
            let code: String =
                before_tests.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
            for named in [
                "Backend::",
                "backend::claim",
                "backend::sandbox",
                "backend::job",
                "ClaimSteps",
                "SandboxSteps",
                "JobSteps",
            ] {
                assert!(!code.contains(named), "{file} names `{named}`: what differs by backend belongs to its module");
            }
        }
    }
}
