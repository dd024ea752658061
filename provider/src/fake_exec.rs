//! `pods/exec` for [`crate::fake_kube::FakeKube`]: the command runs as a local process, as the
//! embedded cluster's simulated kubelet runs it, so `execute`'s wrapper script is tested
//! against a real shell. The process leads its own group (as an exec'd process in a container
//! does); the exec ends when the process has exited and its output is closed (a process it
//! left running can hold it), or at the host's timeout, when the group is killed; each stream
//! keeps at most `max_output_bytes`.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
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
    let stdout = Stream::read(child.stdout.take(), cap);
    let stderr = Stream::read(child.stderr.take(), cap);
    let (status, timed_out) = wait(&mut child, options.timeout, &[&stdout, &stderr]);
    let (stdout, stdout_truncated) = stdout.taken();
    let (stderr, stderr_truncated) = stderr.taken();
    let exit_code =
        if timed_out { None } else { status.map(|s| s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0))) };
    Ok(ExecOutput { exit_code, timed_out, stdout, stderr, stdout_truncated, stderr_truncated })
}

/// Waits until the process has exited and its output is closed, as a runtime ends an exec, or
/// until `timeout`: then the host gives up on the stream, and the group is killed so that
/// nothing the test ran outlives it.
fn wait(child: &mut Child, timeout: Duration, streams: &[&Stream]) -> (Option<std::process::ExitStatus>, bool) {
    let started = Instant::now();
    let mut exited = None;
    loop {
        if exited.is_none()
            && let Ok(Some(status)) = child.try_wait()
        {
            exited = Some(status);
        }
        if exited.is_some() && streams.iter().all(|s| s.closed()) {
            return (exited, false);
        }
        if started.elapsed() >= timeout {
            let group = format!("-{}", child.id());
            let _ = Command::new("kill").args(["-9", "--", &group]).status();
            let _ = child.kill();
            let status = exited.or_else(|| child.wait().ok());
            return (status, true);
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// One output stream, read on its own thread: the first `cap` bytes, whether more came, and
/// whether it is closed.
#[derive(Clone, Default)]
struct Stream(Arc<Mutex<(Vec<u8>, bool, bool)>>);

impl Stream {
    fn read(pipe: Option<impl Read + Send + 'static>, cap: usize) -> Self {
        let stream = Self::default();
        let Some(mut pipe) = pipe else {
            stream.lock().2 = true;
            return stream;
        };
        let shared = stream.clone();
        thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                let mut kept = shared.lock();
                let room = cap.saturating_sub(kept.0.len());
                kept.0.extend_from_slice(&buf[..n.min(room)]);
                kept.1 |= n > room;
            }
            shared.lock().2 = true;
        });
        stream
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (Vec<u8>, bool, bool)> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn closed(&self) -> bool {
        self.lock().2
    }

    /// What was read so far, and whether it was cut.
    fn taken(&self) -> (Vec<u8>, bool) {
        let mut kept = self.lock();
        (std::mem::take(&mut kept.0), kept.1)
    }
}
