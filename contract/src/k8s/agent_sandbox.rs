//! agent-sandbox's names, labels, annotations and condition reasons, written once for the
//! provider (which creates Sandboxes and SandboxClaims and reads their status), the host (which
//! grants access to them) and the embedded cluster's controllers (which act on them).
//!
//! They follow agent-sandbox's `api/v1beta1/sandbox_types.go` and
//! `extensions/api/v1beta1/*_types.go` (release v0.5, kept in v1.0); the extensions group
//! (`SandboxTemplate`, `SandboxWarmPool`, `SandboxClaim`) is served as v1beta1 from v0.5 and as
//! v1alpha1 before.

/// API group of the `Sandbox` resource.
pub const GROUP: &str = "agents.x-k8s.io";
/// The PVC the Sandbox controller makes from a `volumeClaimTemplates` entry: `<template>-<sandbox>`
/// (`claimName` in `sandbox_controller.go`), which a provider deletes and a simulated
/// controller creates under that name.
pub fn volume_claim_name(template: &str, sandbox: &str) -> String {
    format!("{template}-{sandbox}")
}

/// Plural of `Sandbox`.
pub const SANDBOXES: &str = "sandboxes";
/// Kind of a Sandbox.
pub const SANDBOX_KIND: &str = "Sandbox";
/// The versions of the `Sandbox` resource, preferred first (v1alpha1 before agent-sandbox v0.5).
pub const SANDBOX_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];
/// API group of `SandboxTemplate`, `SandboxWarmPool` and `SandboxClaim`.
pub const EXTENSIONS_GROUP: &str = "extensions.agents.x-k8s.io";
/// The versions of the extensions group, preferred first.
pub const EXTENSIONS_VERSIONS: [&str; 2] = ["v1beta1", "v1alpha1"];

/// Plural of `SandboxClaim`.
pub const CLAIMS: &str = "sandboxclaims";
/// Plural of `SandboxTemplate`.
pub const TEMPLATES: &str = "sandboxtemplates";
/// Plural of `SandboxWarmPool`.
pub const WARM_POOLS: &str = "sandboxwarmpools";
/// Kind of a claim.
pub const CLAIM_KIND: &str = "SandboxClaim";
/// Kind of a template.
pub const TEMPLATE_KIND: &str = "SandboxTemplate";
/// Kind of a warm pool.
pub const WARM_POOL_KIND: &str = "SandboxWarmPool";

/// Label on a Sandbox's pod, Service and claims: [`name_hash`] of the Sandbox's name.
pub const SANDBOX_NAME_HASH_LABEL: &str = "agents.x-k8s.io/sandbox-name-hash";
/// Annotation the Sandbox controller writes with the name of the Sandbox's pod.
pub const POD_NAME_ANNOTATION: &str = "agents.x-k8s.io/pod-name";

/// Label on a warm pool's members (and their pods): [`name_hash`] of the pool's name. A claim
/// that adopts a member removes it, so the pool stops counting the member and replenishes.
pub const WARM_POOL_LABEL: &str = "agents.x-k8s.io/warm-pool-sandbox";
/// Label on a pool member and an adopted Sandbox: [`name_hash`] of the template's name.
pub const TEMPLATE_REF_HASH_LABEL: &str = "agents.x-k8s.io/sandbox-template-ref-hash";
/// Annotation on a Sandbox made from a template: the template's name.
pub const TEMPLATE_REF_ANNOTATION: &str = "agents.x-k8s.io/sandbox-template-ref";
/// Label saying how a claim's Sandbox started: [`LAUNCH_WARM`] or [`LAUNCH_COLD`].
pub const LAUNCH_TYPE_LABEL: &str = "agents.x-k8s.io/launch-type";
/// [`LAUNCH_TYPE_LABEL`] of a Sandbox adopted from a warm pool.
pub const LAUNCH_WARM: &str = "warm";
/// [`LAUNCH_TYPE_LABEL`] of a Sandbox a claim created from its template.
pub const LAUNCH_COLD: &str = "cold";
/// Label on a claim's Sandbox and its pod template: the claim's uid.
pub const CLAIM_UID_LABEL: &str = "agents.x-k8s.io/claim-uid";
/// Annotation on a claim naming the warm Sandbox it is adopting (written before the Sandbox's
/// ownership moves, so an interrupted adoption is finished, never repeated with another member).
pub const ASSIGNED_SANDBOX_ANNOTATION: &str = "agents.x-k8s.io/sandbox-name";

/// The `Ready` condition of a Sandbox and of a claim.
pub const READY: &str = "Ready";
/// The `Finished` condition a claim mirrors from its Sandbox.
pub const FINISHED: &str = "Finished";

/// The reasons of a claim's `Ready` condition that the claim controller sets itself (the others
/// are forwarded from the Sandbox's own `Ready`).
pub mod claim_reason {
    /// The template (of the pool, in v1beta1) does not exist.
    pub const TEMPLATE_NOT_FOUND: &str = "TemplateNotFound";
    /// The warm pool the claim names does not exist.
    pub const WARM_POOL_NOT_FOUND: &str = "WarmPoolNotFound";
    /// `additionalPodMetadata` uses a key or value the controller refuses.
    pub const INVALID_METADATA: &str = "InvalidMetadata";
    /// `env` conflicts with the template's `envVarsInjectionPolicy`.
    pub const ENV_VARS_INJECTION_REJECTED: &str = "EnvVarsInjectionRejected";
    /// `volumeClaimTemplates` conflict with the template's policy.
    pub const VOLUME_CLAIM_TEMPLATES_ERROR: &str = "VolumeClaimTemplatesError";
    /// The claim passed its `lifecycle.shutdownTime`.
    pub const CLAIM_EXPIRED: &str = "ClaimExpired";
    /// The Sandbox passed its own `shutdownTime`.
    pub const SANDBOX_EXPIRED: &str = "SandboxExpired";
    /// The claim's Sandbox does not exist (yet, or any more).
    pub const SANDBOX_MISSING: &str = "SandboxMissing";
    /// The Sandbox exists and has no `Ready` condition yet.
    pub const SANDBOX_NOT_READY: &str = "SandboxNotReady";
    /// A Sandbox named like the claim exists and is not the claim's.
    pub const RECONCILER_ERROR: &str = "ReconcilerError";

    /// Reasons after which waiting for the claim to become ready is pointless: the claim's
    /// spec, its template or its lifetime rules it out (agent-sandbox's own clients stop here).
    pub const TERMINAL: [&str; 6] = [
        TEMPLATE_NOT_FOUND,
        WARM_POOL_NOT_FOUND,
        INVALID_METADATA,
        ENV_VARS_INJECTION_REJECTED,
        VOLUME_CLAIM_TEMPLATES_ERROR,
        CLAIM_EXPIRED,
    ];
}

/// What a claim does when its `lifecycle.shutdownTime` passes.
pub mod shutdown_policy {
    /// Delete the claim (and so, by garbage collection, its Sandbox).
    pub const DELETE: &str = "Delete";
    /// Delete the claim in the foreground: it stays, terminating, until its Sandbox is gone.
    pub const DELETE_FOREGROUND: &str = "DeleteForeground";
    /// Keep the claim (its `Ready` says `ClaimExpired`) and delete only the Sandbox.
    pub const RETAIN: &str = "Retain";
}

/// The values of a v1alpha1 claim's `spec.warmpool` (agent-sandbox v0.4) that name no pool;
/// any other value names a `SandboxWarmPool`.
pub mod warm_pool_policy {
    /// Never adopt from a pool: the claim's Sandbox is always made from its template.
    pub const NONE: &str = "none";
    /// Adopt from any warm pool of the claim's template (the field's default).
    pub const DEFAULT: &str = "default";
}

/// FNV-1a 32-bit of a name as 8 lowercase hex digits: agent-sandbox's `NameHash`, the value of
/// [`SANDBOX_NAME_HASH_LABEL`], [`WARM_POOL_LABEL`] and [`TEMPLATE_REF_HASH_LABEL`], short and
/// valid as a label value whatever the name.
pub fn name_hash(name: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

/// Label key domains (with their subdomains) that a claim's `additionalPodMetadata` labels
/// may use: upstream's default `--allowed-label-domains`. Any other label, one without a
/// domain prefix included, makes the claim `InvalidMetadata`.
pub const ALLOWED_POD_LABEL_DOMAINS: [&str; 1] = ["sandbox.users.io"];
/// Annotation key domains (with their subdomains) that a claim's `additionalPodMetadata` may
/// not use (`InvalidMetadata`), but for [`EXEMPT_POD_ANNOTATIONS`].
pub const RESTRICTED_POD_ANNOTATION_DOMAINS: [&str; 3] = ["kubernetes.io", "k8s.io", "agents.x-k8s.io"];
/// Annotations in a restricted domain that a claim may still set on its pod.
pub const EXEMPT_POD_ANNOTATIONS: [&str; 1] = ["cluster-autoscaler.kubernetes.io/safe-to-evict"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_hash_is_fnv1a_32() {
        // Reference vectors of FNV-1a 32.
        assert_eq!(name_hash(""), "811c9dc5");
        assert_eq!(name_hash("a"), "e40c292c");
        assert_eq!(name_hash("foobar"), "bf9cf968");
    }
}
