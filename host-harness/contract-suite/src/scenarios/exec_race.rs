//! A command aimed at a pod that is replaced while its exec opens: the host proved the pod, the
//! exec's request is held at the API server (an injected hold, let go once the replacement
//! runs), and meanwhile the pod is deleted and another
//! pod created under its name, with no labels and no owner, as anyone with `create pods` in
//! the namespace could. The command, and the secret env that comes with it, must not reach the
//! new pod: execute fails, and the new pod shows no trace of the command.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, AttachParams, DeleteParams, PostParams};
use provider_host::HostError;
use serde_json::json;
use tokio::io::AsyncReadExt;

use super::{Outcome, Stop, ensure, failed, scenario, sh};
use crate::context::Ctx;

scenario!(EXEC_INTO_A_REPLACED_POD, "execute-into-a-replaced-pod", cluster: true, simulator: true, replaced_pod);

/// The most any wait of this scenario may take; the exec's request is held at most twice it.
const DEADLINE: Duration = Duration::from_secs(60);

async fn replaced_pod(ctx: &Ctx<'_>) -> Outcome {
    let simulator =
        ctx.cluster.simulator().ok_or_else(|| Stop::Skip("needs a simulated cluster to hold the exec".into()))?;
    let lease = ctx.acquire(ctx.request(&ctx.acquisition_id())).await.map_err(|e| failed("acquire", e))?;
    let stored = ctx.stored(&lease);
    match ctx.host.execute(stored.clone(), sh("true", None)).await {
        Err(HostError::Provider(e)) if e.kind() == "unsupported" => {
            return Err(Stop::Skip(format!("the provider runs no command: {}", e.message())));
        }
        Err(e) => return Err(failed("a first execute", e)),
        Ok(_) => {}
    }
    let pod = lease.pod_name.clone().ok_or("the lease names no pod".to_string())?;
    let pods: Api<Pod> = Api::namespaced(ctx.admin()?.clone(), &lease.namespace);
    let original = pods.get(&pod).await.map_err(|e| format!("read pod {pod}: {e}"))?;
    let proven = original.metadata.uid.clone().unwrap_or_default();
    // The replacement has the original's containers by name, so the exec finds its container.
    let containers: Vec<String> =
        original.spec.iter().flat_map(|s| s.containers.iter().map(|c| c.name.clone())).collect();

    let marker = format!("exec-race-{}", ctx.acquisition_id());
    let canary = format!("canary-{}", uuid::Uuid::new_v4().simple());
    let hold = simulator.hold_exec(&lease.namespace, &pod, 2 * DEADLINE);
    let script = format!("printf %s \"$CANARY\" > \"$HOME/{marker}\"; echo ran");
    let command = ctx.host.execute(stored.clone(), sh(&script, Some(&canary)));
    let replace = async {
        wait(&format!("the exec's request for pod {pod} to be held at the API server"), || async {
            Ok(simulator.holding(hold))
        })
        .await?;
        let replaced = replace(&pods, &pod, &proven, &containers).await;
        // Let the exec go on to the name's lookup, now the replacement's.
        simulator.release(hold);
        replaced
    };
    let (ran, replacement) = tokio::join!(command, replace);
    simulator.release(hold);
    let replacement = replacement?;
    let traces = exec_output(&pods, &pod, &format!("cat \"$HOME/{marker}\" 2>/dev/null; echo end")).await?;
    ensure!(
        traces.trim() == "end",
        "the command ran in the pod that replaced the one the host proved (uid {replacement}): it holds {traces:?}"
    );
    match ran {
        Ok(result) => Err(Stop::Fail(format!(
            "execute succeeded although its pod was replaced while the exec opened: exit {:?}, stdout {:?}; the \
             replacement (uid {replacement}) holds {traces:?}",
            result.exit_code, result.stdout
        ))),
        Err(e) => {
            ensure!(!e.to_string().contains(&canary), "the refusal shows the secret env: {e}");
            let _ = pods.delete(&pod, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await;
            Ok(format!(
                "the exec was held while the pod was replaced: execute failed ({e}), the new pod got nothing ({traces:?})"
            ))
        }
    }
}

/// Deletes the pod at once and puts a pod of nobody's under its name, running; its uid. Where
/// the pod's own controller recreates it first (a Sandbox's pod has the Sandbox's name), that
/// pod is the replacement: it is not the one the host proved either.
async fn replace(pods: &Api<Pod>, name: &str, proven: &str, containers: &[String]) -> Result<String, Stop> {
    pods.delete(name, &DeleteParams { grace_period_seconds: Some(0), ..Default::default() })
        .await
        .map_err(|e| format!("delete pod {name}: {e}"))?;
    wait(&format!("pod {name} (uid {proven}) to be gone"), || async {
        let now = pods.get_opt(name).await.map_err(|e| e.to_string())?;
        Ok(now.is_none_or(|p| p.metadata.uid.as_deref() != Some(proven)))
    })
    .await?;
    let foreign: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": containers.iter()
            .map(|c| json!({"name": c, "image": "busybox:1.36", "command": ["sleep", "3600"]}))
            .collect::<Vec<_>>()}
    }))
    .map_err(|e| e.to_string())?;
    if let Err(e) = pods.create(&PostParams::default(), &foreign).await {
        ensure!(matches!(&e, kube::Error::Api(s) if s.code == 409), "create the replacement pod {name}: {e}");
    }
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if let Some(pod) = pods.get_opt(name).await.map_err(|e| e.to_string())? {
            let uid = pod.metadata.uid.clone().unwrap_or_default();
            if uid != proven && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running") {
                return Ok(uid);
            }
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "waited {} s for the replacement of pod {name} to run",
            DEADLINE.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `sh -c script` in the pod as the cluster's admin: its stdout.
async fn exec_output(pods: &Api<Pod>, name: &str, script: &str) -> Result<String, Stop> {
    let params = AttachParams::default().stdout(true).stderr(false);
    let mut process = pods
        .exec(name, ["sh", "-c", script], &params)
        .await
        .map_err(|e| format!("exec in the replacement pod {name}: {e}"))?;
    let mut out = Vec::new();
    if let Some(mut stdout) = process.stdout() {
        stdout.read_to_end(&mut out).await.map_err(|e| format!("read the exec's output: {e}"))?;
    }
    let _ = process.join().await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Polls `done` until it holds, for [`DEADLINE`] at most.
async fn wait<F, Fut>(what: &str, mut done: F) -> Result<(), Stop>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool, String>>,
{
    let deadline = tokio::time::Instant::now() + DEADLINE;
    loop {
        if done().await? {
            return Ok(());
        }
        ensure!(tokio::time::Instant::now() < deadline, "waited {} s for {what}", DEADLINE.as_secs());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
