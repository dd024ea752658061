//! Each pod's processes in a PID namespace of their own, as runc gives a container's, so that
//! what a real pod does with the processes an exec leaves shows here too.
//!
//! ## What a real pod does
//! A container's main process is PID 1 of its PID namespace (Linux `pid_namespaces(7)`):
//! * An orphan (a process whose parent exited: what `sh -c 'cmd &'` leaves, a daemon that
//!   forked) is reparented to PID 1. Unless PID 1 waits for it, its exit leaves a zombie that
//!   holds a pid of the pod's PID limit. `sleep infinity` never waits.
//! * PID 1 gets only the signals it has a handler for: a main process without a SIGTERM handler
//!   ignores the kubelet's SIGTERM, and only SIGKILL at the end of the grace period ends it.
//! * When PID 1 exits, the kernel kills every other process of the namespace.
//!
//! With `shareProcessNamespace: true` the pod's containers share one namespace whose PID 1 is
//! the pause container's process, which reaps orphans and exits on SIGTERM
//! ([Kubernetes: share process namespace](https://kubernetes.io/docs/tasks/configure-pod-container/share-process-namespace/)).
//!
//! ## What the embedded kubelet does
//! The kubelet runs no image, so PID 1 stands in for the main process ([`MainProcess`]): for a
//! pod with `shareProcessNamespace: true` a pause that reaps and exits on SIGTERM (`sh`,
//! whose `wait` reaps every child), for any other pod `sleep infinity`, which is what most
//! sandbox images run and is the worst case: it never reaps and has no SIGTERM handler. The
//! namespace is made at the pod's first exec with util-linux's `unshare` (with `/proc`
//! mounted afresh, so `ps` in an exec lists the pod's processes only) and every exec enters it
//! with `nsenter`, in the container's working directory. Without root, a user namespace is
//! made as well where the kernel allows it; where nothing works (no util-linux, no namespaces
//! allowed) the kubelet says so once and runs execs as plain processes of the machine.
//!
//! Deleting the pod, stopping the cluster, or the cluster's process dying (through the exec
//! guardian, which kills the session `unshare` leads) kills `unshare`, whose `--kill-child`
//! kills PID 1, and with it, by the kernel, everything in the namespace: a `setsid` daemon
//! too, which no session kill reaches.
//!
//! The pod's stop follows what PID 1 stands in for (`stop_delay` in `pod_state.rs`): beside a
//! pause the main process ends at SIGTERM, as PID 1 it ignores it and the grace period runs
//! out (exit 137); the `termination-delay` knob overrides both. With a PID limit
//! (`KubeletConfig::pod_pids_limit`) the namespace's processes are in a pids cgroup of the
//! pod's own (`pid_limit.rs`). Not reproduced: a main command that handles SIGTERM or reaps as
//! PID 1 (the kubelet runs no image, so it cannot tell).

use std::collections::HashMap;
use std::io;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use k8s_openapi::api::core::v1::Pod;
use rustix::process::{Pid, Signal, kill_process};

use super::pid_limit::{self, PidsCgroup};

/// How long `unshare` may take to start PID 1 before the namespace counts as unavailable.
const START_DEADLINE: Duration = Duration::from_secs(5);

/// What PID 1 of a pod's namespace stands in for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MainProcess {
    /// The pause container of a pod that shares its process namespace: reaps, exits on SIGTERM.
    Pause,
    /// A main process that never reaps and has no SIGTERM handler (`sleep infinity`).
    Sleep,
}

/// The pause stand-in: `wait` reaps every child of the shell, orphans included, and the trap
/// gives it the SIGTERM handler a namespace's PID 1 needs to be stopped by it.
const PAUSE_SCRIPT: &str = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done";

impl MainProcess {
    /// What PID 1 of `pod` is.
    pub fn of(pod: &Pod) -> Self {
        match pod.spec.as_ref().and_then(|s| s.share_process_namespace) {
            Some(true) => Self::Pause,
            _ => Self::Sleep,
        }
    }

    fn argv(self) -> &'static [&'static str] {
        match self {
            Self::Pause => &["sh", "-c", PAUSE_SCRIPT],
            Self::Sleep => &["sleep", "infinity"],
        }
    }
}

/// How the machine lets the kubelet make a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Privilege {
    /// Root: PID and mount namespaces directly.
    Root,
    /// Not root: inside a user namespace of its own, mapped to root there.
    UserNamespace,
}

impl Privilege {
    fn of_this_process() -> Self {
        if rustix::process::geteuid().is_root() { Self::Root } else { Self::UserNamespace }
    }
}

/// One process of a pod's namespace, as the machine sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodProcess {
    /// The pid on the machine (not the pid inside the namespace).
    pub pid: i32,
    /// The command name (`comm`).
    pub name: String,
    /// The command line, words joined by spaces (empty for a zombie).
    pub command: String,
    /// The state letter of `/proc/<pid>/stat`: `Z` for a zombie.
    pub state: char,
}

/// A pod's PID namespace: `unshare` (which leads a session of its own) and PID 1 under it.
#[derive(Debug)]
pub struct PodNamespace {
    unshare: Child,
    pid1: Pid,
    namespace: String,
    privilege: Privilege,
    /// The pod's PID limit, when the cluster sets one (`pid_limit.rs`).
    pids: Option<PidsCgroup>,
}

impl PodNamespace {
    /// Makes the namespace with `main` as PID 1, in the pod's pids cgroup when there is one.
    pub fn start(main: MainProcess, pids: Option<PidsCgroup>) -> io::Result<Self> {
        let privilege = Privilege::of_this_process();
        let mut command = Command::new("unshare");
        if privilege == Privilege::UserNamespace {
            command.args(["--user", "--map-root-user"]);
        }
        command
            .args(["--pid", "--fork", "--mount-proc", "--kill-child", "--"])
            .args(main.argv())
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: `setsid` is async-signal-safe and allocates nothing.
        unsafe {
            command.pre_exec(|| rustix::process::setsid().map(|_| ()).map_err(io::Error::from));
        }
        if let Some(procs) = pids.as_ref().map(|p| p.procs().to_owned()) {
            // SAFETY: `join` only opens and writes a path made before the fork (see there).
            unsafe {
                command.pre_exec(move || pid_limit::join(&procs));
            }
        }
        let mut unshare = command.spawn()?;
        let leader = Pid::from_child(&unshare);
        let own = namespace_of(std::process::id().cast_signed());
        let started = Instant::now();
        loop {
            if let Some(status) = unshare.try_wait()? {
                let mut why = String::new();
                if let Some(mut stderr) = unshare.stderr.take() {
                    let _ = io::Read::read_to_string(&mut stderr, &mut why);
                }
                return Err(io::Error::other(format!("unshare exited ({status}): {}", why.trim())));
            }
            let child = children_of(leader.as_raw_nonzero().get()).into_iter().next();
            if let Some((pid, namespace)) = child.and_then(|pid| Some((pid, namespace_of(pid)?)))
                && Some(&namespace) != own.as_ref()
            {
                let pid1 = Pid::from_raw(pid).ok_or_else(|| io::Error::other("PID 1 has pid 0"))?;
                return Ok(Self { unshare, pid1, namespace, privilege, pids });
            }
            if started.elapsed() > START_DEADLINE {
                let _ = unshare.kill();
                let _ = unshare.wait();
                return Err(io::Error::other(format!(
                    "unshare started no PID 1 in a new namespace within {} s",
                    START_DEADLINE.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The session `unshare` leads: killing it ends the namespace (the exec guardian's id).
    pub fn session(&self) -> Pid {
        Pid::from_child(&self.unshare)
    }

    /// The argv that runs `argv` inside the namespace, in `cwd` (a directory of the machine,
    /// which the namespace's mounts show at the same path), as the leader of a session of its
    /// own there (as runc starts an exec's process), with `tty` as its controlling terminal.
    /// That process is `nsenter`'s child.
    pub fn enter(&self, argv: &[String], cwd: &Path, tty: bool) -> Vec<String> {
        let mut entered = vec!["nsenter".to_string(), format!("--target={}", self.pid1.as_raw_nonzero())];
        if self.privilege == Privilege::UserNamespace {
            entered.extend(["--user".to_string(), "--preserve-credentials".to_string()]);
        }
        entered.extend(["--pid".to_string(), "--mount".to_string(), format!("--wd={}", cwd.display()), "--".into()]);
        entered.push("setsid".into());
        if tty {
            entered.push("--ctty".into());
        }
        entered.extend(argv.iter().cloned());
        entered
    }

    /// The `cgroup.procs` of the pod's pids cgroup, which each exec's process joins.
    pub fn pids_procs(&self) -> Option<std::ffi::CString> {
        self.pids.as_ref().map(|p| p.procs().to_owned())
    }

    /// Every process of the namespace, PID 1 included.
    pub fn processes(&self) -> Vec<PodProcess> {
        let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
        entries
            .flatten()
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
            .filter(|pid| namespace_of(*pid).as_deref() == Some(self.namespace.as_str()))
            .filter_map(|pid| {
                let stat = Stat::read(pid)?;
                let command = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let command = String::from_utf8_lossy(&command).replace('\0', " ").trim_end().to_string();
                Some(PodProcess { pid, name: stat.name, command, state: stat.state })
            })
            .collect()
    }

    /// Ends the namespace and everything in it.
    pub fn kill(&mut self) {
        // PID 1 first: its end kills the namespace even if `unshare` were already gone.
        let _ = kill_process(self.pid1, Signal::KILL);
        let _ = self.unshare.kill();
        let _ = self.unshare.wait();
    }
}

impl Drop for PodNamespace {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The namespaces of a cluster's pods, made at each pod's first exec.
#[derive(Debug, Default)]
pub struct Namespaces {
    by_pod: HashMap<String, PodNamespace>,
    /// None could be made (and that was said once): execs run as plain processes.
    unavailable: bool,
    /// Each pod's PID limit (`podPidsLimit`), and the cluster's name for its cgroups.
    pids_limit: Option<(u32, String)>,
    /// No pids cgroup could be made (and that was said once): pods run unlimited.
    pids_unavailable: bool,
}

impl Namespaces {
    /// Namespaces whose pods each get at most `limit` processes, in pids cgroups under the
    /// cluster's directory `cluster`.
    pub fn with_pids_limit(limit: Option<u32>, cluster: &str) -> Self {
        Self { pids_limit: limit.map(|l| (l, cluster.to_string())), ..Self::default() }
    }

    /// No namespaces: execs run as plain processes of the machine, as where none can be made.
    #[cfg(test)]
    pub fn disabled() -> Self {
        Self { unavailable: true, ..Self::default() }
    }

    /// The pod's namespace, made now if it has none; `None` where the machine gives none.
    /// The bool is true when the namespace was made by this call.
    pub fn get_or_start(&mut self, pod_uid: &str, main: MainProcess) -> Option<(&PodNamespace, bool)> {
        if self.unavailable {
            return None;
        }
        let made = !self.by_pod.contains_key(pod_uid);
        if made {
            let pids = self.pids_cgroup(pod_uid);
            match PodNamespace::start(main, pids) {
                Ok(namespace) => {
                    self.by_pod.insert(pod_uid.to_string(), namespace);
                }
                Err(e) => {
                    self.unavailable = true;
                    tracing::warn!(
                        error = %e,
                        "cannot give pods PID namespaces (util-linux's unshare and nsenter, and root or user \
                         namespaces, are needed): execs run as plain processes of this machine, so orphans \
                         are not reparented to the pod's main process and no zombie shows as on a real node"
                    );
                    return None;
                }
            }
        }
        self.by_pod.get(pod_uid).map(|n| (n, made))
    }

    /// The pod's pids cgroup, when the cluster sets a PID limit and the machine gives cgroups.
    fn pids_cgroup(&mut self, pod_uid: &str) -> Option<PidsCgroup> {
        let (limit, cluster) = self.pids_limit.as_ref().filter(|_| !self.pids_unavailable)?;
        match PidsCgroup::create(cluster, pod_uid, *limit) {
            Ok(cgroup) => Some(cgroup),
            Err(e) => {
                self.pids_unavailable = true;
                tracing::warn!(
                    error = %e,
                    "cannot give pods a PID limit (a writable pids cgroup hierarchy is needed): pods run without \
                     one, so forks never fail as they would beyond a real kubelet's podPidsLimit"
                );
                None
            }
        }
    }

    /// The pod's namespace, if it has one.
    pub fn get(&self, pod_uid: &str) -> Option<&PodNamespace> {
        self.by_pod.get(pod_uid)
    }

    /// Takes the pod's namespace out; dropping it kills everything in it.
    pub fn remove(&mut self, pod_uid: &str) -> Option<PodNamespace> {
        self.by_pod.remove(pod_uid)
    }

    /// The pods that have a namespace.
    pub fn pods(&self) -> impl Iterator<Item = &String> {
        self.by_pod.keys()
    }
}

/// Whether `program` names an executable file, as `execvp` would find it: a path (relative to
/// `cwd`) when it has a `/`, else on `path`. Through `nsenter` a missing program is only an exit
/// status, so the kubelet looks first, to answer as a runtime does.
pub fn executable(program: &str, path: Option<&std::ffi::OsStr>, cwd: &Path) -> bool {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    let runnable = |candidate: &Path| {
        std::fs::metadata(candidate).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return runnable(&cwd.join(program));
    }
    if program.is_empty() {
        return false;
    }
    let path = path.map(OsStr::as_bytes).unwrap_or(b"/usr/local/bin:/usr/bin:/bin");
    path.split(|b| *b == b':').any(|dir| {
        let dir = Path::new(OsStr::from_bytes(dir));
        let dir = if dir.as_os_str().is_empty() { cwd } else { dir };
        runnable(&dir.join(program))
    })
}

/// The PID namespace of a process (`pid:[4026531836]`), `None` once it is gone.
fn namespace_of(pid: i32) -> Option<String> {
    std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok().map(|p| p.to_string_lossy().into_owned())
}

/// The children of `parent`, from every process's `stat`.
pub(crate) fn children_of(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter(|pid| Stat::read(*pid).is_some_and(|s| s.parent == parent))
        .collect()
}

/// The fields of `/proc/<pid>/stat` the kubelet reads.
struct Stat {
    name: String,
    state: char,
    parent: i32,
}

impl Stat {
    fn read(pid: i32) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
    }

    /// `pid (comm) state ppid ...`; `comm` may hold spaces and parentheses, so it ends at the
    /// last `)`.
    fn parse(text: &str) -> Option<Self> {
        let open = text.find('(')?;
        let close = text.rfind(')')?;
        let name = text.get(open + 1..close)?.to_string();
        let mut rest = text.get(close + 1..)?.split_whitespace();
        let state = rest.next()?.chars().next()?;
        let parent = rest.next()?.parse().ok()?;
        Some(Self { name, state, parent })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pod_that_shares_its_process_namespace_has_a_pause_for_pid_1() {
        let pod: Pod = serde_json::from_value(serde_json::json!({"spec": {"shareProcessNamespace": true,
            "containers": [{"name": "main"}]}}))
        .expect("pod");
        assert_eq!(MainProcess::of(&pod), MainProcess::Pause);
        let pod: Pod =
            serde_json::from_value(serde_json::json!({"spec": {"containers": [{"name": "main"}]}})).expect("pod");
        assert_eq!(MainProcess::of(&pod), MainProcess::Sleep);
    }

    #[test]
    fn stat_reads_a_name_with_spaces_and_parentheses() {
        let stat = Stat::parse("42 (a (b) c)) Z 7 42 42 0 -1").expect("parses");
        assert_eq!((stat.name.as_str(), stat.state, stat.parent), ("a (b) c)", 'Z', 7));
        let own = Stat::read(std::process::id().cast_signed()).expect("own stat");
        assert!(!own.name.is_empty() && own.parent > 0 && own.state != 'Z');
    }
}
