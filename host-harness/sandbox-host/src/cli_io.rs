//! How the binaries meet the shell, as kubectl does: output into a closed pipe (`| head`) ends
//! the command quietly, log lines are coloured only on a terminal (and never with `NO_COLOR`
//! set), and a failure is printed once, as its chain of messages on one `Error:` line, without
//! a backtrace whatever `RUST_BACKTRACE` says (a backtrace describes this program, not the
//! user's mistake).
//!
//! `println!` panics when its reader went away. Restoring SIGPIPE's default action would end
//! the process instead, but also on a write to any socket whose peer went away (a Kubernetes
//! connection, an exec stream), so the commands print through `outln!` and `out!`, which
//! end the process on a closed stdout alone, with the status a shell gives a command a closed
//! pipe ended (141).

use std::io::{IsTerminal, Write};

/// The exit status of a command whose stdout was closed under it: what a shell reports for a
/// process SIGPIPE ended (128 + 13), as for `kubectl get pods | head -1`.
pub const EXIT_CLOSED_PIPE: i32 = 141;

/// `println!` for a command's output (see the module docs).
#[macro_export]
macro_rules! outln {
    () => {
        $crate::cli_io::write_out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli_io::write_out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` for a command's output (see the module docs).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli_io::write_out(format_args!($($arg)*))
    };
}

/// Writes to stdout; a reader that went away ends the process with [`EXIT_CLOSED_PIPE`], and any
/// other failure to write with 1 and the reason on stderr.
pub fn write_out(text: std::fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if let Err(e) = stdout.write_fmt(text) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_CLOSED_PIPE);
        }
        eprintln!("Error: could not write the output: {e}");
        std::process::exit(1);
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

/// An error and its causes on one line, each said once ([`provider_host::error::with_causes`]).
pub fn one_line(error: &anyhow::Error) -> String {
    provider_host::error::with_causes(error.as_ref())
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
