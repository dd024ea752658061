//! Reading a SandboxClaim into what the provider must do next: its Sandbox is ready, the claim is
//! still starting (and why), being deleted, or failed for a reason that waiting will not fix.
//!
//! The claim's `Ready` condition is the claim controller's own reason (`claim_reason`) or the
//! Sandbox's, forwarded. A reason in [`claim_reason::TERMINAL`] fails at once with a message that
//! says what to fix: the claim's spec, its template or pool, or its lifetime rule it out (as
//! agent-sandbox's own clients stop there). `SandboxExpired` and the Sandbox's terminal reasons
//! (`PodFailed`, `PodSucceeded`, `MultiplePods`) fail too. Everything else (`SandboxMissing`,
//! `SandboxNotReady`, `ReconcilerError`, the Sandbox's `DependenciesNotReady`, a condition older
//! than the claim's generation) is still starting. Ready means `Ready` True at the claim's
//! generation with `status.sandbox.name` set.

use contract::k8s::agent_sandbox::{ASSIGNED_SANDBOX_ANNOTATION, FINISHED, READY, claim_reason};
use contract::quote;
use serde_json::Value;

use crate::object::{self, condition};
use crate::workload_state::{Cause, Failure};

/// What a claim says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimState {
    /// Ready True at the current generation, naming its Sandbox.
    Ready { sandbox: String },
    /// Not ready yet; the text says why.
    Starting(String),
    /// Being deleted.
    Deleting,
    /// Will not become ready (or is gone for good).
    Failed(Failure),
}

/// `status.sandbox.name`: the Sandbox the claim got.
pub fn sandbox_name(claim: &Value) -> Option<&str> {
    object::str_at(claim, "/status/sandbox/name")
}

/// The Sandbox the claim got, or is adopting (the annotation the controller writes before it
/// moves a warm Sandbox's ownership).
pub fn assigned_sandbox(claim: &Value) -> Option<&str> {
    sandbox_name(claim).or_else(|| object::annotation(claim, ASSIGNED_SANDBOX_ANNOTATION).filter(|n| !n.is_empty()))
}

/// What a terminal reason means and what to fix, for the claim `what` (`SandboxClaim ns/x`).
fn refused(claim: &Value, what: &str, reason: &str, message: &str) -> Failure {
    let spec = |pointer: &str| object::str_at(claim, pointer).map(|s| quote(s).to_string());
    let pool = spec("/spec/warmPoolRef/name").or_else(|| spec("/spec/warmpool")).unwrap_or_else(|| "?".into());
    let said = if message.is_empty() { String::new() } else { format!(" (the controller says {})", quote(message)) };
    let alpha = object::at(claim, "/spec/sandboxTemplateRef").is_some();
    let text = match reason {
        claim_reason::TEMPLATE_NOT_FOUND if alpha => format!(
            "{what}: its SandboxTemplate {} does not exist{said}. Create the template, or fix claim.template.",
            spec("/spec/sandboxTemplateRef/name").unwrap_or_else(|| "?".into())
        ),
        claim_reason::TEMPLATE_NOT_FOUND => format!(
            "{what}: the SandboxTemplate of warm pool {pool} does not exist{said}. Create the template, or point the \
             pool at an existing one (or claim.warmPool at another pool)."
        ),
        claim_reason::WARM_POOL_NOT_FOUND => format!(
            "{what}: the SandboxWarmPool {pool} does not exist in its namespace{said}. Create the pool or fix \
             claim.warmPool."
        ),
        claim_reason::ENV_VARS_INJECTION_REJECTED | claim_reason::VOLUME_CLAIM_TEMPLATES_ERROR => format!(
            "{what}: the template's policy refuses the claim ({reason}{said}). This provider sets neither spec.env \
             nor spec.volumeClaimTemplates, so a webhook or another client changed the claim; destroy the lease \
             and find what did."
        ),
        claim_reason::CLAIM_EXPIRED => {
            let at = object::str_at(claim, "/spec/lifecycle/shutdownTime").unwrap_or("?");
            return Failure::new(
                Cause::ClaimExpired,
                format!(
                    "{what} passed its lifecycle.shutdownTime {at} (the lease's expiry){said}, so its Sandbox is \
                     deleted. Acquire a new sandbox (with a later requested-expires-at if it expired while starting)."
                ),
            );
        }
        _ => format!(
            "{what}: the claim controller refuses the claim ({reason}{said}). Fix what it names in the claim's \
             template or pool, then acquire again."
        ),
    };
    Failure::new(Cause::ClaimRefused, text)
}

/// Reads a claim (see the module docs).
pub fn claim_state(claim: &Value) -> ClaimState {
    let what = format!(
        "SandboxClaim {}/{}",
        object::str_at(claim, "/metadata/namespace").unwrap_or("?"),
        object::name(claim).unwrap_or("?")
    );
    if object::is_terminating(claim) {
        return ClaimState::Deleting;
    }
    let Some(ready) = condition(claim, READY) else {
        return ClaimState::Starting(format!("{what} has no status yet (the claim controller has not reconciled it)"));
    };
    if let (Some(observed), Some(generation)) = (ready.observed_generation, object::generation(claim))
        && observed < generation
    {
        return ClaimState::Starting(format!(
            "the claim controller has not observed generation {generation} of {what} yet"
        ));
    }
    if claim_reason::TERMINAL.contains(&ready.reason) && !ready.is_true() {
        return ClaimState::Failed(refused(claim, &what, ready.reason, ready.message));
    }
    let sandbox = sandbox_name(claim).map_or_else(|| "?".to_string(), str::to_string);
    if ready.is_true() {
        return match sandbox_name(claim) {
            Some(name) => ClaimState::Ready { sandbox: name.to_string() },
            None => ClaimState::Starting(format!("{what} is Ready but names no Sandbox yet")),
        };
    }
    let finished = condition(claim, FINISHED).filter(|c| c.is_true());
    match finished.as_ref().map_or(ready.reason, |c| c.reason) {
        claim_reason::SANDBOX_EXPIRED => ClaimState::Failed(Failure::new(
            Cause::SandboxExpired,
            format!(
                "the Sandbox {sandbox} of {what} passed its own shutdownTime and is being removed; acquire a new sandbox."
            ),
        )),
        "PodFailed" => ClaimState::Failed(Failure::new(
            Cause::PodFailed,
            format!("the pod of Sandbox {sandbox} ({what}) failed and is never recreated; acquire a new sandbox."),
        )),
        "PodSucceeded" => ClaimState::Failed(Failure::new(
            Cause::PodSucceeded,
            format!(
                "the pod of Sandbox {sandbox} ({what}) exited (its command finished) and is never recreated; the \
                 template's command must keep running. Acquire a new sandbox."
            ),
        )),
        "MultiplePods" => ClaimState::Failed(Failure::new(
            Cause::MultiplePods,
            format!("Sandbox {sandbox} of {what} has several pods; destroy the lease and acquire a new sandbox."),
        )),
        reason => ClaimState::Starting(format!("{what} is not ready ({reason}: {})", quote(ready.message))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn claim(spec: Value, reason: &str, status: &str, message: &str) -> Value {
        json!({
            "metadata": {"name": "pc-1", "namespace": "ns", "generation": 1},
            "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message,
                                       "observedGeneration": 1}],
                       "sandbox": {"name": "pool-abcde"}}
        })
    }

    fn failed(state: ClaimState) -> Failure {
        match state {
            ClaimState::Failed(f) => f,
            other => panic!("not failed: {other:?}"),
        }
    }

    fn beta() -> Value {
        json!({"warmPoolRef": {"name": "python"}, "lifecycle": {"shutdownTime": "2026-11-30T10:00:00Z"}})
    }

    #[test]
    fn every_terminal_reason_fails_with_what_to_fix() {
        let pool =
            failed(claim_state(&claim(beta(), "WarmPoolNotFound", "False", "SandboxWarmPool \"python\" not found")));
        assert_eq!(pool.cause, Cause::ClaimRefused);
        assert!(pool.message.contains("Create the pool or fix claim.warmPool"), "{}", pool.message);
        let template = failed(claim_state(&claim(beta(), "TemplateNotFound", "False", "")));
        assert!(template.message.contains("warm pool \"python\""), "{}", template.message);
        let alpha = json!({"sandboxTemplateRef": {"name": "py-tpl"}, "warmpool": "default"});
        let template = failed(claim_state(&claim(alpha, "TemplateNotFound", "False", "")));
        assert!(
            template.message.contains("\"py-tpl\"") && template.message.contains("fix claim.template"),
            "{}",
            template.message
        );
        for reason in claim_reason::TERMINAL {
            let f = failed(claim_state(&claim(beta(), reason, "False", "details")));
            let want = if reason == claim_reason::CLAIM_EXPIRED { Cause::ClaimExpired } else { Cause::ClaimRefused };
            assert_eq!(f.cause, want, "{reason}");
            assert!(f.message.starts_with("SandboxClaim ns/pc-1"), "{reason}: {}", f.message);
        }
        let expired = failed(claim_state(&claim(beta(), "ClaimExpired", "False", "")));
        assert!(expired.ends_sandbox() && expired.message.contains("2026-11-30T10:00:00Z"), "{}", expired.message);
    }

    #[test]
    fn sandbox_reasons_forwarded_by_the_claim_are_read_like_the_sandbox_s() {
        assert_eq!(failed(claim_state(&claim(beta(), "SandboxExpired", "False", ""))).cause, Cause::SandboxExpired);
        assert_eq!(failed(claim_state(&claim(beta(), "PodFailed", "False", ""))).cause, Cause::PodFailed);
        assert_eq!(failed(claim_state(&claim(beta(), "MultiplePods", "False", ""))).cause, Cause::MultiplePods);
        for waiting in ["SandboxMissing", "SandboxNotReady", "ReconcilerError", "DependenciesNotReady"] {
            match claim_state(&claim(beta(), waiting, "False", "m")) {
                ClaimState::Starting(why) => assert!(why.contains(waiting), "{why}"),
                other => panic!("{waiting}: {other:?}"),
            }
        }
    }

    #[test]
    fn ready_needs_the_current_generation_and_a_sandbox_name() {
        let ready = claim(beta(), "DependenciesReady", "True", "");
        assert_eq!(claim_state(&ready), ClaimState::Ready { sandbox: "pool-abcde".into() });
        let mut stale = ready.clone();
        stale["metadata"]["generation"] = json!(2);
        assert!(matches!(claim_state(&stale), ClaimState::Starting(why) if why.contains("generation 2")));
        let mut unnamed = ready.clone();
        unnamed["status"]["sandbox"] = json!({});
        assert!(matches!(claim_state(&unnamed), ClaimState::Starting(_)));
        let mut deleting = ready;
        deleting["metadata"]["deletionTimestamp"] = json!("2026-11-30T10:00:00Z");
        assert_eq!(claim_state(&deleting), ClaimState::Deleting);
        assert!(matches!(claim_state(&json!({"metadata": {"name": "x"}})), ClaimState::Starting(_)));
    }

    #[test]
    fn a_long_controller_message_is_quoted_by_a_short_prefix() {
        let long = "m".repeat(100_000);
        let f = failed(claim_state(&claim(beta(), "InvalidMetadata", "False", &long)));
        crate::testkit::assert_quotes_a_prefix(&f.message, &long);
    }
}
