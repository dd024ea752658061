//! The env `acquire` and `exec` send: `--env NAME=VALUE`, and secret values from
//! `--secret-env NAME` (this process's environment), `--secret-env-file NAME=PATH` (a file) or
//! `--secret-env NAME=VALUE` (the command line, where anyone on the machine can read it in
//! `/proc/PID/cmdline`).
//!
//! No message quotes an entry's name or value, nor the path or variable an entry names: a secret
//! put in the wrong place (`--secret-env 's3cr3t=TOKEN'`, `--secret-env-file TOKEN=s3cr3t`)
//! would be printed. Entries are named by option and position instead (`--secret-env #2`), in
//! this host's own checks and in the provider's errors, where each entry's quoted name is
//! replaced by its position.

use std::path::Path;

use anyhow::bail;
use clap::Args;
use contract::quote;
use provider_host::records::EnvVar;

/// The env options shared by `acquire` and `exec` (each repeatable).
#[derive(Args, Clone, Default)]
pub struct EnvArgs {
    /// Plain environment variable NAME=VALUE (repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE")]
    pub env: Vec<String>,
    /// Secret environment variable (repeatable), kept out of the pod spec, the lease and the
    /// output: NAME takes the value of this process's environment variable NAME; NAME=VALUE takes
    /// it from the command line, where other users of the machine can read it (/proc/PID/cmdline).
    #[arg(long = "secret-env", value_name = "NAME[=VALUE]")]
    pub secret_env: Vec<String>,
    /// Secret environment variable whose value is the file's content (UTF-8), less one trailing
    /// newline (repeatable).
    #[arg(long = "secret-env-file", value_name = "NAME=PATH")]
    pub secret_env_file: Vec<String>,
}

/// The parsed env, and for each variable the option and position it came from.
pub struct Env {
    /// The variables, plain ones first, in the order given.
    pub vars: Vec<EnvVar>,
    /// `--env #1`, `--secret-env #2`, ...: how messages name `vars[i]`.
    labels: Vec<String>,
}

/// The characters a name may have: what a shell can export, and what the provider accepts.
fn is_env_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The refusal for an entry whose name part is not a name; it may be the value.
fn not_a_name(label: &str, form: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{label} is not {form}: the name must be letters, digits and `_`, not starting with a digit (the entry is not \
         shown: it may be a secret value in the wrong place)"
    )
}

/// `PATH`'s content as a secret value: UTF-8, one trailing `\n` or `\r\n` removed (what an editor
/// or `echo value > file` adds).
fn read_secret_file(label: &str, path: &Path) -> anyhow::Result<String> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => bail!(
            "{label}: the file it names cannot be read ({}); its name and path are not shown: either may be a secret \
             in the wrong place",
            e.kind()
        ),
    };
    let Ok(mut text) = String::from_utf8(bytes) else {
        bail!("{label}: the file it names is not UTF-8 text; an env value must be");
    };
    if text.ends_with('\n') {
        text.pop();
        if text.ends_with('\r') {
            text.pop();
        }
    }
    Ok(text)
}

impl EnvArgs {
    /// Reads and checks every entry; the first problem, by the entry's position, before any
    /// cluster is reached.
    pub fn parse(&self) -> anyhow::Result<Env> {
        let mut env = Env { vars: Vec::new(), labels: Vec::new() };
        for (i, item) in self.env.iter().enumerate() {
            let label = format!("--env #{}", i + 1);
            let Some((name, value)) = item.split_once('=') else {
                bail!(
                    "{label} is not NAME=VALUE ({} bytes); it is not shown, as it may be a secret value: give the name, \
                     '=' and the value",
                    item.len()
                );
            };
            env.push(label, name, value.to_string(), false, "NAME=VALUE")?;
        }
        for (i, item) in self.secret_env.iter().enumerate() {
            let label = format!("--secret-env #{}", i + 1);
            match item.split_once('=') {
                Some((name, value)) => env.push(label, name, value.to_string(), true, "NAME=VALUE")?,
                None => {
                    if !is_env_name(item) {
                        return Err(not_a_name(&label, "NAME=VALUE nor the NAME of a variable of this process"));
                    }
                    let value = match std::env::var(item) {
                        Ok(value) => value,
                        Err(std::env::VarError::NotPresent) => bail!(
                            "{label} names an environment variable this process does not have (its name is not shown: \
                             it may be a secret value given without NAME=); export it, or give NAME=VALUE"
                        ),
                        Err(std::env::VarError::NotUnicode(_)) => {
                            bail!(
                                "{label} names an environment variable whose value is not UTF-8; an env value must be"
                            )
                        }
                    };
                    env.push(label, item, value, true, "NAME")?;
                }
            }
        }
        for (i, item) in self.secret_env_file.iter().enumerate() {
            let label = format!("--secret-env-file #{}", i + 1);
            let Some((name, path)) = item.split_once('=') else {
                bail!(
                    "{label} is not NAME=PATH (the entry is not shown: it may be a secret value); give the name, '=' \
                     and the file's path"
                );
            };
            if !is_env_name(name) {
                return Err(not_a_name(&label, "NAME=PATH"));
            }
            let value = read_secret_file(&label, Path::new(path))?;
            env.push(label, name, value, true, "NAME=PATH")?;
        }
        Ok(env)
    }
}

impl Env {
    /// Adds one variable after checking its name, its value and that no earlier entry has the
    /// same name.
    fn push(&mut self, label: String, name: &str, value: String, secret: bool, form: &str) -> anyhow::Result<()> {
        if !is_env_name(name) {
            return Err(not_a_name(&label, form));
        }
        if value.contains('\0') {
            bail!("{label}: the value has a NUL character, which no process environment can hold");
        }
        if let Some(first) = self.vars.iter().position(|var| var.name == name) {
            bail!("{label} has the same name as {}; give each name once", self.labels[first]);
        }
        self.vars.push(EnvVar { name: name.to_string(), value, secret });
        self.labels.push(label);
        Ok(())
    }

    /// `message` with each variable's quoted name and its index in the request (as the
    /// provider's errors name an entry: `env[2] ("TOKEN")`) replaced by the option and position
    /// it was given at: a name may be a secret value in the wrong place.
    pub fn hide_names(&self, message: &str) -> String {
        let mut out = message.to_string();
        for (i, (var, label)) in self.vars.iter().zip(&self.labels).enumerate() {
            out = out.replace(&format!("env[{i}] ({})", quote(&var.name)), label);
            out = out.replace(&format!("env[{i}]"), label);
        }
        // Longest names first, so a name that starts another's quoted form cannot cut it.
        let mut order: Vec<usize> = (0..self.vars.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(self.vars[i].name.len()));
        for i in order {
            out = out.replace(&quote(&self.vars[i].name).to_string(), &self.labels[i]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(env: &[&str], secret_env: &[&str], secret_env_file: &[&str]) -> EnvArgs {
        let owned = |items: &[&str]| items.iter().map(|s| s.to_string()).collect();
        EnvArgs { env: owned(env), secret_env: owned(secret_env), secret_env_file: owned(secret_env_file) }
    }

    fn refusal(args: &EnvArgs) -> String {
        match args.parse() {
            Ok(env) => panic!("accepted {} vars", env.vars.len()),
            Err(e) => format!("{e:#}"),
        }
    }

    #[test]
    fn a_misplaced_secret_is_named_by_its_position() {
        for (args, label) in [
            (args(&[], &["A=1", "s3cr3t-value=TOKEN"], &[]), "--secret-env #2"),
            (args(&["s3cr3t-value"], &[], &[]), "--env #1"),
            (args(&["X=1", "s3cr3t value=x"], &[], &[]), "--env #2"),
            (args(&[], &["s3cr3t-value"], &[]), "--secret-env #1"),
            (args(&[], &[], &["s3cr3t-value"]), "--secret-env-file #1"),
            (args(&[], &[], &["TOKEN=/nonexistent/s3cr3t-value"]), "--secret-env-file #1"),
            (args(&[], &[], &["s3cr3t-value=/dev/null"]), "--secret-env-file #1"),
            (args(&[], &["S3CR3T_VALUE_NOT_SET_ANYWHERE"], &[]), "--secret-env #1"),
            (args(&["S3CR3T=1"], &["S3CR3T=2"], &[]), "--secret-env #1 has the same name as --env #1"),
            (args(&[], &["TOKEN=s3cr3t\0value"], &[]), "--secret-env #1: the value has a NUL"),
        ] {
            let message = refusal(&args);
            assert!(message.contains(label), "{label}: {message}");
            assert!(!message.to_lowercase().contains("s3cr3t"), "{message}");
        }
    }

    #[test]
    fn secret_values_come_from_the_environment_or_a_file() {
        let dir = std::env::temp_dir().join(format!("env-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let file = dir.join("token");
        std::fs::write(&file, "from-file\n").expect("write");
        let crlf = dir.join("crlf");
        std::fs::write(&crlf, "two-lines\n\r\n").expect("write");
        // PATH is in every test's environment, and never changed by one.
        let path = std::env::var("PATH").expect("PATH");
        let env = args(
            &["PLAIN=p"],
            &["PATH", "INLINE=a=b"],
            &[&format!("FILE={}", file.display()), &format!("CRLF={}", crlf.display())],
        )
        .parse()
        .expect("parse");
        let got: Vec<(&str, &str, bool)> =
            env.vars.iter().map(|v| (v.name.as_str(), v.value.as_str(), v.secret)).collect();
        assert_eq!(
            got,
            [
                ("PLAIN", "p", false),
                ("PATH", path.as_str(), true),
                ("INLINE", "a=b", true),
                ("FILE", "from-file", true),
                ("CRLF", "two-lines\n", true)
            ]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_providers_quoted_names_become_positions() {
        let env = args(&["HOME_DIR=1"], &["HOME=2"], &[]).parse().expect("parse");
        let long = "N".repeat(300);
        let long_env = args(&[&format!("{long}=1")], &[], &[]).parse().expect("parse");
        assert_eq!(
            env.hide_names(r#"env var name "HOME" is not accepted; env var "HOME_DIR" too"#),
            "env var name --secret-env #1 is not accepted; env var --env #1 too"
        );
        let message = format!("env var name {} is too long", quote(&long));
        assert_eq!(long_env.hide_names(&message), "env var name --env #1 is too long");
        assert_eq!(
            env.hide_names(r#"the request's env[1] ("HOME") has a NUL; env[0] too"#),
            "the request's --secret-env #1 has a NUL; --env #1 too"
        );
    }
}
