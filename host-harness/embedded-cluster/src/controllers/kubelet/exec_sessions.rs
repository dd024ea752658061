//! The sessions of the simulated kubelet's execs (`exec.rs`): whether one still has a process,
//! how to kill one whole, and the guardian that kills them all if the cluster's process dies
//! without stopping the cluster.
//!
//! Every exec is a session of its own (`setsid`), so its id is the pid of the exec's process,
//! which is also the id of the session's first process group. What the exec starts stays in
//! that group unless a shell with job control (an interactive shell on a TTY) gives its jobs
//! groups of their own; those are still in the session. Killing a session is therefore SIGKILL
//! to its first group and, on Linux, to every group `/proc` shows in the session. A process that
//! starts a session of its own (`setsid`, a daemon detaching) is out of reach.
//!
//! ## Ids used again
//! The kernel hands out no pid that a live process, process group or session still uses, so
//! while anything of a session lives its id names it. Once the last process has exited, the
//! number is free, and an unrelated process may get it and lead a group of its own (`pid_max`
//! is often 32768, so the numbers come round). A signal to the stale id would hit that process.
//! Hence [`Processes::alive`] is asked before every kill and a session is forgotten as soon as
//! it is found empty; the risk left is a session that empties and whose id is taken again as a
//! group before the next check (the next exec's start, the pod's deletion, the cluster's stop).
//!
//! ## The guardian
//! A cluster stopped in order ([`super::exec::ExecHost::shutdown`], run by dropping the
//! cluster) kills what its execs left running. A process that dies without that (SIGKILL, a
//! SIGTERM or SIGINT its program does not handle, an abort) cannot, so each cluster starts, at
//! its first exec, a small `sh` in a process group of its own that ignores SIGHUP and SIGINT
//! (a terminal's Ctrl-C or hang-up that stops the cluster leaves it running), reads `+ID` and
//! `-ID` lines as sessions come and go, and when its input ends (the cluster's process closed
//! it: stopped, or died any way at all) kills the sessions still listed: their first group, and
//! the rest of each session where `pkill` is installed. An orderly stop forgets every session
//! first, so the guardian then exits without killing anything.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio};

use std::sync::OnceLock;

use rustix::process::{Pid, Signal, kill_process_group, test_kill_process_group};

/// The guardian's script: the registered ids as a space-separated list, killed at end of input.
const GUARDIAN_SCRIPT: &str = r#"trap '' HUP INT
sessions=' '
while IFS= read -r line; do
  case $line in
    +*) sessions="$sessions${line#+} " ;;
    -*) id=${line#-}
        case $sessions in *" $id "*) sessions="${sessions%% $id *} ${sessions#* $id }" ;; esac ;;
  esac
done
for id in $sessions; do
  kill -s KILL -- "-$id" 2>/dev/null
  pkill -KILL -s "$id" 2>/dev/null
done"#;

/// The sessions and process groups of the machine's processes, read from `/proc` once, when
/// first needed (an empty table where there is no Linux `/proc`).
#[derive(Default)]
pub(super) struct Processes {
    groups_by_session: Option<HashMap<i32, Vec<Pid>>>,
}

impl Processes {
    /// Whether the session still has a process (a zombie not yet reaped counts).
    pub fn alive(&mut self, session: Pid) -> bool {
        group_exists(session) || self.groups(session).is_some()
    }

    /// SIGKILL to every process group of the session.
    pub fn kill(&mut self, session: Pid) {
        kill_group(session);
        for group in self.groups(session).unwrap_or_default() {
            kill_group(group);
        }
    }

    fn groups(&mut self, session: Pid) -> Option<Vec<Pid>> {
        let table = self.groups_by_session.get_or_insert_with(read_proc);
        table.get(&session.as_raw_nonzero().get()).cloned()
    }
}

/// Whether a process group exists that this process may signal (one that only another user's
/// processes hold is not one of ours, whatever its number).
fn group_exists(group: Pid) -> bool {
    test_kill_process_group(group).is_ok()
}

/// SIGKILL to a process group; one already gone is no error. Never this process's own group.
pub(super) fn kill_group(group: Pid) {
    if group.as_raw_nonzero().get() > 1 && Some(group) != own_group() {
        let _ = kill_process_group(group, Signal::KILL);
    }
}

/// This process's group, from `/proc/self/stat`; `None` where its leader is in an outer PID
/// namespace (a container started by a runner outside it), since no number names the group
/// here then, or where there is no Linux `/proc`. `getpgrp(2)` returns 0 in the first case,
/// which `rustix`'s non-zero `Pid` cannot hold.
fn own_group() -> Option<Pid> {
    static OWN: OnceLock<Option<Pid>> = OnceLock::new();
    *OWN.get_or_init(|| {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        parse_stat(&stat).map(|(group, _)| group)
    })
}

/// Every session's process groups, from `/proc/<pid>/stat`.
fn read_proc() -> HashMap<i32, Vec<Pid>> {
    let mut table: HashMap<i32, Vec<Pid>> = HashMap::new();
    let Ok(entries) = std::fs::read_dir("/proc") else { return table };
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some((group, session)) = parse_stat(&stat) {
            let groups = table.entry(session).or_default();
            if !groups.contains(&group) {
                groups.push(group);
            }
        }
    }
    table
}

/// The process group and session in a `/proc/<pid>/stat` line. They follow the command name,
/// which is in parentheses and may itself hold spaces and parentheses: `pid (comm) state ppid
/// pgrp session ...`.
fn parse_stat(stat: &str) -> Option<(Pid, i32)> {
    let (_, rest) = stat.rsplit_once(')')?;
    let mut fields = rest.split_whitespace();
    // A group outside this process's PID namespace reads as 0; nothing else may panic.
    let group = fields.nth(2)?.parse::<i32>().ok().filter(|g| *g > 0).and_then(Pid::from_raw)?;
    let session = fields.next()?.parse::<i32>().ok()?;
    Some((group, session))
}

/// The running guardian: its process and the pipe it reads.
#[derive(Debug)]
pub(super) struct Guardian {
    child: Option<Child>,
    input: Option<ChildStdin>,
    /// A write failed (the guardian is gone or not reading): nothing more is sent, and the
    /// pipe stays open, since closing it would kill every session listed.
    broken: bool,
}

impl Guardian {
    /// Starts the guardian's `sh`.
    pub fn spawn() -> std::io::Result<Self> {
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARDIAN_SCRIPT)
            .env_clear()
            .current_dir("/")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0);
        if let Some(path) = std::env::var_os("PATH") {
            command.env("PATH", path);
        }
        let mut child = command.spawn()?;
        let Some(input) = child.stdin.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the guardian has no stdin"));
        };
        // A guardian that stops reading must never block an exec's start.
        if let Err(e) = rustix::io::ioctl_fionbio(&input, true) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e.into());
        }
        Ok(Self { child: Some(child), input: Some(input), broken: false })
    }

    /// The session is to be killed if this process dies.
    pub fn register(&mut self, session: Pid) {
        self.send(&format!("+{}\n", session.as_raw_nonzero().get()));
    }

    /// The session is gone or killed already.
    pub fn forget(&mut self, session: Pid) {
        self.send(&format!("-{}\n", session.as_raw_nonzero().get()));
    }

    /// One line, in one write (shorter than `PIPE_BUF`, so never torn).
    fn send(&mut self, line: &str) {
        let Some(input) = self.input.as_mut().filter(|_| !self.broken) else { return };
        if let Err(e) = input.write_all(line.as_bytes()) {
            self.broken = true;
            tracing::warn!(
                error = %e,
                "the exec guardian takes no more sessions: if this process dies without stopping the embedded \
                 cluster, background processes of its execs may be left running"
            );
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // The end of its input: the guardian kills what is still listed and exits.
        drop(self.input.take());
        if let Some(mut child) = self.child.take() {
            let reaper = std::thread::Builder::new().name("exec-guardian-reaper".to_string());
            let _ = reaper.spawn(move || child.wait());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_the_group_and_session_whatever_the_command_name() {
        let pid = |n| Pid::from_raw(n).expect("pid");
        assert_eq!(parse_stat("42 (sh) S 1 42 40 0 -1 4194560 ..."), Some((pid(42), 40)));
        assert_eq!(parse_stat("7 (a) b (c)) R 3 9 9 34816 ..."), Some((pid(9), 9)));
        assert_eq!(parse_stat("2 (kthreadd) S 0 0 0 0 ..."), None, "kernel threads have no group");
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_stat("5 (x) S 1"), None);
        assert_eq!(parse_stat("8 (x) S 1 -1 -1 0 ..."), None, "a negative group is no group, and no panic");
    }

    /// A `sleep` leading a session of its own, as an exec's process does.
    fn session_leader() -> Child {
        let mut command = Command::new("sleep");
        command.arg("60");
        // SAFETY: `setsid` is async-signal-safe and touches no memory of the parent.
        unsafe {
            command.pre_exec(|| rustix::process::setsid().map(drop).map_err(Into::into));
        }
        command.spawn().expect("spawn sleep")
    }

    #[test]
    fn a_session_is_alive_until_its_last_process_is_reaped() {
        let mut child = session_leader();
        let session = Pid::from_raw(child.id() as i32).expect("a child's pid is positive");
        assert!(Processes::default().alive(session), "a running session leader");
        Processes::default().kill(session);
        child.wait().expect("reap the killed leader");
        assert!(!Processes::default().alive(session), "a reaped session");
    }

    #[test]
    fn another_group_is_killed_wherever_the_own_group_leader_lives() {
        // Reading the own group must not fail where its leader is outside this PID namespace.
        let mut leader = session_leader();
        let group = Pid::from_raw(leader.id() as i32).expect("a child's pid is positive");
        assert_ne!(own_group(), Some(group), "a new session is a group of its own");
        kill_group(group);
        let status = leader.wait().expect("reap the killed leader");
        assert!(!status.success(), "SIGKILL ends it: {status}");
    }
}
