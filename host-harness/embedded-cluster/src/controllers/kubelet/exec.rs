//! The simulated kubelet's side of `pods/exec`: the exec'd command runs as a **local process on
//! the machine that runs the cluster**, not in the container's image. Nothing is isolated: the
//! command, and whatever it leaves running, sees the host's files, programs and network, runs as
//! the cluster's user, and can do whatever that user can. It is a simulation for demos and
//! tests, so that `kubectl exec` and kube-rs's `Api::exec` have something real to talk to.
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
//! * A session of its own (`setsid`), as runc gives every process it starts in a container: the
//!   process and what it starts are apart from any terminal of the cluster's, and the session
//!   is what the cluster tracks and kills ([`super::exec_sessions`]).
//! * With `tty`, a pseudo-terminal as its controlling terminal and as its stdin, stdout and
//!   stderr (so stderr reaches the client as stdout, as a terminal merges them); the client's
//!   resize messages set the terminal's size (`TIOCSWINSZ`, which sends the process SIGWINCH).
//!   Without, pipes, and `/dev/null` for a stream the client did not ask for.
//! * What it starts in the background outlives the exec, as in a container: it runs on after
//!   the exec's process has exited until the pod is deleted or the cluster stops, and then the
//!   sessions of all the pod's execs are killed (SIGKILL). So a client can start a server with
//!   `nohup server > log 2>&1 &` in one exec and talk to it from the next.
//!
//! ## When the exec ends
//! * As containerd ends one. Without a TTY: once the process has exited **and** its stdout and
//!   stderr are closed, also by whatever inherited them (containerd's CRI waits for its copy of
//!   the output, which a background process holding the pipes keeps going): `sh -c 'sleep 25 &
//!   echo started'` streams for 25 seconds here as on a real cluster, while `nohup cmd > file
//!   2>&1 &` returns at once. With a TTY: once the process has exited and what it wrote last is
//!   read (a short drain, `TTY_DRAIN` in `remote_command.rs`), as containerd closes the console
//!   when the exec's process exits, so a background process still holding the terminal does
//!   not keep the exec open. The exiting process hangs the
//!   terminal up and the kernel sends its foreground process group SIGHUP: background
//!   processes of a TTY exec live on if they ignore it (`nohup`), as in a container.
//! * An exec cut short before its process exited (the client went away, the cluster's time
//!   limit, the pod's deletion, the cluster stopping) has its whole session killed at once,
//!   what it started in the background included. A real runtime kills only the exec's process
//!   when the exec's request ends (containerd's CRI); here an exec that nobody waits for any
//!   more must not leave work running on the host. Once the process has exited, what it left belongs to the pod: a
//!   client that goes away then, or the time limit reached while a background process still
//!   holds the output, ends the exec (with the process's exit code) and kills nothing.
//! * Nothing outlives the cluster: stopping it (dropping it, which a host does on the SIGTERM
//!   or SIGINT it handles) kills every session, and should the cluster's process die without
//!   stopping it (SIGKILL, a signal its program does not handle), a guardian process does
//!   ([`super::exec_sessions`]).
//! * Out of reach: a process that starts a session of its own (`setsid`, a daemon detaching)
//!   is never killed by the cluster, where a container's PID namespace would hold it. And once
//!   a session is empty its id may be taken by an unrelated process before the cluster notices,
//!   which a later kill would then hit; the cluster checks before each kill to keep that window
//!   short ([`super::exec_sessions`]).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::pin::Pin;
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use contract::quote;
use rustix::fs::{Mode, OFlags};
use rustix::process::Pid;
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::exec_sessions::{Guardian, Processes};
use super::pid_limit;
use super::pid_namespace::{self, MainProcess, Namespaces, PodProcess};

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
    /// The client sends stdin (else the process reads `/dev/null`, or the silent terminal).
    pub stdin: bool,
    /// The client reads stdout (else it goes to `/dev/null`).
    pub stdout: bool,
    /// The client reads stderr apart from stdout.
    pub stderr: bool,
    /// The client asked for a terminal: stdin, stdout and stderr are then the terminal.
    pub tty: bool,
    /// What PID 1 of the pod's namespace stands in for.
    pub main_process: MainProcess,
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
    /// No pseudo-terminal could be had for a TTY exec.
    #[error("cannot open a terminal: {0}")]
    Terminal(std::io::Error),
    /// The pod was deleted while the exec was being set up.
    #[error("the pod was deleted")]
    PodDeleted,
    /// The cluster is stopping.
    #[error("the embedded cluster is stopping; no new exec starts")]
    Stopped,
}

/// What the process reads: the client's stdin.
pub type Input = Box<dyn AsyncWrite + Send + Unpin>;
/// What the process writes: its stdout or stderr, or the terminal.
pub type Output = Box<dyn AsyncRead + Send + Unpin>;

/// One exec's session, as the host tracks it.
#[derive(Debug)]
struct Entry {
    pod_uid: String,
    session: Pid,
    /// The process runs in the pod's namespace, `nsenter`'s child, in a session of its own.
    entered: bool,
    /// The exec still streams; once not, its process has exited and what it left runs on.
    streaming: bool,
}

/// The exec sessions of all pods, and what goes with them.
#[derive(Debug, Default)]
struct Registry {
    entries: HashMap<u64, Entry>,
    /// Deleted pods' uids, so that an exec racing its pod's deletion does not start.
    deleted: HashSet<String>,
    guardian: Option<Guardian>,
    /// The guardian could not be started (and that was said once).
    guardian_failed: bool,
    /// The pods' PID namespaces.
    namespaces: Namespaces,
}

impl Registry {
    /// Tracks a new session, with the guardian.
    fn register(&mut self, id: u64, entry: Entry) {
        self.guard(entry.session);
        self.entries.insert(id, entry);
    }

    /// Has the guardian (started at the first session) kill `session` if the cluster dies.
    fn guard(&mut self, session: Pid) {
        if self.guardian.is_none() && !self.guardian_failed {
            match Guardian::spawn() {
                Ok(guardian) => self.guardian = Some(guardian),
                Err(e) => {
                    self.guardian_failed = true;
                    tracing::warn!(
                        error = %e,
                        "cannot start the exec guardian (sh): if this process dies without stopping the embedded \
                         cluster, background processes of its execs may be left running"
                    );
                }
            }
        }
        if let Some(guardian) = &mut self.guardian {
            guardian.register(session);
        }
    }

    fn forget(&mut self, id: u64) {
        if let (Some(entry), Some(guardian)) = (self.entries.remove(&id), self.guardian.as_mut()) {
            guardian.forget(entry.session);
        }
    }

    /// Forgets the sessions of finished execs that have no process left.
    fn prune(&mut self, processes: &mut Processes) {
        let empty: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| !e.streaming && !processes.alive(e.session))
            .map(|(id, _)| *id)
            .collect();
        for id in empty {
            self.forget(id);
        }
    }

    /// Kills the sessions of a pod's execs (those still running too) and forgets the finished.
    fn kill_pod(&mut self, pod_uid: &str) {
        let mut processes = Processes::default();
        self.prune(&mut processes);
        let ids: Vec<u64> = self.entries.iter().filter(|(_, e)| e.pod_uid == pod_uid).map(|(id, _)| *id).collect();
        for id in ids {
            let Some(entry) = self.entries.get(&id) else { continue };
            if processes.alive(entry.session) {
                kill_exec(&mut processes, entry.session, entry.entered);
            }
            if !entry.streaming {
                self.forget(id);
            }
        }
        if let Some(namespace) = self.namespaces.remove(pod_uid) {
            if let Some(guardian) = self.guardian.as_mut() {
                guardian.forget(namespace.session());
            }
            drop(namespace);
        }
    }
}

/// The execs of one cluster: its temp root, its time limit, and every exec session, so that a
/// pod's deletion and the cluster's stop can kill what they left running.
#[derive(Debug)]
pub struct ExecHost {
    root: PathBuf,
    /// The cluster's name for what it makes on the machine (its root, its pods' cgroups).
    name: String,
    limit: Duration,
    registry: Mutex<Registry>,
    next_id: AtomicU64,
    stopped: watch::Sender<bool>,
}

/// A started exec: the child and its streams. Dropping it ends the exec: before the process
/// exited, its whole session is killed; after, what it left runs on with the pod.
pub struct Process {
    /// The command's process, the leader of its session.
    pub child: Child,
    /// Its stdin, when the client sends one.
    pub stdin: Option<Input>,
    /// Its stdout (with a TTY, the terminal), when the client reads it.
    pub stdout: Option<Output>,
    /// Its stderr, when the client reads it apart.
    pub stderr: Option<Output>,
    /// The cluster's side of the terminal, with a TTY.
    terminal: Option<OwnedFd>,
    host: Arc<ExecHost>,
    id: u64,
    session: Pid,
    entered: bool,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("child", &self.child)
            .field("id", &self.id)
            .field("session", &self.session)
            .finish()
    }
}

impl Process {
    /// Kills the exec's session: the process and whatever it started that is still in it. Only
    /// before the process is waited for, while its pid, the session's id, cannot be anyone's.
    pub fn kill_all(&self) {
        kill_exec(&mut Processes::default(), self.session, self.entered);
    }

    /// Sets the terminal's size, as a client's resize message asks; nothing without a TTY.
    pub fn resize(&self, columns: u16, rows: u16) {
        let Some(terminal) = &self.terminal else { return };
        let size = Winsize { ws_row: rows, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0 };
        if let Err(e) = rustix::termios::tcsetwinsize(terminal, size) {
            tracing::debug!(error = %e, "cannot resize an exec's terminal");
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let exited = matches!(self.child.try_wait(), Ok(Some(_)));
        self.host.release(self.id, exited);
    }
}

impl ExecHost {
    /// A host whose execs may run for `limit`, each pod's in a PID namespace of its own where
    /// the machine gives one; its root directory is made at the first exec.
    pub fn new(limit: Duration, pods_pids_limit: Option<u32>) -> Self {
        let n = NEXT_ROOT.fetch_add(1, Ordering::Relaxed);
        let name = format!("embedded-cluster-{}-{n}", std::process::id());
        let root = std::env::temp_dir().join(&name);
        let registry =
            Registry { namespaces: Namespaces::with_pids_limit(pods_pids_limit, &name), ..Default::default() };
        Self {
            root,
            name,
            limit,
            registry: Mutex::new(registry),
            next_id: AtomicU64::new(0),
            stopped: watch::Sender::new(false),
        }
    }

    /// A host that runs execs as plain processes of the machine, as where no namespace can be
    /// made, so tests reach that path on any machine.
    #[cfg(test)]
    pub(crate) fn without_namespaces(limit: Duration) -> Self {
        let host = Self::new(limit, None);
        host.lock().namespaces = Namespaces::disabled();
        host
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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

    /// The processes of a pod's PID namespace (what a real pod's `ps` shows), `None` while it
    /// has none (no exec yet, or the machine gives no namespaces).
    pub fn pod_processes(&self, pod_uid: &str) -> Option<Vec<PodProcess>> {
        self.lock().namespaces.get(pod_uid).map(pid_namespace::PodNamespace::processes)
    }

    /// How many execs stream now (what finished execs left running is not counted).
    pub fn running(&self) -> usize {
        self.lock().entries.values().filter(|e| e.streaming).count()
    }

    /// Starts one exec's process as the leader of a new session.
    pub fn start(self: &Arc<Self>, spec: ExecSpec) -> Result<Process, StartError> {
        if *self.stopped.borrow() {
            return Err(StartError::Stopped);
        }
        let pod_dir = self.pod_dir(&spec.pod_uid);
        let cwd = inside(&pod_dir, spec.working_dir.as_deref().unwrap_or("/"));
        std::fs::create_dir_all(&cwd).map_err(|source| StartError::WorkingDir { path: cwd.clone(), source })?;

        let program = spec.argv.first().cloned().unwrap_or_default();
        // Under the lock, so a concurrent stop or deletion either refuses this exec or kills it.
        let mut registry = self.lock();
        if *self.stopped.borrow() {
            return Err(StartError::Stopped);
        }
        if registry.deleted.contains(&spec.pod_uid) {
            return Err(StartError::PodDeleted);
        }
        registry.prune(&mut Processes::default());
        let namespace = registry.namespaces.get_or_start(&spec.pod_uid, spec.main_process);
        let entered = namespace.is_some();
        let mut pids_procs = None;
        let argv = match namespace {
            Some((namespace, made)) => {
                let path =
                    spec.env.get("PATH").map(|p| OsString::from_vec(p.clone())).or_else(|| std::env::var_os("PATH"));
                if !pid_namespace::executable(&program, path.as_deref(), &cwd) {
                    return Err(StartError::NotFound(program));
                }
                let (session, argv) = (namespace.session(), namespace.enter(&spec.argv, &cwd, spec.tty));
                pids_procs = namespace.pids_procs();
                if made {
                    registry.guard(session);
                }
                argv
            }
            None => spec.argv.clone(),
        };
        let mut command = Command::new(&argv[0]);
        command.args(argv.iter().skip(1)).current_dir(&cwd).env_clear();
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
        let terminal = if spec.tty { Some(open_terminal().map_err(StartError::Terminal)?) } else { None };
        match &terminal {
            Some((_, process_side)) => {
                let side = || process_side.try_clone().map(Stdio::from).map_err(StartError::Terminal);
                command.stdin(side()?).stdout(side()?).stderr(side()?);
            }
            None => {
                let piped = |on: bool| if on { Stdio::piped() } else { Stdio::null() };
                command.stdin(piped(spec.stdin)).stdout(piped(spec.stdout)).stderr(piped(spec.stderr));
            }
        }
        command.kill_on_drop(true);
        // Inside a namespace the exec's own process takes the terminal (`setsid --ctty`).
        lead_a_session(&mut command, spec.tty && !entered);
        if let Some(procs) = pids_procs {
            // SAFETY: `join` only opens and writes a path made before the fork (see there).
            unsafe {
                command.pre_exec(move || pid_limit::join(&procs));
            }
        }
        let child = command.spawn().map_err(|source| match source.kind() {
            std::io::ErrorKind::NotFound => StartError::NotFound(program.clone()),
            _ => StartError::Spawn { program: program.clone(), source },
        })?;
        // The process has its copies of the terminal; the cluster's would keep it from ever
        // hanging up.
        drop(command);
        let host_side = terminal.map(|(host_side, _)| host_side);
        let session = child.id().and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw);
        let Some(session) = session else {
            // The child is already reaped; `kill_on_drop` covers the impossible rest.
            return Err(StartError::Spawn { program, source: std::io::Error::other("the process has no id") });
        };

        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        registry.register(id, Entry { pod_uid: spec.pod_uid.clone(), session, entered, streaming: true });
        drop(registry);
        tracing::debug!(pod_uid = %spec.pod_uid, program = %quote(&program), pid = session.as_raw_nonzero().get(), "exec started");

        let mut process = Process {
            stdin: None,
            stdout: None,
            stderr: None,
            terminal: None,
            child,
            host: self.clone(),
            id,
            session,
            entered,
        };
        match host_side {
            // On an error the process is dropped, which kills it.
            Some(host_side) => {
                let (stdin, output) = terminal_streams(&host_side, spec.stdin).map_err(StartError::Terminal)?;
                process.stdin = stdin;
                process.stdout = Some(output);
                process.terminal = Some(host_side);
            }
            None => {
                process.stdin = process.child.stdin.take().map(|p| Box::new(p) as Input);
                process.stdout = process.child.stdout.take().map(|p| Box::new(p) as Output);
                process.stderr = process.child.stderr.take().map(|p| Box::new(p) as Output);
            }
        }
        Ok(process)
    }

    /// An exec ended: before its process exited, its session is killed; after, the session is
    /// kept for the pod while it has processes.
    fn release(&self, id: u64, exited: bool) {
        let mut guard = self.lock();
        let registry = &mut *guard;
        let Some(entry) = registry.entries.get_mut(&id) else { return };
        let mut processes = Processes::default();
        if !exited {
            kill_exec(&mut processes, entry.session, entry.entered);
        } else if !registry.deleted.contains(&entry.pod_uid) && processes.alive(entry.session) {
            entry.streaming = false;
            return;
        }
        registry.forget(id);
    }

    /// A pod was deleted: kill its execs and what they left running, and remove its directory.
    pub fn pod_deleted(&self, pod_uid: &str) {
        let mut registry = self.lock();
        registry.deleted.insert(pod_uid.to_string());
        registry.kill_pod(pod_uid);
        drop(registry);
        remove_dir(&self.pod_dir(pod_uid));
    }

    /// After missing deletions (a lagging feed): clean up every pod not in `live`.
    pub fn keep_only(&self, live: &HashSet<String>) {
        let mut registry = self.lock();
        let gone: HashSet<String> = registry
            .entries
            .values()
            .map(|e| &e.pod_uid)
            .chain(registry.namespaces.pods())
            .filter(|u| !live.contains(*u))
            .cloned()
            .collect();
        for uid in &gone {
            registry.kill_pod(uid);
        }
        drop(registry);
        let Ok(dirs) = std::fs::read_dir(self.root.join("pods")) else { return };
        for dir in dirs.flatten() {
            let name = dir.file_name().to_string_lossy().into_owned();
            if !live.iter().any(|uid| safe_segment(uid) == name) {
                remove_dir(&dir.path());
            }
        }
    }

    /// The cluster stops: no exec starts any more, every session (running execs and what
    /// finished ones left) is killed, and the root directory goes. Safe to call more than
    /// once, and from `Drop` outside the runtime.
    pub fn shutdown(&self) {
        let mut guard = self.lock();
        self.stopped.send_replace(true);
        let registry = &mut *guard;
        let mut processes = Processes::default();
        let ids: Vec<u64> = registry.entries.keys().copied().collect();
        for id in ids {
            if let Some(entry) = registry.entries.get(&id)
                && processes.alive(entry.session)
            {
                kill_exec(&mut processes, entry.session, entry.entered);
            }
            registry.forget(id);
        }
        let pods: Vec<String> = registry.namespaces.pods().cloned().collect();
        for uid in pods {
            drop(registry.namespaces.remove(&uid));
        }
        // Nothing is listed any more: the guardian exits without killing anything.
        registry.guardian = None;
        drop(guard);
        remove_dir(&self.root);
        pid_limit::remove_cluster_dir(&self.name);
    }
}

impl Drop for ExecHost {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Kills an exec's session and, for one in a pod's namespace, the session its process leads
/// there (`nsenter` is the session's leader, its child leads one of its own): what the
/// process started goes with it, as a runtime's kill of an exec's process group would take it.
fn kill_exec(processes: &mut Processes, session: Pid, entered: bool) {
    if entered {
        for inner in pid_namespace::children_of(session.as_raw_nonzero().get()).into_iter().filter_map(Pid::from_raw) {
            processes.kill(inner);
        }
    }
    processes.kill(session);
}

/// Makes the process the leader of a new session (`setsid`) and, with a TTY, gives it the
/// terminal on its stdin as its controlling terminal (`TIOCSCTTY`), as runc does.
fn lead_a_session(command: &mut Command, tty: bool) {
    // SAFETY: the closure runs in the child between fork and exec, where only
    // async-signal-safe work is allowed. It makes two system calls, `setsid` and an `ioctl`
    // (rustix neither allocates nor locks for them), and on failure builds an `io::Error`
    // from the errno, which does not allocate either. Fd 0 is open by then: `Command` has put
    // the terminal there.
    unsafe {
        command.pre_exec(move || {
            rustix::process::setsid()?;
            if tty {
                rustix::process::ioctl_tiocsctty(BorrowedFd::borrow_raw(0))?;
            }
            Ok(())
        });
    }
}

/// A new pseudo-terminal: the cluster's side (non-blocking) and the process's.
fn open_terminal() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let host_side = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&host_side)?;
    rustix::pty::unlockpt(&host_side)?;
    let name = rustix::pty::ptsname(&host_side, Vec::new())?;
    let process_side =
        rustix::fs::open(name.as_c_str(), OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC, Mode::empty())?;
    rustix::io::ioctl_fionbio(&host_side, true)?;
    Ok((host_side, process_side))
}

/// The client's streams on the cluster's side of a terminal: what the client types (when it
/// sends stdin) and what the process writes.
fn terminal_streams(host_side: &OwnedFd, stdin: bool) -> std::io::Result<(Option<Input>, Output)> {
    let output = pipe::Receiver::from_owned_fd_unchecked(rustix::io::fcntl_dupfd_cloexec(host_side, 0)?)?;
    let input = if stdin {
        let writer = pipe::Sender::from_owned_fd_unchecked(rustix::io::fcntl_dupfd_cloexec(host_side, 0)?)?;
        Some(Box::new(writer) as Input)
    } else {
        None
    };
    Ok((input, Box::new(TerminalOutput(output))))
}

/// A terminal's output as the cluster reads it: the error that says no process holds the
/// terminal any more (EIO) is its end of file.
struct TerminalOutput(pipe::Receiver);

impl AsyncRead for TerminalOutput {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.0).poll_read(cx, buf) {
            Poll::Ready(Err(e)) if e.raw_os_error() == Some(rustix::io::Errno::IO.raw_os_error()) => {
                Poll::Ready(Ok(()))
            }
            other => other,
        }
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
#[path = "exec_tests.rs"]
mod tests;
