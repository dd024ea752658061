//! The labels the provider puts on what it creates, which the host reads back (the
//! NetworkPolicy it prints selects sandbox pods by them): one spelling for both.

/// The installation's owner id, which the host stamps on everything the provider creates
/// (Kubernetes' recommended label for the tool that manages an object).
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The host's run id (hashed when it is not a valid label value).
pub const LABEL_RUN_ID: &str = "sandbox.paperclip.io/run-id";
/// The acquisition id (hashed when it is not a valid label value); on every object and pod of a
/// lease, so it proves adoption and selects a sandbox's pods.
pub const LABEL_ACQUISITION_ID: &str = "sandbox.paperclip.io/acquisition-id";
