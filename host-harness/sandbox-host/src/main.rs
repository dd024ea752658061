//! `sandbox-host`: the provider host an operator or a plugin runs (see the library's docs).

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use sandbox_host::{Command, cli_io, exit_code, help_groups, log_filter};

#[derive(Parser)]
#[command(name = "sandbox-host", version, about = "Runs sandbox-provider components against a Kubernetes cluster")]
struct Cli {
    /// How log lines are written on stderr: `text` for a person, `json` for a log collector.
    #[arg(long, global = true, value_enum, default_value_t)]
    log_format: log_filter::LogFormat,
    #[command(subcommand)]
    command: Top,
}

/// The host's commands, and what a shell and `man` need of the binary itself.
#[derive(Subcommand)]
enum Top {
    #[command(flatten)]
    Host(Command),
    /// Print the completion script of a shell (bash, zsh, fish, elvish, powershell): e.g.
    /// `sandbox-host completions bash > /etc/bash_completion.d/sandbox-host`.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): `sandbox-host man > sandbox-host.1`.
    Man,
}

fn main() {
    let matches = help_groups::grouped(Cli::command(), help_groups::HOST_GROUPS).get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let command = match cli.command {
        Top::Host(command) => command,
        Top::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "sandbox-host", &mut script);
            sandbox_host::out!("{}", String::from_utf8_lossy(&script));
            return;
        }
        Top::Man => {
            let mut page = Vec::new();
            if let Err(e) = clap_mangen::Man::new(Cli::command()).render(&mut page) {
                std::process::exit(cli_io::exit_code_of(Err(e.into())));
            }
            sandbox_host::out!("{}", String::from_utf8_lossy(&page));
            return;
        }
    };
    // RUST_LOG (or the default), with frame-level logs of the wire capped: they carry secrets.
    log_filter::init(command.default_log_filter(), cli.log_format);
    let result = tokio::runtime::Runtime::new()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| exit_code(runtime.block_on(command.run())));
    std::process::exit(cli_io::exit_code_of(result))
}
