//! A lease's expiry: what the caller asks for, capped at now plus the lease TTL. A requested
//! time is any `i64` a host sends, so the arithmetic saturates instead of wrapping.

/// The expiry (epoch millis) for a lease asked to end at `requested` (`None`: as late as the
/// TTL allows): at or before `requested`, at most `ttl_seconds` after `now`. `None` when that
/// is not after `now`.
pub fn capped(now: i64, ttl_seconds: u32, requested: Option<i64>) -> Option<i64> {
    let ttl_end = now.saturating_add(i64::from(ttl_seconds).saturating_mul(1000));
    let at = requested.map_or(ttl_end, |r| r.min(ttl_end));
    (at > now).then_some(at)
}

/// Whether a lease that ends at `expires_at` has ended at `now`: the expiry itself is past it.
pub fn has_passed(expires_at: i64, now: i64) -> bool {
    now >= expires_at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expiries_are_capped_by_the_ttl_and_never_overflow() {
        let now = 1_000_000;
        assert_eq!(capped(now, 60, None), Some(1_060_000));
        assert_eq!(capped(now, 60, Some(1_010_500)), Some(1_010_500), "honoured to the millisecond");
        assert_eq!(capped(now, 60, Some(i64::MAX)), Some(1_060_000));
        for past in [i64::MIN, -1, 0, now] {
            assert_eq!(capped(now, 60, Some(past)), None, "{past}");
        }
        assert_eq!(capped(i64::MAX, u32::MAX, None), None, "a clock at the end of time");
        assert_eq!(capped(i64::MIN, u32::MAX, Some(i64::MIN)), None);
    }

    #[test]
    fn a_lease_has_ended_at_its_expiry() {
        assert!(!has_passed(1_000, 999));
        assert!(has_passed(1_000, 1_000));
        assert!(has_passed(1_000, 1_001));
    }
}
