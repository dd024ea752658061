//! The `job` backend: a lease is one `batch/v1` Job running the pod this provider specifies, for
//! clusters without agent-sandbox.
//!
//! What is its own: the Job's manifest (one pod, `restartPolicy: Never`, the config's retries
//! and TTL after it finishes) and its leak guard, `activeDeadlineSeconds`, which counts from the
//! Job's `status.startTime`, so renew computes it from there. A finished Job is over: a Job
//! lease has no workspace to keep, so it is never reusable and release destroys it.

use std::time::Duration;

use serde_json::Value;

use crate::acquire::{self, AcquireRequest, Basics, Plan, Planned};
use crate::adoption::Workload;
use crate::api_versions::{self, SandboxVersion};
use crate::backend::{Ended, Existing, Needs, Steps};
use crate::clock::{Clock, Deadline};
use crate::config::Config;
use crate::destroy::{self, DestroyReport};
use crate::errors::ProviderError;
use crate::execute;
use crate::job_manifest::{self, JobParams};
use crate::kube_api::Kube;
use crate::lease::{Lease, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::object;
use crate::probe::{Findings, Severity};
use crate::readiness::{Start, Target};
use crate::resume::{self, ResumeOutcome, ResumeWait};
use crate::rfc3339;
use crate::secret::LeaseEnv;
use crate::workload_state::{JobState, WorkloadKind, job_state};

/// The steps of backend `job`.
pub(crate) struct JobSteps;

impl<K: Kube> Steps<K> for JobSteps {
    fn kind(&self) -> &'static str {
        WorkloadKind::Job.as_str()
    }

    fn probe(&self, _kube: &K, _config: &Config, sandboxes: &[SandboxVersion], found: &mut Findings) -> Needs {
        let names = sandboxes.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
        let shown = if names.is_empty() { "none" } else { names.as_str() };
        found.add(
            Severity::Info,
            "sandbox-versions",
            format!("Sandbox versions served: {shown} (backend job does not need them)"),
        );
        Needs {
            resources: vec![(api_versions::jobs(), "get, list, watch, create, patch, delete")],
            watched: Vec::new(),
            deleted: Vec::new(),
            uses: String::new(),
        }
    }

    fn plan(&self, _kube: &K, log: &dyn Log, request: &AcquireRequest, basics: Basics) -> Result<Plan, ProviderError> {
        let env = acquire::pod_env(&basics, request)?;
        let reusable = acquire::reusable(log, request, &basics.name, false);
        let pod = acquire::plan_pod(&basics, env, WorkloadKind::Job, false)?;
        let workload = job_manifest::job(JobParams {
            name: &basics.name,
            namespace: &basics.config.namespace,
            labels: &pod.labels,
            annotations: &pod.annotations,
            template: pod.template,
            settings: &basics.config.job,
            active_deadline_seconds: job_manifest::active_deadline_seconds(basics.expiry_ms, basics.now),
        })?;
        let planned = Planned {
            resource: api_versions::jobs(),
            version: None,
            kind: WorkloadKind::Job.as_str(),
            workload,
            spec_hash: pod.spec_hash,
            secret_data: pod.secret_data,
            workspace_pvc: false,
            reusable,
        };
        acquire::assemble(basics, planned)
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
        let target = acquire::pod_target(plan, workload, WorkloadKind::Job);
        let start = acquire::wait_start(workload);
        acquire::wait_pod(kube, clock, log, plan, workload, &target, start, started, deadline)
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
        let resource = api_versions::jobs();
        let found = match resume::read_pod_workload(kube, clock, lease_ref, id, WorkloadKind::Job, &resource, &wait)? {
            Ok(found) => found,
            Err(outcome) => return Ok(outcome),
        };
        let start = |_: &Target<'_>| -> Result<Result<Start, ResumeOutcome>, ProviderError> {
            Ok(match job_state(&found.workload) {
                JobState::Deleting => {
                    Err(ResumeOutcome::Expired(format!("{} is being deleted; acquire a new sandbox.", found.what)))
                }
                JobState::Failed(f) => Err(ResumeOutcome::Expired(f.message)),
                JobState::Active => Ok(Start::List(Some(found.workload.clone()))),
            })
        };
        resume::wait_pod_workload(kube, clock, log, lease_ref, id, &resource, &found, &wait, start)
    }

    fn existing(&self, _kube: &K, _lease: &Lease) -> Result<Existing, ProviderError> {
        Ok(Existing::Served(api_versions::jobs()))
    }

    fn ended(&self, workload: &Value, _lease: &Lease, _what: &str) -> Option<Ended> {
        match job_state(workload) {
            JobState::Deleting => Some(Ended::Because("is being deleted".to_string())),
            JobState::Failed(f) => Some(Ended::Because(format!("has ended ({})", f.message))),
            JobState::Active => None,
        }
    }

    /// `activeDeadlineSeconds` counts from `status.startTime`: whole seconds, rounded down so
    /// the Job never outlives the requested expiry.
    fn renew_patch(&self, workload: &Value, expiry: i64, now: i64) -> (Value, i64) {
        let start = object::str_at(workload, "/status/startTime").and_then(rfc3339::parse).unwrap_or(now);
        let seconds = (expiry.saturating_sub(start) / 1000).max(1);
        (job_manifest::deadline_patch(seconds), start.saturating_add(seconds * 1000))
    }

    fn leak_guard(&self, what: &str, expires_at: i64, config: &Config) -> String {
        format!(
            "the cluster terminates {what} at its activeDeadlineSeconds ({}) and deletes it ttlSecondsAfterFinished \
             ({} s) later, with its pod",
            rfc3339::format_seconds(expires_at),
            config.job.ttl_seconds_after_finished
        )
    }

    fn destroy(&self, kube: &K, log: &dyn Log, id: &LeaseId, lease: &Lease) -> Result<DestroyReport, ProviderError> {
        destroy::pod_workload(kube, log, self, id, lease, |uid| {
            destroy::delete(kube, &api_versions::jobs(), &id.namespace, &id.name, uid)
        })
    }

    fn exec_container(&self, _kube: &K, _namespace: &str, _pod: &str) -> Result<String, ProviderError> {
        Ok(execute::own_container())
    }

    fn exec_env(&self, _what: &str, secret: &Value) -> Result<LeaseEnv, ProviderError> {
        Ok(execute::redact_only(secret))
    }
}
