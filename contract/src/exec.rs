//! `execute`'s request and result (`exec-request`, `exec-result` in `types.wit`, contract
//! 0.3.0): a command run in a lease's sandbox, and what it did.
//!
//! The request may carry secret values (`env` entries marked secret), so like
//! [`crate::AcquireRequest`] it is read but never written as JSON and its `Debug` hides them.

use serde::{Deserialize, Serialize};

use crate::EnvVar;

/// A command to run in a lease's sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ExecRequest {
    /// The program: looked up on the sandbox's `PATH` when it has no `/`.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// The working directory; none keeps the sandbox's own.
    #[serde(default)]
    pub cwd: Option<String>,
    /// Added for this command only; secret values are redacted from the output.
    #[serde(default)]
    pub env: Vec<EnvVar>,
    /// Written to standard input, which is then closed.
    #[serde(default)]
    pub stdin: Option<String>,
    /// The command is killed when it runs longer; none lets it run until the call's deadline.
    #[serde(default)]
    pub timeout_ms: Option<u32>,
}

/// What a command did: UTF-8 output (invalid bytes replaced), capped per stream, secret values
/// replaced with [`crate::REDACTED`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExecResult {
    /// None when the command did not exit by itself (it timed out or its connection broke).
    pub exit_code: Option<i32>,
    /// The signal that ended the command, when known (`SIGKILL` at a timeout).
    pub signal: Option<String>,
    pub timed_out: bool,
    pub stdout: String,
    pub stderr: String,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn requests_take_defaults_refuse_unknown_fields_and_hide_secrets() {
        let request: ExecRequest = serde_json::from_value(json!({
            "command": "sh", "args": ["-c", "echo $TOKEN"],
            "env": [{"name": "TOKEN", "value": "hunter2", "secret": true}]
        }))
        .expect("parses");
        assert_eq!((request.cwd.as_deref(), request.stdin.as_deref(), request.timeout_ms), (None, None, None));
        assert!(!format!("{request:?}").contains("hunter2"));
        let typo = serde_json::from_value::<ExecRequest>(json!({"command": "ls", "timeout": 5}));
        assert!(typo.is_err(), "a misspelt field must not be dropped silently");
    }

    #[test]
    fn results_use_the_wit_names() {
        let result = ExecResult { exit_code: Some(3), stderr: "no".into(), ..ExecResult::default() };
        let value = serde_json::to_value(&result).expect("serializes");
        assert_eq!(value["exit-code"], 3);
        assert_eq!(value["timed-out"], false);
        assert_eq!(value["stdout-truncated"], false);
        assert_eq!(serde_json::from_value::<ExecResult>(value).expect("parses"), result);
    }
}
