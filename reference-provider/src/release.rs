//! Release: the run is over. There is no sandbox to destroy (ephemeral) or suspend (reusable),
//! so after the config's `release` behaviour runs, release succeeds for every lease, its own or
//! not, readable or not, and logs what it was.
//!
//! The provider keeps no record that the lease was released, so a later resume-check of the
//! same stored lease still answers from its expiry (see [`crate::resume`]). For a reusable
//! lease that is the contract's answer; for an ephemeral one it is what a provider without
//! state cannot avoid.

use contract::{LeaseRef, ProviderError};

use crate::behaviour;
use crate::clock::Clock;
use crate::config::{self, Operation};
use crate::lease::LeaseState;
use crate::log::Log;

/// Ends the run (see the module docs).
pub fn release(clock: &dyn Clock, log: &dyn Log, lease_ref: &LeaseRef) -> Result<(), ProviderError> {
    let config = config::parse(&lease_ref.config)?;
    behaviour::apply(&config, Operation::Release, clock, log)?;
    match LeaseState::read(&lease_ref.lease) {
        Ok(state) => {
            let kind = if state.reusable { "reusable" } else { "ephemeral" };
            log.info(
                "released a lease; there is no sandbox to keep or delete",
                &[("lease", &state.lease_id), ("kind", kind)],
            );
        }
        Err(why) => {
            log.warn("released a lease this provider cannot read; nothing to do", &[("reason", &why.to_string())])
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use contract::{Lease, LeaseRef};
    use serde_json::json;

    use crate::testkit::{Env, config, config_with, request, stored};

    #[test]
    fn release_succeeds_for_any_lease_and_twice() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(contract::AcquireRequest { reusable: true, ..request(&config(), "l-1") }).unwrap();
        provider.release(stored(&lease, &config())).unwrap();
        provider.release(stored(&lease, &config())).unwrap();
        assert!(env.log_text().contains("kind=reusable"), "{}", env.log_text());
        let foreign = Lease { provider_lease_id: "k8s:job:ns:pc-1".into(), metadata: "garbage".into(), ..lease };
        provider.release(stored(&foreign, &config())).unwrap();
        assert!(env.log_text().contains("cannot read"), "{}", env.log_text());
    }

    #[test]
    fn a_configured_release_failure_is_the_answer_and_a_garbage_config_is_invalid() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "l-2")).unwrap();
        let failing =
            config_with(json!({"operations": {"release": {"fail": {"error": "internal", "retryable": true}}}}));
        let err = provider.release(stored(&lease, &failing)).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("internal", true));
        let err = provider.release(LeaseRef { lease, config: "[]".into() }).unwrap_err();
        assert_eq!(err.kind(), "invalid-config");
    }
}
