//! Contract 0.4.0, the newest: the host's imports forward to the host implementation unchanged.
//! Its lease is neutral; the Kubernetes placement the host stores beside it comes from the
//! component's `kubernetes.placement-of`, called in the same instance as the export that
//! returned the lease.

use std::time::Duration;

use wasmtime::Store;
use wasmtime::component::Resource;

use crate::bindings::kube::{
    DeleteOptions, ExecOptions, ExecOutput, KubeError, ListOptions, PatchType, ResourceType, WatchEvent, WatchOptions,
};
use crate::bindings::since_v0_4_0::exports::paperclip::sandbox_provider::kubernetes;
use crate::bindings::since_v0_4_0::paperclip::sandbox_provider::{deadline, kube, log, types as wit};
use crate::kube_watch::WatchStream;
use crate::log_host;
use crate::records::{
    AccessRule, AccessVerb, AcquireRequest, Backend, ClaimedSandbox, ConfigProblem, DeleteOutcome, DestroyReport,
    Diagnostic, EnvVar, ErrorDetail, ExecRequest, ExecResult, InvalidConfigDetail, Lease, LeaseRef, ObjectReport,
    ProbeResult, ProviderError, ProviderInfo, ResumeOutcome, Severity, Validation, neutral_records, shared_records,
};
use crate::state::CallState;
use crate::versions::{Placed, exports, neutral_lease_glue};

shared_records!();

exports! {
    provider: Provider = "paperclip:sandbox-provider/provider@0.4.0" {
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
    kubernetes: Kubernetes = "paperclip:sandbox-provider/kubernetes@0.4.0" {
        backends / call_backends("backends")() -> Vec<kubernetes::Backend>;
        placement_of / call_placement_of("placement-of")(lease: &wit::Lease) -> Option<kubernetes::Placement>;
    }
}

impl wit::Host for CallState {}

impl log::Host for CallState {
    async fn emit(&mut self, level: log::Level, message: String, fields: Vec<log::Field>) -> wasmtime::Result<()> {
        log_host::emit(self.call, level, &message, &fields);
        Ok(())
    }
}

impl deadline::Host for CallState {
    async fn remaining_millis(&mut self) -> wasmtime::Result<u64> {
        Ok(self.millis_left())
    }

    async fn call_timeout_millis(&mut self) -> wasmtime::Result<u64> {
        Ok(self.timeout_millis())
    }
}

impl kube::Host for CallState {
    async fn get(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.get(&resource, namespace.as_deref(), &name).await)
    }

    async fn create(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        body: String,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.create(&resource, namespace.as_deref(), &body).await)
    }

    async fn patch(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        name: String,
        patch_type: PatchType,
        body: String,
        subresource: Option<String>,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.patch(&resource, namespace.as_deref(), &name, patch_type, &body, subresource.as_deref()).await)
    }

    async fn delete(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        name: String,
        options: DeleteOptions,
    ) -> wasmtime::Result<Result<(), KubeError>> {
        Ok(self.kube.delete(&resource, namespace.as_deref(), &name, &options).await)
    }

    async fn list(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        options: ListOptions,
    ) -> wasmtime::Result<Result<String, KubeError>> {
        Ok(self.kube.list(&resource, namespace.as_deref(), &options).await)
    }

    async fn open_watch(
        &mut self,
        resource: ResourceType,
        namespace: Option<String>,
        options: WatchOptions,
    ) -> wasmtime::Result<Result<Resource<WatchStream>, KubeError>> {
        self.open_watch(resource, namespace, options).await
    }

    async fn served_versions(&mut self, group: String) -> wasmtime::Result<Result<Vec<String>, KubeError>> {
        Ok(self.kube.served_versions(&group).await)
    }

    async fn check_namespace(&mut self, namespace: String) -> wasmtime::Result<Result<(), String>> {
        Ok(self.kube.check_namespace(&namespace))
    }

    async fn exec(
        &mut self,
        namespace: String,
        pod: String,
        options: ExecOptions,
    ) -> wasmtime::Result<Result<ExecOutput, KubeError>> {
        Ok(self.kube.exec(&namespace, &pod, options).await)
    }
}

impl kube::HostWatch for CallState {
    async fn next(
        &mut self,
        watch: Resource<WatchStream>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<Option<WatchEvent>, KubeError>> {
        self.next_event(watch, Duration::from_millis(u64::from(timeout_ms))).await
    }

    async fn drop(&mut self, watch: Resource<WatchStream>) -> wasmtime::Result<()> {
        self.close_watch(watch)
    }
}

neutral_records!();

fn backend(b: kubernetes::Backend) -> Backend {
    match b {
        kubernetes::Backend::Sandbox => Backend::Sandbox,
        kubernetes::Backend::Job => Backend::Job,
        kubernetes::Backend::Claim => Backend::Claim,
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
        sandbox: p.sandbox.map(|s| ClaimedSandbox {
            api_version: s.api_version,
            name: s.name,
            uid: s.uid,
            warm: s.warm,
        }),
    }
}

neutral_lease_glue!();
