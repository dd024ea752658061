//! `--help` with the commands in groups ("Sandboxes", "Operator set-up", ...), as kubectl shows
//! its own, instead of clap's one flat list: clap has no subcommand groups
//! (<https://github.com/clap-rs/clap/issues/1553>), so the list is rendered from the clap
//! definitions (each command's own `about`) into the help template. A command no group names
//! is listed under "Other commands", so none can go missing from the help; one two groups
//! name is listed under the first.

use clap::Command;

/// A heading and the commands under it, in the order shown.
pub type Group<'a> = (&'a str, &'a [&'a str]);

/// The groups of `sandbox-host`'s commands.
pub const HOST_GROUPS: &[Group<'static>] = &[
    ("Sandboxes", &["acquire", "exec", "resume-check", "renew", "release", "destroy", "leases"]),
    ("Configs and providers", &["validate-config", "probe", "describe", "contract"]),
    ("Operator set-up", &["policy", "rbac", "kubeconfig", "network-policy", "pool"]),
    ("Hosts in other languages", &["serve"]),
    ("Shell", &["completions", "man", "help"]),
];

/// `command` with its help listing its subcommands under `groups`' headings.
pub fn grouped(command: Command, groups: &[Group<'_>]) -> Command {
    let subcommands: Vec<(String, String)> = command
        .get_subcommands()
        .filter(|c| !c.is_hide_set())
        .map(|c| (c.get_name().to_string(), c.get_about().map(|a| a.to_string()).unwrap_or_default()))
        .chain([("help".to_string(), "Print this message or the help of the given subcommand(s)".to_string())])
        .collect();
    let width = subcommands.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    let line = |name: &str, about: &str| format!("  {name:<width$}  {about}\n");
    let mut listing = String::new();
    let mut shown: Vec<&str> = Vec::new();
    for (heading, names) in groups {
        let mut lines = String::new();
        for name in names.iter() {
            if shown.contains(name) {
                continue;
            }
            if let Some((name, about)) = subcommands.iter().find(|(n, _)| n == name) {
                lines.push_str(&line(name, about));
                shown.push(name);
            }
        }
        if !lines.is_empty() {
            listing.push_str(&format!("{heading}:\n{lines}\n"));
        }
    }
    let others: String = subcommands
        .iter()
        .filter(|(name, _)| !groups.iter().any(|(_, names)| names.contains(&name.as_str())))
        .map(|(name, about)| line(name, about))
        .collect();
    if !others.is_empty() {
        listing.push_str(&format!("Other commands:\n{others}\n"));
    }
    command.help_template(format!(
        "{{before-help}}{{about-with-newline}}\n{{usage-heading}} {{usage}}\n\n{listing}Options:\n{{options}}{{after-help}}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command() -> Command {
        Command::new("tool")
            .subcommand(Command::new("acquire").about("Get one"))
            .subcommand(Command::new("serve").about("Serve"))
            .subcommand(Command::new("secret").hide(true))
            .subcommand(Command::new("unlisted").about("New"))
    }

    #[test]
    fn commands_are_listed_under_their_headings_and_none_goes_missing() {
        let mut grouped = grouped(command(), &[("Sandboxes", &["acquire"]), ("Hosts", &["serve", "help"])]);
        let help = grouped.render_help().to_string();
        let at = |text: &str| help.find(text).unwrap_or_else(|| panic!("{text:?} missing from:\n{help}"));
        assert!(at("Sandboxes:\n  acquire") < at("Hosts:\n  serve"), "{help}");
        assert!(at("Other commands:\n  unlisted") > at("  help "), "{help}");
        assert!(!help.contains("secret"), "a hidden command stays hidden: {help}");
        assert!(!help.contains("Commands:"), "no second, flat list: {help}");
    }
}
