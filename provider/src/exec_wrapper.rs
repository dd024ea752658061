//! How `execute` runs a command in a sandbox: `sh -c` with one fixed script, and everything
//! of the request on the command's standard input.
//!
//! `pods/exec` puts its command in the request URL, which the API server's audit log and any
//! proxy may record. So the URL carries only [`SCRIPT`], the same for every call; the program,
//! its arguments, the working directory, the env and the timeout travel as the first line of
//! stdin (the *header*, shell words quoted so `eval` reads them back exactly), followed by the
//! caller's own stdin. The sandbox image needs a POSIX `sh`, `sleep`, `kill` and `head -c`
//! (GNU coreutils and busybox have it).
//!
//! Closing the exec stream does not kill the command on every runtime, so the script kills it
//! itself: at the timeout it sends `SIGKILL` to its own process group when it leads one (which
//! ends everything the command started), or else to the command's subshell. The host still
//! closes the stream a little later ([`HOST_GRACE`]) in case a process the command left behind
//! keeps it open.

use std::time::Duration;

/// The script `sh -c` runs. `read -r` reads the header one byte at a time (a shell never
/// reads past a line from a pipe); `eval` sets the command as `"$@"`, the timeout, the size of
/// the caller's input, and `sandbox_exec_setup`, which exports the env and changes directory in
/// the command's own subshell only (so no variable of the request, `PATH` say, reaches the
/// timer). The input is passed on by its size (`head -c`), not by end of stream: on an API
/// server without the `v5.channel.k8s.io` protocol, closing stdin closes the whole exec stream,
/// so the host keeps it open until the command ends. `head` reads it through fd 3, since a
/// background job would otherwise get `/dev/null`.
///
/// The timer is a `sleep` of the timeout, a child of the script (in fractions of a second where
/// `sleep` takes them, GNU and busybox, else whole seconds: a `sleep` that refuses `0.0` takes
/// none, and asking it costs no time). The command runs in a subshell that
/// kills the timer when the command ends; the script waits for the timer: killed, the command
/// ended and the script exits with its status; run out, the command's time is up and the
/// script kills its process group (or, where it leads none, the command's subshell). No shell
/// has to catch a signal (`dash` can miss a trapped one while it waits), and the script exits
/// only after both of its children, so no process of the wrapper outlives an execute. The
/// `wait`s are silenced: a shell reports a child that a signal ended (`Terminated`) there.
///
/// Last, the script writes the command's status after the call's [end marker](end_marker) on
/// stderr. A process the command left running in the background may hold the exec's streams
/// open past the command's end (a runtime ends an exec only once its output closes), and the
/// host then closes the stream at its deadline without a status: the marker still says that
/// the command ended, and how.
pub const SCRIPT: &str = r#"IFS= read -r sandbox_exec_header || exit 125
eval "$sandbox_exec_header" || exit 125
sleep 0.0 2>/dev/null || sandbox_exec_timeout=$sandbox_exec_timeout_whole
sleep "$sandbox_exec_timeout" </dev/null >/dev/null 2>&1 &
sandbox_exec_timer=$!
exec 3<&0
(
  if [ "$sandbox_exec_stdin_bytes" -gt 0 ]; then
    head -c "$sandbox_exec_stdin_bytes" 0<&3 3<&- | ( sandbox_exec_setup && exec "$@" ) 3<&-
  else
    ( sandbox_exec_setup && exec "$@" ) </dev/null 3<&-
  fi
  sandbox_exec_status=$?
  kill "$sandbox_exec_timer" 2>/dev/null
  exit "$sandbox_exec_status"
) &
sandbox_exec_pid=$!
exec 3<&-
if wait "$sandbox_exec_timer" 2>/dev/null; then
  kill -9 "-$$" 2>/dev/null || kill -9 "$sandbox_exec_pid" 2>/dev/null
fi
wait "$sandbox_exec_pid" 2>/dev/null
sandbox_exec_status=$?
printf '%s%s\n' "$sandbox_exec_end" "$sandbox_exec_status" >&2
exit "$sandbox_exec_status""#;

/// The prefix of the script's own variables: no variable the command gets may start with it.
pub const RESERVED_ENV_PREFIX: &str = "sandbox_exec_";

/// How much longer than the command's timeout the host keeps the stream open.
pub const HOST_GRACE: Duration = Duration::from_secs(5);

/// The status a shell reports for a command that `SIGKILL` ended (128 + 9).
pub const KILLED_STATUS: i32 = 137;

/// Linux's standard signals by number (`kill -l`), 1 to 31.
const SIGNALS: [&str; 31] = [
    "SIGHUP",
    "SIGINT",
    "SIGQUIT",
    "SIGILL",
    "SIGTRAP",
    "SIGABRT",
    "SIGBUS",
    "SIGFPE",
    "SIGKILL",
    "SIGUSR1",
    "SIGSEGV",
    "SIGUSR2",
    "SIGPIPE",
    "SIGALRM",
    "SIGTERM",
    "SIGSTKFLT",
    "SIGCHLD",
    "SIGCONT",
    "SIGSTOP",
    "SIGTSTP",
    "SIGTTIN",
    "SIGTTOU",
    "SIGURG",
    "SIGXCPU",
    "SIGXFSZ",
    "SIGVTALRM",
    "SIGPROF",
    "SIGWINCH",
    "SIGIO",
    "SIGPWR",
    "SIGSYS",
];

/// The signal a status of the script names: the shell's `wait` reports a command a signal
/// ended as 128 plus its number, which is all an exec's exit code can carry (runc and kubectl
/// read 137 and 143 the same way). A command that exits 128 + n by itself reads the same.
pub fn signal_of_status(status: i32) -> Option<&'static str> {
    let number = usize::try_from(status.checked_sub(128)?).ok()?;
    SIGNALS.get(number.checked_sub(1)?).copied()
}

/// What the header sets up for one command.
pub struct Invocation<'a> {
    pub command: &'a str,
    pub args: &'a [String],
    pub cwd: Option<&'a str>,
    pub env: Vec<(&'a str, &'a str)>,
    pub timeout: Duration,
    /// This call's [`end_marker`].
    pub end_marker: &'a str,
}

/// The text before the command's status on the script's last line of stderr, unique to one
/// call (`seed` mixed with SplitMix64's finalizer) so that no output of the command matches
/// it by chance. It travels in the stdin header, which the command never sees.
pub fn end_marker(seed: u64) -> String {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    format!("sandbox-exec-end:{:016x}:", z ^ (z >> 31))
}

/// Takes the script's end line (`marker`, the status, a newline) out of `stderr` and returns
/// the status; `None` when the script never wrote it (killed at the timeout, or the output was
/// cut at its cap first). The last match counts: the script writes it after the command ended.
pub fn take_end(stderr: &mut Vec<u8>, marker: &str) -> Option<i32> {
    let marker = marker.as_bytes();
    let start = stderr.windows(marker.len()).rposition(|w| w == marker)?;
    let digits_at = start + marker.len();
    let digits = stderr[digits_at..].iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 3 || stderr.get(digits_at + digits) != Some(&b'\n') {
        return None;
    }
    let status = std::str::from_utf8(&stderr[digits_at..digits_at + digits]).ok()?.parse().ok()?;
    stderr.drain(start..=digits_at + digits);
    Some(status)
}

/// The exec's argv: the same for every call.
pub fn argv() -> Vec<String> {
    vec!["sh".to_string(), "-c".to_string(), SCRIPT.to_string()]
}

/// The bytes of the exec's stdin: the header line, then the caller's input. Names must be
/// shell identifiers and no string may hold a NUL (the caller checks both): everything else,
/// newlines included, is quoted so the header stays one line.
pub fn stdin(invocation: &Invocation<'_>, input: Option<&str>) -> Vec<u8> {
    let input = input.unwrap_or_default();
    let mut header = String::from("sandbox_exec_nl=$(printf '\\n_'); sandbox_exec_nl=${sandbox_exec_nl%_}; ");
    header.push_str("sandbox_exec_setup() { ");
    for (name, value) in &invocation.env {
        header.push_str(&format!("export {name}={} || return 1; ", quote(value)));
    }
    if let Some(dir) = invocation.cwd {
        header.push_str(&format!("cd -- {} || return 1; ", quote(dir)));
    }
    header.push_str(":; }; ");
    let millis = invocation.timeout.as_millis();
    header.push_str(&format!(
        "sandbox_exec_timeout={}.{:03}; sandbox_exec_timeout_whole={}; sandbox_exec_stdin_bytes={}; ",
        millis / 1000,
        millis % 1000,
        millis.div_ceil(1000).max(1),
        input.len()
    ));
    header.push_str(&format!("sandbox_exec_end={}; ", quote(invocation.end_marker)));
    header.push_str("set --");
    for word in std::iter::once(invocation.command).chain(invocation.args.iter().map(String::as_str)) {
        header.push(' ');
        header.push_str(&quote(word));
    }
    let mut bytes = header.into_bytes();
    bytes.push(b'\n');
    bytes.extend_from_slice(input.as_bytes());
    bytes
}

/// One shell word with exactly `text`'s bytes: single-quoted, a `'` written as `'\''`, and a
/// newline as `$sandbox_exec_nl` outside the quotes (which the header defines first).
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('\'');
    for c in text.chars() {
        match c {
            '\'' => out.push_str("'\\''"),
            '\n' => out.push_str("'\"$sandbox_exec_nl\"'"),
            c => out.push(c),
        }
    }
    out.push('\'');
    out
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::unix::process::CommandExt;
    use std::process::{Command, Stdio};
    use std::time::Instant;

    use super::*;

    /// Runs the wrapper with the local `sh`, as a pod's shell would, leading its own process
    /// group as an exec'd process does.
    fn run(invocation: &Invocation<'_>, input: Option<&str>) -> (Option<i32>, String, String) {
        let mut out = spawn(invocation, input, Stdio::piped()).wait_with_output().expect("waits");
        let ended = take_end(&mut out.stderr, MARKER);
        let code = out.status.code();
        assert_eq!(ended, code, "the end line says what the script exits with, when it exits");
        (code, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
    }

    /// Starts the wrapper (stdout as given, stderr piped) and writes its stdin.
    fn spawn(invocation: &Invocation<'_>, input: Option<&str>, stdout: Stdio) -> std::process::Child {
        let argv = argv();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(stdout)
            .stderr(Stdio::piped())
            .spawn()
            .expect("sh runs");
        child.stdin.take().expect("stdin").write_all(&stdin(invocation, input)).expect("writes");
        child
    }

    const MARKER: &str = "sandbox-exec-end:0123456789abcdef:";

    fn invocation<'a>(command: &'a str, args: &'a [String]) -> Invocation<'a> {
        Invocation { command, args, cwd: None, env: Vec::new(), timeout: Duration::from_secs(20), end_marker: MARKER }
    }

    #[test]
    fn the_end_line_is_the_last_match_and_only_a_whole_one_counts() {
        let mut stderr = format!("oops\n{MARKER}7\nlate{MARKER}0\n").into_bytes();
        assert_eq!(take_end(&mut stderr, MARKER), Some(0));
        assert_eq!(stderr, format!("oops\n{MARKER}7\nlate").into_bytes(), "only the end line is taken out");
        for cut in [MARKER.to_string(), format!("{MARKER}12"), format!("{MARKER}x\n"), format!("{MARKER}1234\n")] {
            let mut stderr = cut.clone().into_bytes();
            assert_eq!(take_end(&mut stderr, MARKER), None, "{cut:?}");
            assert_eq!(stderr, cut.into_bytes(), "left as it was");
        }
        assert_ne!(end_marker(1), end_marker(2));
        assert!(end_marker(1).starts_with("sandbox-exec-end:") && end_marker(1).ends_with(':'));
    }

    /// A process the command leaves in the background holds the output open; the end line
    /// comes when the command ends all the same, before the output closes.
    #[test]
    fn the_end_line_comes_while_a_background_process_holds_the_output() {
        use std::io::{BufRead, BufReader};
        let args = vec!["-c".to_string(), "sleep 987.333 & echo started".to_string()];
        let mut child = spawn(&invocation("sh", &args), None, Stdio::null());
        let mut line = String::new();
        BufReader::new(child.stderr.take().expect("stderr")).read_line(&mut line).expect("reads stderr");
        let script = child.wait().expect("the script exits");
        // The background process was forked before the script ended; it may exec `sleep` only
        // after the script has exited, so its command line is waited for.
        let still_held = within_a_minute(|| sleep_running("987.333").then_some(())).is_some();
        let _ = Command::new("kill").args(["-9", "--", &format!("-{}", child.id())]).status();
        assert_eq!(line, format!("{MARKER}0\n"));
        assert_eq!(script.code(), Some(0));
        assert!(still_held, "no `sleep 987.333` showed in /proc within 60 s of the script's end");
    }

    #[test]
    fn arguments_and_env_arrive_byte_for_byte() {
        let tricky = "it's \"quoted\" $HOME `id` \\ \n second line; rm -rf /";
        let args = vec!["-c".to_string(), "printf '%s|%s' \"$1\" \"$V\"".to_string(), "sh".to_string(), tricky.into()];
        let mut inv = invocation("sh", &args);
        inv.env = vec![("V", tricky)];
        let (code, stdout, stderr) = run(&inv, None);
        assert_eq!(code, Some(0), "{stderr}");
        assert_eq!(stdout, format!("{tricky}|{tricky}"));
    }

    #[test]
    fn stdin_cwd_and_exit_codes_reach_the_caller() {
        let args = vec!["-c".to_string(), "pwd; cat; echo oops >&2; exit 3".to_string()];
        let mut inv = invocation("sh", &args);
        inv.cwd = Some("/");
        let (code, stdout, stderr) = run(&inv, Some("line one\nline two"));
        assert_eq!(code, Some(3));
        assert_eq!(stdout, "/\nline one\nline two");
        assert_eq!(stderr, "oops\n");
    }

    #[test]
    fn a_missing_program_or_directory_is_the_shell_s_answer() {
        let (code, _, stderr) = run(&invocation("no-such-program-here", &[]), None);
        assert_eq!(code, Some(127), "{stderr}");
        let mut inv = invocation("true", &[]);
        inv.cwd = Some("/no/such/dir");
        assert_eq!(run(&inv, None).0, Some(1));
    }

    #[test]
    fn the_watchdog_kills_the_command_and_what_it_started() {
        let args = vec!["-c".to_string(), "sleep 30 & sleep 30; echo never".to_string()];
        let mut inv = invocation("sh", &args);
        inv.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let (code, stdout, _) = run(&inv, None);
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}", started.elapsed());
        assert_eq!(stdout, "");
        // The whole group went, the wrapper with it: had the background `sleep` lived, it
        // would have held stdout open for 30 s.
        assert_eq!(code, None, "killed by a signal, not exited");
    }

    #[test]
    fn the_request_s_env_cannot_disarm_the_watchdog() {
        let args = vec!["-c".to_string(), "/bin/sleep 30".to_string()];
        let mut inv = invocation("/bin/sh", &args);
        inv.env = vec![("PATH", "/nowhere")];
        inv.timeout = Duration::from_millis(300);
        let started = Instant::now();
        let (code, _, stderr) = run(&inv, None);
        assert!(started.elapsed() < Duration::from_secs(10), "took {:?}: {stderr}", started.elapsed());
        assert_eq!(code, None, "killed at the timeout");
    }

    /// A `sleep` that takes whole seconds only (as some minimal images have) gets whole seconds,
    /// and finding out costs it no sleep: its first call is the probe, refused at once.
    #[test]
    fn a_sleep_without_fractions_gets_whole_seconds() {
        let dir = std::env::temp_dir().join(format!("exec-wrapper-sleep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let calls = dir.join("calls");
        let real = ["/bin/sleep", "/usr/bin/sleep"].into_iter().find(|p| std::path::Path::new(p).exists());
        let script = format!(
            "#!/bin/sh\necho \"$1\" >> '{}'\ncase \"$1\" in *[!0-9]*) exit 1;; esac\nexec {} \"$1\"\n",
            calls.display(),
            real.expect("a sleep to wrap")
        );
        let fake = dir.join("sleep");
        std::fs::write(&fake, script).expect("write the fake sleep");
        std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        // The command ends once the watchdog has asked for its timer: a command that ended at
        // once could take the watchdog down before it asked, on a loaded machine.
        let wait_for_timer = vec![
            "-c".to_string(),
            "until grep -qx 2 \"$0\" 2>/dev/null; do :; done".to_string(),
            calls.display().to_string(),
        ];
        let mut inv = invocation("sh", &wait_for_timer);
        inv.timeout = Duration::from_millis(1_500);
        let path = format!("{}:{}", dir.display(), std::env::var("PATH").unwrap_or_default());
        let argv = argv();
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env("PATH", path)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sh runs");
        child.stdin.take().expect("stdin").write_all(&stdin(&inv, None)).expect("writes");
        let Some(status) = within_a_minute(|| child.try_wait().expect("waits")) else {
            let _ = child.kill();
            let asked = std::fs::read_to_string(&calls).unwrap_or_default();
            panic!("the wrapper had not ended 60 s after its command started; the fake sleep was asked {asked:?}");
        };
        assert_eq!(status.code(), Some(0));
        let asked = std::fs::read_to_string(&calls).expect("the fake sleep was called");
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(asked, "0.0\n2\n", "the probe, then the timer in whole seconds (rounded up)");
    }

    /// What `check` finds, asked every 20 ms for up to a minute (a generous deadline: these
    /// waits are for a shell on a loaded machine); `None` if it found nothing by then.
    fn within_a_minute<T>(mut check: impl FnMut() -> Option<T>) -> Option<T> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(found) = check() {
                return Some(found);
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether a live process runs `sleep` with this argument (a zombie has no command line).
    fn sleep_running(seconds: &str) -> bool {
        let wanted = format!("sleep\0{seconds}\0");
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .any(|entry| std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| cmdline == wanted.as_bytes()))
    }

    /// The script exits only after its timer: a command that ends first (here at once, the
    /// likeliest moment for a race) leaves no `sleep` of the timeout running, every time.
    #[test]
    fn a_command_that_ends_first_leaves_no_timer_behind() {
        for run_number in 0..40 {
            let mut inv = invocation("true", &[]);
            inv.timeout = Duration::from_millis(987_321);
            assert_eq!(run(&inv, None).0, Some(0));
            assert!(!sleep_running("987.321"), "run {run_number}: the timer outlived the script");
        }
        let (code, stdout, _) = run(&invocation("echo", &["done".to_string()]), None);
        assert_eq!((code, stdout.as_str()), (Some(0), "done\n"));
    }
}
