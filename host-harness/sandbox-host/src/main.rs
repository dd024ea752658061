//! `sandbox-host`: the provider host an operator or a plugin runs (see the library's docs).

use clap::Parser;
use sandbox_host::{Command, exit_code, log_filter};

#[derive(Parser)]
#[command(name = "sandbox-host", version, about = "Runs sandbox-provider components against a Kubernetes cluster")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // RUST_LOG (or the default), with frame-level logs of the wire capped: they carry secrets.
    log_filter::init(cli.command.default_log_filter());
    let runtime = tokio::runtime::Runtime::new()?;
    let code = exit_code(runtime.block_on(cli.command.run()))?;
    std::process::exit(code)
}
