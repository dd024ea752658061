//! The README's command lines are ones the binaries take: every `sandbox-host` and
//! `sandbox-dev` line of its shell blocks, with the variables it sets expanded, is parsed by the
//! binary it names (with `--help` added, so it runs nothing), and a flag or value a binary no
//! longer takes fails here instead of in a user's terminal.

use std::process::Command;

use crate::support::BIN;

/// Each command line of the README's `sh` blocks that runs `sandbox-host` or `sandbox-dev`,
/// as words, with `NAME="..."` variables of the same block expanded.
fn readme_commands() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).expect("README");
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut variables: Vec<(String, String)> = Vec::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_block = line == "```sh";
            variables.clear();
            continue;
        }
        if !in_block {
            continue;
        }
        if let Some((name, value)) = line.split_once("=\"").filter(|(n, _)| n.chars().all(|c| c.is_ascii_uppercase())) {
            variables.push((format!("${name}"), value.trim_end_matches('"').to_string()));
            continue;
        }
        let line = line.split(" # ").next().unwrap_or_default();
        if !(line.starts_with("sandbox-host ") || line.starts_with("sandbox-dev ")) {
            continue;
        }
        let expanded = variables.iter().fold(line.to_string(), |l, (name, value)| l.replace(name, value));
        let words = shlex::split(&expanded).unwrap_or_else(|| panic!("not shell words: {expanded}"));
        // The command ends where the shell's next one (a pipe, a redirection) begins.
        let end = words.iter().position(|w| ["|", ">", ">>", "&&", "&", ";"].contains(&w.as_str()));
        commands.push(words[..end.unwrap_or(words.len())].to_vec());
    }
    commands
}

#[test]
fn every_command_line_in_the_readme_is_one_the_binaries_take() {
    let commands = readme_commands();
    assert!(commands.len() >= 20, "the README's command lines were found: {commands:?}");
    for words in commands {
        let binary = match words[0].as_str() {
            "sandbox-host" => std::path::PathBuf::from(BIN),
            _ => crate::dev_bin(),
        };
        // `--help` before a `--` (after it, words are the command exec runs).
        let at = words.iter().position(|w| w == "--").unwrap_or(words.len());
        let mut args: Vec<&str> = words[1..at].iter().map(String::as_str).collect();
        args.push("--help");
        args.extend(words[at..].iter().map(String::as_str));
        let out = Command::new(&binary).args(&args).output().expect("run");
        assert_eq!(
            out.status.code(),
            Some(0),
            "the README's `{}` is refused: {}",
            words.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
