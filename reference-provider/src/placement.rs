//! The lease in contract 0.3.0's terms: the neutral `lease` record (`provider-lease-id`,
//! `expires-at`, `reusable`, `metadata`), and where its sandbox runs as the `kubernetes`
//! export says it (`backends`, `placement-of`), which a host stores beside the neutral lease.
//!
//! There is no Kubernetes object behind a lease of this provider, and the placement says so
//! in the contract's terms: an empty namespace, API version and workload uid (no object was
//! created), and no pod. `backend` is required and the contract's enum has no case for "no
//! workload"; it is `sandbox`, as the typed field of the 0.1.0 and 0.2.0 lease was, and
//! `backends()` is empty: the provider runs neither backend, so a host that picks providers by
//! backend never sends it real work.
//!
//! The placement is the same for every lease, so it is known from the lease id alone and
//! nothing of it is written into the metadata: the lease a host stores (the neutral lease with
//! this placement beside it) reads exactly as it did under contract 0.2.0, metadata included.
//! `placement-of` answers for every id this provider writes and none for another provider's.

use contract::{Backend, Lease};

use crate::lease::is_ours;

/// Where a lease's sandbox runs (`kubernetes.placement`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    pub backend: Backend,
    pub namespace: String,
    pub api_version: String,
    pub workload_uid: String,
    pub pod_name: Option<String>,
    pub pod_uid: Option<String>,
    pub pod_ip: Option<String>,
}

impl Placement {
    /// The placement of every lease this provider writes: no object, no pod.
    pub fn no_workload() -> Self {
        Self {
            backend: Backend::Sandbox,
            namespace: String::new(),
            api_version: String::new(),
            workload_uid: String::new(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
        }
    }
}

/// The backends this provider runs sandboxes on (`kubernetes.backends`): none, as `describe`
/// says.
pub fn backends() -> Vec<Backend> {
    crate::describe::describe().backends
}

/// Where the lease with this id runs (`kubernetes.placement-of`): [`Placement::no_workload`]
/// for an id this provider writes, none for another provider's.
pub fn placement_of(provider_lease_id: &str) -> Option<Placement> {
    is_ours(provider_lease_id).then(Placement::no_workload)
}

/// The whole lease the provider's logic works on, from the neutral fields: every lease, this
/// provider's or not, gets [`Placement::no_workload`] (no call reads the placement; a lease of
/// another provider is refused by its id).
pub fn whole(provider_lease_id: String, expires_at: Option<i64>, reusable: bool, metadata: String) -> Lease {
    let Placement { backend, namespace, api_version, workload_uid, pod_name, pod_uid, pod_ip } =
        Placement::no_workload();
    Lease {
        provider_lease_id,
        backend,
        namespace,
        api_version,
        workload_uid,
        pod_name,
        pod_uid,
        pod_ip,
        claimed_sandbox: None,
        expires_at,
        reusable,
        metadata,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::testkit::{Env, NOW, config, request};

    #[test]
    fn a_lease_of_this_provider_is_placed_nowhere_and_another_is_not_placed() {
        let env = Env::new();
        let lease = env.provider().acquire(request(&config(), "p-1")).unwrap();
        let placed = placement_of(&lease.provider_lease_id).expect("a placement for its own lease");
        assert_eq!(placed, Placement::no_workload());
        assert_eq!(
            (placed.namespace.as_str(), placed.api_version.as_str(), placed.workload_uid.as_str(), placed.pod_name),
            ("", "", "", None)
        );
        for foreign in ["k8s:job:default:pc-1", "reference:", ""] {
            assert_eq!(placement_of(foreign), None, "{foreign}");
        }
        assert!(backends().is_empty());
    }

    #[test]
    fn the_neutral_lease_and_its_placement_make_the_lease_a_host_stored_under_0_2_0() {
        let env = Env::new();
        let lease = env.provider().acquire(request(&config(), "p-2")).unwrap();
        let back = whole(lease.provider_lease_id.clone(), lease.expires_at, lease.reusable, lease.metadata.clone());
        assert_eq!(back, lease, "nothing is lost going neutral and back");
        let stored = serde_json::to_value(&lease).unwrap();
        assert_eq!(
            stored,
            json!({
                "provider-lease-id": "reference:p-2", "backend": "sandbox", "namespace": "", "api-version": "",
                "workload-uid": "", "pod-name": null, "pod-uid": null, "pod-ip": null,
                "expires-at": NOW + 3_600_000, "reusable": false, "metadata": lease.metadata,
            })
        );
        let metadata: Value = serde_json::from_str(&lease.metadata).unwrap();
        assert!(metadata.get("kubernetes").is_none(), "no placement in the metadata: {metadata}");
    }
}
