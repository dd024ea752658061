//! How the binaries meet the shell, as kubectl does: output into a closed pipe (`| head`) ends
//! the command quietly, log lines are coloured only on a terminal (and never with `NO_COLOR`
//! set), and a failure is printed once, as its chain of messages on one `Error:` line, without
//! a backtrace whatever `RUST_BACKTRACE` says (a backtrace describes this program, not the
//! user's mistake).
//!
//! Rust ignores SIGPIPE, so a write to a closed pipe is an error, and `println!` panics on it.
//! Restoring the default action makes the write end the process as it ends `kubectl`, `cat` or
//! any C program (the libc crate: the standard library has no stable way to ask for it). Serve
//! keeps the error instead: its stdout is the plugin's pipe, and when the plugin goes away serve
//! still winds down in order (see `provider_host::serve`).

use std::io::IsTerminal;

/// Lets a write to a closed pipe end the process quietly, as the default SIGPIPE action does.
pub fn end_quietly_on_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: called once at the start of `main`, before any thread starts; SIG_DFL is a valid
    // disposition for SIGPIPE.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Whether log lines on stderr may carry ANSI colour: a terminal, and no `NO_COLOR`
/// (<https://no-color.org>).
pub fn colour_on_stderr() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The process's exit code for a command's result: its own code, or 1 after printing the
/// failure on stderr as one line, `Error: what failed: why` (see [`one_line`]).
pub fn exit_code_of(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("Error: {}", one_line(&error));
            1
        }
    }
}

/// An error and its causes on one line, outermost first, leaving out a cause whose text the
/// line already holds (many errors repeat their source's message in their own).
pub fn one_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cause_the_line_already_says_is_left_out() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let error = anyhow::Error::new(io)
            .context("failed to read kubeconfig: No such file or directory")
            .context("no cluster: pass --kubeconfig");
        assert_eq!(
            one_line(&error),
            "no cluster: pass --kubeconfig: failed to read kubeconfig: No such file or directory"
        );
        assert_eq!(one_line(&anyhow::anyhow!("alone")), "alone");
    }
}
