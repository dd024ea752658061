//! The leases of this installation, read from the cluster: every Sandbox, Job and SandboxClaim
//! the installation made (its managed-by label and, with an ownership key, its signature: the
//! same proof as every other read, [`crate::ownership`]) in the namespaces asked for, with the
//! lease id that `destroy` takes, its age, when the cluster removes it by itself, and its state.
//! `sandbox-host leases list` prints it; `leases gc` destroys the leases that ended.
//!
//! A lease's objects are found by listing the workload types with the managed-by label as a
//! selector: the host's own read, as its ownership proofs are, so the provider's policy need not
//! grant `list` on them (the Role `rbac` prints does: [`crate::rbac`]). Only the operator's
//! namespaces are read. The state is read from the workload alone and changes nothing: unlike
//! `resume-check`, listing never resumes a suspended Sandbox.

use contract::k8s::agent_sandbox::{CLAIMS, EXTENSIONS_GROUP, EXTENSIONS_VERSIONS, GROUP, SANDBOX_VERSIONS, SANDBOXES};
use contract::k8s::object::{self, expiry_of};
use contract::labels::{LABEL_ACQUISITION_ID, LABEL_MANAGED_BY, LABEL_RUN_ID};
use contract::lease_id::{LeaseId, WORKSPACE_VOLUME};
use contract::{Backend, Lease};
use serde::Serialize;
use serde_json::Value;

use crate::bindings::kube::{KubeError, ListOptions, ResourceType};
use crate::error::HostError;
use crate::kube_host::KubeHost;
use crate::policy::{AccessRule, AccessVerb, Policy};
use crate::runner::ProviderHost;

/// A lease as the cluster shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub struct LeaseRecord {
    /// What `destroy --lease-id` takes.
    pub provider_lease_id: String,
    /// Where the sandbox runs.
    pub backend: Backend,
    /// The namespace of everything the lease owns.
    pub namespace: String,
    /// The workload's name.
    pub name: String,
    /// The workload's uid: a destroy from this record spares a newer object under the name.
    pub workload_uid: String,
    /// The workload's `apiVersion`.
    pub api_version: String,
    /// The acquisition id (its label).
    pub acquisition_id: Option<String>,
    /// The run id (its label; hashed when the id is not a valid label value).
    pub run_id: Option<String>,
    /// When the workload was created (epoch millis).
    pub created_at: Option<i64>,
    /// When the cluster removes it by itself (epoch millis): its leak guard.
    pub expires_at: Option<i64>,
    /// What the workload is doing.
    pub state: LeaseState,
}

/// What a lease's workload is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeaseState {
    /// Its pod is ready (a Sandbox's or claim's `Ready` condition, a Job's ready pod).
    Ready,
    /// Not ready yet (or not any more).
    Starting,
    /// A reusable lease's Sandbox, released: no pod, its workspace kept.
    Suspended,
    /// The Job's pod finished: the sandbox cannot be used again.
    Ended,
    /// Past its expiry; the cluster is removing it.
    Expired,
    /// Being deleted.
    Terminating,
}

impl LeaseState {
    /// Whether nothing can use the lease any more, so `gc` may destroy it.
    pub fn is_over(self) -> bool {
        matches!(self, Self::Ended | Self::Expired | Self::Terminating)
    }
}

impl LeaseRecord {
    /// The lease to destroy this one with: its id, its workload's uid (the delete's
    /// precondition) and API version.
    pub fn lease(&self) -> Lease {
        let id = LeaseId {
            backend: self.backend,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            workspace_pvc: self.provider_lease_id.ends_with(":pvc"),
        };
        Lease { workload_uid: self.workload_uid.clone(), api_version: self.api_version.clone(), ..id.bare_lease() }
    }
}

/// One workload type: its backend, group, the versions it may be served in, and plural.
struct WorkloadType {
    backend: Backend,
    group: &'static str,
    versions: &'static [&'static str],
    plural: &'static str,
}

const WORKLOAD_TYPES: [WorkloadType; 3] = [
    WorkloadType { backend: Backend::Sandbox, group: GROUP, versions: &SANDBOX_VERSIONS, plural: SANDBOXES },
    WorkloadType { backend: Backend::Job, group: "batch", versions: &["v1"], plural: "jobs" },
    WorkloadType { backend: Backend::Claim, group: EXTENSIONS_GROUP, versions: &EXTENSIONS_VERSIONS, plural: CLAIMS },
];

/// The operator's policy narrowed to finding and listing the workload types, in the same
/// namespaces.
fn listing_policy(policy: &Policy) -> Policy {
    let resources = WORKLOAD_TYPES
        .iter()
        .map(|t| AccessRule {
            group: t.group.to_string(),
            versions: t.versions.iter().map(|v| v.to_string()).collect(),
            plural: t.plural.to_string(),
            verbs: vec![AccessVerb::Discovery, AccessVerb::List],
            subresources: Vec::new(),
            namespaced: true,
        })
        .collect();
    Policy { resources, ..policy.clone() }
}

impl ProviderHost {
    /// This installation's leases in `namespaces` (each one the operator's policy allows), the
    /// oldest first.
    pub async fn leases(&self, namespaces: &[String]) -> Result<Vec<LeaseRecord>, HostError> {
        let kube = self.kube().with_policy(listing_policy(self.kube().policy()));
        let now = now_millis();
        let mut records = Vec::new();
        for workload in &WORKLOAD_TYPES {
            let Some(version) = served(&kube, workload).await? else { continue };
            let rt = ResourceType {
                group: workload.group.to_string(),
                version: version.clone(),
                plural: workload.plural.to_string(),
            };
            let selector = format!("{LABEL_MANAGED_BY}={}", kube.policy().owner_id);
            for namespace in namespaces {
                let options = ListOptions { label_selector: Some(selector.clone()), ..empty_list_options() };
                let text = kube.list(&rt, Some(namespace), &options).await.map_err(|e| listing_failed(&rt, e))?;
                let list: Value = serde_json::from_str(&text)
                    .map_err(|e| HostError::Cluster(format!("the list of {} is not JSON: {e}", rt.plural)))?;
                for item in list["items"].as_array().map(Vec::as_slice).unwrap_or_default() {
                    if let Some(record) = record(workload.backend, item, now) {
                        records.push(record);
                    }
                }
            }
        }
        records.sort_by_key(|r| (r.created_at, r.provider_lease_id.clone()));
        Ok(records)
    }
}

fn empty_list_options() -> ListOptions {
    ListOptions {
        label_selector: None,
        field_selector: None,
        limit: None,
        continue_token: None,
        resource_version: None,
    }
}

/// The version a workload type is served in, preferring the newest; `None` when the cluster
/// serves none of them (agent-sandbox not installed).
async fn served(kube: &KubeHost, workload: &WorkloadType) -> Result<Option<String>, HostError> {
    let versions = kube
        .served_versions(workload.group)
        .await
        .map_err(|e| HostError::Cluster(format!("discovery of {} failed: {}", workload.group, error_text(&e))))?;
    Ok(workload.versions.iter().find(|v| versions.iter().any(|s| s == *v)).map(|v| v.to_string()))
}

fn listing_failed(rt: &ResourceType, e: KubeError) -> HostError {
    HostError::Cluster(format!("listing {} failed: {}", rt.plural, error_text(&e)))
}

fn error_text(e: &KubeError) -> String {
    contract::KubeError::from(e.clone()).to_string()
}

fn now_millis() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// The record of one listed workload; `None` when it lacks a name or namespace.
fn record(backend: Backend, object: &Value, now: i64) -> Option<LeaseRecord> {
    let name = object::name(object)?.to_string();
    let namespace = object::str_at(object, "/metadata/namespace")?.to_string();
    let workspace_pvc = backend == Backend::Sandbox
        && object
            .pointer("/spec/volumeClaimTemplates")
            .and_then(Value::as_array)
            .is_some_and(|templates| templates.iter().any(|t| object::name(t) == Some(WORKSPACE_VOLUME)));
    let id = LeaseId { backend, namespace: namespace.clone(), name: name.clone(), workspace_pvc };
    let expires_at = expiry_of(object);
    Some(LeaseRecord {
        provider_lease_id: id.to_string(),
        backend,
        namespace,
        name,
        workload_uid: object::uid(object).unwrap_or_default().to_string(),
        api_version: object::str_at(object, "/apiVersion").unwrap_or_default().to_string(),
        acquisition_id: object::label(object, LABEL_ACQUISITION_ID).map(str::to_string),
        run_id: object::label(object, LABEL_RUN_ID).map(str::to_string),
        created_at: object::str_at(object, "/metadata/creationTimestamp").and_then(contract::rfc3339::parse),
        expires_at,
        state: state(backend, object, expires_at, now),
    })
}

/// The state a workload shows (see [`LeaseState`]).
fn state(backend: Backend, object: &Value, expires_at: Option<i64>, now: i64) -> LeaseState {
    let ready = || {
        object
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|conditions| conditions.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"))
    };
    if object::is_terminating(object) {
        return LeaseState::Terminating;
    }
    if expires_at.is_some_and(|at| at <= now) {
        return LeaseState::Expired;
    }
    match backend {
        Backend::Job => {
            let count = |field: &str| object.pointer(&format!("/status/{field}")).and_then(Value::as_i64).unwrap_or(0);
            if count("succeeded") > 0 || count("failed") > 0 {
                LeaseState::Ended
            } else if count("ready") > 0 {
                LeaseState::Ready
            } else {
                LeaseState::Starting
            }
        }
        Backend::Sandbox if object.pointer("/spec/replicas").and_then(Value::as_i64) == Some(0) => {
            LeaseState::Suspended
        }
        Backend::Sandbox | Backend::Claim if ready() => LeaseState::Ready,
        Backend::Sandbox | Backend::Claim => LeaseState::Starting,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const NOW: i64 = 1_800_000_000_000;

    fn workload(extra: Value) -> Value {
        let mut object = json!({"apiVersion": "batch/v1", "metadata": {"name": "pc-a", "namespace": "agents",
            "uid": "u-1", "creationTimestamp": "2027-01-15T08:00:00Z",
            "labels": {"sandbox.paperclip.io/acquisition-id": "a", "sandbox.paperclip.io/run-id": "r"}}});
        if let (Some(object), Some(extra)) = (object.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                object.insert(key.clone(), value.clone());
            }
        }
        object
    }

    #[test]
    fn a_job_reads_as_a_lease_with_its_expiry_and_state() {
        let job = workload(
            json!({"spec": {"activeDeadlineSeconds": 3600}, "status": {"startTime": "2027-01-15T08:00:00Z", "ready": 1}}),
        );
        let record = record(Backend::Job, &job, NOW).expect("a record");
        assert_eq!(record.provider_lease_id, "k8s:job:agents:pc-a");
        assert_eq!(record.expires_at, contract::rfc3339::parse("2027-01-15T09:00:00Z"));
        assert_eq!((record.state, record.acquisition_id.as_deref()), (LeaseState::Ready, Some("a")));
        let lease = record.lease();
        assert_eq!((lease.workload_uid.as_str(), lease.namespace.as_str()), ("u-1", "agents"));
        let done = workload(json!({"status": {"succeeded": 1}}));
        assert_eq!(record_state(Backend::Job, &done), LeaseState::Ended);
    }

    fn record_state(backend: Backend, object: &Value) -> LeaseState {
        record(backend, object, NOW).expect("a record").state
    }

    #[test]
    fn the_state_comes_from_the_workload_alone() {
        let past = workload(json!({"spec": {"shutdownTime": "2020-01-01T00:00:00Z"}}));
        assert_eq!(record_state(Backend::Sandbox, &past), LeaseState::Expired);
        let suspended = workload(json!({"spec": {"replicas": 0}}));
        assert_eq!(record_state(Backend::Sandbox, &suspended), LeaseState::Suspended);
        let ready = workload(json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}}));
        assert_eq!(record_state(Backend::Claim, &ready), LeaseState::Ready);
        assert_eq!(record_state(Backend::Claim, &workload(json!({}))), LeaseState::Starting);
        let mut going = workload(json!({}));
        going["metadata"]["deletionTimestamp"] = json!("2027-01-15T08:00:00Z");
        assert_eq!(record_state(Backend::Job, &going), LeaseState::Terminating);
        assert!(LeaseState::Expired.is_over() && !LeaseState::Suspended.is_over());
    }

    #[test]
    fn a_sandbox_with_a_workspace_claim_has_the_pvc_lease_id() {
        let sandbox = workload(json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "workspace"}}]}}));
        let record = record(Backend::Sandbox, &sandbox, NOW).expect("a record");
        assert_eq!(record.provider_lease_id, "k8s:sandbox:agents:pc-a:pvc");
        assert!(record.lease().provider_lease_id.ends_with(":pvc"));
    }
}
