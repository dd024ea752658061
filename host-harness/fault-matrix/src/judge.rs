//! What a cell's answer must be: how a cell runs its operation, what the cluster says of the
//! sandboxes the answer is about, and the verdict.

use provider_host::HostError;
use provider_host::records::{Lease, ResumeOutcome};

use super::faults::{Fault, Operation};
use contract_suite::context::{Ctx, now_millis};

/// How much of a provider error's message a cell's record quotes.
const WHY_CHARS: usize = 160;

/// What a cell's operation answered.
pub(super) enum Answer {
    Done,
    Acquired(Lease),
    Resume(ResumeOutcome),
    Error(HostError),
}

/// Runs `operation` on `lease` (a fresh acquire under `id` for acquire).
pub(super) async fn operate(ctx: &Ctx<'_>, operation: Operation, lease: Option<&Lease>, id: &str) -> Answer {
    let done = |r: Result<(), HostError>| r.map_or_else(Answer::Error, |()| Answer::Done);
    match (operation, lease) {
        (Operation::Acquire, _) => ctx.acquire(ctx.request(id)).await.map_or_else(Answer::Error, Answer::Acquired),
        (Operation::ResumeCheck, Some(l)) => {
            ctx.host.resume_check(ctx.stored(l)).await.map_or_else(Answer::Error, Answer::Resume)
        }
        (Operation::Renew, Some(l)) => {
            ctx.host.renew(ctx.stored(l), now_millis() + 1_800_000).await.map_or_else(Answer::Error, Answer::Resume)
        }
        (Operation::Release, Some(l)) => done(ctx.host.release(ctx.stored(l)).await),
        (Operation::Destroy, Some(l)) => done(ctx.host.destroy(ctx.stored(l)).await.map(drop)),
        (_, None) => Answer::Error(HostError::Config("no lease to operate on".to_string())),
    }
}

/// What the cluster says, right after the answer, of the sandboxes it is about: whether the
/// lease the answer carries (a new or a resumable one) is usable, and whether the cell's own
/// lease still is (asked only when the answer says it expired).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Seen {
    answered: Option<bool>,
    stored: Option<bool>,
}

pub(super) async fn look(ctx: &Ctx<'_>, answer: &Answer, lease: Option<&Lease>) -> Result<Seen, String> {
    let mut seen = Seen::default();
    match answer {
        Answer::Acquired(fresh) | Answer::Resume(ResumeOutcome::Resumable(fresh)) => {
            seen.answered = Some(ctx.usable(fresh).await?);
        }
        Answer::Resume(ResumeOutcome::Expired(_)) => {
            if let Some(l) = lease {
                seen.stored = Some(ctx.usable(l).await?);
            }
        }
        Answer::Done | Answer::Error(_) => {}
    }
    Ok(seen)
}

/// Whether an answer to a cell with `fault` (none: the clean run) keeps the contract, given
/// what the cluster says: `Ok` names the answer, `Err` says what broke. A fault that said the
/// object was not found makes "expired" a fair answer for a sandbox that is in fact still
/// there; a transient one allows only retryable errors.
pub(super) fn judge(answer: &Answer, seen: Seen, fault: Option<Fault>) -> Result<String, String> {
    let told_gone = fault == Some(Fault::Status(404));
    match answer {
        Answer::Error(HostError::Provider(e)) => {
            let message: String = e.message().chars().take(WHY_CHARS).collect();
            let class = if e.retryable() { "retryable" } else { "final" };
            match fault {
                Some(f) if f.transient() && !e.retryable() => Err(format!(
                    "a final {} error for a transient fault ({}): a host would give the sandbox up for a blip: \
                     {message}",
                    e.kind(),
                    f.label()
                )),
                None => Err(format!("the clean run failed ({} {class}): {message}", e.kind())),
                _ => Ok(format!("{} ({class}): {message}", e.kind())),
            }
        }
        Answer::Error(other) => Err(format!("not a classified provider error: {other}")),
        Answer::Done => Ok("ok".to_string()),
        Answer::Acquired(_) if seen.answered == Some(false) => {
            Err("acquired, but the cluster says the new sandbox is not usable".to_string())
        }
        Answer::Acquired(_) => Ok("acquired".to_string()),
        Answer::Resume(ResumeOutcome::Resumable(_)) if seen.answered == Some(false) => {
            Err("resumable, but the cluster says the sandbox is not usable".to_string())
        }
        Answer::Resume(ResumeOutcome::Resumable(_)) => Ok("resumable".to_string()),
        Answer::Resume(ResumeOutcome::Expired(why)) if seen.stored == Some(true) && !told_gone => {
            Err(format!("expired, but the cluster says the sandbox is usable: {why}"))
        }
        Answer::Resume(ResumeOutcome::Expired(_)) => Ok("expired".to_string()),
    }
}

#[cfg(test)]
mod tests {
    use provider_host::records::{Backend, ProviderError};

    use super::*;

    fn lease() -> Lease {
        Lease {
            provider_lease_id: "kubernetes/sandbox/contract/pc-c1-1".into(),
            backend: Backend::Sandbox,
            namespace: "contract".into(),
            api_version: "agents.x-k8s.io/v1beta1".into(),
            workload_uid: "u1".into(),
            pod_name: Some("pc-c1-1".into()),
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: None,
            reusable: false,
            metadata: "{}".into(),
        }
    }

    fn usable(answered: Option<bool>, stored: Option<bool>) -> Seen {
        Seen { answered, stored }
    }

    #[test]
    fn resumable_for_an_unusable_sandbox_and_expired_for_a_usable_one_fail() {
        let resumable = Answer::Resume(ResumeOutcome::Resumable(lease()));
        assert!(judge(&resumable, usable(Some(true), None), Some(Fault::Status(500))).is_ok());
        assert!(judge(&resumable, usable(Some(false), None), Some(Fault::Status(500))).is_err());
        let expired = Answer::Resume(ResumeOutcome::Expired("gone".into()));
        assert!(judge(&expired, usable(None, Some(false)), Some(Fault::Late)).is_ok());
        assert!(judge(&expired, usable(None, Some(true)), Some(Fault::Late)).is_err());
        assert!(judge(&expired, usable(None, Some(true)), Some(Fault::Status(404))).is_ok(), "told it was gone");
        let acquired = Answer::Acquired(lease());
        assert!(judge(&acquired, usable(Some(false), None), None).is_err());
    }

    #[test]
    fn traps_timeouts_and_final_errors_for_blips_fail() {
        let trap = Answer::Error(HostError::Trap { call: "acquire", message: "unreachable".into() });
        assert!(judge(&trap, Seen::default(), Some(Fault::Status(500))).is_err());
        let late = Answer::Error(HostError::Timeout { call: "acquire", limit_ms: 10_000 });
        assert!(judge(&late, Seen::default(), Some(Fault::Late)).is_err(), "the host's deadline is not the provider's");
        let rejected = Answer::Error(HostError::Provider(ProviderError::rejected("no")));
        assert!(judge(&rejected, Seen::default(), Some(Fault::Status(422))).is_ok());
        assert!(judge(&rejected, Seen::default(), Some(Fault::Status(503))).is_err());
        assert!(judge(&rejected, Seen::default(), None).is_err());
        let unavailable = Answer::Error(HostError::Provider(ProviderError::unavailable("later")));
        let why = judge(&unavailable, Seen::default(), Some(Fault::DroppedBefore)).expect("retryable is fine");
        assert_eq!(why, "unavailable (retryable): later");
    }
}
