//! Resume-check: whether a stored lease can be used again, decided from the lease alone.
//!
//! After the config's `resume-check` behaviour runs: a lease this provider did not make, or
//! cannot read (see [`crate::lease`]), is `expired` with the reason; a lease whose expiry the
//! clock has reached is `expired`; any other is `resumable`, with the lease as stored. A config
//! that does not parse is `invalid-config`: the host must hand back the config it stored.
//!
//! A provider without state cannot observe `release` or `destroy`: after either, the same
//! stored lease is still `resumable` until its expiry. The contract expects `expired` there;
//! only the host's record of the release can say so, and a host must not resume a lease it
//! released or destroyed.

use contract::{LeaseRef, ProviderError, ResumeOutcome};

use crate::behaviour;
use crate::clock::{Clock, show_time};
use crate::config::{self, Operation};
use crate::expiry;
use crate::lease::LeaseState;
use crate::log::Log;

/// Why a lease that ended at `expires_at` is expired at `now`.
pub fn expired_reason(expires_at: i64, now: i64) -> String {
    format!(
        "the lease expired at {} ({} ms ago); renew before the expiry, or acquire a new lease",
        show_time(expires_at),
        now.saturating_sub(expires_at)
    )
}

/// The state of a lease that is still usable, or why it is expired.
pub fn usable(clock: &dyn Clock, log: &dyn Log, lease_ref: &LeaseRef) -> Result<LeaseState, String> {
    let id = lease_ref.lease.provider_lease_id.as_str();
    let state = LeaseState::read(&lease_ref.lease).map_err(|why| {
        log.warn("a lease this provider cannot read is expired", &[("reason", &why.to_string())]);
        why.to_string()
    })?;
    let now = clock.now_millis();
    if expiry::has_passed(state.expires_at, now) {
        log.info("the lease has expired", &[("lease", id), ("expires-at", &show_time(state.expires_at))]);
        return Err(expired_reason(state.expires_at, now));
    }
    Ok(state)
}

/// Answers whether the lease can be used again (see the module docs).
pub fn resume_check(clock: &dyn Clock, log: &dyn Log, lease_ref: &LeaseRef) -> Result<ResumeOutcome, ProviderError> {
    let config = config::parse(&lease_ref.config)?;
    behaviour::apply(&config, Operation::ResumeCheck, clock, log)?;
    Ok(match usable(clock, log, lease_ref) {
        Ok(state) => ResumeOutcome::Resumable(state.to_lease()),
        Err(reason) => ResumeOutcome::Expired(reason),
    })
}

#[cfg(test)]
mod tests {
    use contract::{Lease, LeaseRef, ResumeOutcome};
    use serde_json::json;

    use crate::testkit::{Env, config, config_with, request, stored};

    #[test]
    fn a_lease_is_resumable_until_its_expiry_then_expired() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with(json!({"leaseTtlSeconds": 10}));
        let lease = provider.acquire(request(&config, "r-1")).unwrap();
        env.clock.advance_millis(9_999);
        assert_eq!(provider.resume_check(stored(&lease, &config)), Ok(ResumeOutcome::Resumable(lease.clone())));
        env.clock.advance_millis(1);
        match provider.resume_check(stored(&lease, &config)).unwrap() {
            ResumeOutcome::Expired(reason) => assert!(reason.contains("expired at"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_lease_it_did_not_make_or_cannot_read_is_expired() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "r-2")).unwrap();
        let foreign = Lease { provider_lease_id: "k8s:job:default:pc-r-2".into(), ..lease.clone() };
        let garbage = Lease { metadata: "{{{".into(), ..lease.clone() };
        let edited = Lease { expires_at: lease.expires_at.map(|e| e + 1), ..lease };
        for (what, lease) in [("another provider's", foreign), ("garbage metadata", garbage), ("edited", edited)] {
            match provider.resume_check(stored(&lease, &config())).unwrap() {
                ResumeOutcome::Expired(reason) => {
                    assert!(reason.to_lowercase().contains("acquire a new lease"), "{what}: {reason}")
                }
                other => panic!("{what}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_released_lease_is_still_resumable_since_release_leaves_no_trace() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "r-3")).unwrap();
        provider.release(stored(&lease, &config())).unwrap();
        provider.destroy(stored(&lease, &config())).unwrap();
        assert_eq!(provider.resume_check(stored(&lease, &config())), Ok(ResumeOutcome::Resumable(lease)));
    }

    #[test]
    fn a_config_that_does_not_parse_is_invalid_config_and_a_configured_failure_is_the_answer() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "r-4")).unwrap();
        let err = provider.resume_check(LeaseRef { lease: lease.clone(), config: "garbage".into() }).unwrap_err();
        assert_eq!(err.kind(), "invalid-config");
        let failing = config_with(json!({"operations": {"resume-check": {"fail": {"error": "unavailable"}}}}));
        let err = provider.resume_check(stored(&lease, &failing)).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", false));
    }
}
