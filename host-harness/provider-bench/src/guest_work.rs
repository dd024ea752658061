//! The guest's own work per operation, as the WebAssembly instructions it runs (wasmtime's
//! fuel, counted by a host loaded with `count_guest_instructions`).
//!
//! The times of the per-call section move with the machine's load, and a change to the
//! provider's code that saves a tenth of its guest time is lost in that noise. The count does
//! not move: the same component given the same answers runs the same instructions on any
//! machine, so it is the figure to compare across runs and commits. What it leaves out is the
//! host's side of a call (instantiation, the bridge, the requests), which the WASM / native
//! table holds.

use std::path::Path;

use embedded_cluster::EmbeddedCluster;
use provider_host::records::LeaseRef;
use provider_host::{Limits, ProviderHost};
use tokio::runtime::Runtime;

use crate::table::Table;
use crate::world::{self, BACKENDS};

/// The counts of one operation over the rounds, in the order they ran.
#[derive(Debug, Default)]
struct Counts(Vec<u64>);

impl Counts {
    fn cells(&self) -> [String; 3] {
        let mut sorted = self.0.clone();
        sorted.sort_unstable();
        let at = |i: usize| sorted.get(i).copied().map_or_else(|| "-".to_string(), fmt_count);
        [at(sorted.len().saturating_sub(1) / 2), at(0), at(sorted.len().saturating_sub(1))]
    }
}

/// A host that counts, and the instructions its calls ran.
struct Counter<'a> {
    runtime: &'a Runtime,
    host: ProviderHost,
}

impl Counter<'_> {
    /// Runs `call` and returns its result with the instructions the guest ran for it.
    fn count<R>(&self, call: impl Future<Output = R>) -> anyhow::Result<(R, u64)> {
        let before = self.instructions()?;
        let result = self.runtime.block_on(call);
        Ok((result, self.instructions()? - before))
    }

    fn instructions(&self) -> anyhow::Result<u64> {
        self.host.guest_instructions().ok_or_else(|| anyhow::anyhow!("the counting host counts no instructions"))
    }
}

/// The table: describe and validate-config, then each lifecycle operation per backend and
/// their sum, over `rounds` lifecycles on `cluster`.
pub fn measure(runtime: &Runtime, cluster: &EmbeddedCluster, component: &Path, rounds: usize) -> anyhow::Result<Table> {
    let limits = Limits { count_guest_instructions: true, ..Limits::default() };
    let counter = Counter { runtime, host: runtime.block_on(world::load(cluster, component, limits))? };
    let mut t = Table::new(
        "Guest instructions per operation (counted, not timed)",
        &["operation", "backend", "instructions p50", "min", "max"],
    );
    let mut row = |op: &str, backend: &str, counts: &Counts| {
        t.row([op.to_string(), backend.to_string()].into_iter().chain(counts.cells()));
    };
    let (mut describe, mut validate) = (Counts::default(), Counts::default());
    let config = world::config("sandbox");
    for _ in 0..rounds {
        let (done, n) = counter.count(counter.host.describe())?;
        done?;
        describe.0.push(n);
        let (done, n) = counter.count(counter.host.validate_config(&config))?;
        done?;
        validate.0.push(n);
    }
    row("describe", "-", &describe);
    row("validate-config", "sandbox", &validate);
    for backend in BACKENDS {
        let config = world::config(backend);
        let mut ops: [(&str, Counts); 5] =
            ["acquire", "resume-check", "renew", "destroy", "lifecycle"].map(|op| (op, Counts::default()));
        for round in 0..rounds {
            let counts = lifecycle(&counter, &config, &format!("guest-work-{backend}-{round}"))?;
            for (i, n) in counts.into_iter().enumerate() {
                ops[i].1.0.push(n);
            }
            ops[4].1.0.push(counts.iter().sum());
        }
        for (op, counts) in &ops {
            row(op, backend, counts);
        }
    }
    t.note(format!(
        "Instructions: wasmtime's fuel, one unit for each WebAssembly operator the guest runs in a call \
         (its instantiation included), counted by a second host on the same cluster; {rounds} rounds of each. \
         Lifecycle: acquire, resume-check, renew, destroy, summed per round. An acquire's count varies with the \
         watch events it sees before its workload is Ready; the others vary by a few dozen at most, as the \
         lengths of names, resource versions and times in the answers do."
    ));
    Ok(t)
}

/// One acquire, resume-check, renew and destroy, and the instructions of each.
fn lifecycle(counter: &Counter<'_>, config: &str, id: &str) -> anyhow::Result<[u64; 4]> {
    let (lease, acquire) = counter.count(counter.host.acquire(world::request(config, id)))?;
    let lease_ref: LeaseRef = world::lease_ref(&lease?, config);
    let (resumed, resume) = counter.count(counter.host.resume_check(lease_ref.clone()))?;
    resumed?;
    let expires = jiff::Timestamp::now().as_millisecond() + 1_800_000;
    let (renewed, renew) = counter.count(counter.host.renew(lease_ref.clone(), expires))?;
    renewed?;
    let (destroyed, destroy) = counter.count(counter.host.destroy(lease_ref))?;
    destroyed?;
    Ok([acquire, resume, renew, destroy])
}

/// A count with thousands separated, for a table cell.
fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_grouped_by_thousands() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1000), "1,000");
        assert_eq!(fmt_count(1_406_297), "1,406,297");
    }

    #[test]
    fn the_median_and_range_of_the_rounds() {
        assert_eq!(Counts(vec![30, 10, 20]).cells(), ["20", "10", "30"].map(String::from));
        assert_eq!(Counts(vec![7]).cells(), ["7", "7", "7"].map(String::from));
        assert_eq!(Counts(Vec::new()).cells(), ["-", "-", "-"].map(String::from));
    }
}
