//! A suspended Sandbox is resumed only once its old pod is gone.
//!
//! Suspending deletes the Sandbox's pod, and a kubelet takes time to stop it: up to the pod's
//! grace period (30 s by default) when the main process ignores SIGTERM. The agent-sandbox
//! controller gives the new pod the old one's name and follows whatever pod carries it, so a
//! Sandbox resumed while the old pod is still terminating follows the old pod: it ends (exit
//! 137 at the end of the grace period, or 143), the Sandbox reports it finished, and the lease
//! is lost although its workspace is intact. Resume therefore waits, within its deadline, for
//! every pod of the Sandbox to be deleted before it un-suspends; a wait that runs out changes
//! nothing, so the Sandbox stays suspended and a later resume-check can try again.

use crate::api_versions;
use crate::clock::{Clock, Deadline};
use crate::errors::ProviderError;
use crate::event_stream::EventStream;
use crate::kube_api::Kube;
use crate::log::Log;
use crate::readiness::{Target, WaitError, own, track};

/// Waits until no pod of `target` (a suspended Sandbox) is left. A timeout is an error that
/// names the pod still stopping, says the Sandbox stays suspended, and ends with `retry` (what
/// the caller's caller should do again).
pub fn wait_until_gone<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &Target<'_>,
    deadline: Deadline,
    retry: &str,
) -> Result<(), ProviderError> {
    match wait(kube, clock, log, target, deadline) {
        Err(WaitError::Timeout(why)) => Err(ProviderError::timeout(format!(
            "{} cannot be resumed yet: {why} when its readiness timeout ran out (a main process that ignores \
             SIGTERM keeps its pod for the whole grace period). It stays suspended, its workspace kept; {retry}.",
            target.describe()
        ))),
        Err(WaitError::Api(e)) => Err(e),
        Err(WaitError::Failed(f)) => Err(f.into_error()),
        Ok(()) => Ok(()),
    }
}

fn wait<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    target: &Target<'_>,
    deadline: Deadline,
) -> Result<(), WaitError> {
    let mut pods = EventStream::new(kube, api_versions::pods(), target.namespace, Some(target.pod_selector()), None);
    let mut left = own(target, pods.relist(clock, deadline).map_err(WaitError::Api)?);
    let mut logged = false;
    loop {
        let Some(name) = left.keys().next().cloned() else {
            return Ok(());
        };
        if !logged {
            log.info(
                "waiting for the suspended Sandbox's old pod to stop before resuming it",
                &[("sandbox", &target.describe()), ("pod", &name)],
            );
            logged = true;
        }
        match pods.next(clock, log, deadline).map_err(WaitError::Api)? {
            None => return Err(WaitError::Timeout(format!("its old pod {name} was still stopping"))),
            Some(change) => {
                track(target, &mut left, change);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::api_versions::SandboxVersion;
    use crate::fake_kube::{FakeClock, FakeKube, MemoryLog};
    use crate::testkit::{NOW, NS};
    use crate::workload_state::{SANDBOX_NAME_HASH_LABEL, WorkloadKind};
    use contract::k8s::agent_sandbox::name_hash;

    fn terminating_pod(name: &str, owner: &str) -> Value {
        json!({
            "metadata": {"name": name, "labels": {SANDBOX_NAME_HASH_LABEL: name_hash("sb")},
                         "deletionTimestamp": "2026-11-30T10:00:00Z",
                         "ownerReferences": [{"uid": owner, "controller": true}]},
            "status": {"phase": "Running"}
        })
    }

    fn gone_within(kube: &FakeKube, clock: &FakeClock, seconds: u64) -> Result<(), ProviderError> {
        let resource = SandboxVersion::V1beta1.resource();
        let target = Target {
            kind: WorkloadKind::Sandbox,
            namespace: NS,
            name: "sb",
            resource: &resource,
            uid: "uid-sb",
            secret: None,
            job_retries: false,
        };
        wait_until_gone(
            kube,
            clock,
            &MemoryLog::default(),
            &target,
            Deadline::after(clock, Duration::from_secs(seconds)),
            "retry resume-check",
        )
    }

    fn cluster() -> (FakeKube, FakeClock) {
        let clock = FakeClock::new(NOW);
        let kube = FakeKube::new(clock.clone());
        kube.set_controllers(false);
        kube.add_namespace(NS);
        (kube, clock)
    }

    #[test]
    fn the_wait_ends_when_the_old_pod_is_deleted() {
        let (kube, clock) = cluster();
        kube.put(&api_versions::pods(), NS, terminating_pod("sb", "uid-sb"));
        kube.schedule_remove(Duration::from_secs(3), "pods", NS, "sb");
        gone_within(&kube, &clock, 30).unwrap();
        assert_eq!(clock.monotonic(), Duration::from_secs(3), "seen when the pod's deletion came");
    }

    #[test]
    fn no_pod_means_no_wait_and_a_foreign_pod_is_not_waited_for() {
        let (kube, clock) = cluster();
        gone_within(&kube, &clock, 30).unwrap();
        kube.put(&api_versions::pods(), NS, terminating_pod("sb", "uid-of-an-older-sandbox"));
        gone_within(&kube, &clock, 30).unwrap();
        assert_eq!(clock.monotonic(), Duration::ZERO);
    }

    #[test]
    fn a_pod_that_outlives_the_deadline_is_named_in_the_timeout() {
        let (kube, clock) = cluster();
        kube.put(&api_versions::pods(), NS, terminating_pod("sb", "uid-sb"));
        let err = gone_within(&kube, &clock, 5).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("timeout", true));
        assert!(
            err.message().starts_with("Sandbox sandboxes/sb cannot be resumed yet: its old pod sb was still stopping")
                && err.message().ends_with("It stays suspended, its workspace kept; retry resume-check."),
            "{err}"
        );
        assert!(clock.monotonic() >= Duration::from_secs(5));
    }
}
