//! A lease's expiry: what the caller asks for, capped at now + the config's lease TTL, in whole
//! seconds. A requested time is any `i64` a host sends, so the arithmetic is checked: in a
//! release build an overflow wraps, and a time far in the past would become one far in the
//! future, past the TTL.

/// The expiry (epoch millis) for `requested`, `None` meaning as late as the TTL allows: capped
/// at `now + ttl_seconds` and rounded down to a whole second. `None` when that is not at least a
/// second after `now`, including a request too far in the past to round.
pub fn lease_expiry(now: i64, ttl_seconds: u32, requested: Option<i64>) -> Option<i64> {
    let ttl_end = now.saturating_add(i64::from(ttl_seconds).saturating_mul(1000));
    let wanted = requested.map_or(ttl_end, |r| r.min(ttl_end));
    let whole_second = wanted.checked_sub(wanted.rem_euclid(1000))?;
    (whole_second > now).then_some(whole_second)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acquire::AcquireRequest;
    use crate::testkit::{Env, NOW, config, request, stored};

    #[test]
    fn expiries_are_capped_rounded_and_never_overflow() {
        let now = 1_000_000_500;
        assert_eq!(lease_expiry(now, 60, None), Some(1_000_060_000));
        assert_eq!(lease_expiry(now, 60, Some(i64::MAX)), Some(1_000_060_000));
        assert_eq!(lease_expiry(now, 60, Some(now + 10_999)), Some(1_000_011_000));
        assert_eq!(lease_expiry(now, 60, Some(now + 499)), None, "rounds down to now");
        for past in [i64::MIN, i64::MIN + 999, -1, 0, now] {
            assert_eq!(lease_expiry(now, 60, Some(past)), None, "{past}");
        }
        assert_eq!(lease_expiry(i64::MAX, u32::MAX, None), None, "a clock at the end of time");
        assert_eq!(lease_expiry(i64::MIN, u32::MAX, Some(i64::MIN)), None);
    }

    #[test]
    fn acquire_refuses_an_expiry_at_the_ends_of_time_without_panicking() {
        for requested in [i64::MIN, i64::MIN + 1, -1, 0] {
            let env = Env::new();
            let req = AcquireRequest { requested_expires_at: Some(requested), ..request(&config("job"), "exp-1") };
            let err = env.provider().acquire(req).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{requested}: {err}");
            assert!(err.message().contains("future"), "{requested}: {err}");
            assert!(!err.message().contains("9999-12-31"), "a time in the past shown as the latest: {err}");
            assert!(env.kube.calls().is_empty(), "{requested}: the cluster was called");
        }
        let env = Env::new();
        let req = AcquireRequest { requested_expires_at: Some(i64::MAX), ..request(&config("job"), "exp-2") };
        let lease = env.provider().acquire(req).unwrap();
        assert_eq!(lease.expires_at, Some(NOW + 3_600_000), "capped at the lease TTL");
    }

    #[test]
    fn renew_refuses_an_expiry_at_the_ends_of_time_without_panicking() {
        let env = Env::new();
        let provider = env.provider();
        let config = config("sandbox");
        let lease = stored(&provider.acquire(request(&config, "exp-3")).unwrap(), &config);
        for requested in [i64::MIN, i64::MIN + 1] {
            let err = provider.renew(lease.clone(), requested).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{requested}: {err}");
            assert!(!err.message().contains("9999-12-31"), "a time in the past shown as the latest: {err}");
        }
        let renewed = match provider.renew(lease, i64::MAX).unwrap() {
            crate::ResumeOutcome::Resumable(l) => l,
            other => panic!("{other:?}"),
        };
        assert_eq!(renewed.expires_at, Some(NOW + 1_010 + 3_600_000 - 10), "capped at now + the lease TTL");
    }
}
