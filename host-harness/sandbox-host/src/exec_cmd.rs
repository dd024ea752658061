//! `sandbox-host exec --lease FILE --config FILE -- CMD ARGS...`: runs a command in a lease's
//! sandbox through the provider's `execute`, prints its output as it came back (stdout to
//! stdout, stderr to stderr) and exits with its exit code, so a script can use it like `ssh`.

use std::io::{Read, Write};

use anyhow::Context;
use clap::Args;
use provider_host::records::ExecRequest;

use crate::env_args::EnvArgs;
use crate::lease_cmd::{self, LeaseArgs};
use crate::provider_cmd::{EXIT_FAILED, report_error_hiding, with_progress};
use crate::session::{Target, session};

/// The exit code of a command killed at its timeout (as `timeout(1)` reports it).
pub const EXIT_TIMED_OUT: i32 = 124;

/// `exec`'s own options.
#[derive(Args)]
pub struct ExecArgs {
    #[command(flatten)]
    pub lease: LeaseArgs,
    /// The working directory in the sandbox (default: the sandbox's own).
    #[arg(long)]
    pub cwd: Option<String>,
    /// What is added to the command's environment; secret values are redacted from its output.
    #[command(flatten)]
    pub env: EnvArgs,
    /// Kill the command after this many milliseconds (default: the host's `exec-timeout-ms`).
    #[arg(long)]
    pub timeout_ms: Option<u32>,
    /// Pass this process's stdin to the command (otherwise it gets an empty input).
    #[arg(long)]
    pub stdin: bool,
    /// The program and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// `exec`
pub async fn run(target: Target, args: ExecArgs) -> anyhow::Result<i32> {
    let lease = lease_cmd::lease_ref(&args.lease.lease, &args.lease.config)?;
    let Some((command, rest)) = args.command.split_first() else {
        anyhow::bail!("exec needs a command after `--`");
    };
    let env = args.env.parse()?;
    let stdin = if args.stdin {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text).context("read stdin (it must be UTF-8)")?;
        Some(text)
    } else {
        None
    };
    let request = ExecRequest {
        command: command.clone(),
        args: rest.to_vec(),
        cwd: args.cwd,
        env: env.vars.clone(),
        stdin,
        timeout_ms: args.timeout_ms,
    };
    let session = session(&target.host, target.namespace.given()?).await?;
    let lease = session.lease(lease)?;
    let result = match with_progress("running the command", session.host.execute(lease, request)).await {
        Ok(result) => result,
        Err(e) => return Ok(report_error_hiding(&e, |message| env.hide_names(message))),
    };
    if target.json {
        crate::outln!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        std::io::stdout().write_all(result.stdout.as_bytes())?;
        std::io::stderr().write_all(result.stderr.as_bytes())?;
        for (stream, cut) in [("stdout", result.stdout_truncated), ("stderr", result.stderr_truncated)] {
            if cut {
                eprintln!("sandbox-host: the command's {stream} was longer than the host keeps and was cut");
            }
        }
        if result.timed_out {
            eprintln!("sandbox-host: the command ran past its timeout and was killed");
        }
    }
    Ok(match (result.timed_out, result.exit_code) {
        (true, _) => EXIT_TIMED_OUT,
        (false, Some(code)) => code,
        (false, None) => EXIT_FAILED,
    })
}
