//! The binary in a shell, as kubectl behaves there: quiet when its reader goes away (`| head`),
//! one line per failure whatever `RUST_BACKTRACE` says, no colour codes when stderr is not a
//! terminal. These need no cluster.

use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_sandbox-host");

/// The status a shell reports for a command a closed pipe ended.
const CLOSED_PIPE: i32 = 141;

/// `sandbox-host` with a compile cache of its own under the temp directory.
fn host(tag: &str) -> Command {
    let cache = std::env::temp_dir().join(format!("sandbox-host-shell-{tag}-{}", std::process::id()));
    let mut command = Command::new(BIN);
    command.env("XDG_CACHE_HOME", &cache).env_remove("NO_COLOR").env_remove("RUST_LOG");
    command
}

#[test]
fn output_into_a_closed_pipe_ends_the_command_quietly() {
    let mut child =
        host("pipe").arg("rbac").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("run sandbox-host rbac");
    // The reader goes away before the command writes, as `| head -0` would.
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "{stderr}");
    assert_eq!(out.status.code(), Some(CLOSED_PIPE), "ended by the closed pipe as kubectl is: {:?}", out.status);
}

#[test]
fn a_failure_is_one_line_without_a_backtrace() {
    let missing = std::env::temp_dir().join("sandbox-host-shell-no-such-policy.json");
    let out = host("backtrace")
        .args(["policy", "show", "--policy"])
        .arg(&missing)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("run sandbox-host policy show");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("backtrace") && !stderr.contains("Caused by"), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("Error: ")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("no-such-policy.json"), "the one line says what failed: {stderr}");
}

#[test]
fn log_lines_carry_no_colour_when_stderr_is_not_a_terminal() {
    // With no ownership key the host warns; stderr here is a pipe.
    let out = host("colour").arg("rbac").output().expect("run sandbox-host rbac");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("WARN") && stderr.contains("ownership key"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "colour codes on a pipe: {stderr:?}");
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    let out = host("json").args(["rbac", "--log-format", "json"]).output().expect("run sandbox-host rbac");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let lines: Vec<serde_json::Value> =
        stderr.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect();
    let warning = lines.iter().find(|l| l["level"] == "WARN").expect("the ownership warning");
    assert!(warning["fields"]["message"].as_str().is_some_and(|m| m.contains("ownership key")), "{warning}");
}

/// What a shell and `man` need come from the binary: a completion script that knows the
/// commands, and a man page.
#[test]
fn completions_and_the_man_page_come_from_the_binary() {
    let run = |args: &[&str]| {
        let out = host("completions").args(args).output().expect("run sandbox-host");
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let bash = run(&["completions", "bash"]);
    assert!(bash.contains("-o default sandbox-host") && bash.contains("resume-check"), "{bash}");
    let zsh = run(&["completions", "zsh"]);
    assert!(zsh.contains("#compdef sandbox-host"), "{zsh}");
    let man = run(&["man"]);
    assert!(man.contains(".TH sandbox-host") && man.contains("acquire"), "{man}");
}
