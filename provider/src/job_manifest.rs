//! The `batch/v1` Job backend: one pod that never restarts (`backoffLimit` 0 and
//! `restartPolicy: Never` by default), `ttlSecondsAfterFinished` 900 for finished Jobs, and the
//! leak guard: `activeDeadlineSeconds` ending at the lease's expiry.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::config::JobSettings;
use crate::errors::ProviderError;
use crate::k8s_types::{Job, JobSpec, PodTemplateSpec};

/// Everything a Job is made of.
pub struct JobParams<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    pub labels: &'a BTreeMap<String, String>,
    pub annotations: &'a BTreeMap<String, String>,
    /// A template with `restartPolicy: Never`.
    pub template: PodTemplateSpec,
    pub settings: &'a JobSettings,
    pub active_deadline_seconds: i64,
}

/// The Job manifest.
pub fn job(p: JobParams<'_>) -> Result<Value, ProviderError> {
    let job = Job::new(
        crate::naming::object_meta(p.name, p.namespace, p.labels, p.annotations),
        JobSpec {
            backoff_limit: p.settings.backoff_limit,
            ttl_seconds_after_finished: p.settings.ttl_seconds_after_finished,
            active_deadline_seconds: p.active_deadline_seconds,
            completions: 1,
            parallelism: 1,
            template: p.template,
        },
    );
    serde_json::to_value(&job).map_err(|e| ProviderError::internal(format!("could not encode the Job: {e}")))
}

/// `activeDeadlineSeconds` that ends at `expiry_millis` for a Job that started (or starts) at
/// `start_millis`: whole seconds rounded up, at least 1.
pub fn active_deadline_seconds(expiry_millis: i64, start_millis: i64) -> i64 {
    let millis = expiry_millis.saturating_sub(start_millis);
    (millis + 999).div_euclid(1000).max(1)
}

/// Moves the leak guard (renew).
pub fn deadline_patch(seconds: i64) -> Value {
    json!({"spec": {"activeDeadlineSeconds": seconds}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s_types::PodSpec;

    #[test]
    fn job_defaults() {
        let labels = BTreeMap::from([("l".to_string(), "v".to_string())]);
        let template = PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec { restart_policy: Some("Never".into()), ..Default::default() }),
        };
        let j = job(JobParams {
            name: "pc-1",
            namespace: "ns",
            labels: &labels,
            annotations: &BTreeMap::new(),
            template,
            settings: &JobSettings::default(),
            active_deadline_seconds: 3600,
        })
        .unwrap();
        assert_eq!(j["apiVersion"], "batch/v1");
        assert_eq!(j["kind"], "Job");
        assert_eq!(j["spec"]["backoffLimit"], 0);
        assert_eq!(j["spec"]["ttlSecondsAfterFinished"], 900);
        assert_eq!(j["spec"]["activeDeadlineSeconds"], 3600);
        assert_eq!(j["spec"]["template"]["spec"]["restartPolicy"], "Never");
    }

    #[test]
    fn deadline_rounds_up_to_whole_seconds() {
        assert_eq!(active_deadline_seconds(10_000, 0), 10);
        assert_eq!(active_deadline_seconds(10_001, 0), 11);
        assert_eq!(active_deadline_seconds(5, 10), 1);
        assert_eq!(deadline_patch(42), json!({"spec": {"activeDeadlineSeconds": 42}}));
    }
}
