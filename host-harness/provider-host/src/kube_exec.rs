//! `kube.exec`: a command in a pod's container, over the `pods/exec` subresource's WebSocket
//! (kube-rs `Api::<Pod>::exec`, which speaks `v5.channel.k8s.io` and falls back to `v4`).
//!
//! Checked like any other request first: the policy must grant `exec` on `pods` in the
//! namespace, and the pod must be this installation's (its controller chain leads to an
//! object the host created), proved by reading it as the host. The proof is kept for the pod's
//! later execs, bound to its uid ([`crate::proven_pods`]): they do not walk its chain again, and
//! while the host's watch of the namespace's pods ([`crate::pod_watch`]) keeps the proof
//! current they do not read the pod before the stream opens either; the lease's scope is then
//! checked against what the host proved, and the read that binds the exec (below) is the
//! call's read of the pod.
//!
//! ## Bound to the proven pod
//! `pods/exec` names its pod by name, and the API server looks the name up when the exec's
//! stream opens, not when the host proved it: a pod deleted and created again under that name
//! in between (someone with `create pods` in the namespace, racing the host) would get the
//! command. So the host sends nothing but the command's argv before it has proved the pod
//! again: once the stream is open it reads the pod as the host a second time (a quorum read),
//! and writes the provider's stdin only when the uid is the one it checked. The argument: the
//! name was looked up before the stream opened, so before the second read; the checked pod held
//! the name at the first read (or, for a current proof, at the read it came from, with no
//! deletion seen since) and still holds it at the second, and a pod that exists at two
//! moments exists in between, while no two pods share a name at once; so the stream reached the
//! checked pod. Otherwise the host closes the stream, sends nothing, and refuses the call as
//! `not-owned` (a pod gone is `not-found`). The process the stream started elsewhere gets
//! no byte of its input and sees it end.
//!
//! What this covers is stdin. The argv travels in the request's URL and starts with the
//! process, before any check can be made after the lookup, so a provider must keep it free of
//! anything the sandbox's owner alone may see; this provider's argv is one fixed script, and
//! the program, its arguments and the env (secrets included) are its stdin (`exec_wrapper.rs`).
//! Out of reach: a kubelet whose own view of the pods lags far enough behind the API server
//! to still run a pod of that name older than the one checked.
//!
//! Then the host writes the provider's stdin (and keeps it open: without `v5.channel.k8s.io` it
//! cannot be closed alone),
//! reads stdout and stderr to their ends keeping at most the cap of each
//! (`max-exec-output-bytes`, or less if the provider asks), and takes the exit code from the
//! final status ([the remote-command protocol]). At the timeout, or the call's deadline if
//! sooner (one deadline for opening and running), it closes the stream and reports
//! `timed-out` with the output read so far: closing does not kill the process on every
//! runtime, which is why the provider kills it in the pod first.
//!
//! [the remote-command protocol]: https://github.com/kubernetes/kubernetes/blob/master/staging/src/k8s.io/apimachinery/pkg/util/remotecommand/constants.go

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use kube::api::{Api, AttachParams};
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::bindings::kube::{ExecOptions, ExecOutput, KubeError, OtherDetail, ResourceType};
use crate::kube_errors;
use crate::kube_host::{KubeHost, Target};
use crate::kube_transport::DEADLINE_MARGIN;
use crate::ownership::uid;
use crate::policy::AccessVerb;

impl KubeHost {
    /// Runs a command in `pod` (see the module docs).
    pub async fn exec(&self, namespace: &str, pod: &str, options: ExecOptions) -> Result<ExecOutput, KubeError> {
        let pods = ResourceType { group: String::new(), version: "v1".into(), plural: "pods".into() };
        let target = Target {
            verb: AccessVerb::Exec,
            rt: &pods,
            namespace: Some(namespace),
            name: Some(pod),
            subresource: None,
        };
        self.allow(&target)?;
        if options.command.is_empty() {
            return Err(KubeError::Invalid(format!("{}: the command is empty", target.describe())));
        }
        let proven = match self.proven_pods.current(namespace, pod) {
            // The watch has seen nothing of this pod since the host proved it: no read first.
            Some(kept) => {
                self.require_in_scope(&target, &kept)?;
                Proven { uid: uid_of(&target, &kept)?, read_first: false }
            }
            None => {
                let session = self.proven_pods.session(namespace);
                let Some(object) = self.read_as_host(&pods, Some(namespace), pod).await? else {
                    return Err(KubeError::NotFound(format!("pods {} not found", crate::policy::quoted(pod))));
                };
                if self.proven_pods.holds(namespace, &object) {
                    self.require_in_scope(&target, &object)?;
                } else {
                    self.require_visible(&target, &object).await?;
                }
                self.proven_pods.keep(namespace, &object, session);
                Proven { uid: uid_of(&target, &object)?, read_first: true }
            }
        };
        let client = self.client.clone().ok_or_else(|| KubeError::Transport("no cluster connection".to_string()))?;
        let started = Instant::now();
        let timeout = self.exec_budget(Duration::from_millis(u64::from(options.timeout_ms)));
        let cap = usize::try_from(options.max_output_bytes).unwrap_or(usize::MAX).min(self.max_exec_output);
        let watching = client.clone();
        self.proven_pods.watch(namespace, |feed| crate::pod_watch::start(watching, feed));
        let still_proven = self.still_the_pod(&target, &proven);
        let result = run(Api::namespaced(client, namespace), pod, options, cap, timeout, still_proven).await;
        if matches!(result, Err(KubeError::NotFound(_))) {
            // Gone before its stream opened, whatever the watch has shown yet.
            self.proven_pods.forget(namespace, pod);
        }
        tracing::debug!(target: "provider_host::kube", verb = "exec", namespace, pod,
            ok = result.is_ok(), millis = started.elapsed().as_millis() as u64, "kube request");
        result
    }

    /// Whether an exec into `pod` would open without reading it first: the host proved the pod,
    /// and its watch of the namespace's pods, in step, has seen nothing of the pod since. For
    /// diagnostics, and tests that wait for the watch.
    pub fn proves_current(&self, namespace: &str, pod: &str) -> bool {
        self.proven_pods.current(namespace, pod).is_some()
    }

    /// Whether the pod under the target's name is still the one with uid `proven`, read again
    /// as the host once the exec's stream is open (see "Bound to the proven pod"). When no read
    /// came before the stream (the proof was current), this read is the call's check of the pod:
    /// its owner references must be the ones proved, and it must be in the lease's scope.
    async fn still_the_pod(&self, target: &Target<'_>, proven: &Proven) -> Result<(), KubeError> {
        let pod = target.name.unwrap_or_default();
        let namespace = target.namespace.unwrap_or_default();
        let session = self.proven_pods.session(namespace);
        let Some(now) = self.read_as_host(target.rt, target.namespace, pod).await? else {
            self.proven_pods.forget(namespace, pod);
            return Err(KubeError::NotFound(format!(
                "pods {} not found: it was deleted while the exec's stream opened; nothing was sent to the command",
                crate::policy::quoted(pod)
            )));
        };
        let now_uid = uid(&now).unwrap_or_default();
        if now_uid != proven.uid {
            self.proven_pods.forget(namespace, pod);
            let when = if proven.read_first { "while the exec's stream opened" } else { "since the host proved it" };
            tracing::warn!(target: "provider_host::ownership", call = %target.describe(), checked = %proven.uid,
                now = now_uid, "exec refused: the pod was replaced by another of that name {when}; nothing was sent to \
                the process the stream started in it");
            return Err(KubeError::NotOwned(format!(
                "host refuses {}: the pod was replaced by another of that name {when}, so the stream may have reached \
                 the new one; nothing was sent to it",
                target.describe()
            )));
        }
        if !proven.read_first {
            self.require_in_scope(target, &now)?;
        }
        if self.proven_pods.holds(namespace, &now) {
            // Read in `session`: the proof is current again if the watch is in step.
            self.proven_pods.keep(namespace, &now, session);
        } else {
            // The same pod with other owner references: proved again before anything is sent
            // when this call did not read it before; its next exec proves it afresh either way.
            self.proven_pods.forget(namespace, pod);
            if !proven.read_first {
                self.require_visible(target, &now).await?;
                self.proven_pods.keep(namespace, &now, session);
            }
        }
        Ok(())
    }

    /// The command's time: what it asked for, cut to the call's deadline.
    fn exec_budget(&self, asked: Duration) -> Duration {
        match self.call_deadline {
            Some(deadline) => {
                asked.min(deadline.saturating_duration_since(Instant::now()).saturating_sub(DEADLINE_MARGIN))
            }
            None => asked,
        }
    }
}

/// The pod an exec is bound to: the uid the host proved, and whether this call read the pod
/// before opening the stream (else the proof was current, [`crate::proven_pods`]).
struct Proven {
    uid: String,
    read_first: bool,
}

/// The uid of the pod `object`, which an exec is bound to.
fn uid_of(target: &Target<'_>, object: &Value) -> Result<String, KubeError> {
    match uid(object).filter(|u| !u.is_empty()) {
        Some(uid) => Ok(uid.to_string()),
        None => Err(KubeError::Invalid(format!(
            "{}: the pod has no uid, so the exec could not be bound to it",
            target.describe()
        ))),
    }
}

/// Bytes kube-rs holds between the exec's WebSocket and each of its pipes. Its default, 1 KiB,
/// splits a wrapper header of a few hundred bytes of env into two stdin messages, and the
/// second then waits for the first's delayed TCP acknowledgement (tens of milliseconds on
/// Linux); it also moves output through in 1 KiB steps. Stdin messages are at most 4 KiB
/// whatever this is (kube-rs reads its pipe in steps of that size).
const STREAM_BUFFER: usize = 64 * 1024;

async fn run(
    api: Api<Pod>,
    pod: &str,
    options: ExecOptions,
    cap: usize,
    timeout: Duration,
    still_proven: impl Future<Output = Result<(), KubeError>>,
) -> Result<ExecOutput, KubeError> {
    let end = tokio::time::Instant::now() + timeout;
    let mut params = AttachParams::default()
        .stdin(options.stdin.is_some())
        .stdout(true)
        .stderr(true)
        .max_stdin_buf_size(STREAM_BUFFER)
        .max_stdout_buf_size(STREAM_BUFFER)
        .max_stderr_buf_size(STREAM_BUFFER);
    if let Some(container) = &options.container {
        params = params.container(container.clone());
    }
    let mut process = match tokio::time::timeout_at(end, api.exec(pod, options.command.clone(), &params)).await {
        Err(_) => {
            return Err(KubeError::Timeout(format!(
                "exec in pod {}: the stream did not open within {} ms",
                crate::policy::quoted(pod),
                timeout.as_millis()
            )));
        }
        Ok(Err(e)) => return Err(kube_errors::from_client_error(&e)),
        Ok(Ok(process)) => process,
    };
    // Nothing of the provider's input before the pod is proved again.
    let refusal = match tokio::time::timeout_at(end, still_proven).await {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(_) => Some(KubeError::Timeout(format!(
            "exec in pod {}: the pod could not be read again within {} ms to bind the exec to it; nothing was sent \
             to the command",
            crate::policy::quoted(pod),
            timeout.as_millis()
        ))),
    };
    if let Some(refusal) = refusal {
        process.abort();
        return Err(refusal);
    }
    // Stdin stays open until the command ends: without `v5.channel.k8s.io`, kube-rs can close
    // it only by closing the whole stream. The provider says how much input there is instead.
    let mut stdin = process.stdin();
    let stdout = process.stdout();
    let stderr = process.stderr();
    let status = process.take_status();
    let input = options.stdin.unwrap_or_default();
    let (mut out, mut err) = (Capped::default(), Capped::default());
    // Input is written while the output is read, and the final status ends the exec whether
    // or not all of it was taken: a command that leaves most of its input unread (`head -c 5`)
    // must not hold the host's write, and with it the exec, until the timeout.
    let streams = async {
        let write = async {
            if let Some(pipe) = stdin.as_mut() {
                // A command that exits without reading its input is no error of the host's.
                let _ = pipe.write_all(&input).await;
                let _ = pipe.flush().await;
            }
        };
        let finish = async {
            tokio::join!(out.read(stdout, cap), err.read(stderr, cap));
            match status {
                Some(status) => status.await,
                None => None,
            }
        };
        tokio::pin!(write, finish);
        let mut written = false;
        loop {
            tokio::select! {
                () = &mut write, if !written => written = true,
                status = &mut finish => break status,
            }
        }
    };
    let finished = tokio::time::timeout_at(end, streams).await;
    drop(stdin);
    process.abort();
    let mut output = |exit_code, timed_out| ExecOutput {
        exit_code,
        timed_out,
        stdout: std::mem::take(&mut out.kept),
        stderr: std::mem::take(&mut err.kept),
        stdout_truncated: out.truncated,
        stderr_truncated: err.truncated,
    };
    match finished {
        // What was read before the timeout is kept: it is often why the command hung.
        Err(_) => Ok(output(None, true)),
        Ok(None) => Ok(output(None, false)),
        Ok(Some(status)) => {
            let code = exit_code(&status)?;
            Ok(output(Some(code), false))
        }
    }
}

/// One stream's output: the first `cap` bytes, and whether more came.
#[derive(Default)]
struct Capped {
    kept: Vec<u8>,
    truncated: bool,
}

impl Capped {
    /// Reads `stream` to its end (or a read error, which ends it as the peer closing would).
    async fn read(&mut self, stream: Option<impl AsyncRead + Unpin>, cap: usize) {
        let Some(mut stream) = stream else {
            return;
        };
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = stream.read(&mut buf).await {
            if n == 0 {
                break;
            }
            let room = cap.saturating_sub(self.kept.len());
            self.kept.extend_from_slice(&buf[..n.min(room)]);
            self.truncated |= n > room;
        }
    }
}

/// The exit code of the exec's final status: `Success` is 0, `NonZeroExitCode` carries it in
/// a cause; any other failure (no such container, the program cannot start) is an error.
fn exit_code(status: &Status) -> Result<i32, KubeError> {
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        let causes = status.details.as_ref().and_then(|d| d.causes.as_ref());
        let code = causes
            .into_iter()
            .flatten()
            .find(|c| c.reason.as_deref() == Some("ExitCode"))
            .and_then(|c| c.message.as_deref())
            .and_then(|m| m.parse::<i32>().ok());
        if let Some(code) = code {
            return Ok(code);
        }
    }
    let message = status.message.clone().unwrap_or_else(|| "the command could not be run".to_string());
    let code = status.code.and_then(|c| u16::try_from(c).ok()).unwrap_or(500);
    Err(KubeError::Other(OtherDetail { code, message: kube_errors::truncate(&message, 512) }))
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{StatusCause, StatusDetails};

    use super::*;

    fn status(status: &str, reason: Option<&str>, code: Option<&str>) -> Status {
        Status {
            status: Some(status.into()),
            reason: reason.map(Into::into),
            message: Some("command terminated".into()),
            details: code.map(|c| StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some(c.into()),
                    field: None,
                }]),
                ..StatusDetails::default()
            }),
            ..Status::default()
        }
    }

    #[test]
    fn the_final_status_gives_the_exit_code() {
        assert_eq!(exit_code(&status("Success", None, None)).ok(), Some(0));
        assert_eq!(exit_code(&status("Failure", Some("NonZeroExitCode"), Some("137"))).ok(), Some(137));
        let failed = exit_code(&status("Failure", Some("InternalError"), None));
        assert!(matches!(failed, Err(KubeError::Other(d)) if d.message == "command terminated"));
    }
}
