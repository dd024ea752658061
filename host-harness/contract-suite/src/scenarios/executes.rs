//! Many executes in one lease leave no process behind: no zombie, and no more live processes
//! than after the first command. On a real node whose sandbox kept its main command as PID 1,
//! every execute left about two zombies (the exec script's watchdog and its `sleep`, reparented
//! to a PID 1 that never reaps) until the pod's PID limit made every fork fail; and a watchdog
//! stopped at the wrong moment left its `sleep` running until the command's timeout.
//!
//! The counting runs in the sandbox as an ordinary command, reading `/proc` (Linux): what a
//! user's `ps` would show, on any cluster.

use provider_host::HostError;
use provider_host::records::LeaseRef;

use super::{Outcome, Stop, ensure, failed, scenario, sh};
use crate::CLUSTER_WAIT;
use crate::context::Ctx;

scenario!(MANY_EXECUTES, "many-executes-leave-no-zombie", cluster: true, simulator: false, many_executes);

/// How many commands the scenario runs between its counts: a Paperclip run makes 18 to 52
/// before its agent starts.
const EXECUTES: usize = 20;

/// Prints how many processes run outside the script's own session, and how many of those are
/// zombies (`/proc/<pid>/stat`: state is the field after the command name, session the fourth).
const COUNT: &str = r#"read -r line < /proc/self/stat; rest=${line##*) }; set -- $rest; own=$4
others=0; zombies=0
for d in /proc/[0-9]*; do
  read -r line 2>/dev/null < "$d/stat" || continue
  rest=${line##*) }; set -- $rest
  [ "$4" = "$own" ] && continue
  others=$((others + 1))
  [ "$1" = Z ] && zombies=$((zombies + 1))
done
echo "$others $zombies""#;

/// The processes outside the counting command's session, and the zombies among them.
async fn count(ctx: &Ctx<'_>, lease: &LeaseRef) -> Result<(u32, u32), Stop> {
    let result = match ctx.host.execute(lease.clone(), sh(COUNT, None)).await {
        Err(HostError::Provider(e)) if e.kind() == "unsupported" => {
            return Err(Stop::Skip(format!("the provider runs no command: {}", e.message())));
        }
        other => other.map_err(|e| failed("execute the count", e))?,
    };
    let numbers: Vec<u32> = result.stdout.split_whitespace().filter_map(|w| w.parse().ok()).collect();
    match numbers[..] {
        [others, zombies] if result.exit_code == Some(0) => Ok((others, zombies)),
        _ => Err(Stop::Fail(format!(
            "the count in the sandbox (a POSIX sh reading /proc) failed: exit {:?}, stdout {:?}, stderr {:?}",
            result.exit_code,
            result.stdout.chars().take(200).collect::<String>(),
            result.stderr.chars().take(200).collect::<String>()
        ))),
    }
}

async fn many_executes(ctx: &Ctx<'_>) -> Outcome {
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let stored = ctx.stored(&lease);
    let (before, _) = count(ctx, &stored).await?;
    for n in 1..=EXECUTES {
        let result = ctx.host.execute(stored.clone(), sh("true", None)).await.map_err(|e| failed("execute true", e))?;
        ensure!(result.exit_code == Some(0), "execute #{n} of `true` answered {result:?}");
    }
    let background = ctx
        .host
        .execute(stored.clone(), sh("sleep 1 >/dev/null 2>&1 & echo started", None))
        .await
        .map_err(|e| failed("execute with a background process", e))?;
    ensure!(background.stdout == "started\n", "the command with a background process answered {background:?}");
    // Orphans are reaped as they exit, and the background `sleep` runs a second.
    let deadline = tokio::time::Instant::now() + CLUSTER_WAIT;
    loop {
        let (others, zombies) = count(ctx, &stored).await?;
        if zombies == 0 && others <= before {
            return Ok(format!(
                "{} executes: no zombie, {others} processes beside the command ({before} after the first)",
                EXECUTES + 1
            ));
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "{} s after {} executes the sandbox has {others} processes beside the command, {zombies} of them \
             zombies, where the first command saw {before}: executes leave processes behind",
            CLUSTER_WAIT.as_secs(),
            EXECUTES + 1
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
}
