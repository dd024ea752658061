//! The `sandbox` backend: a lease is one agent-sandbox `Sandbox` running the pod this provider
//! specifies, in the served version the config asks for (or the preferred one).
//!
//! What is its own: the Sandbox's manifest and its leak guard (`spec.shutdownTime`), the
//! persistent workspace (a volume claim template, so a lease with one can be reusable), and the
//! suspend and resume of a reusable lease: release suspends it (its pod goes, its workspace
//! claim stays) and a later resume-check, or an acquire that adopts it, resumes it once the old
//! pod is gone (`old_pod`). A Sandbox is deleted through each served version until one answers,
//! so a lease recorded in a version the cluster no longer serves is still destroyed.

use std::time::Duration;

use serde_json::Value;

use crate::acquire::{self, AcquireRequest, Basics, Plan, Planned};
use crate::adoption::{Origin, Workload};
use crate::api_versions::{self, SandboxVersion};
use crate::backend::{Ended, Existing, Needs, Steps};
use crate::clock::{Clock, Deadline};
use crate::config::{Config, SandboxApiVersion};
use crate::destroy::{self, DestroyReport};
use crate::errors::{FromKube, ProviderError};
use crate::execute;
use crate::kube_api::{Kube, KubeError, PatchType};
use crate::lease::{Lease, LeaseRef};
use crate::log::Log;
use crate::naming::LeaseId;
use crate::object;
use crate::old_pod;
use crate::probe::{Findings, Severity};
use crate::readiness::{Start, Target};
use crate::resume::{self, Found, ResumeOutcome, ResumeWait};
use crate::rfc3339;
use crate::sandbox_manifest::{self, SandboxParams};
use crate::secret::LeaseEnv;
use crate::workload_state::{SandboxState, WorkloadKind, sandbox_state};

/// The agent-sandbox API, for messages about a cluster that no longer serves it.
const API: &str = "agent-sandbox";

/// The steps of backend `sandbox`.
pub(crate) struct SandboxSteps;

impl<K: Kube> Steps<K> for SandboxSteps {
    fn kind(&self) -> &'static str {
        WorkloadKind::Sandbox.as_str()
    }

    fn probe(&self, _kube: &K, config: &Config, sandboxes: &[SandboxVersion], found: &mut Findings) -> Needs {
        let mut needs = Needs { resources: Vec::new(), watched: Vec::new(), deleted: Vec::new(), uses: String::new() };
        if config.sandbox.workspace_volume.is_some() {
            needs.deleted.push(api_versions::pvcs());
        }
        let names = sandboxes.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ");
        let pinned = match config.sandbox_api_version {
            SandboxApiVersion::Auto => None,
            SandboxApiVersion::V1beta1 => Some(SandboxVersion::V1beta1),
            SandboxApiVersion::V1alpha1 => Some(SandboxVersion::V1alpha1),
        };
        let Some(&preferred) = sandboxes.first() else {
            found.add(
                Severity::Error,
                "sandbox-crd-absent",
                "the cluster serves no agents.x-k8s.io Sandbox version: install agent-sandbox (v0.5 or later), or set \
                 backend to \"job\"",
            );
            return needs;
        };
        if let Some(p) = pinned.filter(|p| !sandboxes.contains(p)) {
            found.add(
                Severity::Error,
                "sandbox-version-not-served",
                format!("sandboxApiVersion is pinned to {} but the cluster serves {names}", p.as_str()),
            );
            return needs;
        }
        let version = pinned.unwrap_or(preferred);
        found.add(
            Severity::Info,
            "sandbox-versions",
            format!("Sandbox versions served: {names}; acquire uses {}", version.as_str()),
        );
        if version == SandboxVersion::V1alpha1 {
            found.add(
                Severity::Warning,
                "sandbox-v1alpha1-only",
                "Sandbox v1alpha1 is deprecated and removed in agent-sandbox v1.0; upgrade agent-sandbox",
            );
        }
        needs.resources.push((version.resource(), "get, list, watch, create, patch, delete"));
        needs.uses = format!(", Sandbox {}", version.as_str());
        needs
    }

    fn plan(&self, kube: &K, log: &dyn Log, request: &AcquireRequest, basics: Basics) -> Result<Plan, ProviderError> {
        let env = acquire::pod_env(&basics, request)?;
        let version = api_versions::resolve(kube, basics.config.sandbox_api_version)?;
        let workspace = basics.config.sandbox.workspace_volume.as_ref();
        let reusable = acquire::reusable(log, request, &basics.name, workspace.is_some());
        let pod = acquire::plan_pod(&basics, env, WorkloadKind::Sandbox, workspace.is_some())?;
        let workload = sandbox_manifest::sandbox(&SandboxParams {
            name: &basics.name,
            namespace: &basics.config.namespace,
            version,
            labels: &pod.labels,
            annotations: &pod.annotations,
            template: &pod.template,
            shutdown_time: &rfc3339::format_seconds(basics.expiry_ms),
            workspace,
        })?;
        let workspace_pvc = workspace.is_some();
        let planned = Planned {
            resource: version.resource(),
            version: Some(version),
            kind: WorkloadKind::Sandbox.as_str(),
            workload,
            spec_hash: pod.spec_hash,
            secret_data: pod.secret_data,
            workspace_pvc,
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
        let target = acquire::pod_target(plan, workload, WorkloadKind::Sandbox);
        let start = match workload.origin {
            Origin::AdoptedSuspended => resume_adopted(kube, clock, log, plan, &target, deadline)?,
            Origin::Created | Origin::Adopted => acquire::wait_start(workload),
        };
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
        let Some(version) = api_versions::for_existing(kube, &lease_ref.lease.api_version)? else {
            return Ok(ResumeOutcome::Expired(format!(
                "the cluster no longer serves agent-sandbox (agents.x-k8s.io), so Sandbox {} cannot exist; acquire a \
                 new sandbox.",
                id.qualified()
            )));
        };
        let resource = version.resource();
        let found =
            match resume::read_pod_workload(kube, clock, lease_ref, id, WorkloadKind::Sandbox, &resource, &wait)? {
                Ok(found) => found,
                Err(outcome) => return Ok(outcome),
            };
        let (what, workload) = (&found.what, &found.workload);
        let start = |target: &Target<'_>| -> Result<Result<Start, ResumeOutcome>, ProviderError> {
            match sandbox_state(workload) {
                SandboxState::Deleting => {
                    Ok(Err(ResumeOutcome::Expired(format!("{what} is being deleted; acquire a new sandbox."))))
                }
                SandboxState::Failed(f) if f.ends_sandbox() => Ok(Err(ResumeOutcome::Expired(f.message))),
                SandboxState::Failed(f) => Err(f.into_error()),
                SandboxState::Suspended if !lease_ref.lease.reusable => Ok(Err(ResumeOutcome::Expired(format!(
                    "{what} is suspended and the lease is not reusable: its processes and scratch files are gone. \
                     Acquire a new sandbox."
                )))),
                SandboxState::Suspended => resume_suspended(kube, clock, log, target, version, &found, wait.deadline),
                SandboxState::Ready | SandboxState::Starting(_) => Ok(Ok(Start::List(Some(workload.clone())))),
            }
        };
        resume::wait_pod_workload(kube, clock, log, lease_ref, id, &resource, &found, &wait, start)
    }

    fn existing(&self, kube: &K, lease: &Lease) -> Result<Existing, ProviderError> {
        Ok(match api_versions::for_existing(kube, &lease.api_version)? {
            Some(version) => Existing::Served(version.resource()),
            None => Existing::NotServed(API),
        })
    }

    fn ended(&self, workload: &Value, _lease: &Lease, _what: &str) -> Option<Ended> {
        match sandbox_state(workload) {
            SandboxState::Deleting => Some(Ended::Because("is being deleted".to_string())),
            SandboxState::Failed(f) if f.ends_sandbox() => Some(Ended::Because(format!("has ended ({})", f.message))),
            _ => None,
        }
    }

    fn renew_patch(&self, _workload: &Value, expiry: i64, _now: i64) -> (Value, i64) {
        (sandbox_manifest::shutdown_patch(&rfc3339::format_seconds(expiry)), expiry)
    }

    fn leak_guard(&self, what: &str, expires_at: i64, _config: &Config) -> String {
        format!(
            "the cluster deletes {what} at its shutdownTime {} (shutdownPolicy Delete), with its pod",
            rfc3339::format_seconds(expires_at)
        )
    }

    fn release(&self, kube: &K, log: &dyn Log, lease_ref: &LeaseRef, id: &LeaseId) -> Result<(), ProviderError> {
        if lease_ref.lease.reusable {
            suspend(kube, log, &lease_ref.lease, id)
        } else {
            Steps::<K>::destroy(self, kube, log, id, &lease_ref.lease).map(|_| ())
        }
    }

    fn destroy(&self, kube: &K, log: &dyn Log, id: &LeaseId, lease: &Lease) -> Result<DestroyReport, ProviderError> {
        destroy::pod_workload(kube, log, self, id, lease, |uid| delete(kube, id, &lease.api_version, uid))
    }

    fn exec_container(&self, _kube: &K, _namespace: &str, _pod: &str) -> Result<String, ProviderError> {
        Ok(execute::own_container())
    }

    fn exec_env(&self, _what: &str, secret: &Value) -> Result<LeaseEnv, ProviderError> {
        Ok(execute::redact_only(secret))
    }
}

/// Resumes the suspended Sandbox of a reusable lease (resume-check) once its old pod is gone
/// (`old_pod`): where the wait for its new pod starts, or `expired` when it was deleted meanwhile.
fn resume_suspended<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &Target<'_>,
    version: SandboxVersion,
    found: &Found,
    deadline: Deadline,
) -> Result<Result<Start, ResumeOutcome>, ProviderError> {
    let what = &found.what;
    old_pod::wait_until_gone(kube, clock, log, target, deadline, "retry resume-check")?;
    let patch = sandbox_manifest::resume_patch(version);
    let patched = match kube.patch(target.resource, Some(target.namespace), target.name, PatchType::Merge, &patch, None)
    {
        Ok(p) => p,
        Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => {
            return Ok(Err(ResumeOutcome::Expired(format!("{what} was deleted while resuming it."))));
        }
        Err(e) => return Err(ProviderError::from_kube(&e, &format!("resume {what}"))),
    };
    log.info("resuming a suspended Sandbox", &[("sandbox", what)]);
    Ok(Ok(match object::resource_version(&patched) {
        Some(rv) => Start::After(rv.to_string()),
        None => Start::List(Some(found.workload.clone())),
    }))
}

/// Resumes the adopted suspended Sandbox once its old pod is gone (`old_pod`; its Secret is
/// already up to date, so the new pod reads the current values); the wait starts after the patch.
fn resume_adopted<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    plan: &Plan,
    target: &Target<'_>,
    deadline: Deadline,
) -> Result<Option<Start>, ProviderError> {
    let Some(version) = plan.version else {
        return Err(ProviderError::internal("a suspended Sandbox adopted without a Sandbox version"));
    };
    old_pod::wait_until_gone(kube, clock, log, target, deadline, "retry acquire, which resumes it")?;
    let ns = Some(plan.config.namespace.as_str());
    let patch = sandbox_manifest::resume_patch(version);
    match kube.patch(&plan.resource, ns, &plan.name, PatchType::Merge, &patch, None) {
        Ok(patched) => Ok(object::resource_version(&patched).map(|rv| Start::After(rv.to_string()))),
        Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => Err(ProviderError::conflict(
            format!(
                "{} was deleted while this acquire resumed it (someone deleted it, or its expiry passed). Retry \
                 acquire: it creates a new one, with an empty workspace.",
                plan.describe()
            ),
            true,
        )),
        Err(e) => Err(ProviderError::from_kube(&e, &format!("resume {}", plan.describe()))),
    }
}

/// Suspends a reusable lease's Sandbox (release): its pod goes, its workspace claim stays. A
/// Sandbox that is gone, or not the lease's, has nothing to suspend.
fn suspend<K: Kube>(kube: &K, log: &dyn Log, lease: &Lease, id: &LeaseId) -> Result<(), ProviderError> {
    let what = format!("Sandbox {}", id.qualified());
    let Some(version) = api_versions::for_existing(kube, &lease.api_version)? else {
        log.info("nothing to suspend: the cluster serves no Sandbox version", &[("sandbox", &what)]);
        return Ok(());
    };
    let resource = version.resource();
    let current = match kube.get(&resource, Some(&id.namespace), &id.name) {
        Ok(s) => s,
        Err(KubeError::NotFound(_)) => {
            log.info("nothing to suspend: the Sandbox is already gone", &[("sandbox", &what)]);
            return Ok(());
        }
        Err(KubeError::NotOwned(_)) => {
            log.warn(
                "nothing to suspend: the object under the lease's name is not this installation's",
                &[("sandbox", &what)],
            );
            return Ok(());
        }
        Err(e) => return Err(ProviderError::from_kube(&e, &format!("get {what}"))),
    };
    if !lease.workload_uid.is_empty() && object::uid(&current) != Some(lease.workload_uid.as_str()) {
        log.warn("not suspending: a different Sandbox now has the lease's name", &[("sandbox", &what)]);
        return Ok(());
    }
    let patch = sandbox_manifest::suspend_patch(version);
    match kube.patch(&resource, Some(&id.namespace), &id.name, PatchType::Merge, &patch, None) {
        Ok(_) => {
            log.info("suspended a reusable Sandbox; its workspace claim is kept", &[("sandbox", &what)]);
            Ok(())
        }
        Err(KubeError::NotFound(_) | KubeError::NotOwned(_)) => Ok(()),
        Err(e) => Err(ProviderError::from_kube(&e, &format!("suspend {what}"))),
    }
}

/// Deletes the Sandbox through the versions the cluster serves (the recorded one first when
/// discovery fails), until one delete succeeds.
fn delete<K: Kube>(kube: &K, id: &LeaseId, recorded_api_version: &str, uid: Option<&str>) -> Result<bool, KubeError> {
    let versions = match api_versions::served_sandbox_versions(kube) {
        Ok(served) => served,
        Err(_) => {
            let recorded = SandboxVersion::from_api_version(recorded_api_version);
            let others = SandboxVersion::PREFERENCE.into_iter().filter(|v| Some(*v) != recorded);
            recorded.into_iter().chain(others).collect()
        }
    };
    let mut first_error = None;
    for version in versions {
        match destroy::delete(kube, &version.resource(), &id.namespace, &id.name, uid) {
            Ok(true) => return Ok(true),
            Ok(false) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(false),
    }
}
