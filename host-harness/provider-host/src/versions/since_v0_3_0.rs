//! Contract 0.3.0 (frozen): the same host implementation behind 0.3.0's interfaces, which
//! 0.4.0 extended without changing a case: every value converts one to one. 0.3.0's
//! `kubernetes.backend` has no `claim` and its placement no `claimed-sandbox`.

use wasmtime::Store;

use crate::bindings::kube as current;
use crate::bindings::since_v0_3_0::exports::paperclip::sandbox_provider::kubernetes;
use crate::bindings::since_v0_3_0::paperclip::sandbox_provider::{deadline, kube, log, types as wit};
use crate::records::{
    AccessRule, AccessVerb, AcquireRequest, Backend, ConfigProblem, DeleteOutcome, DestroyReport, Diagnostic, EnvVar,
    ErrorDetail, ExecRequest, ExecResult, InvalidConfigDetail, Lease, LeaseRef, ObjectReport, ProbeResult,
    ProviderError, ProviderInfo, ResumeOutcome, Severity, Validation, neutral_records, shared_records,
};
use crate::state::CallState;
use crate::versions::{Placed, exports, neutral_lease_glue, older_kube, same_kube_errors};

shared_records!();

exports! {
    provider: Provider = "paperclip:sandbox-provider/provider@0.3.0" {
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
        execute / call_execute("execute")(lease: &wit::LeaseRef, request: &wit::ExecRequest)
            -> Result<wit::ExecResult, wit::ProviderError>;
    }
    kubernetes: Kubernetes = "paperclip:sandbox-provider/kubernetes@0.3.0" {
        backends / call_backends("backends")() -> Vec<kubernetes::Backend>;
        placement_of / call_placement_of("placement-of")(lease: &wit::Lease) -> Option<kubernetes::Placement>;
    }
}
same_kube_errors!();

older_kube!({
    async fn check_namespace(&mut self, namespace: String) -> wasmtime::Result<Result<(), String>> {
        Ok(self.kube.check_namespace(&namespace))
    }

    async fn exec(
        &mut self,
        namespace: String,
        pod: String,
        o: kube::ExecOptions,
    ) -> wasmtime::Result<Result<kube::ExecOutput, kube::KubeError>> {
        let options = current::ExecOptions {
            container: o.container,
            command: o.command,
            stdin: o.stdin,
            timeout_ms: o.timeout_ms,
            max_output_bytes: o.max_output_bytes,
        };
        let output = self.kube.exec(&namespace, &pod, options).await.map_err(old_error)?;
        Ok(Ok(kube::ExecOutput {
            exit_code: output.exit_code,
            timed_out: output.timed_out,
            stdout: output.stdout,
            stderr: output.stderr,
            stdout_truncated: output.stdout_truncated,
            stderr_truncated: output.stderr_truncated,
        }))
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

neutral_records!();

fn backend(b: kubernetes::Backend) -> Backend {
    match b {
        kubernetes::Backend::Sandbox => Backend::Sandbox,
        kubernetes::Backend::Job => Backend::Job,
    }
}

fn placed(p: kubernetes::Placement) -> Placed {
    Placed {
        backend: backend(p.backend),
        namespace: p.namespace,
        api_version: p.api_version,
        workload_uid: p.workload_uid,
        pod_name: p.pod_name,
        pod_uid: p.pod_uid,
        pod_ip: p.pod_ip,
        sandbox: None,
    }
}

neutral_lease_glue!();
