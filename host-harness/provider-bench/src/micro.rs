//! Criterion drives the micro measurements (warm-up, sample schedule, its own statistics and
//! saved baselines under `target/criterion`, so a run says how much changed since the last);
//! every call's own duration is kept as well, for the p50/p99 the table shows. Operations are
//! synchronous closures: an async one is driven with `Runtime::block_on`, as the native
//! provider drives each of its requests.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::Criterion;

use crate::stats::Samples;

/// A criterion instance configured for one report run.
pub struct Micro {
    criterion: Criterion,
    warm_up: Duration,
}

impl Micro {
    /// Short warm-up and measurement in `quick` mode, criterion's usual otherwise.
    pub fn new(quick: bool) -> Self {
        let (warm_up, measure, samples) = if quick {
            (Duration::from_millis(300), Duration::from_secs(1), 20)
        } else {
            (Duration::from_secs(1), Duration::from_secs(3), 50)
        };
        let criterion =
            Criterion::default().warm_up_time(warm_up).measurement_time(measure).sample_size(samples).without_plots();
        Self { criterion, warm_up }
    }

    /// Measures `op` under criterion as `id`; returns every call's duration (warm-up excluded).
    /// The first error ends the measurement and is returned.
    pub fn measure(&mut self, id: &str, mut op: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Samples> {
        self.measure_timed(id, || {
            let started = Instant::now();
            op().map(|()| started.elapsed())
        })
    }

    /// [`Self::measure`] for an operation that times itself: `op` returns the part of its work
    /// to count (an instantiate without the teardown that follows it, say).
    pub fn measure_timed(
        &mut self,
        id: &str,
        mut op: impl FnMut() -> anyhow::Result<Duration>,
    ) -> anyhow::Result<Samples> {
        let kept: Arc<Mutex<Vec<Duration>>> = Arc::default();
        let failure: Arc<Mutex<Option<anyhow::Error>>> = Arc::default();
        // Criterion warms up for `warm_up` first, then measures: keep what comes after.
        let warm_up_ends = Instant::now() + self.warm_up;
        self.criterion.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut durations = Vec::with_capacity(usize::try_from(iters).unwrap_or(0));
                for _ in 0..iters {
                    let outcome = op();
                    let took = outcome.as_ref().map_or(Duration::ZERO, |d| *d);
                    total += took;
                    durations.push(took);
                    if let Err(e) = outcome {
                        if let Ok(mut f) = failure.lock() {
                            f.get_or_insert(e);
                        }
                        break;
                    }
                }
                if Instant::now() > warm_up_ends
                    && let Ok(mut k) = kept.lock()
                {
                    k.extend(durations);
                }
                total
            })
        });
        if let Some(e) = failure.lock().ok().and_then(|mut f| f.take()) {
            return Err(e.context(format!("measuring {id}")));
        }
        let kept = kept.lock().map(|k| k.clone()).unwrap_or_default();
        Ok(Samples::new(kept))
    }
}
