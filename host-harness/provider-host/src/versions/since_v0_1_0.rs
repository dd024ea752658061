//! Contract 0.1.0 (frozen): the same host implementation behind the old interfaces. What 0.2.0
//! added is absent here (no deadline import, no `check-namespace`), and its new cases are
//! folded into the nearest old ones: a host refusal (`denied`, `not-owned`) reads as
//! `forbidden`, as it did in 0.1.0; a provider of 0.1.0 declares no access.

use crate::bindings::kube as current;
use crate::bindings::since_v0_1_0::paperclip::sandbox_provider::{kube, log, types as wit};
use crate::records::{
    AcquireRequest, Backend, ConfigProblem, DeleteOutcome, DestroyReport, Diagnostic, EnvVar, ErrorDetail,
    InvalidConfigDetail, Lease, LeaseRef, ObjectReport, ProbeResult, ProviderError, ProviderInfo, ResumeOutcome,
    Severity, Validation, flat_lease_records, provider_errors, shared_records,
};
use crate::state::CallState;
use crate::versions::{exports, older_kube};

shared_records!();

exports! {
    provider: Provider = "paperclip:sandbox-provider/provider@0.1.0" {
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

/// A 0.2.0 error as 0.1.0 names it.
fn old_error(error: current::KubeError) -> kube::KubeError {
    use current::KubeError as E;
    match error {
        E::NotFound(m) => kube::KubeError::NotFound(m),
        E::AlreadyExists(m) => kube::KubeError::AlreadyExists(m),
        E::Conflict(m) => kube::KubeError::Conflict(m),
        E::Gone(m) => kube::KubeError::Gone(m),
        E::Invalid(m) => kube::KubeError::Invalid(m),
        E::Forbidden(m) | E::Denied(m) | E::NotOwned(m) => kube::KubeError::Forbidden(m),
        E::Unauthorized(m) => kube::KubeError::Unauthorized(m),
        E::Timeout(m) => kube::KubeError::Timeout(m),
        E::Unavailable(d) => kube::KubeError::Unavailable(kube::UnavailableDetail {
            message: d.message,
            retry_after_seconds: d.retry_after_seconds,
        }),
        E::Transport(m) => kube::KubeError::Transport(m),
        E::Other(d) => kube::KubeError::Other(kube::OtherDetail { code: d.code, message: d.message }),
    }
}

older_kube!({});

impl wit::Host for CallState {}

impl From<wit::ProviderInfo> for ProviderInfo {
    fn from(i: wit::ProviderInfo) -> Self {
        Self {
            driver_key: i.driver_key,
            display_name: i.display_name,
            version: i.version,
            config_schema: i.config_schema,
            reusable_leases: i.reusable_leases,
            backends: i.backends.into_iter().map(Into::into).collect(),
            access: Vec::new(),
        }
    }
}

provider_errors!(Forbidden, Conflict, Capacity, ImagePull, Rejected, Timeout, Unavailable, Internal);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_refusals_read_as_forbidden_in_the_old_contract() {
        assert!(
            matches!(old_error(current::KubeError::Denied("no".into())), kube::KubeError::Forbidden(m) if m == "no")
        );
        assert!(matches!(old_error(current::KubeError::Gone("x".into())), kube::KubeError::Gone(_)));
    }

    #[test]
    fn old_providers_declare_no_access() {
        let info = ProviderInfo::from(wit::ProviderInfo {
            driver_key: "k".into(),
            display_name: "d".into(),
            version: "1".into(),
            config_schema: "{}".into(),
            reusable_leases: false,
            backends: Vec::new(),
        });
        assert!(info.access.is_empty());
    }
}
