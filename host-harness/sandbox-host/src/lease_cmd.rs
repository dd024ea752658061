//! The commands on a stored lease: `resume-check`, `renew`, `release` and `destroy` (which
//! also works from the lease id alone), and how a lease file is read.

use std::path::{Path, PathBuf};

use anyhow::bail;
use clap::Args;
use provider_host::records::{Lease, LeaseRef, ResumeOutcome};

use crate::acquire_cmd::{expiry_from_now, note_capped};
use crate::documents::read_document;
use crate::provider_cmd::{EXIT_EXPIRED, print_json, print_lease, report_error, with_progress, word};
use crate::session::{Target, session};

/// Reads a stored lease and the config it was made with.
pub fn lease_ref(lease: &Path, config: &Path) -> anyhow::Result<LeaseRef> {
    let lease = match read_lease(lease)? {
        StoredLease::Whole(lease) => *lease,
        StoredLease::IdOnly { id, missing } => bail!(
            "the lease file holds the lease id {} but not the rest of the lease ({missing}): pass the lease as \
             `acquire --json` printed it; only `destroy` works from the id alone (--lease-id)",
            contract::quote(&id)
        ),
    };
    Ok(LeaseRef { lease, config: read_document(config, "config")? })
}

/// A lease file's content: the whole lease, or only its id (all `destroy` needs).
enum StoredLease {
    Whole(Box<Lease>),
    IdOnly {
        /// The `provider-lease-id`.
        id: String,
        /// What the lease lacks, as serde says it.
        missing: String,
    },
}

/// Reads a lease file (`-`: standard input).
fn read_lease(path: &Path) -> anyhow::Result<StoredLease> {
    let text = read_document(path, "lease")?;
    let whole_error = match serde_json::from_str::<Lease>(&text) {
        Ok(lease) => return Ok(StoredLease::Whole(Box::new(lease))),
        Err(e) => e,
    };
    let id = serde_json::from_str::<serde_json::Value>(&text)
        .ok()
        .and_then(|value| value.get("provider-lease-id").and_then(|id| id.as_str()).map(str::to_string));
    match id {
        Some(id) => Ok(StoredLease::IdOnly { id, missing: whole_error.to_string() }),
        None => Err(anyhow::Error::new(whole_error).context(
            "the lease file is not a lease (as `acquire --json` prints it, or `{\"provider-lease-id\": ...}`)",
        )),
    }
}

/// Options of the commands that take a stored lease.
#[derive(Args)]
pub struct LeaseArgs {
    /// The lease (JSON, as written by `acquire --out` or printed by `acquire --json`; `-` reads
    /// standard input).
    #[arg(long)]
    pub lease: PathBuf,
    /// The provider config the lease was made with (JSON or YAML; `-` reads standard input).
    #[arg(long)]
    pub config: PathBuf,
}

/// `resume-check`
pub async fn resume_check(target: Target, args: LeaseArgs) -> anyhow::Result<i32> {
    let r = lease_ref(&args.lease, &args.config)?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    let outcome = match with_progress("checking the lease", session.host.resume_check(r)).await {
        Ok(o) => o,
        Err(e) => return Ok(report_error(&e)),
    };
    print_outcome(&outcome, target.json)
}

/// Prints a resume-check or renew answer; the exit code tells resumable (0) from expired (3).
fn print_outcome(outcome: &ResumeOutcome, json: bool) -> anyhow::Result<i32> {
    if json {
        print_json(outcome)?;
    }
    Ok(match outcome {
        ResumeOutcome::Resumable(lease) => {
            if !json {
                crate::outln!("resumable");
                print_lease(lease);
            }
            0
        }
        ResumeOutcome::Expired(reason) => {
            if !json {
                crate::outln!("expired: {reason}");
            }
            EXIT_EXPIRED
        }
    })
}

/// `renew`; its arguments are checked before the cluster is reached.
pub async fn renew(target: Target, args: LeaseArgs, expires_in: u64) -> anyhow::Result<i32> {
    let r = lease_ref(&args.lease, &args.config)?;
    let at = expiry_from_now("--expires-in", expires_in)?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    let outcome = match session.host.renew(r, at).await {
        Ok(o) => o,
        Err(e) => return Ok(report_error(&e)),
    };
    if let ResumeOutcome::Resumable(lease) = &outcome {
        note_capped(Some(at), lease);
    }
    print_outcome(&outcome, target.json)
}

/// `release`
pub async fn release(target: Target, args: LeaseArgs) -> anyhow::Result<i32> {
    let r = lease_ref(&args.lease, &args.config)?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    match session.host.release(r).await {
        Ok(()) => {
            if target.json {
                crate::outln!("null");
            } else {
                crate::outln!("released");
            }
            Ok(0)
        }
        Err(e) => Ok(report_error(&e)),
    }
}

/// Options of `destroy`: a stored lease, or its id alone.
#[derive(Args)]
pub struct DestroyArgs {
    /// The lease (JSON, as written by `acquire --out` or printed by `acquire --json`; `-` reads
    /// standard input); a file with only its `provider-lease-id` will do.
    #[arg(long, required_unless_present = "lease_id")]
    pub lease: Option<PathBuf>,
    /// The lease's id alone (`k8s:job:default:pc-a-1`, as acquire printed it), when the lease
    /// file is lost. Without the stored workload uid, destroy deletes whatever holds the name,
    /// even a newer sandbox of the same acquisition id.
    #[arg(long, value_name = "ID", conflicts_with = "lease")]
    pub lease_id: Option<String>,
    /// The provider config the lease was made with (JSON or YAML; `-` reads standard input);
    /// the Kubernetes provider destroys from the lease id and does not need it.
    #[arg(long)]
    pub config: Option<PathBuf>,
}

/// The lease a bare id makes, for `destroy`; an id of another provider is refused, as only the
/// Kubernetes provider's ids say where their objects are.
fn lease_of_id(id: &str) -> anyhow::Result<Lease> {
    let parsed = contract::lease_id::LeaseId::parse(id)
        .map_err(|e| anyhow::anyhow!("{e}: pass the whole lease with --lease instead"))?;
    Ok(parsed.bare_lease())
}

impl DestroyArgs {
    /// The lease and config to destroy, read before the cluster is reached.
    fn lease_ref(&self) -> anyhow::Result<LeaseRef> {
        let lease = match (&self.lease, &self.lease_id) {
            (_, Some(id)) => lease_of_id(id)?,
            (Some(path), None) => match read_lease(path)? {
                StoredLease::Whole(lease) => *lease,
                StoredLease::IdOnly { id, .. } => lease_of_id(&id)?,
            },
            (None, None) => bail!("name the lease: --lease FILE or --lease-id ID"),
        };
        let config = match &self.config {
            Some(path) => read_document(path, "config")?,
            None => "{}".to_string(),
        };
        Ok(LeaseRef { lease, config })
    }
}

/// `destroy`
pub async fn destroy(target: Target, args: DestroyArgs) -> anyhow::Result<i32> {
    let r = args.lease_ref()?;
    let session = session(&target.host, target.namespace.given()?).await?;
    let r = session.lease(r)?;
    match session.host.destroy(r).await {
        Ok(report) => {
            if target.json {
                print_json(&report)?;
            } else {
                for o in &report.objects {
                    crate::outln!("{:<10} {:<40} {}", o.kind, o.name, word(&o.outcome));
                }
            }
            Ok(0)
        }
        Err(e) => Ok(report_error(&e)),
    }
}
