//! The progress line of `acquire` on a terminal: the workload the host created for it, the phase
//! of its pod, and the time spent against the call's deadline, e.g.
//! `jobs.batch default/pc-a-1 · pod pc-a-1-x7k2p Pending (ContainerCreating) · 4 s of 30 s`.
//!
//! The workload comes from the creates the host sent ([`provider_host::created_objects`]); the
//! pod is read with the command's own credentials, once a second, by the acquisition-id label
//! the provider puts on the pods of a Sandbox or a Job (a claim's pods come from its warm pool's
//! template and carry none, so its line shows no pod). Nothing is read or shown when stderr is
//! not a terminal.

use std::future::Future;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use provider_host::created_objects::{CreatedObject, CreatedObjects};

/// How often the pod is read.
const POD_READ_EVERY: Duration = Duration::from_secs(1);
/// How often the line is redrawn.
const REDRAW_EVERY: Duration = Duration::from_millis(250);

/// What the line is drawn from.
pub struct Progress {
    /// The creates the host sends for the acquire.
    pub created: CreatedObjects,
    /// The command's cluster, read for the pod's phase; `None` without one.
    pub cluster: Option<kube::Config>,
    /// The acquisition id, which labels the pods.
    pub acquisition_id: String,
    /// The call's deadline (the host's call timeout).
    pub deadline: Duration,
}

impl Progress {
    /// Runs `acquire`, drawing the line on stderr while it runs when stderr is a terminal.
    pub async fn around<T>(self, acquire: impl Future<Output = T>) -> T {
        if !std::io::stderr().is_terminal() {
            return acquire.await;
        }
        let bar = indicatif::ProgressBar::new_spinner();
        bar.enable_steady_tick(Duration::from_millis(100));
        let started = Instant::now();
        let pod = Arc::new(Mutex::new(None::<String>));
        // The reads run beside the acquire, never inside its poll: a slow read must not stall it.
        // A client of its own, built only here: a command with no terminal reads nothing.
        let client = self.cluster.and_then(|config| kube::Client::try_from(config).ok());
        let reader = tokio::spawn(read_pods(self.created.clone(), client, self.acquisition_id, pod.clone()));
        tokio::pin!(acquire);
        let mut redraw = tokio::time::interval(REDRAW_EVERY);
        let out = loop {
            tokio::select! {
                out = &mut acquire => break out,
                _ = redraw.tick() => {
                    let workload = workload(&self.created.list());
                    let pod = pod.lock().unwrap_or_else(PoisonError::into_inner).clone();
                    bar.set_message(line(workload.as_ref(), pod.as_deref(), started.elapsed(), self.deadline));
                }
            }
        };
        reader.abort();
        bar.finish_and_clear();
        out
    }
}

/// The workload among the creates: the object a lease id names.
fn workload(created: &[CreatedObject]) -> Option<CreatedObject> {
    created.iter().find(|o| contract::Backend::of_workload(&o.group, &o.plural).is_some()).cloned()
}

/// Reads the acquire's pod once a second into `shown`, once its workload's namespace is known.
async fn read_pods(
    created: CreatedObjects,
    client: Option<kube::Client>,
    acquisition_id: String,
    shown: Arc<Mutex<Option<String>>>,
) {
    let Some(client) = client else { return };
    let selector = format!("{}={acquisition_id}", contract::labels::LABEL_ACQUISITION_ID);
    loop {
        tokio::time::sleep(POD_READ_EVERY).await;
        let Some(namespace) = workload(&created.list()).and_then(|w| w.namespace) else { continue };
        let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
        if let Ok(Ok(list)) =
            tokio::time::timeout(POD_READ_EVERY, pods.list(&ListParams::default().labels(&selector))).await
            && let Some(pod) = list.items.iter().max_by_key(|p| p.metadata.creation_timestamp.clone())
        {
            *shown.lock().unwrap_or_else(PoisonError::into_inner) = Some(pod_state(pod));
        }
    }
}

/// `name Phase (Reason)`: the phase, and why its first waiting container waits.
fn pod_state(pod: &Pod) -> String {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let status = pod.status.as_ref();
    let phase = status.and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
    let waiting = status
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.iter().find_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone()));
    match waiting {
        Some(reason) => format!("{name} {phase} ({reason})"),
        None => format!("{name} {phase}"),
    }
}

/// The line itself.
fn line(workload: Option<&CreatedObject>, pod: Option<&str>, elapsed: Duration, deadline: Duration) -> String {
    let workload = workload.map(ToString::to_string).unwrap_or_else(|| "creating the workload".to_string());
    let pod = pod.map(|p| format!(" · pod {p}")).unwrap_or_default();
    format!("{workload}{pod} · {} s of {} s", elapsed.as_secs(), deadline.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> CreatedObject {
        CreatedObject {
            group: "batch".into(),
            plural: "jobs".into(),
            namespace: Some("default".into()),
            name: "pc-a".into(),
        }
    }

    #[test]
    fn the_line_names_the_workload_its_pod_and_the_time_left() {
        let secret = CreatedObject { group: String::new(), plural: "secrets".into(), ..job() };
        assert_eq!(workload(&[secret, job()]), Some(job()), "the Secret is no workload");
        assert_eq!(
            line(
                Some(&job()),
                Some("pc-a-x Pending (ContainerCreating)"),
                Duration::from_millis(4_900),
                Duration::from_secs(30)
            ),
            "jobs.batch default/pc-a · pod pc-a-x Pending (ContainerCreating) · 4 s of 30 s"
        );
        assert_eq!(line(None, None, Duration::ZERO, Duration::from_secs(30)), "creating the workload · 0 s of 30 s");
    }

    #[test]
    fn a_pod_shows_its_phase_and_why_it_waits() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "pc-a-x"},
            "status": {"phase": "Pending", "containerStatuses": [{"name": "main", "image": "i", "imageID": "", "ready": false,
                "restartCount": 0, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}
        }))
        .expect("a pod");
        assert_eq!(pod_state(&pod), "pc-a-x Pending (ImagePullBackOff)");
        let running: Pod =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "status": {"phase": "Running"}}))
                .expect("a pod");
        assert_eq!(pod_state(&running), "p Running");
    }
}
