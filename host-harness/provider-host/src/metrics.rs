//! The host's metrics, for an operator's Prometheus: calls by operation and outcome, their
//! latency and how much of it was the provider's code and the host's imports
//! ([`crate::call_time`]), the leases this process holds, warm and cold claims, and the host's
//! policy denials. `sandbox-host serve --metrics-addr` serves them in the Prometheus text format
//! (OpenMetrics), made by the Prometheus project's own Rust client (`prometheus-client`).
//!
//! The metrics, their labels and HELP texts are registered in [`HostMetrics::new`]; the
//! README's table lists them, and a test of `serve --metrics-addr` holds it to a scrape.

use std::collections::HashSet;
use std::sync::Mutex;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use serde_json::Value;

use crate::call_time::CallTimes;

/// The content type of [`HostMetrics::encode`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    operation: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabels {
    operation: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WarmLabels {
    warm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct InstanceLabels {
    made: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
}

/// Latency buckets from 5 ms to about 82 s: an execute of `true` to an acquire that waits for
/// an image pull.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

/// Buckets from 50 us to about 26 s for the parts of a call: the guest's own work is tens of
/// microseconds to milliseconds, an import as long as the cluster takes.
fn part_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// The metrics of one host process; share it with an `Arc`.
pub struct HostMetrics {
    registry: Registry,
    calls: Family<CallLabels, Counter>,
    durations: Family<OperationLabels, Histogram, fn() -> Histogram>,
    guest: Family<OperationLabels, Histogram, fn() -> Histogram>,
    imports: Family<OperationLabels, Histogram, fn() -> Histogram>,
    instances: Family<InstanceLabels, Counter>,
    leases: Gauge,
    live: Mutex<HashSet<String>>,
    claims: Family<WarmLabels, Counter>,
    denials: Family<VerbLabels, Counter>,
}

impl std::fmt::Debug for HostMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMetrics").field("registry", &self.registry).finish_non_exhaustive()
    }
}

impl Default for HostMetrics {
    fn default() -> Self {
        Self::new()
    }
}

impl HostMetrics {
    /// Every metric at zero, registered under `sandbox_host_`.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("sandbox_host");
        let calls = Family::<CallLabels, Counter>::default();
        registry.register("calls", "Calls answered, by operation and outcome (ok, or the error's kind)", calls.clone());
        let durations =
            Family::<OperationLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        registry.register("call_duration_seconds", "How long each call took, by operation", durations.clone());
        let guest = Family::<OperationLabels, Histogram, fn() -> Histogram>::new_with_constructor(part_histogram);
        registry.register(
            "call_guest_seconds",
            "Time each call spent running the provider's WebAssembly, by operation",
            guest.clone(),
        );
        let imports = Family::<OperationLabels, Histogram, fn() -> Histogram>::new_with_constructor(part_histogram);
        registry.register(
            "call_import_seconds",
            "Time each call spent in the host's imports (Kubernetes requests, watches, exec), by operation",
            imports.clone(),
        );
        let instances = Family::<InstanceLabels, Counter>::default();
        // Both series from the start, so a rate of calls that made their own has a zero to start from.
        for made in ["ahead", "in-call"] {
            instances.get_or_create(&InstanceLabels { made: made.into() }).inc_by(0);
        }
        registry.register(
            "call_instances",
            "Instances calls ran on, by whether the host made it ahead of the call or the call made its own \
             (more calls at once than instances made ahead)",
            instances.clone(),
        );
        let leases = Gauge::default();
        registry.register(
            "leases",
            "Leases this process acquired or found resumable and has not seen released, destroyed or expired",
            leases.clone(),
        );
        let claims = Family::<WarmLabels, Counter>::default();
        // Both series from the start, so a rate of warm claims has a zero to start from.
        for warm in ["true", "false"] {
            claims.get_or_create(&WarmLabels { warm: warm.into() }).inc_by(0);
        }
        registry.register(
            "claims",
            "Leases acquired on the claim backend, by whether a warm pool's Sandbox was adopted",
            claims.clone(),
        );
        let denials = Family::<VerbLabels, Counter>::default();
        registry.register("policy_denials", "Provider requests the host's policy refused, by verb", denials.clone());
        Self {
            registry,
            calls,
            durations,
            guest,
            imports,
            instances,
            leases,
            live: Mutex::new(HashSet::new()),
            claims,
            denials,
        }
    }

    /// Records one answered call: `outcome` is `ok` or the error's kind; `result` is its JSON
    /// answer (a lease, a resume outcome) and `lease_id` the lease it was about, if any.
    pub fn call(&self, operation: &str, outcome: &str, seconds: f64, result: Option<&Value>, lease_id: Option<&str>) {
        self.calls.get_or_create(&CallLabels { operation: operation.into(), outcome: outcome.into() }).inc();
        self.durations.get_or_create(&OperationLabels { operation: operation.into() }).observe(seconds);
        if outcome != "ok" {
            return;
        }
        let mut live = self.live.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (operation, result) {
            ("acquire", Some(lease)) => {
                if let Some(id) = lease["provider-lease-id"].as_str() {
                    live.insert(id.to_string());
                }
                if lease["backend"] == "claim" {
                    let warm = lease["claimed-sandbox"]["warm"].as_bool().unwrap_or(false);
                    self.claims.get_or_create(&WarmLabels { warm: warm.to_string() }).inc();
                }
            }
            ("resume-check" | "renew", Some(outcome)) => {
                let id = lease_id.map(str::to_string);
                match (outcome.get("resumable"), id) {
                    (Some(_), Some(id)) => {
                        live.insert(id);
                    }
                    (None, Some(id)) => {
                        live.remove(&id);
                    }
                    _ => {}
                }
            }
            ("release" | "destroy", _) => {
                if let Some(id) = lease_id {
                    live.remove(id);
                }
            }
            _ => {}
        }
        self.leases.set(i64::try_from(live.len()).unwrap_or(i64::MAX));
    }

    /// Records where one call's time went; the rest of its duration is the host's own work
    /// around the export (instance, arguments, result).
    pub(crate) fn call_times(&self, operation: &str, times: CallTimes) {
        let labels = OperationLabels { operation: operation.into() };
        self.guest.get_or_create(&labels).observe(times.guest.as_secs_f64());
        self.imports.get_or_create(&labels).observe(times.imports.as_secs_f64());
    }

    /// Records the instance a call ran on: one the host made ahead, or one the call made itself.
    pub(crate) fn instance(&self, made_ahead: bool) {
        let made = if made_ahead { "ahead" } else { "in-call" };
        self.instances.get_or_create(&InstanceLabels { made: made.into() }).inc();
    }

    /// Records a provider request the host's policy refused.
    pub(crate) fn denied(&self, verb: &str) {
        self.denials.get_or_create(&VerbLabels { verb: verb.into() }).inc();
    }

    /// The metrics in the Prometheus (OpenMetrics) text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            text = format!("# the metrics could not be encoded: {e}\n");
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn calls_leases_and_claims_are_counted() {
        let metrics = HostMetrics::new();
        let lease =
            json!({"provider-lease-id": "k8s:claim:ns:pc-1", "backend": "claim", "claimed-sandbox": {"warm": true}});
        metrics.call("acquire", "ok", 0.02, Some(&lease), None);
        metrics.call("acquire", "capacity", 0.5, None, None);
        metrics.call("resume-check", "ok", 0.01, Some(&json!({"expired": "gone"})), Some("k8s:job:ns:gone"));
        let text = metrics.encode();
        for line in [
            "sandbox_host_calls_total{operation=\"acquire\",outcome=\"ok\"} 1",
            "sandbox_host_calls_total{operation=\"acquire\",outcome=\"capacity\"} 1",
            "sandbox_host_leases 1",
            "sandbox_host_claims_total{warm=\"true\"} 1",
            "sandbox_host_call_duration_seconds_count{operation=\"acquire\"} 2",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from:\n{text}");
        }
        metrics.call("destroy", "ok", 0.01, None, Some("k8s:claim:ns:pc-1"));
        metrics.denied("delete");
        let ms = std::time::Duration::from_millis;
        metrics.call_times("renew", CallTimes { guest: ms(1), imports: ms(3), whole: ms(5), ..CallTimes::default() });
        metrics.instance(true);
        metrics.instance(true);
        let text = metrics.encode();
        for line in [
            "sandbox_host_call_guest_seconds_sum{operation=\"renew\"} 0.001",
            "sandbox_host_call_import_seconds_sum{operation=\"renew\"} 0.003",
            "sandbox_host_call_instances_total{made=\"ahead\"} 2",
            "sandbox_host_call_instances_total{made=\"in-call\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from:\n{text}");
        }
        assert!(text.lines().any(|l| l == "sandbox_host_leases 0"), "{text}");
        assert!(text.lines().any(|l| l == "sandbox_host_policy_denials_total{verb=\"delete\"} 1"), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }
}
