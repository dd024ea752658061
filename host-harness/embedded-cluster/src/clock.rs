//! The cluster's clock: real time, optionally sped up, and advanceable by hand.
//!
//! Scenarios must never sleep for real minutes. Everything with a deadline (`shutdownTime`,
//! `activeDeadlineSeconds`, `ttlSecondsAfterFinished`, kubelet delays) reads this clock and sleeps
//! through it, so a test can run time faster (`scale`) or jump it forward (`advance`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::sync::watch;

/// A shared, controllable notion of "now" for the API server and the simulated controllers.
#[derive(Debug)]
pub struct Clock {
    start_real: Instant,
    start_wall: Timestamp,
    scale: f64,
    /// Time added by `advance`, on top of scaled real time.
    skew: Mutex<Duration>,
    /// Bumped on every `advance`, so sleepers re-check their deadline at once.
    advanced: watch::Sender<u64>,
}

impl Clock {
    /// Real time (scale 1).
    pub fn real() -> Self {
        Self::scaled(1.0)
    }

    /// Time that runs `scale` times faster than real time (`scale` below 1 slows it down).
    /// Non-finite or non-positive factors fall back to real time.
    pub fn scaled(scale: f64) -> Self {
        let scale = if scale.is_finite() && scale > 0.0 { scale } else { 1.0 };
        Self {
            start_real: Instant::now(),
            start_wall: Timestamp::now(),
            scale,
            skew: Mutex::new(Duration::ZERO),
            advanced: watch::channel(0).0,
        }
    }

    /// The time-scale factor.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// Cluster time now.
    pub fn now(&self) -> Timestamp {
        let elapsed = self.start_real.elapsed().mul_f64(self.scale) + self.skew();
        let elapsed = jiff::SignedDuration::try_from(elapsed).unwrap_or(jiff::SignedDuration::MAX);
        self.start_wall.saturating_add(elapsed).unwrap_or(Timestamp::MAX)
    }

    /// Cluster time now, formatted as Kubernetes writes timestamps (RFC 3339, whole seconds, `Z`).
    pub fn now_rfc3339(&self) -> String {
        format_time(self.now())
    }

    /// Jumps cluster time forward; every sleeper wakes up and re-checks its deadline.
    pub fn advance(&self, by: Duration) {
        if let Ok(mut skew) = self.skew.lock() {
            *skew += by;
        }
        self.advanced.send_modify(|n| *n += 1);
    }

    fn skew(&self) -> Duration {
        self.skew.lock().map(|s| *s).unwrap_or_default()
    }

    /// Converts a span of cluster time into the real time it takes at the current scale.
    pub fn real_duration(&self, cluster: Duration) -> Duration {
        cluster.div_f64(self.scale)
    }

    /// Sleeps for a span of cluster time (returns early if the clock is advanced past it).
    pub async fn sleep(&self, cluster: Duration) {
        let until = self.now() + jiff::SignedDuration::try_from(cluster).unwrap_or(jiff::SignedDuration::MAX);
        self.sleep_until(until).await;
    }

    /// Sleeps until cluster time reaches `deadline`.
    pub async fn sleep_until(&self, deadline: Timestamp) {
        let mut advanced = self.advanced.subscribe();
        loop {
            let now = self.now();
            if now >= deadline {
                return;
            }
            let remaining = Duration::try_from(deadline.duration_since(now)).unwrap_or(Duration::ZERO);
            tokio::select! {
                _ = tokio::time::sleep(self.real_duration(remaining)) => {}
                changed = advanced.changed() => {
                    if changed.is_err() {
                        tokio::time::sleep(self.real_duration(remaining)).await;
                    }
                }
            }
        }
    }

    /// A receiver that changes whenever the clock is advanced by hand, so loops that compute
    /// their own deadlines can re-evaluate them.
    pub fn advances(&self) -> watch::Receiver<u64> {
        self.advanced.subscribe()
    }
}

/// Formats a timestamp the way Kubernetes serialises `metav1.Time` (`2026-01-02T03:04:05Z`).
pub fn format_time(t: Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Parses an RFC 3339 timestamp as found in `shutdownTime` or `creationTimestamp`.
pub fn parse_time(s: &str) -> Option<Timestamp> {
    s.parse::<Timestamp>().ok()
}

/// Parses a duration as behaviour annotations write it: Go-style (`500ms`, `2s`, `1m30s`,
/// `1h`), which jiff's friendly format reads, or a bare number of seconds (`2`, `0.5`).
/// Negative and unreadable values are `None`.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    if let Ok(secs) = s.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    Duration::try_from(s.parse::<jiff::SignedDuration>().ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advance_moves_now_forward() {
        let clock = Clock::real();
        let before = clock.now();
        clock.advance(Duration::from_secs(3600));
        let after = clock.now();
        assert!(after.duration_since(before) >= jiff::SignedDuration::from_secs(3600));
    }

    #[tokio::test]
    async fn sleep_until_wakes_on_advance() {
        let clock = std::sync::Arc::new(Clock::real());
        let deadline = clock.now() + jiff::SignedDuration::from_secs(600);
        let c = clock.clone();
        let sleeper = tokio::spawn(async move { c.sleep_until(deadline).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        clock.advance(Duration::from_secs(601));
        tokio::time::timeout(Duration::from_secs(5), sleeper)
            .await
            .expect("sleeper should wake once the clock passes its deadline")
            .expect("sleeper task");
    }

    #[tokio::test]
    async fn scaled_clock_runs_faster() {
        let clock = Clock::scaled(100.0);
        let before = clock.now();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let elapsed = clock.now().duration_since(before);
        assert!(elapsed >= jiff::SignedDuration::from_secs(4), "elapsed {elapsed:?}");
    }

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_duration("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("soon"), None);
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration(""), None);
    }

    #[test]
    fn times_format_like_kubernetes() {
        let t: Timestamp = "2026-01-02T03:04:05.678Z".parse().expect("valid");
        assert_eq!(format_time(t), "2026-01-02T03:04:05Z");
    }
}
