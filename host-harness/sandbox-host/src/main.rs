//! `sandbox-host`: the provider host an operator or a plugin runs (see the library's docs).

use clap::Parser;
use sandbox_host::{Command, cli_io, exit_code, log_filter};

#[derive(Parser)]
#[command(name = "sandbox-host", version, about = "Runs sandbox-provider components against a Kubernetes cluster")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() {
    let cli = Cli::parse();
    // RUST_LOG (or the default), with frame-level logs of the wire capped: they carry secrets.
    log_filter::init(cli.command.default_log_filter());
    let result = tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| exit_code(runtime.block_on(cli.command.run())));
    std::process::exit(cli_io::exit_code_of(result))
}
