//! `sandbox-host leases list|gc`: the installation's leases as the cluster shows them
//! ([`provider_host::inventory`]), and the clean-up of those that ended (or, with
//! `--older-than`, of any past an age), through the provider's own `destroy`.
//!
//! The namespaces read are `-n`'s, else every namespace the operator's policy allows by name.

use clap::{Args, Subcommand};
use provider_host::inventory::LeaseRecord;
use provider_host::records::LeaseRef;
use provider_host::runner::ProviderHost;

use crate::provider_cmd::{EXIT_FAILED, print_json, report_error, word};
use crate::session::{Target, session};

/// `sandbox-host leases ...`
#[derive(Args)]
pub struct LeasesArgs {
    #[command(subcommand)]
    command: LeasesCommand,
}

#[derive(Subcommand)]
enum LeasesCommand {
    /// This installation's leases: id, state, age, time left before the cluster removes the
    /// sandbox by itself, and the run it is for.
    List {
        #[command(flatten)]
        target: Target,
    },
    /// Destroy the leases that ended (expired, finished, or being deleted), and with
    /// --older-than those older than that, whatever their state.
    Gc {
        #[command(flatten)]
        target: Target,
        /// Also destroy every lease created more than this many seconds ago (leases a plugin
        /// forgot, say).
        #[arg(long, value_name = "SECONDS")]
        older_than: Option<u64>,
        /// Say what would be destroyed, and destroy nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

impl LeasesArgs {
    /// The provider host options, for `sandbox-dev --embedded`.
    pub fn target_mut(&mut self) -> &mut Target {
        match &mut self.command {
            LeasesCommand::List { target } | LeasesCommand::Gc { target, .. } => target,
        }
    }
}

/// Runs a `leases` command; its exit code.
pub async fn run(args: LeasesArgs) -> anyhow::Result<i32> {
    match args.command {
        LeasesCommand::List { target } => list(target).await,
        LeasesCommand::Gc { target, older_than, dry_run } => gc(target, older_than, dry_run).await,
    }
}

/// The namespaces to read: `-n`'s, else each the policy allows by name.
fn namespaces(target: &Target, host: &ProviderHost) -> anyhow::Result<Vec<String>> {
    if let Some(namespace) = target.namespace.given()? {
        return Ok(vec![namespace.to_string()]);
    }
    let allowed = &host.grants().effective.namespaces;
    if allowed.iter().any(|n| n == provider_host::policy::ANY_NAMESPACE) {
        anyhow::bail!("the policy allows any namespace (\"*\"), and listing them all is not done: name one with -n");
    }
    Ok(allowed.clone())
}

/// A duration for a person: `45s`, `12m`, `5h`, `3d`.
fn shown_duration(millis: i64) -> String {
    let seconds = millis / 1000;
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 120 * 60 => format!("{}m", s / 60),
        s if s < 48 * 3600 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

fn now_millis() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// `leases list`
async fn list(target: Target) -> anyhow::Result<i32> {
    let host = session(&target.host, target.namespace.given()?).await?.host;
    let records = match host.leases(&namespaces(&target, &host)?).await {
        Ok(records) => records,
        Err(e) => return Ok(report_error(&e)),
    };
    if target.json {
        print_json(&records)?;
        return Ok(0);
    }
    let now = now_millis();
    let width = records.iter().map(|r| r.provider_lease_id.len()).max().unwrap_or(0).max("LEASE".len());
    crate::outln!("{:<width$}  {:<11} {:>5}  {:>10}  RUN", "LEASE", "STATE", "AGE", "EXPIRES IN");
    for r in &records {
        let age = r.created_at.map(|at| shown_duration(now - at)).unwrap_or_else(|| "-".into());
        let left = match r.expires_at {
            Some(at) if at > now => shown_duration(at - now),
            Some(_) => "passed".to_string(),
            None => "-".to_string(),
        };
        let run = r.run_id.as_deref().unwrap_or("-");
        crate::outln!("{:<width$}  {:<11} {age:>5}  {left:>10}  {run}", r.provider_lease_id, word(&r.state));
    }
    if records.is_empty() {
        eprintln!("no leases of this installation (owner id {})", host.grants().effective.owner_id);
    }
    Ok(0)
}

/// Why `gc` destroys a lease, or `None` to keep it.
fn why_collect(record: &LeaseRecord, older_than: Option<u64>, now: i64) -> Option<String> {
    if record.state.is_over() {
        return Some(word(&record.state));
    }
    let limit = i64::try_from(older_than?).ok()?.saturating_mul(1000);
    let age = now - record.created_at?;
    (age > limit).then(|| format!("older than {}", shown_duration(limit)))
}

/// `leases gc`
async fn gc(target: Target, older_than: Option<u64>, dry_run: bool) -> anyhow::Result<i32> {
    let host = session(&target.host, target.namespace.given()?).await?.host;
    let records = match host.leases(&namespaces(&target, &host)?).await {
        Ok(records) => records,
        Err(e) => return Ok(report_error(&e)),
    };
    let now = now_millis();
    let mut results = Vec::new();
    let mut failed = false;
    for record in &records {
        let Some(reason) = why_collect(record, older_than, now) else { continue };
        let config = serde_json::json!({"namespace": record.namespace}).to_string();
        let outcome = if dry_run {
            "would destroy".to_string()
        } else {
            match host.destroy(LeaseRef { lease: record.lease(), config }).await {
                Ok(_) => "destroyed".to_string(),
                Err(e) => {
                    failed = true;
                    format!("failed: {e}")
                }
            }
        };
        if !target.json {
            crate::outln!("{outcome:<13} {} ({reason})", record.provider_lease_id);
        }
        results.push(serde_json::json!({
            "provider-lease-id": record.provider_lease_id, "reason": reason, "outcome": outcome,
        }));
    }
    if target.json {
        print_json(&results)?;
    } else if results.is_empty() {
        crate::outln!("nothing to collect among {} lease(s)", records.len());
    }
    Ok(if failed { EXIT_FAILED } else { 0 })
}

#[cfg(test)]
mod tests {
    use provider_host::inventory::LeaseState;

    use super::*;

    fn record(state: LeaseState, created_at: i64) -> LeaseRecord {
        LeaseRecord {
            provider_lease_id: "k8s:job:default:pc-a".into(),
            backend: contract::Backend::Job,
            namespace: "default".into(),
            name: "pc-a".into(),
            workload_uid: "u".into(),
            api_version: "batch/v1".into(),
            acquisition_id: None,
            run_id: None,
            created_at: Some(created_at),
            expires_at: None,
            state,
        }
    }

    #[test]
    fn gc_takes_what_ended_and_with_older_than_what_is_old() {
        let now = 10_000_000;
        assert_eq!(why_collect(&record(LeaseState::Expired, now), None, now).as_deref(), Some("expired"));
        assert_eq!(why_collect(&record(LeaseState::Ready, 0), None, now), None, "no age limit: a live lease stays");
        assert_eq!(why_collect(&record(LeaseState::Ready, 0), Some(3600), now).as_deref(), Some("older than 60m"));
        assert_eq!(why_collect(&record(LeaseState::Ready, now - 1000), Some(3600), now), None);
    }

    #[test]
    fn durations_read_as_kubectl_prints_ages() {
        assert_eq!(
            [45_000, 30 * 60_000, 5 * 3_600_000, 3 * 86_400_000].map(shown_duration),
            ["45s", "30m", "5h", "3d"]
        );
    }
}
