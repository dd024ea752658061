//! The Kubernetes provider's lease id, `k8s:<backend>:<namespace>:<name>` with `:pvc` appended
//! when a Sandbox lease owns a persistent workspace claim. The name is the workload's: the
//! Sandbox, the Job, or (`k8s:claim:...`) the SandboxClaim. Namespaces and names are DNS-1123
//! labels, so `:` never occurs inside a part.
//!
//! The id alone names everything a lease owns: the provider destroys from it, and a host can
//! make a lease of it when the stored lease is lost (`sandbox-host destroy --lease-id`).

use std::fmt;

use crate::k8s::names::{DNS1123_LABEL_MAX_LENGTH, dns1123_label};
use crate::quote::quote;
use crate::{Backend, Lease};

/// The longest lease id the provider writes: `k8s:sandbox:<namespace>:<name>:pvc` with both
/// parts DNS-1123 labels.
pub const MAX_LEN: usize = "k8s:sandbox::".len() + 2 * DNS1123_LABEL_MAX_LENGTH + ":pvc".len();

/// The name of a sandbox's workspace volume, and of the Sandbox's volume claim template whose
/// claim (`workspace-<name>`) a lease with `:pvc` owns.
pub const WORKSPACE_VOLUME: &str = "workspace";

/// A parsed lease id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseId {
    /// Where the sandbox runs.
    pub backend: Backend,
    /// The namespace of everything the lease owns.
    pub namespace: String,
    /// The workload's name.
    pub name: String,
    /// The lease owns the PVC `workspace-<name>` (Sandbox backend only).
    pub workspace_pvc: bool,
}

/// Why a lease id is not one of the Kubernetes provider's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "provider lease id {} was not made by the Kubernetes provider (expected k8s:<sandbox|job|claim>:<namespace>:<name>[:pvc]); \
     the lease belongs to another provider or was corrupted",
    quote(.0)
)]
pub struct BadLeaseId(pub String);

impl LeaseId {
    /// Parses a lease id strictly: every part must be what acquire would have written, so
    /// nothing longer than [`MAX_LEN`] is split at all.
    pub fn parse(text: &str) -> Result<Self, BadLeaseId> {
        let bad = || BadLeaseId(text.to_string());
        if text.len() > MAX_LEN {
            return Err(bad());
        }
        let parts: Vec<&str> = text.split(':').collect();
        let (backend, namespace, name, flag) = match parts.as_slice() {
            ["k8s", backend, namespace, name] => (*backend, *namespace, *name, None),
            ["k8s", backend, namespace, name, flag] => (*backend, *namespace, *name, Some(*flag)),
            _ => return Err(bad()),
        };
        let backend = Backend::parse(backend).ok_or_else(bad)?;
        let workspace_pvc = match flag {
            None => false,
            Some("pvc") if backend == Backend::Sandbox => true,
            Some(_) => return Err(bad()),
        };
        if !dns1123_label(namespace).is_empty() || !dns1123_label(name).is_empty() {
            return Err(bad());
        }
        Ok(Self { backend, namespace: namespace.to_string(), name: name.to_string(), workspace_pvc })
    }

    /// `namespace/name`, for messages.
    pub fn qualified(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The lease this id alone makes, for `destroy` when the stored lease is lost: its backend
    /// and namespace, and no workload uid, so destroy deletes whatever holds the name (a stored
    /// lease's uid would spare a newer sandbox under it).
    pub fn bare_lease(&self) -> Lease {
        Lease {
            provider_lease_id: self.to_string(),
            backend: self.backend,
            namespace: self.namespace.clone(),
            api_version: String::new(),
            workload_uid: String::new(),
            pod_name: None,
            pod_uid: None,
            pod_ip: None,
            claimed_sandbox: None,
            expires_at: None,
            reusable: false,
            metadata: "{}".to_string(),
        }
    }
}

impl fmt::Display for LeaseId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "k8s:{}:{}:{}", self.backend.as_str(), self.namespace, self.name)?;
        if self.workspace_pvc {
            f.write_str(":pvc")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_round_trips_through_its_text() {
        for text in ["k8s:job:ns:pc-1", "k8s:sandbox:team-a:pc-2:pvc", "k8s:claim:default:pc-3"] {
            assert_eq!(LeaseId::parse(text).expect("an id").to_string(), text);
        }
        let longest = format!("k8s:sandbox:{}:{}:pvc", "n".repeat(63), "w".repeat(63));
        assert_eq!(longest.len(), MAX_LEN);
        assert!(LeaseId::parse(&longest).is_ok());
    }

    #[test]
    fn anything_acquire_would_not_write_is_refused() {
        for text in ["", "k8s:job:ns", "k8s:vm:ns:x", "k8s:job:ns:x:pvc", "k8s:job:NS:x", "ref:abc", "k8s:job:ns:x:y:z"]
        {
            assert!(LeaseId::parse(text).is_err(), "{text}");
        }
    }
}
