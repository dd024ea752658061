//! Whether a valid config fits the host it runs under: its namespace is one the host's policy
//! allows, and its readiness wait plus the clean-up after a failed acquire fit the host's call
//! deadline. Both are asked of the host (no cluster call), so `validate-config`, `probe` and
//! `acquire` refuse such a config before anything is sent; otherwise the host would deny every
//! call, or end an acquire mid-wait with no time left to clean up.

use std::time::Duration;

use crate::clock::{Clock, Deadline};
use crate::compensation::COMPENSATION_BUDGET;
use crate::config::{Config, ConfigProblem, Validation};
use crate::kube_api::Kube;

/// Time kept free at the end of a call on top of the clean-up budget: the last API answers and
/// the lease's encoding must still fit before the host's deadline.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(1);

/// A wait of at most `wanted` that ends early enough for `reserve` (clean-up) and the margin
/// to fit before the host ends the call; `wanted` alone where no host sets a deadline.
pub fn wait_deadline(clock: &dyn Clock, wanted: Duration, reserve: Duration) -> Deadline {
    let budget = match clock.call_remaining() {
        None => wanted,
        Some(left) => wanted.min(left.saturating_sub(reserve + DEADLINE_MARGIN)),
    };
    Deadline::after(clock, budget)
}

/// The longest readiness wait that fits a host call of `call_timeout`, in whole seconds.
pub fn max_readiness_seconds(call_timeout: Duration) -> u64 {
    call_timeout.saturating_sub(COMPENSATION_BUDGET + DEADLINE_MARGIN).as_secs()
}

/// The problems of a parsed config with the host (an empty list when it fits).
pub fn problems<K: Kube>(namespace: &str, readiness_seconds: u32, kube: &K, clock: &dyn Clock) -> Vec<ConfigProblem> {
    let mut out = Vec::new();
    if let Err(why) = kube.check_namespace(namespace) {
        out.push(ConfigProblem { path: "/namespace".to_string(), message: why });
    }
    if let Some(timeout) = clock.call_timeout() {
        let fits = max_readiness_seconds(timeout);
        if u64::from(readiness_seconds) > fits {
            out.push(ConfigProblem {
                path: "/readinessTimeoutSeconds".to_string(),
                message: format!(
                    "{readiness_seconds} s does not fit the host's call deadline of {} ms: an acquire also needs up to \
                     {} s to clean up after a failure and {} s of margin. Set it to at most {fits}, or raise the \
                     host's call-timeout-ms.",
                    timeout.as_millis(),
                    COMPENSATION_BUDGET.as_secs(),
                    DEADLINE_MARGIN.as_secs()
                ),
            });
        }
    }
    out
}

/// `validation` of `config` (none when it has errors) with the host's problems added; a config
/// that does not fit is not ok and has no normalized form.
pub fn check<K: Kube>(mut validation: Validation, config: Option<&Config>, kube: &K, clock: &dyn Clock) -> Validation {
    let Some(config) = config else {
        return validation;
    };
    let found = problems(&config.namespace, config.readiness_timeout_seconds, kube, clock);
    if !found.is_empty() {
        validation.errors.extend(found);
        validation.ok = false;
        validation.normalized_config = None;
    }
    validation
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_end_early_enough_for_the_clean_up() {
        let env = Env::new();
        let reserve = COMPENSATION_BUDGET;
        let wanted = Duration::from_secs(20);
        assert_eq!(wait_deadline(&env.clock, wanted, reserve).remaining(&env.clock), wanted, "no host deadline");
        env.clock.set_host_deadline(Duration::from_secs(10));
        assert_eq!(wait_deadline(&env.clock, wanted, reserve).remaining(&env.clock), Duration::from_secs(4));
        env.clock.set_host_deadline(Duration::from_secs(3));
        assert!(wait_deadline(&env.clock, wanted, reserve).passed(&env.clock), "nothing left to wait");
    }
    use crate::testkit::{Env, NS, config_with};

    #[test]
    fn a_namespace_outside_the_policy_is_an_error_at_its_path() {
        let env = Env::new();
        env.kube.allow_namespaces(&["elsewhere"]);
        let validation = env.provider().validate_config(&config_with("sandbox", serde_json::json!({})));
        assert!(!validation.ok);
        assert_eq!(validation.normalized_config, None);
        let problem = validation.errors.iter().find(|p| p.path == "/namespace").expect("namespace refused");
        assert!(problem.message.contains(NS), "{}", problem.message);
        assert!(env.kube.calls().is_empty(), "nothing was sent to the cluster");
    }

    #[test]
    fn a_readiness_wait_longer_than_the_host_allows_is_an_error() {
        let env = Env::new();
        env.clock.set_host_deadline(Duration::from_secs(30));
        let fits =
            env.provider().validate_config(&config_with("job", serde_json::json!({"readinessTimeoutSeconds": 24})));
        assert!(fits.ok, "{:?}", fits.errors);
        let too_long = config_with("job", serde_json::json!({"readinessTimeoutSeconds": 25}));
        let validation = env.provider().validate_config(&too_long);
        assert!(!validation.ok);
        let problem = &validation.errors[0];
        assert_eq!(problem.path, "/readinessTimeoutSeconds");
        assert!(problem.message.contains("at most 24"), "{}", problem.message);
        assert_eq!(max_readiness_seconds(Duration::from_secs(3)), 0);
    }
}
