//! `acquire`: a sandbox from a config, with the lease printed (and written with `--out`); ids
//! generated for hand use; the expiry cap noted; and on Ctrl-C, what the acquire left in the
//! cluster and the command that removes it.

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use provider_host::created_objects::CreatedObject;
use provider_host::records::{AcquireRequest, Lease};

use crate::acquire_progress::Progress;
use crate::documents::read_document;
use crate::env_args::EnvArgs;
use crate::provider_cmd::{EXIT_INTERRUPTED, millis_to_rfc3339, print_json, print_lease, report_error_hiding};
use crate::session::{Target, session};

/// Options of `acquire`.
#[derive(Args)]
pub struct AcquireArgs {
    /// Provider config (JSON or YAML; `-` reads standard input).
    #[arg(long)]
    pub config: PathBuf,
    /// The idempotency key: acquire again with the same id and you get the same sandbox. It
    /// names the workload (the config's namePrefix and the id: a DNS label). Generated and
    /// printed when omitted.
    #[arg(long)]
    pub acquisition_id: Option<String>,
    /// The run the sandbox is for, recorded on its objects. Generated when omitted.
    #[arg(long)]
    pub run_id: Option<String>,
    /// The agent the sandbox is for, recorded on its objects.
    #[arg(long)]
    pub agent_id: Option<String>,
    /// Bound the sandbox's life to this many seconds from now.
    #[arg(long)]
    pub expires_in: Option<u64>,
    #[command(flatten)]
    pub env: EnvArgs,
    /// Ask for a lease that `release` suspends instead of destroying.
    #[arg(long)]
    pub reusable: bool,
    /// Also write the lease (JSON) to this file, for `--lease` of the later commands.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Epoch millis `seconds` from now; an error naming `option` when no time stamp reaches that far.
pub(crate) fn expiry_from_now(option: &str, seconds: u64) -> anyhow::Result<i64> {
    let now_ms = jiff::Timestamp::now().as_millisecond();
    i64::try_from(seconds).ok().and_then(|s| s.checked_mul(1000)).and_then(|ms| now_ms.checked_add(ms)).with_context(
        || {
            format!(
                "{option} {seconds} is further from now than any time stamp can hold; ask for at most the config's \
                 leaseTtlSeconds, where the provider caps a lease anyway"
            )
        },
    )
}

/// Says on stderr when the lease ends earlier than `--expires-in` asked (by more than the
/// rounding to a whole second): the provider caps a lease at the config's `leaseTtlSeconds`
/// from now, and a person who asked for more should not find out when the sandbox is gone.
pub(crate) fn note_capped(requested: Option<i64>, lease: &Lease) {
    if let (Some(requested), Some(granted)) = (requested, lease.expires_at)
        && granted < requested.saturating_sub(1000)
    {
        eprintln!(
            "note: the lease expires at {}, earlier than --expires-in asked ({}): a lease lasts at most the config's \
             leaseTtlSeconds from now. Renew it before then, or raise leaseTtlSeconds.",
            millis_to_rfc3339(granted),
            millis_to_rfc3339(requested)
        );
    }
}

/// An id for an acquire run by hand that names none: the clock's nanoseconds mixed with the
/// process id, so two at once on one machine differ; lowercase hex, so it stays a DNS label.
fn generated_id(prefix: &str) -> String {
    let nanos = jiff::Timestamp::now().as_nanosecond().unsigned_abs();
    let mixed = nanos ^ (u128::from(std::process::id()) << 40);
    format!("{prefix}{:08x}", (mixed ^ (mixed >> 32)) as u32)
}

/// Says on stderr what an acquire stopped by Ctrl-C left in the cluster (the provider had no
/// chance to clean up) and the command that removes it.
fn report_interrupted(acquisition_id: &str, created: &[CreatedObject], target: &Target) {
    if created.is_empty() {
        eprintln!(
            "interrupted: the acquire of acquisition id {acquisition_id} stopped before it created anything; nothing \
             is left in the cluster"
        );
        return;
    }
    eprintln!(
        "interrupted: the acquire of acquisition id {acquisition_id} stopped before it finished, and the provider did \
         not get to clean up. It created (or was creating) these, which stay until the cluster deletes them at the \
         lease's expiry:"
    );
    for object in created {
        eprintln!("  {object}");
    }
    let workload = created.iter().find_map(|object| {
        let backend = contract::Backend::of_workload(&object.group, &object.plural)?;
        let namespace = object.namespace.clone()?;
        Some(contract::lease_id::LeaseId { backend, namespace, name: object.name.clone(), workspace_pvc: false })
    });
    match workload {
        Some(id) => {
            let mut command = vec!["sandbox-host".to_string(), "destroy".into(), "--lease-id".into(), id.to_string()];
            if let Some(component) = &target.host.component.component {
                command.extend(["--component".into(), component.display().to_string()]);
            }
            if let Some(kubeconfig) = &target.host.kubeconfig {
                command.extend(["--kubeconfig".into(), kubeconfig.display().to_string()]);
            }
            let shown = shlex::try_join(command.iter().map(String::as_str)).unwrap_or_else(|_| command.join(" "));
            eprintln!("Remove them with: {shown}");
        }
        None => eprintln!("None of them is a workload a lease id names: delete them with kubectl."),
    }
    eprintln!("Or acquire again with --acquisition-id {acquisition_id} to use the sandbox: acquire adopts it.");
}

/// `acquire`; its arguments are checked before the cluster is reached.
pub async fn acquire(target: Target, args: AcquireArgs) -> anyhow::Result<i32> {
    let config = read_document(&args.config, "config")?;
    let env = args.env.parse()?;
    let requested_expires_at = args.expires_in.map(|s| expiry_from_now("--expires-in", s)).transpose()?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let config = session.config(config)?;
    let mut host = session.host;
    let created = host.record_created();
    let acquisition_id = args.acquisition_id.unwrap_or_else(|| {
        let id = generated_id("cli-");
        eprintln!(
            "note: no --acquisition-id given; using {id} (acquire again with --acquisition-id {id} to get this sandbox)"
        );
        id
    });
    let request = AcquireRequest {
        config,
        run_id: args.run_id.unwrap_or_else(|| generated_id("cli-run-")),
        acquisition_id: acquisition_id.clone(),
        agent_id: args.agent_id,
        requested_expires_at,
        env: env.vars.clone(),
        reusable: args.reusable,
    };
    let progress = Progress {
        created: created.clone(),
        cluster: session.cluster,
        acquisition_id: acquisition_id.clone(),
        deadline: host.limits().call_timeout(),
    };
    let acquiring = progress.around(host.acquire(request));
    let result = tokio::select! {
        result = acquiring => result,
        _ = tokio::signal::ctrl_c() => {
            report_interrupted(&acquisition_id, &created.list(), &target);
            return Ok(EXIT_INTERRUPTED);
        }
    };
    let lease = match result {
        Ok(l) => l,
        Err(e) => return Ok(report_error_hiding(&e, |message| env.hide_names(message))),
    };
    note_capped(requested_expires_at, &lease);
    if let Some(out) = &args.out {
        std::fs::write(out, serde_json::to_string_pretty(&lease)?)
            .with_context(|| format!("write {}", out.display()))?;
    }
    if target.json {
        print_json(&lease)?;
    } else {
        print_lease(&lease);
    }
    Ok(0)
}
