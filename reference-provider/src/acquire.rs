//! Acquire: a lease that holds all its own state, for a sandbox that does not exist.
//!
//! The request's ids and config are checked, the config's `acquire` behaviour runs, then the
//! lease is made: its id is `reference:<acquisition-id>`, so a retried acquire gets the same
//! id (with a fresh expiry: the provider cannot know the first attempt's); it expires at the
//! requested time when one is given and at most `leaseTtlSeconds` from now; it is reusable when
//! the host asks. A requested expiry that is not in the future is `rejected`. The env is never
//! read, so no value of it can reach the lease or a log line.

use contract::{AcquireRequest, Lease, ProviderError};

use crate::behaviour;
use crate::clock::{Clock, show_time};
use crate::config::{self, Operation};
use crate::expiry;
use crate::input_limits;
use crate::lease::{LeaseState, lease_id};
use crate::log::Log;

/// Makes the lease (see the module docs).
pub fn acquire(clock: &dyn Clock, log: &dyn Log, request: &AcquireRequest) -> Result<Lease, ProviderError> {
    input_limits::check_request(request)?;
    let config = config::parse(&request.config)?;
    behaviour::apply(&config, Operation::Acquire, clock, log)?;
    let now = clock.now_millis();
    let Some(expires_at) = expiry::capped(now, config.lease_ttl_seconds, request.requested_expires_at) else {
        let asked = request.requested_expires_at.map_or_else(|| "no time".to_string(), show_time);
        return Err(ProviderError::rejected(format!(
            "acquire asks for a lease that ends at {asked}, which is not after now ({}); ask for a time in the future, \
             or none for the config's lease TTL",
            show_time(now)
        )));
    };
    let id = lease_id(&request.acquisition_id);
    let state = LeaseState::new(
        id.clone(),
        now,
        expires_at,
        config.lease_ttl_seconds,
        request.reusable,
        request.run_id.clone(),
        request.agent_id.clone(),
    );
    log.info("acquired a lease", &[("lease", &id), ("expires-at", &show_time(expires_at))]);
    Ok(state.to_lease())
}

#[cfg(test)]
mod tests {
    use contract::EnvVar;
    use serde_json::json;

    use crate::input_limits::HOST_ID;
    use crate::testkit::{Env, NOW, SECRET_VALUE, config, config_with, request};

    #[test]
    fn a_retried_acquire_gets_the_same_lease_id() {
        let env = Env::new();
        let provider = env.provider();
        let first = provider.acquire(request(&config(), "a-1")).unwrap();
        env.clock.advance_millis(5_000);
        let retry = provider.acquire(request(&config(), "a-1")).unwrap();
        assert_eq!(first.provider_lease_id, "reference:a-1");
        assert_eq!(retry.provider_lease_id, first.provider_lease_id);
        let other = provider.acquire(request(&config(), "a-2")).unwrap();
        assert_ne!(other.provider_lease_id, first.provider_lease_id);
    }

    #[test]
    fn the_expiry_is_the_requested_one_capped_by_the_lease_ttl() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with(json!({"leaseTtlSeconds": 60}));
        let lease = provider.acquire(request(&config, "a-1")).unwrap();
        assert_eq!(lease.expires_at, Some(NOW + 60_000), "the TTL without a request");
        let asked = |at| contract::AcquireRequest { requested_expires_at: Some(at), ..request(&config, "a-1") };
        assert_eq!(provider.acquire(asked(NOW + 10_001)).unwrap().expires_at, Some(NOW + 10_001), "honoured");
        assert_eq!(provider.acquire(asked(NOW + 3_600_000)).unwrap().expires_at, Some(NOW + 60_000), "capped");
        assert_eq!(provider.acquire(asked(i64::MAX)).unwrap().expires_at, Some(NOW + 60_000));
        for past in [i64::MIN, 0, NOW] {
            let err = provider.acquire(asked(past)).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{past}: {err}");
            assert!(err.message().contains("not after now"), "{err}");
        }
    }

    #[test]
    fn the_lease_keeps_what_later_calls_need_and_no_env_value() {
        let env = Env::new();
        let req = contract::AcquireRequest {
            env: vec![EnvVar { name: "TOKEN".into(), value: SECRET_VALUE.into(), secret: true }],
            reusable: true,
            agent_id: Some("agent-7".into()),
            ..request(&config_with(json!({"leaseTtlSeconds": 120})), "a-3")
        };
        let lease = env.provider().acquire(req).unwrap();
        assert!(lease.reusable);
        let metadata: serde_json::Value = serde_json::from_str(&lease.metadata).unwrap();
        assert_eq!(metadata["acquired-at"], NOW);
        assert_eq!(metadata["expires-at"], NOW + 120_000);
        assert_eq!(metadata["lease-ttl-seconds"], 120);
        assert_eq!((metadata["run-id"].as_str(), metadata["agent-id"].as_str()), (Some("run-1"), Some("agent-7")));
        let everything = format!("{lease:?}{}", env.log_text());
        assert!(!everything.contains(SECRET_VALUE), "{everything}");
    }

    #[test]
    fn bad_ids_and_configs_are_refused_before_anything_runs() {
        let env = Env::new();
        let provider = env.provider();
        let slow = config_with(json!({"operations": {"acquire": {"delayMillis": 100}}}));
        for id in [String::new(), "i".repeat(HOST_ID.max + 1)] {
            let err = provider.acquire(request(&slow, &id)).unwrap_err();
            assert_eq!(err.kind(), "rejected", "{err}");
            assert!(err.message().len() < 300, "no id echoed whole: {err}");
        }
        let long_run = contract::AcquireRequest { run_id: "r".repeat(300), ..request(&slow, "a-1") };
        assert!(provider.acquire(long_run).unwrap_err().message().contains("the run id"));
        let long_agent = contract::AcquireRequest { agent_id: Some("g".repeat(300)), ..request(&slow, "a-1") };
        assert!(provider.acquire(long_agent).unwrap_err().message().contains("the agent id"));
        let huge = format!("{{\"pad\": \"{}\"}}", "p".repeat(crate::input_limits::CONFIG_TEXT.max));
        assert_eq!(provider.acquire(request(&huge, "a-1")).unwrap_err().kind(), "invalid-config");
        let err = provider.acquire(request("{\"leaseTtlSeconds\": 0}", "a-1")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid-config at /leaseTtlSeconds: must be between 1 and 604800, not 0; run \
                                     validate-config for every problem"
        );
        assert!(env.clock.sleeps().is_empty(), "the configured delay never ran");
    }

    #[test]
    fn a_configured_acquire_failure_makes_no_lease() {
        let env = Env::new();
        let config =
            config_with(json!({"operations": {"acquire": {"fail": {"error": "capacity", "retryable": true}}}}));
        let err = env.provider().acquire(request(&config, "a-1")).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("capacity", true));
        assert!(!env.log_text().contains("acquired a lease"), "{}", env.log_text());
    }
}
