//! The provider's only way to the cluster: a small `Kube` trait with the operations of the
//! WIT `kube` interface. The component glue implements it with the host's imports; unit tests
//! and benchmarks implement it with an in-memory fake, so the provider's logic runs natively.

use std::time::Duration;

use serde_json::Value;

/// A resource type: group (empty for core), version and plural.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub plural: String,
}

impl ResourceType {
    /// A resource type from its three parts.
    pub fn new(group: &str, version: &str, plural: &str) -> Self {
        Self { group: group.to_string(), version: version.to_string(), plural: plural.to_string() }
    }

    /// `v1` or `group/version`, as in an object's `apiVersion`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }
}

/// The patch types of the Kubernetes API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
}

/// How dependents of a deleted object are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    Background,
    Foreground,
    Orphan,
}

/// Options of a DELETE.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    pub propagation: Option<Propagation>,
    pub precondition_uid: Option<String>,
    pub precondition_resource_version: Option<String>,
    pub grace_period_seconds: Option<i64>,
}

/// Options of a LIST.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    pub limit: Option<u32>,
    pub continue_token: Option<String>,
    pub resource_version: Option<String>,
}

/// Options of a WATCH.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WatchOptions {
    pub label_selector: Option<String>,
    pub field_selector: Option<String>,
    /// Start after this version; `None` starts with the current state.
    pub resource_version: Option<String>,
    pub timeout_seconds: Option<u32>,
    pub allow_bookmarks: bool,
}

/// One watch event.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent {
    Added(Value),
    Modified(Value),
    Deleted(Value),
    /// A resourceVersion the watch may resume from.
    Bookmark(String),
}

/// How to run a command in a pod (`pods/exec`): no shell, the runtime runs `command` as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOptions {
    /// The container; none for the pod's only (or default) one.
    pub container: Option<String>,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// Written to standard input, which stays open until the command ends (see the WIT's
    /// `exec-options`); none opens no stdin.
    pub stdin: Option<Vec<u8>>,
    /// The host closes the stream after this long and reports `timed_out`.
    pub timeout: Duration,
    /// Bytes kept of each stream (the host may keep fewer).
    pub max_output_bytes: u32,
}

/// What an exec'd command did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// From the exec's final status; none when the stream ended without one.
    pub exit_code: Option<i32>,
    /// The host closed the stream at the timeout.
    pub timed_out: bool,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

pub use contract::KubeError;

/// An open watch.
pub trait Watch {
    /// The next event, waiting at most `timeout`; `Ok(None)` when none came in time. An error
    /// ends the watch: `Gone` asks for a re-list, `Transport` for a resume from the last version.
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchEvent>, KubeError>;
}

/// Kubernetes access, as the host's `kube` interface offers it. Bodies are JSON values.
pub trait Kube {
    type Watch: Watch;

    fn get(&self, resource: &ResourceType, namespace: Option<&str>, name: &str) -> Result<Value, KubeError>;
    fn create(&self, resource: &ResourceType, namespace: Option<&str>, body: &Value) -> Result<Value, KubeError>;
    fn patch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, KubeError>;
    fn delete(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError>;
    /// The List object, with `metadata.resourceVersion` and `metadata.continue`.
    fn list(&self, resource: &ResourceType, namespace: Option<&str>, options: &ListOptions)
    -> Result<Value, KubeError>;
    fn watch(
        &self,
        resource: &ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<Self::Watch, KubeError>;
    /// Versions a group serves, preferred first; empty when the group is not served.
    fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError>;
    /// Whether the host's policy lets the provider work in `namespace` (no cluster call); the
    /// error is the host's explanation.
    fn check_namespace(&self, namespace: &str) -> Result<(), String>;
    /// Runs a command in a container of `pod`; a non-zero exit is an output, not an error.
    fn exec(&self, namespace: &str, pod: &str, options: &ExecOptions) -> Result<ExecOutput, KubeError>;
}
