//! Clean-up after a failed acquire: undo what the call created or adopted, newest first, within
//! its own budget, and say truthfully what is left and what the cluster does with it.
//!
//! Acquire orders its writes so that no object ever exists without an owner or an expiry: the
//! workload carries its leak guard from its create (a Sandbox `shutdownTime` with
//! `shutdownPolicy: Delete`, a claim's `lifecycle.shutdownTime` with `shutdownPolicy: Delete`, a
//! Job `activeDeadlineSeconds`), and the per-lease Secret is created with an ownerReference to
//! the workload. Whatever clean-up cannot delete therefore still goes
//! by itself, and the message says how and when. Deletes carry a uid precondition, so an object
//! that replaced ours under the same name is never touched; transient failures are retried
//! within [`COMPENSATION_BUDGET`]. A suspended Sandbox the call adopted (and resumed) is
//! suspended again, never deleted: its workspace is the user's data, and its Secret stays too.

use std::time::Duration;

use crate::adoption::proves_acquisition;
use crate::api_versions::SandboxVersion;
use crate::clock::{Clock, Deadline};
use crate::destroy;
use crate::host_fit;
use crate::kube_api::{Kube, KubeError, PatchType, ResourceType};
use crate::log::Log;
use crate::naming::Identity;
use crate::object;
use crate::retry::{GaveUp, Retrier};
use crate::rfc3339;
use crate::sandbox_manifest;

/// How long clean-up after a failed acquire may take, on top of the acquire's own deadline.
pub const COMPENSATION_BUDGET: Duration = Duration::from_secs(5);

/// What an object is to the lease; it decides what the cluster does with it if clean-up cannot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The Sandbox, Job or SandboxClaim (`kind`), which the cluster removes by itself at
    /// `expires_at` (epoch millis).
    Workload { kind: &'static str, expires_at: i64 },
    /// The per-lease Secret, owned by the workload.
    Secret,
}

impl Role {
    fn kind(self) -> &'static str {
        match self {
            Self::Workload { kind, .. } => kind,
            Self::Secret => "Secret",
        }
    }
}

/// What clean-up does to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Undo {
    /// Delete it.
    Delete,
    /// Suspend it (again): a suspended Sandbox the acquire adopted keeps its workspace.
    Suspend(SandboxVersion),
}

/// An object a failed acquire must undo.
#[derive(Debug, Clone)]
pub struct Touched {
    /// What it is to the lease.
    pub role: Role,
    /// Its resource type (the Sandbox version in use, Jobs, Secrets).
    pub resource: ResourceType,
    /// Its name, in the acquire's namespace.
    pub name: String,
    /// `None` when a create's answer was lost: the object may or may not exist.
    pub uid: Option<String>,
    /// Delete it, or suspend it again.
    pub undo: Undo,
}

/// What clean-up needs to know about the acquire besides the objects.
pub struct Scope<'a> {
    /// The namespace of every object.
    pub namespace: &'a str,
    /// Proves that an object whose create answer was lost is this acquisition's.
    pub identity: &'a Identity,
    /// What the cluster does by itself with the workload named by the first argument, whose
    /// leak guard fires at the second (epoch millis): its backend's `Steps::leak_guard`.
    pub leak_guard: &'a dyn Fn(&str, i64) -> String,
    /// The lease id a host can destroy.
    pub lease_id: &'a str,
}

/// How undoing one object ended.
enum Outcome {
    Done,
    /// Nothing of ours was there (gone, or replaced by an object that is not ours).
    Absent,
    Failed(String),
}

/// Undoes `touched` (in creation order), newest first. Returns the sentences that end the
/// acquire's error message: what was undone, or what is left and what becomes of it.
pub fn compensate<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    scope: &Scope<'_>,
    touched: &[Touched],
) -> String {
    // Inside the host's deadline too: a clean-up the host cuts off is no clean-up.
    let budget = host_fit::wait_deadline(clock, COMPENSATION_BUDGET, Duration::ZERO);
    // One retrier for all objects: once the cluster stopped answering for one, the others are
    // tried once each, not for as long again.
    let mut retrier = Retrier::new();
    let mut results: Vec<(&Touched, Outcome)> = Vec::new();
    for t in touched.iter().rev() {
        let outcome = if budget.passed(clock) {
            Outcome::Failed("clean-up budget spent".to_string())
        } else {
            undo(kube, clock, budget, &mut retrier, scope, t)
        };
        if let Outcome::Done = outcome {
            let what = format!("{} {}/{}", t.role.kind(), scope.namespace, t.name);
            let done = match t.undo {
                Undo::Delete => "clean-up after a failed acquire deleted an object",
                Undo::Suspend(_) => "clean-up after a failed acquire suspended the Sandbox it had resumed",
            };
            log.info(done, &[("object", &what)]);
        }
        results.push((t, outcome));
    }
    let text = report(scope, &results);
    if results.iter().any(|(_, o)| matches!(o, Outcome::Failed(_))) {
        // The acquire's error carries the report; this is the provider's own record of it.
        log.info("clean-up after a failed acquire left objects behind", &[("report", &text)]);
    }
    text
}

fn undo<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    budget: Deadline,
    retrier: &mut Retrier,
    scope: &Scope<'_>,
    t: &Touched,
) -> Outcome {
    let ns = Some(scope.namespace);
    if let Undo::Suspend(version) = t.undo {
        let patch = sandbox_manifest::suspend_patch(version);
        let suspend = || kube.patch(&t.resource, ns, &t.name, PatchType::Merge, &patch, None);
        return match retrier.call(clock, budget, suspend) {
            Ok(_) => Outcome::Done,
            Err(GaveUp::Final(KubeError::NotFound(_) | KubeError::NotOwned(_))) => Outcome::Absent,
            Err(g) => Outcome::Failed(last_error(&g)),
        };
    }
    let uid = match &t.uid {
        Some(uid) => uid.clone(),
        None => match retrier.call(clock, budget, || kube.get(&t.resource, ns, &t.name)) {
            Ok(found) if proves_acquisition(&found, scope.identity) => match object::uid(&found) {
                Some(uid) => uid.to_string(),
                None => return Outcome::Absent,
            },
            Ok(_) | Err(GaveUp::Final(KubeError::NotFound(_) | KubeError::NotOwned(_))) => return Outcome::Absent,
            Err(g) => return Outcome::Failed(last_error(&g)),
        },
    };
    // The delete destroy makes: background, under the uid, so an object that replaced ours
    // under the name (or one the host says is not this installation's) is left alone.
    match retrier.call(clock, budget, || destroy::delete(kube, &t.resource, scope.namespace, &t.name, Some(&uid))) {
        Ok(true) => Outcome::Done,
        Ok(false) => Outcome::Absent,
        Err(g) => Outcome::Failed(last_error(&g)),
    }
}

fn last_error(gave_up: &GaveUp) -> String {
    match gave_up {
        GaveUp::Lost { error, .. } => format!("the cluster stopped answering: {error}"),
        other => other.error().to_string(),
    }
}

/// The sentences for the error message (see [`compensate`]).
fn report(scope: &Scope<'_>, results: &[(&Touched, Outcome)]) -> String {
    let what = |t: &Touched| format!("{} {}/{}", t.role.kind(), scope.namespace, t.name);
    let workload = results.iter().find(|(t, _)| matches!(t.role, Role::Workload { .. }));
    let workload_deleted = workload.is_some_and(|(t, o)| t.undo == Undo::Delete && !matches!(o, Outcome::Failed(_)));
    let mut sentences = Vec::new();
    let mut left = Vec::new();
    let mut fates = Vec::new();
    // In creation order: the workload, then what it owns.
    for (t, outcome) in results.iter().rev() {
        match (t.undo, outcome) {
            (Undo::Delete, Outcome::Failed(error)) => {
                // A create whose answer never came may never have reached the cluster (a refused
                // connection): the object is then not there to delete, and the message says so.
                let unsure = if t.uid.is_none() { ", if its create reached the cluster" } else { "" };
                left.push(format!("{}{unsure} ({error})", what(t)));
                fates.push(fate(scope, t, workload.map(|(w, _)| *w), workload_deleted));
            }
            (Undo::Suspend(_), Outcome::Failed(error)) => sentences.push(format!(
                "Clean-up could not suspend {} again ({error}): it runs with its workspace until it is released, or \
                 until its shutdownTime {} when the cluster deletes it and its workspace. Acquire again with the \
                 same acquisition id to get its lease, then release it.",
                what(t),
                expiry(t.role)
            )),
            (Undo::Suspend(_), Outcome::Done) => sentences.push(format!(
                "{} was found suspended and is suspended again, its workspace and Secret kept; acquire again with \
                 the same acquisition id to resume it.",
                what(t)
            )),
            (_, Outcome::Done | Outcome::Absent) => {}
        }
    }
    if !left.is_empty() {
        sentences.insert(
            0,
            format!(
                "Clean-up could not delete: {}. {}. Destroy lease {} to remove them now.",
                left.join("; "),
                capitalise(&fates.join("; ")),
                scope.lease_id
            ),
        );
    } else if results.iter().any(|(t, _)| t.undo == Undo::Delete) {
        sentences.insert(0, "Everything this acquire created was deleted.".to_string());
    }
    sentences.join(" ")
}

fn expiry(role: Role) -> String {
    match role {
        Role::Workload { expires_at, .. } => rfc3339::format_seconds(expires_at),
        Role::Secret => "the lease's expiry".to_string(),
    }
}

/// What the cluster does with an object clean-up could not delete.
fn fate(scope: &Scope<'_>, t: &Touched, workload: Option<&Touched>, workload_deleted: bool) -> String {
    let what = format!("{} {}/{}", t.role.kind(), scope.namespace, t.name);
    match t.role {
        Role::Workload { expires_at, .. } => (scope.leak_guard)(&what, expires_at),
        Role::Secret => {
            let owner = workload.map_or_else(
                || "its owner".to_string(),
                |w| format!("its owner {} {}/{}", w.role.kind(), scope.namespace, w.name),
            );
            if workload_deleted {
                format!("garbage collection deletes {what} now that {owner} is deleted")
            } else {
                format!("garbage collection deletes {what} with {owner}")
            }
        }
    }
}

fn capitalise(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| first.to_uppercase().chain(chars).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_kube::{PodBehaviour, Verb};
    use crate::testkit::{Env, NOW, NS, assert_no_secret, assert_nothing_left, config, request};

    #[test]
    fn a_failure_after_the_first_create_cleans_up_and_returns_the_original_error() {
        let env = Env::new();
        env.kube.fail(Verb::Create, "secrets", 1, KubeError::Invalid("ownerReferences: bad".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-10")).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(err.message().starts_with("create Secret sandboxes/pc-acq-10-env was rejected"), "{err}");
        assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert_nothing_left(&env);
    }

    #[test]
    fn a_lost_create_answer_is_adopted_by_the_retried_create_or_else_still_cleaned_up() {
        let env = Env::new();
        // The Sandbox is created but its answer lost: the create is asked again, meets it (409)
        // and adopts it.
        env.kube.lose_create_answer("sandboxes", 1, KubeError::Timeout("no answer".into()));
        let lease = env.provider().acquire(request(&config("sandbox"), "acq-12")).expect("the retry adopts");
        assert_eq!(env.kube.count(Verb::Create, "sandboxes"), 2);
        assert_eq!(
            Some(lease.workload_uid.as_str()),
            env.kube.object("sandboxes", NS, "pc-acq-12").as_ref().and_then(object::uid)
        );

        // When the retry fails for good, clean-up must still find and delete the Sandbox whose
        // answer was lost (after checking its labels).
        let env = Env::new();
        env.kube.lose_create_answer("sandboxes", 1, KubeError::Timeout("no answer".into()));
        env.kube.fail(Verb::Create, "sandboxes", 2, KubeError::Forbidden("quota webhook".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-12")).unwrap_err();
        assert_eq!(err.kind(), "forbidden");
        assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert_nothing_left(&env);

        // A Secret whose create may have happened is looked for, too.
        let env = Env::new();
        env.kube.fail(Verb::Create, "secrets", 1, KubeError::Timeout("no answer".into()));
        env.kube.fail(Verb::Create, "secrets", 1, KubeError::Invalid("ownerReferences: bad".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-12")).unwrap_err();
        assert_eq!(err.kind(), "rejected");
        assert!(env.kube.calls().iter().any(|c| c.verb == Verb::Get && c.name.as_deref() == Some("pc-acq-12-env")));
        assert_nothing_left(&env);
    }

    #[test]
    fn a_410_on_a_clean_up_delete_is_not_a_deleted_object() {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.fail_always(Verb::Delete, "sandboxes", KubeError::Gone("the resource version is too old".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-25")).unwrap_err();
        assert!(!err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert!(err.message().contains("Clean-up could not delete: Sandbox sandboxes/pc-acq-25"), "{err}");
        assert!(env.kube.object("sandboxes", NS, "pc-acq-25").is_some());
    }

    #[test]
    fn what_clean_up_cannot_delete_is_named_with_what_the_cluster_does_with_it() {
        let unavailable = || KubeError::Unavailable { message: "etcd".into(), retry_after_seconds: None };
        let expiry = rfc3339::format_seconds(NOW + 3_600_000);
        let cases = [
            ("sandbox", "sandboxes", vec!["Sandbox sandboxes/pc-acq-28", "shutdownPolicy Delete", expiry.as_str()]),
            (
                "job",
                "jobs",
                vec!["Job sandboxes/pc-acq-28", "activeDeadlineSeconds", "ttlSecondsAfterFinished (900 s)"],
            ),
        ];
        for (backend, plural, texts) in cases {
            let env = Env::new();
            env.kube.set_behaviour(PodBehaviour::NeverReady);
            env.kube.fail_always(Verb::Delete, plural, unavailable());
            env.kube.fail_always(Verb::Delete, "secrets", unavailable());
            let err = env.provider().acquire(request(&config(backend), "acq-28")).unwrap_err();
            assert_eq!((err.kind(), err.retryable()), ("timeout", true), "{backend}: {err}");
            for text in texts.iter().chain(&["Secret sandboxes/pc-acq-28-env", "garbage collection"]) {
                assert!(err.message().contains(text), "{backend}: {text:?} missing in: {err}");
            }
            assert!(!err.message().contains("deletes them at the lease's expiry"), "{err}");
            assert!(
                env.clock.monotonic() <= Duration::from_secs(20) + COMPENSATION_BUDGET,
                "{backend}: clean-up kept to its budget ({:?})",
                env.clock.monotonic()
            );
            assert_no_secret(&env, &err.to_string());
        }
    }

    #[test]
    fn clean_up_retries_transient_delete_failures() {
        let env = Env::new();
        env.kube.set_behaviour(PodBehaviour::NeverReady);
        env.kube.fail_times(Verb::Delete, "sandboxes", 0, 3, KubeError::Other { code: 500, message: "etcd".into() });
        env.kube.fail(Verb::Delete, "secrets", 1, KubeError::Timeout("slow".into()));
        let err = env.provider().acquire(request(&config("sandbox"), "acq-29")).unwrap_err();
        assert!(err.message().contains("Everything this acquire created was deleted"), "{err}");
        assert_nothing_left(&env);
    }

    /// An API server that cannot be reached fails the create and every clean-up call alike: the
    /// workload may never have been created, and the message does not say it was.
    #[test]
    fn an_object_whose_create_may_not_have_reached_the_cluster_is_named_as_such() {
        let env = Env::new();
        let refused = KubeError::Transport("tcp connect error: Connection refused".into());
        for verb in [Verb::Create, Verb::Get, Verb::Delete, Verb::List] {
            env.kube.fail_always(verb, "jobs", refused.clone());
        }
        let err = env.provider().acquire(request(&config("job"), "acq-30")).unwrap_err();
        assert!(err.message().contains("Job sandboxes/pc-acq-30, if its create reached the cluster"), "{err}");
    }

    #[test]
    fn a_create_the_host_never_sent_leaves_nothing_to_clean_up() {
        let env = Env::new();
        let refused = KubeError::Transport(format!("{}the connection was refused", contract::kube_error::NOT_SENT));
        for verb in [Verb::Create, Verb::Get, Verb::Delete, Verb::List] {
            env.kube.fail_always(verb, "jobs", refused.clone());
        }
        let err = env.provider().acquire(request(&config("job"), "acq-31")).unwrap_err();
        assert!(!err.message().contains("lean-up"), "no clean-up of an object never made: {err}");
        assert!(!err.message().contains("Destroy lease"), "{err}");
    }
}
