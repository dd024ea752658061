//! Execute: there is no sandbox, so no command can run. After the config's `execute` behaviour
//! runs (a delay, a stall, a configured failure, as for every operation), the answer is
//! `unsupported`, for every lease and every request: the contract's case for "the provider
//! cannot do this", which the same call never turns into a result.
//!
//! The provider never pretends a command ran: a scripted `exec-result` would have to redact the
//! request's secret env from output it made up, and would teach a host nothing about a real
//! sandbox. What a host needs to test is how it handles `execute`'s answers and its deadline (the
//! call timeout plus the command's), and the config reaches every one: `fail` answers any
//! `provider-error` case, a `stall` is measured from the execute call's own deadline. A config
//! that does not parse is `invalid-config`, as for the other lease calls. The request is never
//! read: none of its command, arguments or env (secret values included) reaches a message or a
//! log line.

use std::borrow::Cow;

use contract::quote::shorten;
use contract::{ExecRequest, ExecResult, LeaseRef, ProviderError};

use crate::behaviour;
use crate::clock::Clock;
use crate::config::{self, Operation, operation_path};
use crate::lease::LEASE_ID_MAX;
use crate::log::Log;

/// Why every execute is `unsupported`.
pub fn unsupported_message() -> String {
    format!(
        "the reference provider runs no sandbox, so it cannot run a command: its leases hold only their own state. Run \
         commands with a provider that has a workload (the Kubernetes provider); to test other answers of execute \
         here, set {} in the config (a delay, a stall, a configured error)",
        operation_path(Operation::Execute)
    )
}

/// Answers an execute (see the module docs).
pub fn execute(
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    _request: &ExecRequest,
) -> Result<ExecResult, ProviderError> {
    let config = config::parse(&lease_ref.config)?;
    behaviour::apply(&config, Operation::Execute, clock, log)?;
    let id = lease_ref.lease.provider_lease_id.as_str();
    let id = if id.len() <= LEASE_ID_MAX { Cow::Borrowed(id) } else { shorten(id) };
    log.info("execute is unsupported: there is no sandbox to run a command in", &[("lease", &id)]);
    Err(ProviderError::unsupported(unsupported_message()))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use contract::{EnvVar, ExecRequest, LeaseRef};
    use serde_json::json;

    use crate::testkit::{Env, SECRET_VALUE, config, config_with, request, stored};

    fn command() -> ExecRequest {
        ExecRequest {
            command: "sh".into(),
            args: vec!["-c".into(), "echo $TOKEN".into()],
            cwd: Some("/workspace".into()),
            env: vec![EnvVar { name: "TOKEN".into(), value: SECRET_VALUE.into(), secret: true }],
            stdin: Some("input".into()),
            timeout_ms: Some(5_000),
        }
    }

    #[test]
    fn execute_is_unsupported_for_every_lease_and_says_why() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "x-1")).unwrap();
        let foreign = contract::Lease { provider_lease_id: "k8s:job:ns:pc-1".into(), ..lease.clone() };
        for lease in [lease, foreign] {
            let err = provider.execute(stored(&lease, &config()), command()).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), ("unsupported", false), "{err}");
            assert!(err.message().contains("runs no sandbox"), "{err}");
            assert!(err.message().contains("/operations/execute"), "it says how to test other answers: {err}");
        }
        let everything = format!("{}{}", env.log_text(), super::unsupported_message());
        assert!(!everything.contains(SECRET_VALUE) && !everything.contains("echo"), "the request is never read");
        assert!(env.log_text().contains("lease=reference:x-1"), "{}", env.log_text());
    }

    #[test]
    fn the_config_steers_execute_like_every_operation() {
        let env = Env::new();
        env.clock.set_host_deadline(Duration::from_secs(40));
        let provider = env.provider();
        let failing = config_with(json!({"operations": {"execute": {"delayMillis": 250,
            "fail": {"error": "unavailable", "retryable": true, "message": "the sandbox is away"}}}}));
        let lease = provider.acquire(request(&failing, "x-2")).unwrap();
        let err = provider.execute(stored(&lease, &failing), command()).unwrap_err();
        assert_eq!((err.kind(), err.retryable(), err.message()), ("unavailable", true, "the sandbox is away"));
        assert_eq!(env.clock.sleeps(), vec![Duration::from_millis(250)]);

        let stalling = config_with(
            json!({"operations": {"execute": {"stall": {"until": "before-deadline", "marginMillis": 1000}}}}),
        );
        let err = provider.execute(stored(&lease, &stalling), command()).unwrap_err();
        assert_eq!(err.kind(), "unsupported", "a stall before the deadline, then the answer");
        assert_eq!(env.clock.sleeps()[1], Duration::from_millis(40_000 - 250 - 1000));
    }

    #[test]
    fn a_config_that_does_not_parse_is_invalid_config() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "x-3")).unwrap();
        let err = provider.execute(LeaseRef { lease, config: "[]".into() }, command()).unwrap_err();
        assert_eq!(err.kind(), "invalid-config");
    }
}
