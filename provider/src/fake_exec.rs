//! `pods/exec` for [`crate::fake_kube::FakeKube`]: the command runs as a local process, as the
//! embedded cluster's simulated kubelet runs it, so `execute`'s wrapper script is tested
//! against a real shell. The process leads its own group (as an exec'd process in a container
//! does); the group is killed at the host's timeout, and each stream keeps at most
//! `max_output_bytes`.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::kube_api::{ExecOptions, ExecOutput, KubeError};

/// Runs `options.command` locally (see the module docs).
pub fn run(options: &ExecOptions) -> Result<ExecOutput, KubeError> {
    let Some((program, args)) = options.command.split_first() else {
        return Err(KubeError::Invalid("you must specify at least one command for the container".to_string()));
    };
    let mut child = Command::new(program)
        .args(args)
        .process_group(0)
        .stdin(if options.stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| KubeError::Other { code: 500, message: format!("exec failed: {program}: {e}") })?;
    if let (Some(mut pipe), Some(input)) = (child.stdin.take(), options.stdin.clone()) {
        thread::spawn(move || pipe.write_all(&input));
    }
    let cap = usize::try_from(options.max_output_bytes).unwrap_or(usize::MAX);
    let stdout = child.stdout.take().map(|pipe| thread::spawn(move || capped(pipe, cap)));
    let stderr = child.stderr.take().map(|pipe| thread::spawn(move || capped(pipe, cap)));
    let (status, timed_out) = wait(&mut child, options.timeout);
    let collect =
        |reader: Option<thread::JoinHandle<(Vec<u8>, bool)>>| reader.and_then(|r| r.join().ok()).unwrap_or_default();
    let (stdout, stdout_truncated) = collect(stdout);
    let (stderr, stderr_truncated) = collect(stderr);
    let exit_code =
        if timed_out { None } else { status.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))) };
    Ok(ExecOutput { exit_code, timed_out, stdout, stderr, stdout_truncated, stderr_truncated })
}

/// Waits for the process until `timeout`, then kills its group.
fn wait(child: &mut Child, timeout: Duration) -> (Option<std::process::ExitStatus>, bool) {
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return (Some(status), false);
        }
        if started.elapsed() >= timeout {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-9", "--", &group]).status();
            let _ = child.kill();
            return (child.wait().ok(), true);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Reads a stream to its end, keeping the first `cap` bytes.
fn capped(mut pipe: impl Read, cap: usize) -> (Vec<u8>, bool) {
    let (mut kept, mut truncated, mut buf) = (Vec::new(), false, [0u8; 8192]);
    while let Ok(n) = pipe.read(&mut buf) {
        if n == 0 {
            break;
        }
        let room = cap.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
        truncated |= n > room;
    }
    (kept, truncated)
}
