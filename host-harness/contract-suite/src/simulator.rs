//! What the suite can do only on a cluster it simulates: read the API server's request log,
//! hold a request at the API server, slow a pod's stop. A real cluster offers none of it, so
//! the scenarios that need it are skipped there and say so.
//!
//! The suite names these hooks without linking any simulator, so the product binary runs the
//! suite on a real cluster with no test bed in it; the embedded cluster implements them in the
//! `fault-matrix` crate.

use std::time::Duration;

/// Whose credentials a kubeconfig of the simulated cluster carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// The cluster's administrator: the suite's own checks and objects made behind the
    /// provider's back.
    Admin,
    /// The identity the host under test uses, which the request log tells apart.
    Provider,
}

/// One request the API server received, as much of it as a scenario judges.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenRequest {
    /// `get`, `create`, `watch`, ...
    pub verb: String,
    /// The plural resource (`pods`), empty for a non-resource path.
    pub resource: String,
    /// Empty for a cluster-scoped or non-resource request.
    pub namespace: String,
    /// Empty for a collection.
    pub name: String,
}

/// A hold [`Simulator::hold_exec`] placed, to ask about and lift.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold(pub u64);

/// A simulated cluster's hooks.
pub trait Simulator: Send + Sync {
    /// A kubeconfig (YAML) for `who`.
    fn kubeconfig(&self, who: Identity) -> anyhow::Result<String>;
    /// A position in the request log: what comes after it is [`Simulator::requests_since`].
    fn request_mark(&self) -> u64;
    /// The requests received since `mark`, oldest first.
    fn requests_since(&self, mark: u64) -> Vec<SeenRequest>;
    /// Holds the next exec request into pod `namespace/pod` at the API server for up to
    /// `longest` (or until [`Simulator::release`]).
    fn hold_exec(&self, namespace: &str, pod: &str, longest: Duration) -> Hold;
    /// Whether a request is being held by `hold` now.
    fn holding(&self, hold: Hold) -> bool;
    /// Lifts `hold`: a request it holds goes on, later ones are not held.
    fn release(&self, hold: Hold);
    /// The pod annotation (key, value) that makes a pod take `delay` to stop once deleted, as
    /// a real container that handles SIGTERM does.
    fn slow_stop(&self, delay: Duration) -> (String, String);
}
