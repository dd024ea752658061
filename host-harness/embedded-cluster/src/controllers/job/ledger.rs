//! What the controller remembers between syncs. Without the real controller's
//! `job-tracking` finalizer, a pod that finished and was then deleted would vanish from the
//! count; so the controller remembers which finished pods it has already folded into
//! `status.succeeded`/`failed`, and which finished pods it saw on the watch (even if they are
//! gone by the next sync). Lost on restart: a fresh controller trusts the Job's counters.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;

use super::backoff::BackoffRecord;
use super::pods::{self, PodState};

/// A pod seen in a terminal phase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FinishedPod {
    /// Pod UID (or name when it has none), so each pod is counted once.
    pub id: String,
    /// `Succeeded` rather than `Failed`.
    pub succeeded: bool,
    /// When it finished, for the failure backoff.
    pub finished_at: Timestamp,
}

impl FinishedPod {
    /// The finished-pod record for `pod`, or `None` while it is still running or terminating.
    pub fn from_pod(pod: &Pod, now: Timestamp) -> Option<Self> {
        let succeeded = match pods::state(pod) {
            PodState::Succeeded => true,
            PodState::Failed => false,
            PodState::Active | PodState::Terminating => return None,
        };
        Some(Self { id: pods::identity(pod), succeeded, finished_at: pods::finish_time(pod, now) })
    }
}

/// Per-Job memory that the status counters were computed from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ledger {
    /// Finished pods already included in `status.succeeded` / `status.failed`.
    pub counted: BTreeSet<String>,
    /// Pod-failure backoff state.
    pub backoff: BackoffRecord,
}

/// The controller's memory of all Jobs, keyed by Job UID.
#[derive(Debug, Default)]
pub struct Memory {
    ledgers: HashMap<String, Ledger>,
    seen_finished: HashMap<String, BTreeMap<String, FinishedPod>>,
}

impl Memory {
    /// Records a pod from the watch if it is finished and owned by a Job, so its outcome is
    /// counted even if the pod is deleted before the next sync lists it.
    pub fn observe_pod(&mut self, pod: &Pod, now: Timestamp) {
        let Some(job_uid) = pods::controlling_job_uid(pod) else {
            return;
        };
        let Some(finished) = FinishedPod::from_pod(pod, now) else {
            return;
        };
        if self.ledgers.get(job_uid).is_some_and(|l| l.counted.contains(&finished.id)) {
            return;
        }
        self.seen_finished.entry(job_uid.to_string()).or_default().entry(finished.id.clone()).or_insert(finished);
    }

    /// The ledger for a Job, or `None` if this controller has not synced it yet.
    pub fn ledger(&self, job_uid: &str) -> Option<&Ledger> {
        self.ledgers.get(job_uid)
    }

    /// Finished pods seen on the watch and not yet counted.
    pub fn seen_finished(&self, job_uid: &str) -> Vec<FinishedPod> {
        self.seen_finished.get(job_uid).map(|m| m.values().cloned().collect()).unwrap_or_default()
    }

    /// Stores the ledger after its status was written, dropping watch records it now covers.
    pub fn commit(&mut self, job_uid: &str, ledger: Ledger) {
        if let Some(seen) = self.seen_finished.get_mut(job_uid) {
            seen.retain(|id, _| !ledger.counted.contains(id));
            if seen.is_empty() {
                self.seen_finished.remove(job_uid);
            }
        }
        self.ledgers.insert(job_uid.to_string(), ledger);
    }

    /// Drops everything about a Job that finished or went away.
    pub fn forget(&mut self, job_uid: &str) {
        self.ledgers.remove(job_uid);
        self.seen_finished.remove(job_uid);
    }

    /// Drops Jobs for which `keep` is false (used to clean up after deleted Jobs).
    pub fn retain_jobs(&mut self, keep: impl Fn(&str) -> bool) {
        self.ledgers.retain(|uid, _| keep(uid));
        self.seen_finished.retain(|uid, _| keep(uid));
    }

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        self.ledgers.is_empty() && self.seen_finished.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::test_support::*;

    #[test]
    fn observes_only_finished_owned_pods() {
        let mut memory = Memory::default();
        memory.observe_pod(&pod("running", "Running"), t(0));
        let mut orphan = pod("orphan", "Failed");
        orphan.metadata.owner_references = None;
        memory.observe_pod(&orphan, t(0));
        assert!(memory.is_empty());

        memory.observe_pod(&pod("done", "Failed"), t(3));
        let seen = memory.seen_finished(JOB_UID);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].id, "uid-done");
        assert!(!seen[0].succeeded);
        assert_eq!(seen[0].finished_at, t(3));
    }

    #[test]
    fn keeps_the_first_observation() {
        let mut memory = Memory::default();
        memory.observe_pod(&pod("done", "Failed"), t(3));
        memory.observe_pod(&pod("done", "Failed"), t(9));
        assert_eq!(memory.seen_finished(JOB_UID)[0].finished_at, t(3));
    }

    #[test]
    fn commit_drops_counted_observations_and_ignores_later_ones() {
        let mut memory = Memory::default();
        memory.observe_pod(&pod("a", "Failed"), t(1));
        memory.observe_pod(&pod("b", "Succeeded"), t(1));
        let ledger = Ledger { counted: BTreeSet::from(["uid-a".to_string()]), backoff: BackoffRecord::default() };
        memory.commit(JOB_UID, ledger.clone());
        let seen = memory.seen_finished(JOB_UID);
        assert_eq!(seen.len(), 1);
        assert_eq!(seen[0].id, "uid-b");
        assert_eq!(memory.ledger(JOB_UID), Some(&ledger));

        memory.observe_pod(&pod("a", "Failed"), t(2));
        assert_eq!(memory.seen_finished(JOB_UID).len(), 1);
    }

    #[test]
    fn forget_and_retain_drop_jobs() {
        let mut memory = Memory::default();
        memory.observe_pod(&pod("a", "Failed"), t(1));
        memory.commit("other", Ledger::default());
        memory.retain_jobs(|uid| uid == JOB_UID);
        assert!(memory.ledger("other").is_none());
        assert_eq!(memory.seen_finished(JOB_UID).len(), 1);
        memory.forget(JOB_UID);
        assert!(memory.is_empty());
    }
}
