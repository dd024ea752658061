//! The scenarios every provider must pass. Each uses only the contract (the host's calls) and,
//! where it says so, the cluster: Kubernetes-only scenarios are skipped for a component that
//! uses no cluster, clock-driven ones against a real cluster.

mod destroy;
mod exec_race;
mod executes;
mod expiry;
mod foreign;
mod idempotency;
mod lifecycle;
mod resume;
mod reuse;

use contract::{EnvVar, ExecRequest};
use futures::future::BoxFuture;

use crate::context::Ctx;

/// How a scenario ended before its audit.
pub enum Stop {
    /// The component broke the contract; the text says how.
    Fail(String),
    /// The scenario cannot run here; the text says why.
    Skip(String),
}

impl From<String> for Stop {
    fn from(why: String) -> Self {
        Stop::Fail(why)
    }
}

/// What a scenario checked, or why it stopped.
pub type Outcome = Result<String, Stop>;

/// One scenario.
pub struct Scenario {
    /// Its name in the report.
    pub name: &'static str,
    /// Needs the cluster (the component must declare `kube` access).
    pub needs_cluster: bool,
    /// Needs a simulated cluster's hooks ([`crate::simulator`]).
    pub needs_simulator: bool,
    pub run: for<'a> fn(&'a Ctx<'a>) -> BoxFuture<'a, Outcome>,
}

/// Fails the scenario unless `cond` holds.
macro_rules! ensure {
    ($cond:expr, $($why:tt)+) => {
        if !$cond {
            return Err($crate::scenarios::Stop::Fail(format!($($why)+)));
        }
    };
}
pub(crate) use ensure;

/// Declares a scenario constant that runs an `async fn(&Ctx) -> Outcome`.
macro_rules! scenario {
    ($const:ident, $name:literal, cluster: $cluster:expr, simulator: $simulator:expr, $body:ident) => {
        pub const $const: $crate::scenarios::Scenario = $crate::scenarios::Scenario {
            name: $name,
            needs_cluster: $cluster,
            needs_simulator: $simulator,
            run: {
                fn run<'a>(
                    ctx: &'a $crate::context::Ctx<'a>,
                ) -> futures::future::BoxFuture<'a, $crate::scenarios::Outcome> {
                    Box::pin($body(ctx))
                }
                run
            },
        };
    };
}
pub(crate) use scenario;

/// A `sh -c` command with a generous timeout, with the secret env var `CANARY` when `secret`
/// is given.
pub(crate) fn sh(script: &str, secret: Option<&str>) -> ExecRequest {
    ExecRequest {
        command: "sh".into(),
        args: vec!["-c".into(), script.into()],
        cwd: None,
        env: secret.map(|s| EnvVar { name: "CANARY".into(), value: s.into(), secret: true }).into_iter().collect(),
        stdin: None,
        timeout_ms: Some(120_000),
    }
}

/// A host error as a scenario reports it.
pub(crate) fn failed(step: &str, error: provider_host::HostError) -> Stop {
    Stop::Fail(format!("{step} failed: {error}"))
}

/// Every scenario, in the order they run.
pub fn all() -> Vec<Scenario> {
    vec![
        lifecycle::LIFECYCLE,
        expiry::REQUESTED_EXPIRY,
        idempotency::RETRIED_ACQUIRE,
        idempotency::CONCURRENT_ACQUIRES,
        destroy::REPEATED_DESTROY,
        destroy::DESTROY_OF_NOTHING,
        destroy::DESTROY_WITH_BAD_METADATA,
        resume::WORKLOAD_DELETED,
        resume::POD_DELETED,
        resume::WORKLOAD_RECREATED,
        resume::WHILE_TERMINATING,
        reuse::RESUME_RIGHT_AFTER_RELEASE,
        expiry::AFTER_EXPIRY,
        foreign::FOREIGN_OBJECT_UNDER_THE_NAME,
        foreign::LEASE_INTO_ANOTHER_NAMESPACE,
        exec_race::EXEC_INTO_A_REPLACED_POD,
        executes::MANY_EXECUTES,
    ]
}
