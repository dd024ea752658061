//! Builds the pod the Job controller creates from `spec.template`.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// Labels the API server puts on a Job's template (and so on its pods) to tie them to the Job.
pub const CONTROLLER_UID_LABELS: [&str; 2] = ["batch.kubernetes.io/controller-uid", "controller-uid"];
/// Labels that carry the Job's name.
pub const JOB_NAME_LABELS: [&str; 2] = ["batch.kubernetes.io/job-name", "job-name"];

/// Why a Job's pods cannot be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    /// The Job lacks an identity field the pods must point back to.
    #[error("the Job has no {0}")]
    MissingField(&'static str),
    /// `spec.template.spec` is absent, so there is nothing to run.
    #[error("the Job's pod template has no spec")]
    NoPodSpec,
}

/// The pod to create for `job`: `generateName: <job>-`, the template's labels (plus the Job
/// labels if the API server did not add them), annotations and finalizers, and a controller
/// ownerReference so garbage collection and the pod watch lead back to the Job.
pub fn pod_for_job(job: &Job) -> Result<Pod, TemplateError> {
    let name = job.metadata.name.as_deref().ok_or(TemplateError::MissingField("name"))?;
    let uid = job.metadata.uid.as_deref().ok_or(TemplateError::MissingField("uid"))?;
    let template = job.spec.as_ref().map(|s| &s.template).ok_or(TemplateError::MissingField("spec"))?;
    let spec = template.spec.clone().ok_or(TemplateError::NoPodSpec)?;
    let template_meta = template.metadata.clone().unwrap_or_default();

    let mut labels: BTreeMap<String, String> = template_meta.labels.unwrap_or_default();
    for key in CONTROLLER_UID_LABELS {
        labels.entry(key.to_string()).or_insert_with(|| uid.to_string());
    }
    for key in JOB_NAME_LABELS {
        labels.entry(key.to_string()).or_insert_with(|| name.to_string());
    }

    Ok(Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{name}-")),
            namespace: job.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            finalizers: template_meta.finalizers,
            owner_references: Some(vec![OwnerReference {
                api_version: "batch/v1".to_string(),
                kind: "Job".to_string(),
                name: name.to_string(),
                uid: uid.to_string(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::job::test_support::*;

    #[test]
    fn pods_carry_generate_name_labels_annotations_and_owner() {
        let mut j = job(1, Some(1));
        if let Some(spec) = j.spec.as_mut() {
            let meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
            meta.labels = Some(BTreeMap::from([("app".to_string(), "x".to_string())]));
            meta.annotations = Some(BTreeMap::from([("note".to_string(), "y".to_string())]));
        }
        let pod = pod_for_job(&j).expect("buildable");
        let meta = &pod.metadata;
        assert_eq!(meta.generate_name.as_deref(), Some("work-"));
        assert_eq!(meta.name, None);
        assert_eq!(meta.namespace.as_deref(), Some(NAMESPACE));
        let labels = meta.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app").map(String::as_str), Some("x"));
        assert_eq!(labels.get("controller-uid").map(String::as_str), Some(JOB_UID));
        assert_eq!(labels.get("batch.kubernetes.io/controller-uid").map(String::as_str), Some(JOB_UID));
        assert_eq!(labels.get("job-name").map(String::as_str), Some(JOB_NAME));
        assert_eq!(labels.get("batch.kubernetes.io/job-name").map(String::as_str), Some(JOB_NAME));
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("note").map(String::as_str), Some("y"));
        let owner = meta.owner_references.clone().unwrap_or_default();
        assert_eq!(owner.len(), 1);
        assert_eq!(owner[0].api_version, "batch/v1");
        assert_eq!(owner[0].kind, "Job");
        assert_eq!(owner[0].name, JOB_NAME);
        assert_eq!(owner[0].uid, JOB_UID);
        assert_eq!(owner[0].controller, Some(true));
        assert_eq!(owner[0].block_owner_deletion, Some(true));
        assert!(pod.spec.is_some());
    }

    #[test]
    fn existing_job_labels_are_kept() {
        let mut j = job(1, Some(1));
        if let Some(spec) = j.spec.as_mut() {
            let meta = spec.template.metadata.get_or_insert_with(ObjectMeta::default);
            meta.labels = Some(BTreeMap::from([("controller-uid".to_string(), "from-server".to_string())]));
        }
        let pod = pod_for_job(&j).expect("buildable");
        let labels = pod.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get("controller-uid").map(String::as_str), Some("from-server"));
    }

    #[test]
    fn a_template_without_spec_is_an_error() {
        let mut j = job(1, Some(1));
        if let Some(spec) = j.spec.as_mut() {
            spec.template.spec = None;
        }
        assert_eq!(pod_for_job(&j), Err(TemplateError::NoPodSpec));
        let mut nameless = job(1, Some(1));
        nameless.metadata.uid = None;
        assert_eq!(pod_for_job(&nameless), Err(TemplateError::MissingField("uid")));
    }
}
