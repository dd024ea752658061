//! Destroy: total and idempotent, from the lease id alone.
//!
//! The config's `destroy` behaviour runs first when the config parses; a config that does not
//! parse is ignored (destroy must work whatever the host kept), and a log line says so. The
//! report has one object per lease, kind `Lease`, named by the lease id:
//!
//! - `already-gone` for an id this provider did not write (nothing of it is this provider's),
//!   and for a lease whose expiry has passed (the metadata's, else the typed `expires-at`): an
//!   expired lease ended by itself;
//! - `deleted` otherwise, with any metadata, missing or garbage.
//!
//! Nothing records a destroy, so destroying an unexpired lease again reports `deleted` again,
//! and a resume-check of it is still `resumable` (see [`crate::resume`]). Destroy never fails
//! but as configured.

use contract::quote::shorten;
use contract::{DeleteOutcome, DestroyReport, LeaseRef, ObjectReport, ProviderError};

use crate::behaviour;
use crate::clock::Clock;
use crate::config::{self, Operation};
use crate::expiry;
use crate::lease::{LEASE_ID_MAX, LeaseState, is_ours};
use crate::log::Log;

/// The kind every report names: the lease is the only thing this provider makes.
pub const LEASE_KIND: &str = "Lease";

/// Destroys the lease (see the module docs).
pub fn destroy(clock: &dyn Clock, log: &dyn Log, lease_ref: &LeaseRef) -> Result<DestroyReport, ProviderError> {
    match config::parse(&lease_ref.config) {
        Ok(config) => behaviour::apply(&config, Operation::Destroy, clock, log)?,
        Err(e) => log.warn("destroy ignores a config it cannot read", &[("problem", &e.to_string())]),
    }
    let lease = &lease_ref.lease;
    let id = lease.provider_lease_id.as_str();
    let outcome = if !is_ours(id) {
        DeleteOutcome::AlreadyGone
    } else {
        let expires_at = LeaseState::read(lease).map(|s| s.expires_at).ok().or(lease.expires_at);
        match expires_at {
            Some(at) if expiry::has_passed(at, clock.now_millis()) => DeleteOutcome::AlreadyGone,
            _ => DeleteOutcome::Deleted,
        }
    };
    let name = if id.len() <= LEASE_ID_MAX { id.to_string() } else { shorten(id).into_owned() };
    let shown = if outcome == DeleteOutcome::Deleted { "deleted" } else { "already gone" };
    log.info("destroyed a lease", &[("lease", &name), ("outcome", shown)]);
    Ok(DestroyReport { objects: vec![ObjectReport { kind: LEASE_KIND.to_string(), name, outcome }] })
}

#[cfg(test)]
mod tests {
    use contract::{Backend, DeleteOutcome, DestroyReport, Lease, LeaseRef, ObjectReport};
    use serde_json::json;

    use crate::testkit::{Env, config, config_with, request, stored};

    /// A lease a host might hand back after losing everything but the id.
    fn bare(id: &str) -> LeaseRef {
        LeaseRef {
            lease: Lease {
                provider_lease_id: id.to_string(),
                backend: Backend::Job,
                namespace: "x".into(),
                api_version: "garbage".into(),
                workload_uid: String::new(),
                pod_name: None,
                pod_uid: None,
                pod_ip: None,
                claimed_sandbox: None,
                expires_at: None,
                reusable: false,
                metadata: "{{{ not json".into(),
            },
            config: "also garbage".into(),
        }
    }

    fn report(name: &str, outcome: DeleteOutcome) -> DestroyReport {
        DestroyReport { objects: vec![ObjectReport { kind: "Lease".into(), name: name.into(), outcome }] }
    }

    #[test]
    fn destroy_works_from_the_lease_id_alone_and_twice() {
        let env = Env::new();
        let provider = env.provider();
        let lease = provider.acquire(request(&config(), "d-1")).unwrap();
        for _ in 0..2 {
            assert_eq!(
                provider.destroy(bare(&lease.provider_lease_id)),
                Ok(report("reference:d-1", DeleteOutcome::Deleted))
            );
        }
        assert!(env.log_text().contains("ignores a config"), "{}", env.log_text());
    }

    #[test]
    fn an_expired_lease_and_another_providers_are_already_gone() {
        let env = Env::new();
        let provider = env.provider();
        let config = config_with(json!({"leaseTtlSeconds": 5}));
        let lease = provider.acquire(request(&config, "d-2")).unwrap();
        env.clock.advance_millis(5_000);
        assert_eq!(provider.destroy(stored(&lease, &config)), Ok(report("reference:d-2", DeleteOutcome::AlreadyGone)));
        let typed_only =
            LeaseRef { lease: Lease { expires_at: lease.expires_at, ..bare("reference:d-2").lease }, config };
        assert_eq!(provider.destroy(typed_only), Ok(report("reference:d-2", DeleteOutcome::AlreadyGone)));
        assert_eq!(
            provider.destroy(bare("k8s:job:ns:pc-1")),
            Ok(report("k8s:job:ns:pc-1", DeleteOutcome::AlreadyGone))
        );
    }

    #[test]
    fn a_huge_foreign_id_is_named_by_a_short_prefix() {
        let env = Env::new();
        let report = env.provider().destroy(bare(&"q".repeat(100_000))).unwrap();
        assert!(report.objects[0].name.len() < 100, "{}", report.objects[0].name);
        assert_eq!(report.objects[0].outcome, DeleteOutcome::AlreadyGone);
    }

    #[test]
    fn a_configured_destroy_failure_is_the_answer() {
        let env = Env::new();
        let provider = env.provider();
        let failing =
            config_with(json!({"operations": {"destroy": {"fail": {"error": "unavailable", "retryable": true}}}}));
        let lease = provider.acquire(request(&failing, "d-3")).unwrap();
        let err = provider.destroy(stored(&lease, &failing)).unwrap_err();
        assert_eq!((err.kind(), err.retryable()), ("unavailable", true));
    }
}
