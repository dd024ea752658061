//! Renew: moves a lease's expiry, inside the lease.
//!
//! After the config's `renew` behaviour runs, a lease that resume-check would call expired
//! (not this provider's, unreadable, or past its expiry) is `expired` here too. Otherwise the
//! new expiry is the requested one, capped at now plus the lease TTL stored in the lease at
//! acquire (a later config cannot stretch it); earlier than the current one is allowed. A
//! requested time that is not in the future is `rejected`. The answer carries the renewed
//! lease: the host must store it in place of the old one, which still says the old expiry.

use contract::{LeaseRef, ProviderError, ResumeOutcome};

use crate::behaviour;
use crate::clock::{Clock, show_time};
use crate::config::{self, Operation};
use crate::expiry;
use crate::log::Log;
use crate::resume;

/// Moves the lease's expiry to `expires_at`, capped (see the module docs).
pub fn renew(
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    expires_at: i64,
) -> Result<ResumeOutcome, ProviderError> {
    let config = config::parse(&lease_ref.config)?;
    behaviour::apply(&config, Operation::Renew, clock, log)?;
    let mut state = match resume::usable(clock, log, lease_ref) {
        Ok(state) => state,
        Err(reason) => return Ok(ResumeOutcome::Expired(reason)),
    };
    let now = clock.now_millis();
    let Some(renewed) = expiry::capped(now, state.lease_ttl_seconds, Some(expires_at)) else {
        return Err(ProviderError::rejected(format!(
            "renew asks for an expiry at {}, which is not after now ({}); ask for a later time, or release the lease",
            show_time(expires_at),
            show_time(now)
        )));
    };
    state.expires_at = renewed;
    state.renewed_at = Some(now);
    log.info("renewed a lease", &[("lease", &state.lease_id), ("expires-at", &show_time(renewed))]);
    Ok(ResumeOutcome::Resumable(state.to_lease()))
}

#[cfg(test)]
mod tests {
    use contract::{Lease, ResumeOutcome};
    use serde_json::json;

    use crate::testkit::{Env, NOW, config, config_with, request, stored};

    fn renewed(outcome: ResumeOutcome) -> Lease {
        match outcome {
            ResumeOutcome::Resumable(lease) => lease,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn renew_moves_the_expiry_capped_by_the_lease_ttl() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with(json!({"leaseTtlSeconds": 60}));
        let lease = provider.acquire(request(&config, "n-1")).unwrap();
        env.clock.advance_millis(30_000);
        let later = renewed(provider.renew(stored(&lease, &config), NOW + 80_000).unwrap());
        assert_eq!(later.expires_at, Some(NOW + 80_000));
        let capped = renewed(provider.renew(stored(&later, &config), i64::MAX).unwrap());
        assert_eq!(capped.expires_at, Some(NOW + 30_000 + 60_000), "now plus the TTL");
        let sooner = renewed(provider.renew(stored(&capped, &config), NOW + 40_000).unwrap());
        assert_eq!(sooner.expires_at, Some(NOW + 40_000), "moving it earlier is allowed");
        let metadata: serde_json::Value = serde_json::from_str(&sooner.metadata).unwrap();
        assert_eq!(metadata["renewed-at"], NOW + 30_000);
        assert_eq!(metadata["acquired-at"], NOW);
    }

    #[test]
    fn the_ttl_is_the_one_stored_at_acquire() {
        let env = Env::new();
        let provider = env.provider();
        let short = config_with(json!({"leaseTtlSeconds": 60}));
        let lease = provider.acquire(request(&short, "n-2")).unwrap();
        let long = config_with(json!({"leaseTtlSeconds": 86_400}));
        let renewed = renewed(provider.renew(stored(&lease, &long), i64::MAX).unwrap());
        assert_eq!(renewed.expires_at, Some(NOW + 60_000));
    }

    #[test]
    fn an_expired_or_unreadable_lease_is_expired_and_the_old_copy_reads_the_old_expiry() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with(json!({"leaseTtlSeconds": 60}));
        let lease = provider.acquire(request(&config, "n-3")).unwrap();
        env.clock.advance_millis(30_000);
        let later = renewed(provider.renew(stored(&lease, &config), NOW + 80_000).unwrap());
        env.clock.advance_millis(30_000);
        let check = |lease: &Lease| provider.resume_check(stored(lease, &config)).unwrap();
        assert!(matches!(check(&lease), ResumeOutcome::Expired(_)), "the old copy says the old expiry");
        assert!(matches!(check(&later), ResumeOutcome::Resumable(_)));
        assert!(matches!(provider.renew(stored(&lease, &config), NOW + 90_000), Ok(ResumeOutcome::Expired(_))));
        let garbage = Lease { metadata: String::new(), ..later };
        assert!(matches!(provider.renew(stored(&garbage, &config), NOW + 90_000), Ok(ResumeOutcome::Expired(_))));
    }

    #[test]
    fn a_time_not_in_the_future_is_rejected() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "n-4")).unwrap();
        for past in [i64::MIN, 0, NOW] {
            let err = provider.renew(stored(&lease, &config()), past).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{past}: {err}");
        }
    }

    #[test]
    fn a_configured_renew_failure_is_the_answer() {
        let env = Env::new();
        let provider = env.provider();
        let failing = config_with(json!({"operations": {"renew": {"fail": {"error": "conflict", "message": "lost"}}}}));
        let lease = provider.acquire(request(&failing, "n-5")).unwrap();
        let err = provider.renew(stored(&lease, &failing), NOW + 1_000).unwrap_err();
        assert_eq!((err.kind(), err.message()), ("conflict", "lost"));
    }
}
