//! What an operation does before it answers, as its config says: a fixed delay, a stall
//! measured from the host's deadline, then a configured failure. Deterministic: the same config
//! does the same on every call (a provider without state cannot count attempts, so "fail the
//! first time only" is not expressible).
//!
//! - `delayMillis`: sleep that long, then go on.
//! - `stall` `before-deadline`: sleep until `marginMillis` before the host's deadline (at once
//!   when less is left), then go on: the answer arrives just inside the deadline.
//! - `stall` `past-deadline`: sleep until `marginMillis` past the deadline. The host must end
//!   the call by then (its instance is discarded, nothing after runs); if it does not, the call
//!   answers `timeout` saying the host kept a call past its own deadline.
//! - `fail`: answer the configured `provider-error`.
//!
//! Without a host deadline (native use) a stall before it has nothing to measure from and goes
//! on at once; a stall past it answers `timeout` at once.

use std::time::Duration;

use contract::{ErrorDetail, ProviderError};

use crate::clock::Clock;
use crate::config::{Behaviour, Config, Operation, StallUntil, operation_path};
use crate::log::Log;

/// Does what the config says `operation` does before it answers; `Err` is the answer.
pub fn apply(config: &Config, operation: Operation, clock: &dyn Clock, log: &dyn Log) -> Result<(), ProviderError> {
    let Behaviour { delay_millis, stall, fail } = config.behaviour(operation);
    let name = operation.as_str();
    if let Some(delay) = delay_millis {
        log.info("delaying the answer as configured", &[("operation", name), ("delay-ms", &delay.to_string())]);
        clock.sleep(Duration::from_millis(delay));
    }
    if let Some(stall) = stall {
        let left = clock.call_remaining();
        let margin = stall.margin();
        match (stall.until, left) {
            (StallUntil::BeforeDeadline, None) => {
                log.warn("no host deadline to stall before; answering at once", &[("operation", name)]);
            }
            (StallUntil::BeforeDeadline, Some(left)) => {
                let wait = left.saturating_sub(margin);
                log.info(
                    "stalling until just before the host's deadline",
                    &[("operation", name), ("stall-ms", &millis(wait))],
                );
                clock.sleep(wait);
            }
            (StallUntil::PastDeadline, None) => {
                return Err(ProviderError::Timeout(ErrorDetail {
                    message: format!(
                        "{name} was configured to stall past the host's deadline, and the host set none; run it under \
                         a host, or remove {}/stall",
                        operation_path(operation)
                    ),
                    retryable: false,
                }));
            }
            (StallUntil::PastDeadline, Some(left)) => {
                let wait = left.saturating_add(margin);
                log.info("stalling past the host's deadline", &[("operation", name), ("stall-ms", &millis(wait))]);
                clock.sleep(wait);
                return Err(ProviderError::Timeout(ErrorDetail {
                    message: format!(
                        "{name} stalled {} ms, {} ms past the host's deadline as configured, and the host did not end \
                         the call: a host must end every call at its deadline (the deadline import said {} ms were \
                         left)",
                        wait.as_millis(),
                        margin.as_millis(),
                        left.as_millis()
                    ),
                    retryable: false,
                }));
            }
        }
    }
    match fail {
        Some(failure) => {
            log.info("failing as configured", &[("operation", name), ("error", failure.error.as_str())]);
            Err(failure.to_error(&format!("{}/fail", operation_path(operation))))
        }
        None => Ok(()),
    }
}

fn millis(d: Duration) -> String {
    d.as_millis().to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::testkit::{Env, config_with};

    fn config(operations: serde_json::Value) -> Config {
        crate::config::parse(&config_with(serde_json::json!({"operations": operations}))).unwrap()
    }

    #[test]
    fn an_operation_the_config_leaves_out_answers_at_once() {
        let env = Env::new();
        let config = config(serde_json::json!({"renew": {"delayMillis": 50}}));
        assert_eq!(apply(&config, Operation::Acquire, &env.clock, &env.log), Ok(()));
        assert!(env.clock.sleeps().is_empty());
    }

    #[test]
    fn a_delay_sleeps_then_answers() {
        let env = Env::new();
        let config = config(serde_json::json!({"acquire": {"delayMillis": 1500}}));
        assert_eq!(apply(&config, Operation::Acquire, &env.clock, &env.log), Ok(()));
        assert_eq!(env.clock.sleeps(), vec![Duration::from_millis(1500)]);
    }

    #[test]
    fn a_stall_before_the_deadline_wakes_its_margin_before_it() {
        let env = Env::new();
        env.clock.set_host_deadline(Duration::from_secs(30));
        let config = config(serde_json::json!({"renew": {"stall": {"until": "before-deadline", "marginMillis": 500}}}));
        assert_eq!(apply(&config, Operation::Renew, &env.clock, &env.log), Ok(()));
        assert_eq!(env.clock.sleeps(), vec![Duration::from_millis(29_500)]);
        assert_eq!(env.clock.call_remaining(), Some(Duration::from_millis(500)));
        env.clock.set_host_deadline(Duration::from_millis(100));
        assert_eq!(apply(&config, Operation::Renew, &env.clock, &env.log), Ok(()));
        assert_eq!(env.clock.sleeps()[1], Duration::ZERO, "less left than the margin: no wait");
    }

    #[test]
    fn a_stall_past_the_deadline_that_the_host_does_not_end_is_a_timeout_naming_the_host() {
        let env = Env::new();
        env.clock.set_host_deadline(Duration::from_secs(2));
        let config = config(serde_json::json!({"release": {"stall": {"until": "past-deadline"}}}));
        let err = apply(&config, Operation::Release, &env.clock, &env.log).unwrap_err();
        assert_eq!(env.clock.sleeps(), vec![Duration::from_millis(2_200)], "the default margin past it");
        assert_eq!((err.kind(), err.retryable()), ("timeout", false));
        assert!(err.message().contains("the host did not end the call"), "{err}");
    }

    #[test]
    fn without_a_host_deadline_a_stall_has_nothing_to_measure_from() {
        let env = Env::new();
        let before = config(serde_json::json!({"probe": {"stall": {"until": "before-deadline"}}}));
        assert_eq!(apply(&before, Operation::Probe, &env.clock, &env.log), Ok(()));
        let past = config(serde_json::json!({"probe": {"stall": {"until": "past-deadline"}}}));
        let err = apply(&past, Operation::Probe, &env.clock, &env.log).unwrap_err();
        assert_eq!(err.kind(), "timeout");
        assert!(env.clock.sleeps().is_empty(), "{:?}", env.clock.sleeps());
    }

    #[test]
    fn a_configured_failure_is_the_answer_every_time() {
        let env = Env::new();
        let config = config(serde_json::json!({"destroy": {"delayMillis": 10,
            "fail": {"error": "unavailable", "retryable": true, "message": "the backing store is down"}}}));
        for _ in 0..3 {
            let err = apply(&config, Operation::Destroy, &env.clock, &env.log).unwrap_err();
            assert_eq!(err, ProviderError::unavailable("the backing store is down"));
        }
        assert_eq!(env.clock.sleeps().len(), 3, "the delay comes first, every time");
        assert!(env.log_text().contains("failing as configured"), "{}", env.log_text());
    }

    #[test]
    fn every_error_case_can_be_configured() {
        let env = Env::new();
        for case in crate::config::ErrorCase::ALL {
            let fail = if case == crate::config::ErrorCase::InvalidConfig {
                serde_json::json!({"error": case.as_str()})
            } else {
                serde_json::json!({"error": case.as_str(), "retryable": true})
            };
            let config = config(serde_json::json!({"acquire": {"fail": fail}}));
            let err = apply(&config, Operation::Acquire, &env.clock, &env.log).unwrap_err();
            assert_eq!(err.kind(), case.as_str());
            assert_eq!(err.retryable(), case != crate::config::ErrorCase::InvalidConfig, "{case:?}");
            assert!(err.message().contains("configured failure"), "{err}");
        }
        let config = config(serde_json::json!({"acquire": {"fail": {"error": "invalid-config"}}}));
        match apply(&config, Operation::Acquire, &env.clock, &env.log) {
            Err(ProviderError::InvalidConfig(d)) => assert_eq!(d.path, "/operations/acquire/fail"),
            other => panic!("{other:?}"),
        }
    }
}
