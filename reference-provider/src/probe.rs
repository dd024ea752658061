//! Probe: whether a config can work, and what the provider sees of its host. There is no
//! environment to reach, so probe reports the config as the provider reads it and the host's
//! deadline, as diagnostics (never an error):
//!
//! - `config-invalid` (error): each problem validate-config would report, with its path;
//! - `configured-failure` (error): the config's `probe` behaviour asks probe to fail;
//! - `config` (info): the lease TTL and what each configured operation does (`execute`, which
//!   has no sandbox, answers `unsupported` unless configured to fail otherwise);
//! - `host-deadline` (info): the host's call deadline and what was left when probe answered,
//!   or `no-host-deadline` (warning) where the host sets none;
//! - `no-cluster` (info): the provider needs no cluster and no `kube` access.
//!
//! The config's `probe` behaviour (delay, stall) runs before the answer, like every operation's.

use contract::{Diagnostic, ProbeResult, Severity};

use crate::behaviour;
use crate::clock::Clock;
use crate::config::{self, Behaviour, Config, Operation, StallUntil};
use crate::log::Log;

fn diagnostic(severity: Severity, code: &str, message: impl Into<String>) -> Diagnostic {
    Diagnostic { severity, code: code.to_string(), message: message.into() }
}

/// What one operation does, in words.
fn describe_behaviour(op: Operation, b: &Behaviour) -> String {
    let mut parts = Vec::new();
    if let Some(delay) = b.delay_millis {
        parts.push(format!("waits {delay} ms"));
    }
    match b.stall {
        Some(stall) if stall.until == StallUntil::PastDeadline => {
            parts.push(format!(
                "stalls until {} ms past the host's deadline, which must end the call",
                stall.margin_millis
            ));
            return parts.join(", then ");
        }
        Some(stall) => parts.push(format!("stalls until {} ms before the host's deadline", stall.margin_millis)),
        None => {}
    }
    match &b.fail {
        Some(f) if f.retryable == Some(true) => parts.push(format!("fails with {} (retryable)", f.error.as_str())),
        Some(f) => parts.push(format!("fails with {}", f.error.as_str())),
        None if op == Operation::Execute => parts.push("answers unsupported".to_string()),
        None => parts.push("answers".to_string()),
    }
    parts.join(", then ")
}

/// The config as the provider reads it, in words.
fn describe_config(config: &Config) -> String {
    let operations: Vec<String> =
        config.operations.iter().map(|(op, b)| format!("{}: {}", op.as_str(), describe_behaviour(*op, b))).collect();
    let operations = if operations.is_empty() {
        "every operation answers at once (execute: unsupported, there is no sandbox)".to_string()
    } else {
        operations.join("; ")
    };
    format!("lease TTL {} s; {operations}", config.lease_ttl_seconds)
}

/// Probes a config (see the module docs).
pub fn probe(clock: &dyn Clock, log: &dyn Log, text: &str) -> ProbeResult {
    let validation = config::validate(text, clock.call_timeout());
    let parsed = validation.normalized_config.as_deref().map(config::parse);
    let Some(Ok(config)) = parsed else {
        let diagnostics: Vec<Diagnostic> = validation
            .errors
            .iter()
            .map(|p| diagnostic(Severity::Error, "config-invalid", format!("{}: {}", p.path, p.message)))
            .collect();
        return ProbeResult {
            ok: false,
            summary: "the config is invalid; run validate-config for every problem".to_string(),
            diagnostics,
        };
    };
    let mut diagnostics = Vec::new();
    if let Err(e) = behaviour::apply(&config, Operation::Probe, clock, log) {
        diagnostics.push(diagnostic(Severity::Error, "configured-failure", e.to_string()));
    }
    diagnostics.push(diagnostic(Severity::Info, "config", describe_config(&config)));
    diagnostics.push(match (clock.call_timeout(), clock.call_remaining()) {
        (Some(timeout), Some(left)) => diagnostic(
            Severity::Info,
            "host-deadline",
            format!(
                "the host ends every call after {} ms; {} ms were left when this probe answered",
                timeout.as_millis(),
                left.as_millis()
            ),
        ),
        _ => diagnostic(
            Severity::Warning,
            "no-host-deadline",
            "no host deadline is known: stalls have nothing to measure from, and delays are not checked against one",
        ),
    });
    diagnostics.push(diagnostic(
        Severity::Info,
        "no-cluster",
        "this provider makes no objects: it needs no cluster and no kube access",
    ));
    let ok = diagnostics.iter().all(|d| d.severity != Severity::Error);
    let summary = if ok {
        "the config works: leases need nothing but this provider".to_string()
    } else {
        "probe fails as the config asks".to_string()
    };
    ProbeResult { ok, summary, diagnostics }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use contract::Severity;
    use serde_json::json;

    use crate::testkit::{Env, config, config_with};

    fn codes(result: &contract::ProbeResult) -> Vec<(Severity, &str)> {
        result.diagnostics.iter().map(|d| (d.severity, d.code.as_str())).collect()
    }

    #[test]
    fn probe_reports_the_config_and_the_hosts_deadline() {
        let env = Env::new();
        env.clock.set_host_deadline(Duration::from_secs(30));
        let config = config_with(json!({"leaseTtlSeconds": 90, "operations": {
            "acquire": {"fail": {"error": "capacity", "retryable": true}},
            "renew": {"stall": {"until": "past-deadline"}}}}));
        let result = env.provider().probe(&config);
        assert!(result.ok, "{result:?}");
        assert_eq!(
            codes(&result),
            vec![(Severity::Info, "config"), (Severity::Info, "host-deadline"), (Severity::Info, "no-cluster")]
        );
        assert_eq!(
            result.diagnostics[0].message,
            "lease TTL 90 s; acquire: fails with capacity (retryable); renew: stalls until 200 ms past the host's \
             deadline, which must end the call"
        );
        assert!(result.diagnostics[1].message.contains("after 30000 ms; 30000 ms were left"), "{result:?}");
    }

    #[test]
    fn without_a_host_deadline_probe_warns() {
        let env = Env::new();
        let result = env.provider().probe(&config());
        assert!(result.ok);
        assert!(codes(&result).contains(&(Severity::Warning, "no-host-deadline")), "{result:?}");
        assert!(result.diagnostics[0].message.contains("every operation answers at once"));
    }

    #[test]
    fn an_invalid_config_or_a_configured_failure_is_an_error_diagnostic() {
        let env = Env::new();
        env.clock.set_host_deadline(Duration::from_secs(1));
        let result =
            env.provider().probe(r#"{"leaseTtlSeconds": "long", "operations": {"renew": {"delayMillis": 5000}}}"#);
        assert!(!result.ok);
        let messages: Vec<&str> = result.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert!(messages.iter().any(|m| m.starts_with("/leaseTtlSeconds: must be an integer")), "{messages:?}");
        let failing = config_with(json!({"operations": {"probe": {"delayMillis": 300, "fail": {"error": "denied"}}}}));
        let result = env.provider().probe(&failing);
        assert!(!result.ok);
        assert_eq!(result.diagnostics[0].code, "configured-failure");
        assert!(result.diagnostics[0].message.starts_with("denied: probe failed with denied"), "{result:?}");
        assert_eq!(env.clock.sleeps(), vec![Duration::from_millis(300)]);
        assert!(result.diagnostics[2].message.contains("700 ms were left"), "{result:?}");
    }
}
