//! The claim's status: its `Ready` (forwarded from the Sandbox or one of the claim's own
//! reasons), the Sandbox's `Finished` mirrored, `status.sandbox`, and when the claim expires.

use std::time::Duration;

use contract::k8s::agent_sandbox::{FINISHED, READY, claim_reason};
use jiff::{SignedDuration, Timestamp};
use serde_json::{Value, json};

use super::model::{Claim, ClaimStatus, Lifecycle, SandboxRef};
use crate::clock::{format_time, parse_time};
use crate::controllers::extensions::sandbox_view::SandboxView;
use crate::controllers::sandbox::model::Condition;
use crate::controllers::sandbox::status::{NewCondition, remove_condition, set_condition};

/// When the claim expires: the earlier of `shutdownTime` and `ttlSecondsAfterFinished` after
/// its `Finished` condition turned True (upstream's `lifecycle.ExpireAt`).
pub fn expires_at(lifecycle: &Lifecycle, status: &ClaimStatus) -> Option<Timestamp> {
    let finished_at =
        status.condition(FINISHED).filter(|c| c.status == "True").and_then(|c| parse_time(&c.last_transition_time));
    let ttl_at = lifecycle
        .ttl_seconds_after_finished
        .zip(finished_at)
        .and_then(|(ttl, at)| at.checked_add(SignedDuration::from_secs(ttl)).ok());
    match (lifecycle.shutdown_time, ttl_at) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The cluster time from `now` to `deadline` (zero once passed).
pub fn until(now: Timestamp, deadline: Timestamp) -> Duration {
    Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO)
}

fn static_status(status: &str) -> &'static str {
    match status {
        "True" => "True",
        "False" => "False",
        _ => "Unknown",
    }
}

/// The claim's status with `Ready` set as given (observedGeneration: the claim's generation).
pub fn with_ready(
    claim: &Claim,
    status: &'static str,
    reason: &str,
    message: impl Into<String>,
    now: Timestamp,
) -> ClaimStatus {
    let mut out = claim.status.clone();
    set_condition(
        &mut out.conditions,
        NewCondition::new(READY, status, reason, message),
        claim.generation,
        &format_time(now),
    );
    out
}

/// A claim that cannot get its Sandbox: `Ready` False with the reason; `status.sandbox` kept.
pub fn failed(claim: &Claim, reason: &str, message: impl Into<String>, now: Timestamp) -> ClaimStatus {
    with_ready(claim, "False", reason, message, now)
}

/// The claim's Sandbox is gone: `Ready` False `SandboxMissing`, `status.sandbox` and the
/// mirrored `Finished` cleared (the next pass gets a new Sandbox, as upstream's does).
pub fn missing(claim: &Claim, now: Timestamp) -> ClaimStatus {
    let mut out = failed(claim, claim_reason::SANDBOX_MISSING, "Sandbox does not exist", now);
    out.sandbox = SandboxRef::default();
    remove_condition(&mut out.conditions, FINISHED);
    out
}

/// An expired claim kept (`Retain`): `Ready` False `ClaimExpired`; `status.sandbox` names the
/// Sandbox until it is gone; `Finished` stays as it was.
pub fn expired(claim: &Claim, sandbox: Option<&SandboxView>, now: Timestamp) -> ClaimStatus {
    let mut out = failed(claim, claim_reason::CLAIM_EXPIRED, "Claim expired. Sandbox cleanup initiated.", now);
    out.sandbox = match sandbox {
        Some(s) => SandboxRef { name: s.name.clone(), pod_ips: s.pod_ips().to_vec() },
        None => SandboxRef::default(),
    };
    out
}

/// A claim with its Sandbox: `Ready` forwarded from the Sandbox's (`SandboxExpired` when the
/// Sandbox expired on its own, `SandboxNotReady` before it has one), `Finished` mirrored,
/// `status.sandbox` naming it with its pod IPs.
pub fn tracked(claim: &Claim, sandbox: &SandboxView, now: Timestamp) -> ClaimStatus {
    let mut out = match sandbox.ready_condition() {
        Some(ready) if ready.reason == claim_reason::SANDBOX_EXPIRED => failed(
            claim,
            claim_reason::SANDBOX_EXPIRED,
            "Underlying Sandbox resource has expired independently of the Claim.",
            now,
        ),
        Some(ready) => with_ready(claim, static_status(&ready.status), &ready.reason, ready.message.clone(), now),
        None => failed(claim, claim_reason::SANDBOX_NOT_READY, "Sandbox is not ready", now),
    };
    match sandbox.finished_condition() {
        Some(finished) => mirror(&mut out.conditions, finished),
        None => remove_condition(&mut out.conditions, FINISHED),
    }
    out.sandbox = SandboxRef { name: sandbox.name.clone(), pod_ips: sandbox.pod_ips().to_vec() };
    out
}

/// Copies a condition as `meta.SetStatusCondition` would: an unchanged status keeps its
/// transition time, so the TTL after `Finished` counts from when the Sandbox finished.
fn mirror(conditions: &mut Vec<Condition>, from: &Condition) {
    match conditions.iter_mut().find(|c| c.type_ == from.type_) {
        Some(existing) => {
            let keep_time = existing.status == from.status && !existing.last_transition_time.is_empty();
            let time =
                if keep_time { existing.last_transition_time.clone() } else { from.last_transition_time.clone() };
            *existing = Condition { last_transition_time: time, ..from.clone() };
        }
        None => conditions.push(from.clone()),
    }
}

/// The merge patch turning `old` into `new` on the status subresource, or `None` if equal.
/// Lists are replaced whole, and an emptied `status.sandbox` field is removed with a null.
pub fn status_patch(old: &ClaimStatus, new: &ClaimStatus) -> Option<Value> {
    if old == new {
        return None;
    }
    let name = if new.sandbox.name.is_empty() { Value::Null } else { json!(new.sandbox.name) };
    let ips = if new.sandbox.pod_ips.is_empty() { Value::Null } else { json!(new.sandbox.pod_ips) };
    Some(json!({"status": {"conditions": new.conditions, "sandbox": {"name": name, "podIPs": ips}}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::claim::model::parse_spec;
    use crate::controllers::sandbox::model::SandboxStatus;

    fn at(s: &str) -> Timestamp {
        parse_time(s).unwrap_or_else(|| panic!("time {s}"))
    }

    fn claim() -> Claim {
        Claim {
            name: "c".into(),
            namespace: "ns".into(),
            uid: "cu".into(),
            resource_version: "1".into(),
            generation: 3,
            created: Some(at("2026-01-01T00:00:00Z")),
            deleting: false,
            annotations: Default::default(),
            spec: parse_spec(Some(&json!({"warmPoolRef": {"name": "p"}})), false),
            status: ClaimStatus::default(),
        }
    }

    fn condition(type_: &str, status: &str, reason: &str, time: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            observed_generation: Some(1),
            last_transition_time: time.into(),
            reason: reason.into(),
            message: "m".into(),
        }
    }

    fn sandbox(conditions: Vec<Condition>) -> SandboxView {
        SandboxView {
            name: "s".into(),
            status: SandboxStatus { conditions, pod_ips: Some(vec!["10.0.0.1".into()]), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn expiry_is_the_earlier_of_shutdown_time_and_ttl_after_finished() {
        let mut status = ClaimStatus::default();
        let lifecycle = Lifecycle {
            shutdown_time: Some(at("2026-01-01T01:00:00Z")),
            ttl_seconds_after_finished: Some(60),
            ..Default::default()
        };
        assert_eq!(expires_at(&lifecycle, &status), Some(at("2026-01-01T01:00:00Z")), "not finished: shutdownTime");
        status.conditions.push(condition(FINISHED, "True", "PodSucceeded", "2026-01-01T00:10:00Z"));
        assert_eq!(expires_at(&lifecycle, &status), Some(at("2026-01-01T00:11:00Z")));
        assert_eq!(expires_at(&Lifecycle::default(), &status), None);
        assert_eq!(until(at("2026-01-01T00:00:00Z"), at("2026-01-01T00:00:05Z")), Duration::from_secs(5));
        assert_eq!(until(at("2026-01-01T00:00:09Z"), at("2026-01-01T00:00:05Z")), Duration::ZERO);
    }

    #[test]
    fn ready_is_forwarded_with_the_claims_generation_and_finished_mirrored() {
        let now = at("2026-01-01T00:00:10Z");
        let s = sandbox(vec![
            condition(READY, "False", "PodSucceeded", "2026-01-01T00:00:05Z"),
            condition(FINISHED, "True", "PodSucceeded", "2026-01-01T00:00:05Z"),
        ]);
        let status = tracked(&claim(), &s, now);
        let ready = status.condition(READY).unwrap_or_else(|| panic!("ready"));
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str(), ready.observed_generation),
            ("False", "PodSucceeded", Some(3))
        );
        let finished = status.condition(FINISHED).unwrap_or_else(|| panic!("finished"));
        assert_eq!(finished.last_transition_time, "2026-01-01T00:00:05Z", "the Sandbox's time, for the TTL");
        assert_eq!((status.sandbox.name.as_str(), status.sandbox.pod_ips.len()), ("s", 1));

        let expired_box = sandbox(vec![condition(READY, "False", "SandboxExpired", "2026-01-01T00:00:05Z")]);
        assert_eq!(
            tracked(&claim(), &expired_box, now).condition(READY).map(|c| c.reason.clone()).as_deref(),
            Some("SandboxExpired")
        );
        let fresh = sandbox(Vec::new());
        assert_eq!(
            tracked(&claim(), &fresh, now).condition(READY).map(|c| c.reason.clone()).as_deref(),
            Some("SandboxNotReady")
        );
    }

    #[test]
    fn a_missing_sandbox_clears_the_reference_and_the_patch_nulls_it() {
        let now = at("2026-01-01T00:00:10Z");
        let mut c = claim();
        c.status = tracked(&c, &sandbox(vec![condition(READY, "True", "DependenciesReady", "")]), now);
        let gone = missing(&c, now);
        assert_eq!(gone.sandbox, SandboxRef::default());
        assert_eq!(gone.condition(READY).map(|c| c.reason.clone()).as_deref(), Some("SandboxMissing"));
        let patch = status_patch(&c.status, &gone).unwrap_or_else(|| panic!("changed"));
        assert_eq!(patch["status"]["sandbox"], json!({"name": null, "podIPs": null}));
        assert!(status_patch(&gone, &gone).is_none());
    }
}
