//! The provider commands that need no lease: `describe`, `validate-config` and `probe`, and
//! what every provider command shares: exit codes, progress on a terminal, how errors, leases
//! and answers are printed. `acquire` is in [`crate::acquire_cmd`], the commands on a stored
//! lease in [`crate::lease_cmd`], how a command reaches its cluster in [`crate::session`].

use std::io::IsTerminal;
use std::path::Path;
use std::time::Duration;

use provider_host::error::HostError;
use provider_host::records::Lease;

use crate::documents::read_document;
use crate::session::{Offline, Target, session, session_with};

/// Exit code of `resume-check` when the lease is expired (an answer, not an error).
pub const EXIT_EXPIRED: i32 = 3;
/// Exit code when the provider (or the host around it) failed.
pub const EXIT_FAILED: i32 = 1;
/// Exit code of a command stopped by Ctrl-C (SIGINT), as a shell reports one.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Shows a spinner on stderr while `fut` runs, only when stderr is a terminal.
pub async fn with_progress<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    if !std::io::stderr().is_terminal() {
        return fut.await;
    }
    let bar = indicatif::ProgressBar::new_spinner().with_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(100));
    let out = fut.await;
    bar.finish_and_clear();
    out
}

/// Prints a host error and returns the process exit code.
pub fn report_error(err: &HostError) -> i32 {
    report_error_hiding(err, str::to_string)
}

/// Prints a host error passed through `hide` (which replaces what must not be shown, such as
/// the request's env names) and returns the process exit code.
pub fn report_error_hiding(err: &HostError, hide: impl Fn(&str) -> String) -> i32 {
    match err {
        HostError::Provider(e) => {
            eprintln!("error ({}{}): {}", e.kind(), if e.retryable() { ", retryable" } else { "" }, hide(e.message()))
        }
        other => eprintln!("error: {}", hide(&other.to_string())),
    }
    EXIT_FAILED
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    crate::outln!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

/// A value's word in the JSON output (`job`, `already-gone`, `failed: why`), so a person reads
/// the words a script reads: the serde form of a unit variant, or of a one-field one.
pub(crate) fn word<T: serde::Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(word)) => word,
        Ok(serde_json::Value::Object(map)) if map.len() == 1 => {
            let (key, detail) = map.into_iter().next().unwrap_or_default();
            match detail {
                serde_json::Value::String(text) => format!("{key}: {text}"),
                other => format!("{key}: {other}"),
            }
        }
        Ok(other) => other.to_string(),
        Err(e) => format!("(unprintable: {e})"),
    }
}

pub(crate) fn millis_to_rfc3339(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_else(|_| ms.to_string())
}

/// Prints a lease for a person.
pub fn print_lease(lease: &Lease) {
    crate::outln!("lease      {}", lease.provider_lease_id);
    crate::outln!("backend    {} ({})", word(&lease.backend), lease.api_version);
    crate::outln!("namespace  {}", lease.namespace);
    crate::outln!("workload   uid {}", lease.workload_uid);
    crate::outln!(
        "pod        {} (uid {}, ip {})",
        lease.pod_name.as_deref().unwrap_or("-"),
        lease.pod_uid.as_deref().unwrap_or("-"),
        lease.pod_ip.as_deref().unwrap_or("-")
    );
    crate::outln!("expires    {}", lease.expires_at.map(millis_to_rfc3339).unwrap_or_else(|| "never".into()));
    crate::outln!("reusable   {}", lease.reusable);
}

/// `describe`
pub async fn describe(target: Target) -> anyhow::Result<i32> {
    let host = session_with(&target.host, target.namespace.given()?, Offline::Allowed).await?.host;
    let info = match host.describe().await {
        Ok(i) => i,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&info)?;
    } else {
        crate::outln!("{} ({}) {}", info.display_name, info.driver_key, info.version);
        let backends: Vec<String> = info.backends.iter().map(word).collect();
        crate::outln!("backends: {}; reusable leases: {}", backends.join(", "), info.reusable_leases);
        crate::outln!("config schema: {} bytes of JSON Schema (use --json to see it)", info.config_schema.len());
    }
    Ok(0)
}

/// `validate-config`
pub async fn validate_config(target: Target, config: &Path) -> anyhow::Result<i32> {
    let config = read_document(config, "config")?;
    let session = session_with(&target.host, target.namespace.given()?, Offline::Allowed).await?;
    let config = session.config(config)?;
    let v = match session.host.validate_config(&config).await {
        Ok(v) => v,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&v)?;
    } else {
        for w in &v.warnings {
            crate::outln!("warning {}: {}", w.path, w.message);
        }
        for e in &v.errors {
            crate::outln!("error   {}: {}", e.path, e.message);
        }
        crate::outln!("{}", if v.ok { "config is valid" } else { "config is invalid" });
    }
    Ok(if v.ok { 0 } else { EXIT_FAILED })
}

/// `probe`
pub async fn probe(target: Target, config: &Path) -> anyhow::Result<i32> {
    let config = read_document(config, "config")?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let config = session.config(config)?;
    let p = match session.host.probe(&config).await {
        Ok(p) => p,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&p)?;
    } else {
        crate::outln!("{}", p.summary);
        for d in &p.diagnostics {
            crate::outln!("  {:<8} {:<28} {}", word(&d.severity), d.code, d.message);
        }
    }
    Ok(if p.ok { 0 } else { EXIT_FAILED })
}
