//! What agent-sandbox's extension controllers (template, warm pool, claim) share: which API
//! versions the cluster serves, the Sandboxes as they read them, the template's blueprint, and
//! the owner references that tie a Sandbox to its pool or claim.
//!
//! The three controllers are separate clients with separate identities (as [`ControllerKind`]
//! says), so the request log tells their calls apart, though upstream runs them in one binary.
//!
//! [`ControllerKind`]: super::ControllerKind

pub mod blueprint;
pub mod caches;
pub mod discovery;
pub mod sandbox_view;
pub mod triggers;

pub use contract::k8s::agent_sandbox::{EXTENSIONS_GROUP, name_hash};

/// Label on a pool member (and its pod template): [`blueprint::Template::blueprint_hash`] of
/// the template it was made from, so a pool under `Recreate` knows which members are stale.
/// Adoption removes it. (Only the cluster's controllers read it, so it is not in the contract.)
pub const TEMPLATE_HASH_LABEL: &str = "agents.x-k8s.io/sandbox-template-hash";

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::DynamicObject;

/// The name, namespace and uid of an extension object (`kind` for the error): a controller
/// cannot act on one without them.
pub fn identity(obj: &DynamicObject, kind: &str) -> anyhow::Result<(String, String, String)> {
    let meta = &obj.metadata;
    let name = meta.name.clone().ok_or_else(|| anyhow::anyhow!("{kind} without metadata.name"))?;
    let namespace = meta.namespace.clone().ok_or_else(|| anyhow::anyhow!("{kind} {name} without a namespace"))?;
    let uid = meta.uid.clone().ok_or_else(|| anyhow::anyhow!("{kind} {namespace}/{name} without a uid"))?;
    Ok((name, namespace, uid))
}

/// The object's `status` as `T`; empty (the default) when absent, null or not of that shape,
/// as right after a create.
pub fn status<T: serde::de::DeserializeOwned + Default>(obj: &DynamicObject) -> T {
    obj.data
        .get("status")
        .filter(|s| !s.is_null())
        .and_then(|s| serde_json::from_value(s.clone()).ok())
        .unwrap_or_default()
}

/// A controller reference (`controller: true`, `blockOwnerDeletion: true`), so garbage
/// collection removes the dependent with its owner and foreground deletion waits for it.
pub fn controller_reference(api_version: &str, kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: name.to_string(),
        uid: uid.to_string(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The object's controller reference, if any.
pub fn controller_of(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references.iter().flatten().find(|r| r.controller == Some(true))
}

/// Whether an owner reference names a kind of the extensions group, whatever its version
/// (references keep the version they were written with, so a group and kind match is what
/// counts, as upstream's `MatchesGroupKind`).
pub fn is_extension_kind(reference: &OwnerReference, kind: &str) -> bool {
    reference.kind == kind && reference.api_version.split('/').next() == Some(EXTENSIONS_GROUP)
}

/// Whether the object's controller is the owner with this uid (the uid, not the name, decides:
/// an owner deleted and re-created under its name owns nothing of its predecessor's).
pub fn is_controlled_by(meta: &ObjectMeta, uid: &str) -> bool {
    controller_of(meta).is_some_and(|r| r.uid == uid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extension_kinds_match_by_group_and_kind_whatever_the_version() {
        let reference = |api_version: &str, kind: &str| controller_reference(api_version, kind, "p", "u");
        assert!(is_extension_kind(
            &reference("extensions.agents.x-k8s.io/v1alpha1", "SandboxWarmPool"),
            "SandboxWarmPool"
        ));
        assert!(is_extension_kind(
            &reference("extensions.agents.x-k8s.io/v1beta1", "SandboxWarmPool"),
            "SandboxWarmPool"
        ));
        assert!(!is_extension_kind(&reference("agents.x-k8s.io/v1beta1", "SandboxWarmPool"), "SandboxWarmPool"));
        assert!(!is_extension_kind(
            &reference("extensions.agents.x-k8s.io/v1beta1", "SandboxClaim"),
            "SandboxWarmPool"
        ));
        let meta = ObjectMeta { owner_references: Some(vec![reference("v1", "X")]), ..Default::default() };
        assert!(is_controlled_by(&meta, "u"));
        assert!(!is_controlled_by(&meta, "other"));
    }
}
