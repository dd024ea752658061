//! Release: the run is over. An ephemeral lease is destroyed (a claim lease always is: a claimed
//! Sandbox is not kept); a reusable Sandbox lease is suspended (its pod deleted, its workspace
//! claim kept) for a later resume-check. Idempotent:
//! a workload that is already gone (404) is released; any other failure, 410 included, is an
//! error, because it does not say whether the Sandbox was suspended.

use crate::backend;
use crate::errors::ProviderError;
use crate::kube_api::Kube;
use crate::lease::LeaseRef;
use crate::log::Log;
use crate::naming::LeaseId;

/// Releases a lease (see the module docs): a reusable Sandbox lease is suspended by its backend
/// (`backend::sandbox`), every other lease destroyed.
pub fn release<K: Kube>(kube: &K, log: &dyn Log, lease_ref: &LeaseRef) -> Result<(), ProviderError> {
    let id = LeaseId::parse(&lease_ref.lease.provider_lease_id).map_err(|e| ProviderError::rejected(e.to_string()))?;
    backend::steps::<K>(id.backend).release(kube, log, lease_ref, &id)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::acquire::AcquireRequest;
    use crate::fake_kube::Verb;
    use crate::kube_api::KubeError;
    use crate::testkit::{Env, NS, config, config_with, request, stored};
    use crate::workload_state::sandbox_spec_suspended;

    #[test]
    fn an_ephemeral_lease_is_destroyed() {
        for backend in ["sandbox", "job"] {
            let env = Env::new();
            let provider = env.provider();
            let config = config(backend);
            let lease = provider.acquire(request(&config, "l-1")).unwrap();
            provider.release(stored(&lease, &config)).unwrap();
            assert!(env.kube.names_in(NS).is_empty(), "{backend}: {:?}", env.kube.names_in(NS));
            provider.release(stored(&lease, &config)).unwrap();
        }
    }

    #[test]
    fn a_reusable_lease_is_suspended_and_kept() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
        let lease = provider.acquire(AcquireRequest { reusable: true, ..request(&config, "l-2") }).unwrap();
        provider.release(stored(&lease, &config)).unwrap();
        let sandbox = env.kube.object("sandboxes", NS, "pc-l-2").unwrap();
        assert!(sandbox_spec_suspended(&sandbox));
        assert!(env.kube.object("secrets", NS, "pc-l-2-env").is_some());
        assert!(env.kube.object("pods", NS, "pc-l-2").is_none());
        env.kube.remove("sandboxes", NS, "pc-l-2");
        provider.release(stored(&lease, &config)).unwrap();
    }

    #[test]
    fn a_410_is_an_error_never_released() {
        for verb in [Verb::Get, Verb::Patch] {
            let env = Env::new();
            let provider = env.provider();
            let config = config_with("sandbox", json!({"sandbox": {"workspaceVolume": {"size": "1Gi"}}}));
            let lease = provider.acquire(AcquireRequest { reusable: true, ..request(&config, "l-3") }).unwrap();
            env.kube.fail(verb, "sandboxes", 1, KubeError::Gone("the resource version is too old".into()));
            let err = provider.release(stored(&lease, &config)).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), ("unavailable", true), "{verb:?}: {err}");
            assert!(!sandbox_spec_suspended(&env.kube.object("sandboxes", NS, "pc-l-3").unwrap()), "{verb:?}");
            provider.release(stored(&lease, &config)).unwrap();
            assert!(sandbox_spec_suspended(&env.kube.object("sandboxes", NS, "pc-l-3").unwrap()), "{verb:?}");
        }
    }
}
