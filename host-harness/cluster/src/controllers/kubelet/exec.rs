//! The simulated kubelet's side of `pods/exec`: the exec'd command runs as a **local process on
//! the machine that runs the cluster**, not in the container's image. Nothing is isolated: the
//! command sees the host's files and programs, runs as the cluster's user, and can do whatever
//! that user can. It is a simulation for demos and tests, so that `kubectl exec` and kube-rs's
//! `Api::exec` have something real to talk to.
//!
//! Where a real kube-apiserver proxies an exec to the kubelet's streaming server, the embedded
//! API server calls [`ExecHost::start`] in-process (the rest of the simulated kubelet is an
//! ordinary API client and takes no part).
//!
//! ## What the process gets
//! * argv exactly as the request gave it (`argv[0]` looked up on `PATH`); no shell unless the
//!   command is one.
//! * A per-pod directory, `<tmp>/embedded-cluster-<pid>-<n>/pods/<pod uid>/`, that stands for
//!   the container's filesystem root: the container's `workingDir` `/a/b` is `<pod dir>/a/b`
//!   (created on first use; `..` and `.` components are dropped), no `workingDir` is the pod
//!   directory itself. Files written there persist across the pod's execs; every container of
//!   the pod shares the directory. It is removed when the pod is deleted and the whole root
//!   when the cluster stops.
//! * A clean environment, not the host's: `PATH` (the host's, so host programs resolve),
//!   `HOME` (the pod directory), `HOSTNAME` (the pod's hostname or name), `TERM=xterm` with a
//!   TTY, then the container's own variables ([`super::exec_env`]) over them.
//! * Its own process group, killed with SIGKILL when the exec ends for any reason (the command
//!   exited, the client went away, the cluster's time limit, the pod's deletion, the cluster
//!   stopping), so nothing it started outlives the exec. That differs from a container, where
//!   background processes of an exec live on until the container stops. A process that leaves
//!   the group (`setsid`) escapes; a cluster killed with SIGKILL cannot kill anything.
//! * No terminal: with `tty` the process still reads and writes pipes (its stderr is reported
//!   as stdout, as a TTY merges them), and resize events are ignored.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rustix::process::{Pid, Signal, kill_process_group};
use sandbox_contract::quote;
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

/// How long an exec may run unless the cluster is configured otherwise.
pub const DEFAULT_EXEC_LIMIT: Duration = Duration::from_secs(10 * 60);

/// Tells the roots of clusters in one process apart.
static NEXT_ROOT: AtomicU32 = AtomicU32::new(0);

/// What to run for one exec.
#[derive(Debug, Clone)]
pub struct ExecSpec {
    /// The pod's uid, which names its directory.
    pub pod_uid: String,
    /// The process's argv, never empty.
    pub argv: Vec<String>,
    /// The container's resolved variables.
    pub env: BTreeMap<String, Vec<u8>>,
    /// The container's `workingDir`, a path inside the container.
    pub working_dir: Option<String>,
    /// What `HOSTNAME` says.
    pub hostname: String,
    /// The client sends stdin (else the process reads `/dev/null`).
    pub stdin: bool,
    /// The client reads stdout (else it goes to `/dev/null`).
    pub stdout: bool,
    /// The client reads stderr apart from stdout.
    pub stderr: bool,
    /// The client asked for a terminal: stderr is then read as stdout.
    pub tty: bool,
}

/// Why a process could not be started; shown to the client in the exec's final status, worded
/// like the container runtime's `exec: "x": executable file not found in $PATH`.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// `argv[0]` is not on `PATH` (or not there at the path given).
    #[error("exec: {}: executable file not found in $PATH", quote(.0))]
    NotFound(String),
    /// The process could not be spawned for another reason (permissions, resources).
    #[error("exec: {}: {source}", quote(.program))]
    Spawn { program: String, source: std::io::Error },
    /// The pod's directory or the container's working directory cannot be made.
    #[error("cannot create the working directory {}: {source}", .path.display())]
    WorkingDir { path: PathBuf, source: std::io::Error },
    /// The cluster is stopping.
    #[error("the embedded cluster is stopping; no new exec starts")]
    Stopped,
}

/// One running exec's process group, as the host tracks it.
#[derive(Debug, Clone)]
struct Entry {
    pod_uid: String,
    group: Pid,
}

/// The execs of one cluster: its temp root, its time limit, and every live process group, so
/// that a pod's deletion and the cluster's stop can kill them.
#[derive(Debug)]
pub struct ExecHost {
    root: PathBuf,
    limit: Duration,
    running: Mutex<HashMap<u64, Entry>>,
    next_id: AtomicU64,
    stopped: watch::Sender<bool>,
}

/// A started exec: the child and its pipes. Dropping it kills the process group and forgets it.
#[derive(Debug)]
pub struct Process {
    /// The command's process, the leader of its group.
    pub child: Child,
    /// Its stdin, when the client sends one.
    pub stdin: Option<ChildStdin>,
    /// Its stdout, when the client reads it.
    pub stdout: Option<ChildStdout>,
    /// Its stderr, when the client reads it (apart, or as stdout with a TTY).
    pub stderr: Option<ChildStderr>,
    host: Arc<ExecHost>,
    id: u64,
    group: Pid,
}

impl Process {
    /// Kills everything left in the process group (the command itself, or what it left running
    /// after it exited).
    pub fn kill_group(&self) {
        kill_group(self.group);
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill_group();
        self.host.lock().remove(&self.id);
    }
}

/// SIGKILL to a process group; a group that is already gone is no error.
fn kill_group(group: Pid) {
    if group.as_raw_nonzero().get() > 1 {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

impl ExecHost {
    /// A host whose execs may run for `limit`; its root directory is made at the first exec.
    pub fn new(limit: Duration) -> Self {
        let n = NEXT_ROOT.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("embedded-cluster-{}-{n}", std::process::id()));
        Self { root, limit, running: Mutex::default(), next_id: AtomicU64::new(0), stopped: watch::Sender::new(false) }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        self.running.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The longest an exec may run.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Becomes true when the cluster stops.
    pub fn stopped(&self) -> watch::Receiver<bool> {
        self.stopped.subscribe()
    }

    /// The directory that stands for a pod's filesystem root.
    pub fn pod_dir(&self, pod_uid: &str) -> PathBuf {
        self.root.join("pods").join(safe_segment(pod_uid))
    }

    /// How many execs run now.
    pub fn running(&self) -> usize {
        self.lock().len()
    }

    /// Starts one exec's process in its own process group.
    pub fn start(self: &Arc<Self>, spec: ExecSpec) -> Result<Process, StartError> {
        if *self.stopped.borrow() {
            return Err(StartError::Stopped);
        }
        let pod_dir = self.pod_dir(&spec.pod_uid);
        let cwd = inside(&pod_dir, spec.working_dir.as_deref().unwrap_or("/"));
        std::fs::create_dir_all(&cwd).map_err(|source| StartError::WorkingDir { path: cwd.clone(), source })?;

        let program = spec.argv.first().cloned().unwrap_or_default();
        let mut command = Command::new(&program);
        command.args(spec.argv.iter().skip(1)).current_dir(&cwd).env_clear();
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        command.env("HOME", &pod_dir).env("HOSTNAME", &spec.hostname);
        if spec.tty {
            command.env("TERM", "xterm");
        }
        for (name, value) in &spec.env {
            command.env(name, OsString::from_vec(value.clone()));
        }
        let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
        command
            .stdin(piped(spec.stdin))
            .stdout(piped(spec.stdout))
            .stderr(piped(spec.stderr || (spec.tty && spec.stdout)))
            .process_group(0)
            .kill_on_drop(true);

        // Registered under the lock, so a concurrent stop either refuses this exec or kills it.
        let mut running = self.lock();
        if *self.stopped.borrow() {
            return Err(StartError::Stopped);
        }
        let mut child = command.spawn().map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => StartError::NotFound(program.clone()),
            _ => StartError::Spawn { program: program.clone(), source },
        })?;
        let group = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
        let Some(group) = group else {
            // The child is already reaped; `kill_on_drop` covers the impossible rest.
            return Err(StartError::Spawn { program, source: std::io::Error::other("the process has no id") });
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        running.insert(id, Entry { pod_uid: spec.pod_uid.clone(), group });
        drop(running);
        tracing::debug!(pod_uid = %spec.pod_uid, program = %quote(&program), pid = group.as_raw_nonzero().get(), "exec started");
        Ok(Process {
            stdin: child.stdin.take(),
            stdout: child.stdout.take(),
            stderr: child.stderr.take(),
            child,
            host: self.clone(),
            id,
            group,
        })
    }

    /// A pod was deleted: kill its execs and remove its directory.
    pub fn pod_deleted(&self, pod_uid: &str) {
        for entry in self.lock().values().filter(|e| e.pod_uid == pod_uid) {
            kill_group(entry.group);
        }
        remove_dir(&self.pod_dir(pod_uid));
    }

    /// After missing deletions (a lagging feed): clean up every pod not in `live`.
    pub fn keep_only(&self, live: &HashSet<String>) {
        let gone: HashSet<String> =
            self.lock().values().map(|e| e.pod_uid.clone()).filter(|u| !live.contains(u)).collect();
        for uid in &gone {
            self.pod_deleted(uid);
        }
        let Ok(dirs) = std::fs::read_dir(self.root.join("pods")) else { return };
        for dir in dirs.flatten() {
            let name = dir.file_name().to_string_lossy().into_owned();
            if !live.iter().any(|uid| safe_segment(uid) == name) {
                remove_dir(&dir.path());
            }
        }
    }

    /// The cluster stops: no exec starts any more, every running one is killed, and the root
    /// directory goes. Safe to call more than once, and from `Drop` outside the runtime.
    pub fn shutdown(&self) {
        let running = self.lock();
        self.stopped.send_replace(true);
        for entry in running.values() {
            kill_group(entry.group);
        }
        drop(running);
        remove_dir(&self.root);
    }
}

/// Removes a directory tree, logging (not failing) when it cannot.
fn remove_dir(path: &Path) {
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove an exec directory; remove it by hand")
        }
    }
}

/// A uid as one path segment (uids are UUIDs; anything else is made harmless).
fn safe_segment(uid: &str) -> String {
    let cleaned: String = uid.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    if cleaned.is_empty() { "_".to_string() } else { cleaned }
}

/// A path inside the container, mapped into the pod directory: only its normal components
/// count, so it can never leave the directory.
fn inside(pod_dir: &Path, container_path: &str) -> PathBuf {
    let mut path = pod_dir.to_path_buf();
    for component in Path::new(container_path).components() {
        if let Component::Normal(part) = component {
            path.push(part);
        }
    }
    path
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn container_paths_stay_inside_the_pod_directory() {
        let dir = Path::new("/tmp/pods/u");
        assert_eq!(inside(dir, "/"), dir);
        assert_eq!(inside(dir, "/app/data"), dir.join("app/data"));
        assert_eq!(inside(dir, "../../etc/./x/.."), dir.join("etc/x"));
        assert_eq!(safe_segment("../a b"), "___a_b");
    }

    fn spec(uid: &str, argv: &[&str]) -> ExecSpec {
        ExecSpec {
            pod_uid: uid.to_string(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            env: BTreeMap::from([("GREETING".to_string(), b"hello".to_vec())]),
            working_dir: Some("/work".to_string()),
            hostname: "pod-a".to_string(),
            stdin: false,
            stdout: true,
            stderr: true,
            tty: false,
        }
    }

    #[tokio::test]
    async fn a_process_runs_in_the_pod_directory_with_a_clean_environment() {
        use tokio::io::AsyncReadExt;
        let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT));
        let mut p =
            host.start(spec("uid-1", &["sh", "-c", "pwd; echo $GREETING $HOSTNAME; env | wc -l"])).expect("start");
        let mut out = String::new();
        p.stdout.take().expect("stdout").read_to_string(&mut out).await.expect("read");
        assert!(p.child.wait().await.expect("wait").success());
        let pwd = host.pod_dir("uid-1").join("work");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..2], [pwd.to_string_lossy().as_ref(), "hello pod-a"], "{out}");
        assert!(lines[2].trim().parse::<usize>().is_ok_and(|n| n < 10), "only a few variables: {out}");
        assert_eq!(host.running(), 1);
        drop(p);
        assert_eq!(host.running(), 0);
        host.pod_deleted("uid-1");
        assert!(!host.pod_dir("uid-1").exists());
        host.shutdown();
        assert!(!host.root.exists());
        assert!(matches!(host.start(spec("uid-1", &["true"])), Err(StartError::Stopped)));
    }

    #[tokio::test]
    async fn a_missing_program_is_the_runtimes_error() {
        let host = Arc::new(ExecHost::new(DEFAULT_EXEC_LIMIT));
        let err = host.start(spec("uid-2", &["no-such-program-here"])).expect_err("not found");
        assert_eq!(err.to_string(), "exec: \"no-such-program-here\": executable file not found in $PATH");
        host.shutdown();
    }
}
