//! Percentiles of measured durations: what the table reports for every latency.

use std::time::Duration;

/// Durations of one measured thing, kept sorted once read.
#[derive(Debug, Clone, Default)]
pub struct Samples(Vec<Duration>);

impl Samples {
    /// Samples from measurements in any order.
    pub fn new(mut durations: Vec<Duration>) -> Self {
        durations.sort_unstable();
        Self(durations)
    }

    /// How many were measured.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether nothing was measured.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The `p`-th percentile (nearest rank; 0 < p <= 100), zero when empty.
    pub fn percentile(&self, p: f64) -> Duration {
        if self.0.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }

    /// The median.
    pub fn p50(&self) -> Duration {
        self.percentile(50.0)
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Duration {
        self.percentile(99.0)
    }

    /// The smallest, zero when empty.
    pub fn min(&self) -> Duration {
        self.0.first().copied().unwrap_or_default()
    }

    /// The largest, zero when empty.
    pub fn max(&self) -> Duration {
        self.0.last().copied().unwrap_or_default()
    }
}

/// A duration for a table cell, in the unit that keeps three significant digits readable.
pub fn fmt_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos < 10_000 {
        format!("{:.2} us", nanos as f64 / 1e3)
    } else if nanos < 1_000_000 {
        format!("{:.1} us", nanos as f64 / 1e3)
    } else if nanos < 1_000_000_000 {
        format!("{:.2} ms", nanos as f64 / 1e6)
    } else {
        format!("{:.2} s", nanos as f64 / 1e9)
    }
}

/// Bytes for a table cell, in MiB or KiB.
pub fn fmt_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let s = Samples::new((1..=100).rev().map(ms).collect());
        assert_eq!(s.p50(), ms(50));
        assert_eq!(s.p99(), ms(99));
        assert_eq!(s.percentile(100.0), ms(100));
        assert_eq!(Samples::new(vec![ms(7)]).p99(), ms(7));
        assert_eq!(Samples::default().p50(), Duration::ZERO);
    }

    #[test]
    fn units_keep_three_digits() {
        assert_eq!(fmt_duration(Duration::from_nanos(9_870)), "9.87 us");
        assert_eq!(fmt_duration(Duration::from_micros(249)), "249.0 us");
        assert_eq!(fmt_duration(ms(11)), "11.00 ms");
        assert_eq!(fmt_bytes(1_285_222), "1.2 MiB");
        assert_eq!(fmt_bytes(398_063), "388.7 KiB");
    }
}
