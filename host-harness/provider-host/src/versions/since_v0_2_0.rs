//! Contract 0.2.0 (frozen): the same host implementation behind 0.2.0's interfaces, which
//! 0.3.0 extended without changing a case: every value converts one to one. 0.2.0 has no
//! `execute` and no `kube.exec`, and its lease record holds the Kubernetes placement itself.

use crate::bindings::kube as current;
use crate::bindings::since_v0_2_0::paperclip::sandbox_provider::{deadline, kube, log, types as wit};
use crate::records::{
    AccessRule, AccessVerb, AcquireRequest, Backend, ConfigProblem, DeleteOutcome, DestroyReport, Diagnostic, EnvVar,
    ErrorDetail, InvalidConfigDetail, Lease, LeaseRef, ObjectReport, ProbeResult, ProviderError, ProviderInfo,
    ResumeOutcome, Severity, Validation, access_records, flat_lease_records, provider_errors, shared_records,
};
use crate::state::CallState;
use crate::versions::{exports, older_kube, same_kube_errors};

shared_records!();

exports! {
    provider: Provider = "paperclip:sandbox-provider/provider@0.2.0" {
        describe / call_describe("describe")() -> wit::ProviderInfo;
        validate_config / call_validate_config("validate-config")(config: &str) -> wit::Validation;
        probe / call_probe("probe")(config: &str) -> wit::ProbeResult;
        acquire / call_acquire("acquire")(request: &wit::AcquireRequest) -> Result<wit::Lease, wit::ProviderError>;
        resume_check / call_resume_check("resume-check")(lease: &wit::LeaseRef)
            -> Result<wit::ResumeOutcome, wit::ProviderError>;
        renew / call_renew("renew")(lease: &wit::LeaseRef, expires_at: i64)
            -> Result<wit::ResumeOutcome, wit::ProviderError>;
        release / call_release("release")(lease: &wit::LeaseRef) -> Result<(), wit::ProviderError>;
        destroy / call_destroy("destroy")(lease: &wit::LeaseRef) -> Result<wit::DestroyReport, wit::ProviderError>;
    }
}
flat_lease_records!();
access_records!();

same_kube_errors!();

older_kube!({
    async fn check_namespace(&mut self, namespace: String) -> wasmtime::Result<Result<(), String>> {
        Ok(self.kube.check_namespace(&namespace))
    }
});

impl wit::Host for CallState {}

impl deadline::Host for CallState {
    async fn remaining_millis(&mut self) -> wasmtime::Result<u64> {
        Ok(self.millis_left())
    }

    async fn call_timeout_millis(&mut self) -> wasmtime::Result<u64> {
        Ok(self.timeout_millis())
    }
}

impl From<wit::ProviderInfo> for ProviderInfo {
    fn from(i: wit::ProviderInfo) -> Self {
        Self {
            driver_key: i.driver_key,
            display_name: i.display_name,
            version: i.version,
            config_schema: i.config_schema,
            reusable_leases: i.reusable_leases,
            backends: i.backends.into_iter().map(Into::into).collect(),
            access: i.access.into_iter().map(Into::into).collect(),
        }
    }
}

provider_errors!(Forbidden, Denied, Conflict, Capacity, ImagePull, Rejected, Timeout, Unavailable, Internal);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_round_trip_through_the_bindgen_type() {
        let lease: Lease = serde_json::from_value(serde_json::json!({
            "provider-lease-id": "sb-abc", "backend": "sandbox", "namespace": "agents",
            "api-version": "agents.x-k8s.io/v1beta1", "workload-uid": "u-1", "pod-name": "sb-abc",
            "pod-ip": "10.0.0.7", "expires-at": 1_700_000_000_000_i64, "metadata": r#"{"secret":"sb-abc-env"}"#
        }))
        .expect("parses");
        let wit_lease: wit::Lease = lease.clone().into();
        assert_eq!((wit_lease.workload_uid.as_str(), wit_lease.pod_uid.as_deref()), ("u-1", None));
        assert_eq!(Lease::from(wit_lease), lease);
    }

    #[test]
    fn host_refusals_keep_their_own_cases() {
        assert!(
            matches!(old_error(current::KubeError::NotOwned("x".into())), kube::KubeError::NotOwned(m) if m == "x")
        );
        assert!(matches!(old_error(current::KubeError::Denied("no".into())), kube::KubeError::Denied(_)));
    }

    #[test]
    fn errors_keep_their_case_and_retry_advice() {
        let error = ProviderError::from(wit::ProviderError::ImagePull(wit::ErrorDetail {
            message: "no such image".into(),
            retryable: false,
        }));
        assert_eq!(error, ProviderError::image_pull("no such image"));
        assert_eq!(error.to_string(), "image-pull: no such image");
    }
}
