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

/// `--help` lists the commands by what they are for, as kubectl does, each command once and
/// every one in a group (the old help was one flat list).
#[test]
fn the_help_groups_the_commands() {
    let out = host("help").arg("--help").output().expect("run sandbox-host --help");
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{help}");
    let headings: Vec<&str> = help.lines().filter(|l| !l.starts_with(' ') && l.ends_with(':')).collect();
    assert_eq!(
        headings,
        ["Sandboxes:", "Configs and providers:", "Operator set-up:", "Hosts in other languages:", "Shell:", "Options:"],
        "{help}"
    );
    let commands: Vec<&str> = help
        .split("Options:")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("  ")?.split_whitespace().next())
        .collect();
    for name in ["acquire", "destroy", "serve", "rbac", "pool", "contract", "completions", "help"] {
        assert_eq!(commands.iter().filter(|c| **c == name).count(), 1, "{name} once: {help}");
    }
    let completions = host("help").args(["completions", "bash"]).output().expect("completions");
    let script = String::from_utf8_lossy(&completions.stdout);
    for name in &commands {
        assert!(script.contains(name), "{name} is a command the binary knows: {script:.200}");
    }
}
