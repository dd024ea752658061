//! Execute: runs a command in a lease's sandbox and reports what it did.
//!
//! Contract: a command that runs is a result whatever its exit code; an error means it could
//! not be run (the lease's sandbox is gone, the host refused, the cluster failed). The steps:
//!
//! 1. The request is checked (a program, no NUL, env names the shell can export, the sizes of
//!    [`input_limits`](crate::input_limits)) before anything is sent.
//! 2. The pod: the one the lease names, straight away, while the lease's own record has not
//!    expired (the host proves the pod the lease's before anything of the command reaches
//!    it). When the lease names none or has expired by its record, and when the named pod
//!    cannot take the command (gone, completed), the lease is resume-checked and the command
//!    goes to the pod the workload has *now* (a Job's pod may have been replaced); a gone
//!    sandbox is an error that says to acquire again. A command goes to another pod only when
//!    the first exec never started it.
//! 3. The values to redact are gathered: the lease's Secret (its env's secret values; no read
//!    when the lease's metadata records that it has none) and the request's secret env. A
//!    claim lease's pod is the template's, without the lease's env, so its whole env comes from
//!    its Secret (see `secret`) and is exported into the command, the request's env overriding
//!    it; the values travel in the stdin header like the request's.
//! 4. The command runs through [`exec_wrapper`]: nothing of the request in the exec URL, a
//!    watchdog in the pod that kills it at its timeout, the host's stream closed a little later.
//!    It runs in the sandbox container, or for a claim lease (whose template names the pod's
//!    containers, and the API server picks none) in the container its backend picks
//!    (`backend::claim::container`): the
//!    one the pod's `kubectl.kubernetes.io/default-container` annotation names, else `sandbox`,
//!    else the only one; a pod with several and no hint runs nothing. The pick is made when the
//!    lease gets its pod (acquire, resume-check) and recorded in the lease's metadata with the
//!    pod's name, so a command to that pod reads nothing to pick it. When the pod refuses the
//!    command (a 400: a recorded container it does not have, or a pod that cannot take
//!    commands), the pick is made again from the pod, and the command sent again only to
//!    another container. A recorded container is one of the lease's own pod, which the host
//!    proves; what metadata can name there the provider could pick itself.
//! 5. The output is decoded as UTF-8 (invalid bytes replaced), capped at [`OUTPUT_CAP`] per
//!    stream, and scrubbed of every secret value.
//!
//! A command killed at its timeout reports `timed-out`, no exit code, and `SIGKILL`; one that
//! ended in time reports its status even when a process it left running held the output open
//! until the host's deadline (the script's end line says how it ended). The
//! timeout is the request's, cut to what the call's deadline leaves (and
//! [`DEFAULT_TIMEOUT`] when the host sets none).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use contract::quote;
use serde_json::Value;

pub use contract::{ExecRequest, ExecResult};

use crate::api_versions;
use crate::backend::{self, Steps};
use crate::clock::Clock;
use crate::errors::{FromKube, ProviderError};
use crate::exec_wrapper::{self, HOST_GRACE, Invocation, KILLED_STATUS, RESERVED_ENV_PREFIX};
use crate::input_limits::{COMMAND_BYTES, COMMAND_WORDS, ENV_NAME, ENV_VARS, EXEC_STRING, PLAIN_ENV, WORKING_DIR};
use crate::input_limits::{env_entry, env_entry_len, env_fault, word_len};
use crate::kube_api::{ExecOptions, ExecOutput, Kube, KubeError};
use crate::lease::{LeaseMetadata, LeaseRef};
use crate::log::{Level, Log};
use crate::naming::{CONTAINER_NAME, LeaseId, secret_name};
use crate::redact::Redactor;
use crate::resume::{ResumeOutcome, resume_check};
use crate::secret::{self, LeaseEnv};

/// Bytes kept of each of stdout and stderr: enough for any log an agent reads back, small
/// enough that both fit in a provider instance's memory with room to spare.
pub const OUTPUT_CAP: u32 = 1024 * 1024;

/// The timeout of a command when neither the request nor the host's deadline gives one.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Time kept after the host closes the stream, to scrub the output and answer.
const ANSWER_RESERVE: Duration = Duration::from_secs(1);

/// Runs `request` in the sandbox of `lease_ref` (see the module docs).
pub fn execute<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
    request: &ExecRequest,
) -> Result<ExecResult, ProviderError> {
    check(request)?;
    let id = LeaseId::parse(&lease_ref.lease.provider_lease_id).map_err(|e| ProviderError::rejected(e.to_string()))?;
    let steps = backend::steps::<K>(id.backend);
    let metadata = LeaseMetadata::parse_lenient(&lease_ref.lease.metadata);
    // The pod the lease names, when its own record says it may still run commands; else (and
    // whenever that pod cannot take the command) the workload's pod now, from a resume-check.
    let recorded = recorded_pod(clock, lease_ref);
    let mut pod = match &recorded {
        Some(pod) => pod.clone(),
        None => current_pod(kube, clock, log, lease_ref)?,
    };
    let LeaseEnv { vars, secret_values: mut secrets } = match lease_env(kube, steps, &id, &metadata) {
        Ok(env) => env,
        // A Secret gone with its lease: say what the resume-check says of the lease first.
        Err(e) if recorded.is_some() => {
            current_pod(kube, clock, log, lease_ref)?;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    secrets.extend(request.env.iter().filter(|v| v.secret).map(|v| v.value.clone()));
    let redactor = Redactor::new(secrets.iter().map(String::as_str));
    // The lease's env first, each name the request sets left to the request's value.
    let overridden = |name: &str| request.env.iter().any(|v| v.name == name);
    let env: Vec<(&str, &str)> = vars
        .iter()
        .filter(|(name, _)| !overridden(name))
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .chain(request.env.iter().map(|v| (v.name.as_str(), v.value.as_str())))
        .collect();
    ENV_VARS.check(|| "the lease's env and the command's together".into(), env.len())?;
    let timeout = timeout(clock, request.timeout_ms)?;
    let end_marker = exec_wrapper::end_marker(marker_seed(clock));
    let invocation = Invocation {
        command: &request.command,
        args: &request.args,
        cwd: request.cwd.as_deref(),
        env,
        timeout,
        end_marker: &end_marker,
    };
    let mut options = ExecOptions {
        container: None,
        command: exec_wrapper::argv(),
        stdin: Some(exec_wrapper::stdin(&invocation, request.stdin.as_deref())),
        timeout: timeout + HOST_GRACE,
        max_output_bytes: OUTPUT_CAP,
    };
    let started = clock.monotonic();
    // The container the lease recorded for this pod, when its backend records one (a claim's).
    let container = steps.recorded_container(&metadata, &pod);
    // The namespace the checks above used: the lease id's, never the metadata's copy.
    let mut attempt = exec_in(kube, steps, &id, &pod, container.as_deref(), &mut options);
    if let (Some(named), Err(ExecFailure::Kube(KubeError::Invalid(_)))) = (&container, &attempt) {
        // Metadata is informational: when the pod refuses the command (a 400: an unknown
        // container, or a pod that cannot take commands), the container is picked again from
        // the pod, and the command sent again only when that pick is another container.
        if let Ok(picked) = steps.exec_container(kube, &id.namespace, &pod)
            && picked != *named
        {
            attempt = exec_in(kube, steps, &id, &pod, Some(&picked), &mut options);
        }
    }
    if recorded.is_some() && matches!(attempt, Err(ref e) if never_started(e)) {
        let now = current_pod(kube, clock, log, lease_ref)?;
        if now != pod {
            pod = now;
            attempt = exec_in(kube, steps, &id, &pod, None, &mut options);
        }
    }
    let mut output = attempt.map_err(|e| {
        let error = match e {
            ExecFailure::Container(e) => e,
            ExecFailure::Kube(KubeError::NotFound(_)) => ProviderError::unavailable(format!(
                "pod {}/{pod} went away before the command started (its workload replaces it); retry the command",
                id.namespace
            )),
            ExecFailure::Kube(e) => ProviderError::from_kube(&e, &format!("exec in pod {}/{pod}", id.namespace)),
        };
        redactor.scrub_error(error)
    })?;
    let elapsed = clock.monotonic().saturating_sub(started);
    // The script's end line, when it wrote one, says how the command ended; the exec's own
    // status is missing when something the command left running held the output until the
    // host's deadline.
    let ended = exec_wrapper::take_end(&mut output.stderr, &end_marker);
    if ended.is_some() && output.timed_out {
        log.warn(
            "the command ended, but a process it left running kept its output open until the timeout; \
             redirect the output of background processes (`cmd >log 2>&1 &`) so the command returns when it ends",
            &[("pod", &pod)],
        );
    }
    let status = ended.or(output.exit_code);
    let killed_at_timeout = match ended {
        Some(status) => status == KILLED_STATUS && elapsed >= timeout,
        None => output.timed_out || (output.exit_code == Some(KILLED_STATUS) && elapsed >= timeout),
    };
    let text = |bytes: &[u8], truncated: bool| {
        let text = String::from_utf8_lossy(bytes);
        if truncated { redactor.scrub_cut(&text) } else { redactor.scrub(&text) }
    };
    let result = ExecResult {
        exit_code: if killed_at_timeout { None } else { status },
        signal: if killed_at_timeout {
            Some("SIGKILL".to_string())
        } else {
            status.and_then(exec_wrapper::signal_of_status).map(str::to_string)
        },
        timed_out: killed_at_timeout,
        stdout: text(&output.stdout, output.stdout_truncated),
        stderr: text(&output.stderr, output.stderr_truncated),
        stdout_truncated: output.stdout_truncated,
        stderr_truncated: output.stderr_truncated,
    };
    let exit = result.exit_code.map_or_else(|| "none".to_string(), |c| c.to_string());
    let millis = elapsed.as_millis().to_string();
    log.emit(Level::Info, "command ended", &[("pod", &pod), ("exit-code", &exit), ("millis", &millis)]);
    Ok(result)
}

/// The pod the lease names, unless the lease's own record says it has expired: the command goes
/// there without a resume-check, and the host proves the pod the lease's before anything runs.
fn recorded_pod(clock: &dyn Clock, lease_ref: &LeaseRef) -> Option<String> {
    let lease = &lease_ref.lease;
    let expired = lease.expires_at.is_some_and(|at| at <= clock.now_millis());
    lease.pod_name.clone().filter(|name| !name.is_empty() && !expired)
}

/// The workload's pod now, from a resume-check: an error that says to acquire again when the
/// lease's sandbox is gone, or to retry when it has no pod yet.
fn current_pod<K: Kube>(
    kube: &K,
    clock: &dyn Clock,
    log: &dyn Log,
    lease_ref: &LeaseRef,
) -> Result<String, ProviderError> {
    let lease = match resume_check(kube, clock, log, lease_ref)? {
        ResumeOutcome::Resumable(lease) => lease,
        ResumeOutcome::Expired(reason) => {
            return Err(ProviderError::rejected(format!(
                "cannot run a command in lease {}: {reason}",
                quote(&lease_ref.lease.provider_lease_id)
            )));
        }
    };
    lease.pod_name.ok_or_else(|| {
        ProviderError::unavailable(format!(
            "the sandbox of lease {} has no pod yet, so there is nothing to run the command in; retry shortly.",
            quote(&lease.provider_lease_id)
        ))
    })
}

/// Why an exec did not give output.
enum ExecFailure {
    /// No container of the pod could be picked.
    Container(ProviderError),
    Kube(KubeError),
}

/// Whether a failed exec never started the command, so that it can go to another pod: the pod
/// was gone or could not take commands (completed, its container stopped). A pod the host
/// refuses is not one: someone else holds its name, which the caller must hear of.
fn never_started(failure: &ExecFailure) -> bool {
    matches!(failure, ExecFailure::Kube(KubeError::NotFound(_) | KubeError::Invalid(_)))
}

/// Runs the wrapper in `pod`, in `container` (what the lease recorded for the pod) or else the
/// one its backend picks.
fn exec_in<K: Kube>(
    kube: &K,
    steps: &dyn Steps<K>,
    id: &LeaseId,
    pod: &str,
    container: Option<&str>,
    options: &mut ExecOptions,
) -> Result<ExecOutput, ExecFailure> {
    options.container = Some(match container {
        Some(name) => name.to_string(),
        None => steps.exec_container(kube, &id.namespace, pod).map_err(ExecFailure::Container)?,
    });
    kube.exec(&id.namespace, pod, options).map_err(ExecFailure::Kube)
}

/// A seed for this call's end marker: the clocks and a count of the calls, so no two calls of
/// one provider instance share one.
fn marker_seed(clock: &dyn Clock) -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let calls = CALLS.fetch_add(1, Ordering::Relaxed);
    let nanos = u64::try_from(clock.monotonic().as_nanos()).unwrap_or(u64::MAX);
    (clock.now_millis() as u64).rotate_left(32) ^ nanos ^ calls.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Refuses a request the wrapper could not pass on exactly, or a process could not start with.
fn check(request: &ExecRequest) -> Result<(), ProviderError> {
    if request.command.is_empty() {
        return Err(ProviderError::rejected("execute needs a command (the program to run); it is empty."));
    }
    if request.timeout_ms == Some(0) {
        return Err(ProviderError::rejected(
            "a timeout of 0 ms would kill the command before it starts; leave timeout-ms out for the longest the \
             host allows.",
        ));
    }
    let words = std::iter::once(&request.command).chain(&request.args);
    COMMAND_WORDS.check(|| "the command and its arguments".into(), 1 + request.args.len())?;
    COMMAND_BYTES.check(|| "the command and its arguments".into(), words.clone().map(|w| word_len(w)).sum())?;
    for word in words {
        EXEC_STRING.check(|| format!("the argument {}", quote(word)), word_len(word))?;
        no_nul("the command and its arguments", word)?;
    }
    if let Some(cwd) = &request.cwd {
        WORKING_DIR.check(|| "the working directory".into(), cwd.len())?;
        no_nul("the working directory", cwd)?;
    }
    ENV_VARS.check(|| "the command's env".into(), request.env.len())?;
    let mut plain = 0usize;
    for (index, var) in request.env.iter().enumerate() {
        if let Some(fault) = env_fault(&var.name, &var.value) {
            return Err(ProviderError::rejected(format!(
                "the command's {} cannot be passed to it: {fault}. Fix that entry of the request's env; nothing was \
                 run.",
                env_entry("env", index, &var.name)
            )));
        }
        ENV_NAME.check(|| format!("env var name {}", quote(&var.name)), var.name.len())?;
        if var.name.starts_with(RESERVED_ENV_PREFIX) {
            return Err(ProviderError::rejected(format!(
                "env var name {} starts with `{RESERVED_ENV_PREFIX}`, which the command wrapper of execute uses \
                 itself; rename it.",
                quote(&var.name)
            )));
        }
        EXEC_STRING.check(|| format!("env var {}", quote(&var.name)), env_entry_len(&var.name, &var.value))?;
        plain = plain.saturating_add(env_entry_len(&var.name, &var.value));
        PLAIN_ENV.check(|| "env names and values together".into(), plain)?;
    }
    Ok(())
}

fn no_nul(what: &str, text: &str) -> Result<(), ProviderError> {
    if text.contains('\0') {
        return Err(ProviderError::rejected(format!("{what} hold a NUL character, which no process can be given.")));
    }
    Ok(())
}

/// The command's timeout: the request's, cut to what the call's deadline leaves after the
/// host's grace and the answer.
fn timeout(clock: &dyn Clock, requested_ms: Option<u32>) -> Result<Duration, ProviderError> {
    let requested = requested_ms.map(|ms| Duration::from_millis(u64::from(ms)));
    let Some(remaining) = clock.call_remaining() else {
        return Ok(requested.unwrap_or(DEFAULT_TIMEOUT));
    };
    let room = remaining.saturating_sub(HOST_GRACE + ANSWER_RESERVE);
    if room < Duration::from_millis(100) {
        return Err(ProviderError::timeout(format!(
            "the call has {} ms left, too little to run a command; the host's call deadline must be longer.",
            remaining.as_millis()
        )));
    }
    Ok(requested.map_or(room, |r| r.min(room)))
}

/// The container commands run in, in a pod this provider specified (a Sandbox's or Job's).
pub(crate) fn own_container() -> String {
    CONTAINER_NAME.to_string()
}

/// What the Secret of a Sandbox or Job lease gives a command: nothing to export (its pod has
/// the env already), its values to redact.
pub(crate) fn redact_only(secret: &Value) -> LeaseEnv {
    LeaseEnv {
        vars: Vec::new(),
        secret_values: secret::decoded_data(secret).into_iter().map(|(_, value)| value).collect(),
    }
}

/// The lease's env from its Secret: for a claim lease every variable to export and the secret
/// values among them, for the others (whose pod has the env already) the secret values to
/// redact; nothing when the lease has no Secret. A Secret the lease's metadata records but the
/// cluster no longer has, and any other failure, stop the call: the pod's env may still hold
/// the values, and the output could not be scrubbed (nor a claim lease's env passed on).
fn lease_env<K: Kube>(
    kube: &K,
    steps: &dyn Steps<K>,
    id: &LeaseId,
    metadata: &LeaseMetadata,
) -> Result<LeaseEnv, ProviderError> {
    let recorded = metadata.secret_name.is_some();
    // Metadata that records the workload records its Secret too, when there is one.
    if !recorded && metadata.name.is_some() {
        return Ok(LeaseEnv { vars: Vec::new(), secret_values: Vec::new() });
    }
    let name = secret_name(&id.name);
    let secret = match kube.get(&api_versions::secrets(), Some(&id.namespace), &name) {
        Ok(secret) => secret,
        Err(KubeError::NotFound(_)) if !recorded => {
            return Ok(LeaseEnv { vars: Vec::new(), secret_values: Vec::new() });
        }
        Err(KubeError::NotFound(_)) => {
            return Err(ProviderError::rejected(format!(
                "the lease's Secret {}/{name} is gone, so its values cannot be redacted from the command's output; \
                 nothing was run. Acquire a new lease.",
                id.namespace
            )));
        }
        Err(e) => {
            let action = format!("read Secret {}/{name} (its values are redacted from the output)", id.namespace);
            return Err(ProviderError::from_kube(&e, &action));
        }
    };
    steps.exec_env(&format!("the lease's Secret {}/{name}", id.namespace), &secret)
}

#[cfg(test)]
mod tests;
