//! The WebAssembly component glue (contract 0.4.0): the `kube` and `log` imports as [`Kube`]
//! and [`Log`], the clock from WASI's clocks with the host's call deadline from the `deadline`
//! import, and the exported `provider` and `kubernetes` interfaces converting WIT
//! values to the crate's types and back (the neutral lease through [`crate::placement`]). No
//! decisions are made here.

use std::time::Duration;

use serde_json::Value;
use wasip2::clocks as wasi_clocks;

use crate::clock::Clock;
use crate::kube_api::{
    self, DeleteOptions, ExecOptions, ExecOutput, Kube, KubeError, ListOptions, PatchType, Propagation, WatchEvent,
    WatchOptions,
};
use crate::log::{Level, Log};
use crate::placement::{self, NeutralLease, Placement};
use crate::response_body;
use crate::{
    AccessVerb, AcquireRequest, Backend, DeleteOutcome, DestroyReport, EnvVar, ExecRequest, ExecResult, Lease,
    LeaseRef, ProbeResult, Provider, ProviderError, ProviderInfo, ResumeOutcome, Severity, Validation,
};

wit_bindgen::generate!({
    path: "../wit/since_v0.4.0",
    world: "kubernetes-provider",
});

use exports::paperclip::sandbox_provider::kubernetes as k8s;
use exports::paperclip::sandbox_provider::provider::Guest;
use paperclip::sandbox_provider::deadline as host_deadline;
use paperclip::sandbox_provider::kube as host;
use paperclip::sandbox_provider::log as host_log;
use paperclip::sandbox_provider::types as wit;

/// The host's `kube` import.
struct HostKube;

/// An open watch of the host, and what it is of (its events are parsed for that resource).
struct HostWatch {
    watch: host::Watch,
    resource: kube_api::ResourceType,
}

/// The host's `log` import.
struct HostLog;

/// WASI's clocks, and the host's deadline for the call in progress.
///
/// The component is built for `wasm32-unknown-unknown`, whose `std::time` has no clock: time
/// comes from `wasi:clocks` through the `wasip2` crate's bindings, the only WASI the component
/// imports (the `wasm32-wasip2` std imports cli, io and terminal interfaces besides, each of which
/// every instance must be linked to).
struct HostClock;

impl Clock for HostClock {
    fn now_millis(&self) -> i64 {
        let now = wasi_clocks::wall_clock::now();
        let millis = i128::from(now.seconds) * 1000 + i128::from(now.nanoseconds / 1_000_000);
        i64::try_from(millis).unwrap_or(i64::MAX)
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(wasi_clocks::monotonic_clock::now())
    }

    fn sleep(&self, duration: Duration) {
        let nanos = u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX);
        wasi_clocks::monotonic_clock::subscribe_duration(nanos).block();
    }

    fn call_remaining(&self) -> Option<Duration> {
        Some(Duration::from_millis(host_deadline::remaining_millis()))
    }

    fn call_timeout(&self) -> Option<Duration> {
        Some(Duration::from_millis(host_deadline::call_timeout_millis()))
    }
}

fn resource(r: &kube_api::ResourceType) -> host::ResourceType {
    host::ResourceType { group: r.group.clone(), version: r.version.clone(), plural: r.plural.clone() }
}

fn kube_error(e: host::KubeError) -> KubeError {
    match e {
        host::KubeError::NotFound(m) => KubeError::NotFound(m),
        host::KubeError::AlreadyExists(m) => KubeError::AlreadyExists(m),
        host::KubeError::Conflict(m) => KubeError::Conflict(m),
        host::KubeError::Gone(m) => KubeError::Gone(m),
        host::KubeError::Invalid(m) => KubeError::Invalid(m),
        host::KubeError::Forbidden(m) => KubeError::Forbidden(m),
        host::KubeError::Denied(m) => KubeError::Denied(m),
        host::KubeError::NotOwned(m) => KubeError::NotOwned(m),
        host::KubeError::Unauthorized(m) => KubeError::Unauthorized(m),
        host::KubeError::Timeout(m) => KubeError::Timeout(m),
        host::KubeError::Unavailable(d) => {
            KubeError::Unavailable { message: d.message, retry_after_seconds: d.retry_after_seconds }
        }
        host::KubeError::Transport(m) => KubeError::Transport(m),
        host::KubeError::Other(d) => KubeError::Other { code: d.code, message: d.message },
    }
}

impl Kube for HostKube {
    type Watch = HostWatch;

    fn get(&self, r: &kube_api::ResourceType, namespace: Option<&str>, name: &str) -> Result<Value, KubeError> {
        response_body::parse(&host::get(&resource(r), namespace, name).map_err(kube_error)?, r)
    }

    fn create(&self, r: &kube_api::ResourceType, namespace: Option<&str>, body: &Value) -> Result<Value, KubeError> {
        response_body::parse(&host::create(&resource(r), namespace, &body.to_string()).map_err(kube_error)?, r)
    }

    fn patch(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        name: &str,
        patch_type: PatchType,
        body: &Value,
        subresource: Option<&str>,
    ) -> Result<Value, KubeError> {
        let patch_type = match patch_type {
            PatchType::Merge => host::PatchType::Merge,
            PatchType::Json => host::PatchType::Json,
            PatchType::Strategic => host::PatchType::Strategic,
        };
        let answer = host::patch(&resource(r), namespace, name, patch_type, &body.to_string(), subresource);
        response_body::parse(&answer.map_err(kube_error)?, r)
    }

    fn delete(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<(), KubeError> {
        let options = host::DeleteOptions {
            propagation: options.propagation.map(|p| match p {
                Propagation::Background => host::Propagation::Background,
                Propagation::Foreground => host::Propagation::Foreground,
                Propagation::Orphan => host::Propagation::Orphan,
            }),
            precondition_uid: options.precondition_uid.clone(),
            precondition_resource_version: options.precondition_resource_version.clone(),
            grace_period_seconds: options.grace_period_seconds,
        };
        host::delete(&resource(r), namespace, name, &options).map_err(kube_error)
    }

    fn list(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        options: &ListOptions,
    ) -> Result<Value, KubeError> {
        let options = host::ListOptions {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            limit: options.limit,
            continue_token: options.continue_token.clone(),
            resource_version: options.resource_version.clone(),
        };
        response_body::parse(&host::list(&resource(r), namespace, &options).map_err(kube_error)?, r)
    }

    fn watch(
        &self,
        r: &kube_api::ResourceType,
        namespace: Option<&str>,
        options: &WatchOptions,
    ) -> Result<HostWatch, KubeError> {
        let options = host::WatchOptions {
            label_selector: options.label_selector.clone(),
            field_selector: options.field_selector.clone(),
            resource_version: options.resource_version.clone(),
            timeout_seconds: options.timeout_seconds,
            allow_bookmarks: options.allow_bookmarks,
        };
        let watch = host::open_watch(&resource(r), namespace, &options).map_err(kube_error)?;
        Ok(HostWatch { watch, resource: r.clone() })
    }

    fn served_versions(&self, group: &str) -> Result<Vec<String>, KubeError> {
        host::served_versions(group).map_err(kube_error)
    }

    fn check_namespace(&self, namespace: &str) -> Result<(), String> {
        host::check_namespace(namespace)
    }

    fn exec(&self, namespace: &str, pod: &str, options: &ExecOptions) -> Result<ExecOutput, KubeError> {
        let options = host::ExecOptions {
            container: options.container.clone(),
            command: options.command.clone(),
            stdin: options.stdin.clone(),
            timeout_ms: u32::try_from(options.timeout.as_millis()).unwrap_or(u32::MAX),
            max_output_bytes: options.max_output_bytes,
        };
        let out = host::exec(namespace, pod, &options).map_err(kube_error)?;
        Ok(ExecOutput {
            exit_code: out.exit_code,
            timed_out: out.timed_out,
            stdout: out.stdout,
            stderr: out.stderr,
            stdout_truncated: out.stdout_truncated,
            stderr_truncated: out.stderr_truncated,
        })
    }
}

impl kube_api::Watch for HostWatch {
    fn next(&mut self, timeout: Duration) -> Result<Option<WatchEvent>, KubeError> {
        let timeout_ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let event = match self.watch.next(timeout_ms).map_err(kube_error)? {
            None => return Ok(None),
            Some(host::WatchEvent::Added(o)) => WatchEvent::Added(response_body::parse(&o, &self.resource)?),
            Some(host::WatchEvent::Modified(o)) => WatchEvent::Modified(response_body::parse(&o, &self.resource)?),
            Some(host::WatchEvent::Deleted(o)) => WatchEvent::Deleted(response_body::parse(&o, &self.resource)?),
            Some(host::WatchEvent::Bookmark(rv)) => WatchEvent::Bookmark(rv),
        };
        Ok(Some(event))
    }
}

impl Log for HostLog {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let level = match level {
            Level::Trace => host_log::Level::Trace,
            Level::Debug => host_log::Level::Debug,
            Level::Info => host_log::Level::Info,
            Level::Warn => host_log::Level::Warn,
            Level::Error => host_log::Level::Error,
        };
        let fields: Vec<host_log::Field> =
            fields.iter().map(|(k, v)| host_log::Field { key: k.to_string(), value: v.to_string() }).collect();
        host_log::emit(level, message, &fields);
    }
}

fn backend_to_wit(b: Backend) -> k8s::Backend {
    match b {
        Backend::Sandbox => k8s::Backend::Sandbox,
        Backend::Job => k8s::Backend::Job,
        Backend::Claim => k8s::Backend::Claim,
    }
}

fn lease_to_wit(l: Lease) -> wit::Lease {
    let NeutralLease { provider_lease_id, expires_at, reusable, metadata } = placement::neutral(l);
    wit::Lease { provider_lease_id, expires_at, reusable, metadata }
}

fn neutral(l: wit::Lease) -> NeutralLease {
    NeutralLease {
        provider_lease_id: l.provider_lease_id,
        expires_at: l.expires_at,
        reusable: l.reusable,
        metadata: l.metadata,
    }
}

fn lease_ref_from_wit(r: wit::LeaseRef) -> LeaseRef {
    LeaseRef { lease: placement::whole(neutral(r.lease)), config: r.config }
}

fn error_to_wit(e: ProviderError) -> wit::ProviderError {
    let detail = |d: crate::ErrorDetail| wit::ErrorDetail { message: d.message, retryable: d.retryable };
    match e {
        ProviderError::InvalidConfig(d) => {
            wit::ProviderError::InvalidConfig(wit::InvalidConfigDetail { path: d.path, message: d.message })
        }
        ProviderError::Forbidden(d) => wit::ProviderError::Forbidden(detail(d)),
        ProviderError::Denied(d) => wit::ProviderError::Denied(detail(d)),
        ProviderError::Conflict(d) => wit::ProviderError::Conflict(detail(d)),
        ProviderError::Capacity(d) => wit::ProviderError::Capacity(detail(d)),
        ProviderError::ImagePull(d) => wit::ProviderError::ImagePull(detail(d)),
        ProviderError::Rejected(d) => wit::ProviderError::Rejected(detail(d)),
        ProviderError::Timeout(d) => wit::ProviderError::Timeout(detail(d)),
        ProviderError::Unsupported(d) => wit::ProviderError::Unsupported(detail(d)),
        ProviderError::Unavailable(d) => wit::ProviderError::Unavailable(detail(d)),
        ProviderError::Internal(d) => wit::ProviderError::Internal(detail(d)),
    }
}

fn problems_to_wit(problems: Vec<crate::ConfigProblem>) -> Vec<wit::ConfigProblem> {
    problems.into_iter().map(|p| wit::ConfigProblem { path: p.path, message: p.message }).collect()
}

fn provider() -> Provider<HostKube, HostClock, HostLog> {
    Provider::new(HostKube, HostClock, HostLog)
}

fn verb_to_wit(v: AccessVerb) -> wit::AccessVerb {
    match v {
        AccessVerb::Get => wit::AccessVerb::Get,
        AccessVerb::Create => wit::AccessVerb::Create,
        AccessVerb::Patch => wit::AccessVerb::Patch,
        AccessVerb::Delete => wit::AccessVerb::Delete,
        AccessVerb::List => wit::AccessVerb::List,
        AccessVerb::Watch => wit::AccessVerb::Watch,
        AccessVerb::Discovery => wit::AccessVerb::Discovery,
        AccessVerb::Exec => wit::AccessVerb::Exec,
    }
}

/// The exported `provider` interface.
struct Component;

impl Guest for Component {
    fn describe() -> wit::ProviderInfo {
        let ProviderInfo { driver_key, display_name, version, config_schema, reusable_leases, backends: _, access } =
            provider().describe();
        wit::ProviderInfo {
            driver_key,
            display_name,
            version,
            config_schema,
            reusable_leases,
            access: access
                .into_iter()
                .map(|r| wit::AccessRule {
                    group: r.group,
                    versions: r.versions,
                    plural: r.plural,
                    verbs: r.verbs.into_iter().map(verb_to_wit).collect(),
                    subresources: r.subresources,
                    namespaced: r.namespaced,
                })
                .collect(),
        }
    }

    fn validate_config(config: String) -> wit::Validation {
        let Validation { ok, warnings, errors, normalized_config } = provider().validate_config(&config);
        wit::Validation { ok, warnings: problems_to_wit(warnings), errors: problems_to_wit(errors), normalized_config }
    }

    fn probe(config: String) -> wit::ProbeResult {
        let ProbeResult { ok, summary, diagnostics } = provider().probe(&config);
        let diagnostics = diagnostics
            .into_iter()
            .map(|d| wit::Diagnostic {
                severity: match d.severity {
                    Severity::Info => wit::Severity::Info,
                    Severity::Warning => wit::Severity::Warning,
                    Severity::Error => wit::Severity::Error,
                },
                code: d.code,
                message: d.message,
            })
            .collect();
        wit::ProbeResult { ok, summary, diagnostics }
    }

    fn acquire(request: wit::AcquireRequest) -> Result<wit::Lease, wit::ProviderError> {
        let request = AcquireRequest {
            config: request.config,
            run_id: request.run_id,
            acquisition_id: request.acquisition_id,
            agent_id: request.agent_id,
            requested_expires_at: request.requested_expires_at,
            env: request.env.into_iter().map(|e| EnvVar { name: e.name, value: e.value, secret: e.secret }).collect(),
            reusable: request.reusable,
        };
        provider().acquire(request).map(lease_to_wit).map_err(error_to_wit)
    }

    fn resume_check(lease: wit::LeaseRef) -> Result<wit::ResumeOutcome, wit::ProviderError> {
        match provider().resume_check(lease_ref_from_wit(lease)).map_err(error_to_wit)? {
            ResumeOutcome::Resumable(l) => Ok(wit::ResumeOutcome::Resumable(lease_to_wit(l))),
            ResumeOutcome::Expired(reason) => Ok(wit::ResumeOutcome::Expired(reason)),
        }
    }

    fn renew(lease: wit::LeaseRef, expires_at: i64) -> Result<wit::ResumeOutcome, wit::ProviderError> {
        match provider().renew(lease_ref_from_wit(lease), expires_at).map_err(error_to_wit)? {
            ResumeOutcome::Resumable(l) => Ok(wit::ResumeOutcome::Resumable(lease_to_wit(l))),
            ResumeOutcome::Expired(reason) => Ok(wit::ResumeOutcome::Expired(reason)),
        }
    }

    fn release(lease: wit::LeaseRef) -> Result<(), wit::ProviderError> {
        provider().release(lease_ref_from_wit(lease)).map_err(error_to_wit)
    }

    fn destroy(lease: wit::LeaseRef) -> Result<wit::DestroyReport, wit::ProviderError> {
        let DestroyReport { objects } = provider().destroy(lease_ref_from_wit(lease)).map_err(error_to_wit)?;
        let objects = objects
            .into_iter()
            .map(|o| wit::ObjectReport {
                kind: o.kind,
                name: o.name,
                outcome: match o.outcome {
                    DeleteOutcome::Deleted => wit::DeleteOutcome::Deleted,
                    DeleteOutcome::AlreadyGone => wit::DeleteOutcome::AlreadyGone,
                    DeleteOutcome::Failed(why) => wit::DeleteOutcome::Failed(why),
                },
            })
            .collect();
        Ok(wit::DestroyReport { objects })
    }

    fn execute(lease: wit::LeaseRef, request: wit::ExecRequest) -> Result<wit::ExecResult, wit::ProviderError> {
        let request = ExecRequest {
            command: request.command,
            args: request.args,
            cwd: request.cwd,
            env: request.env.into_iter().map(|e| EnvVar { name: e.name, value: e.value, secret: e.secret }).collect(),
            stdin: request.stdin,
            timeout_ms: request.timeout_ms,
        };
        let ExecResult { exit_code, signal, timed_out, stdout, stderr, stdout_truncated, stderr_truncated } =
            provider().execute(lease_ref_from_wit(lease), request).map_err(error_to_wit)?;
        Ok(wit::ExecResult { exit_code, signal, timed_out, stdout, stderr, stdout_truncated, stderr_truncated })
    }
}

impl k8s::Guest for Component {
    fn backends() -> Vec<k8s::Backend> {
        provider().describe().backends.into_iter().map(backend_to_wit).collect()
    }

    fn placement_of(lease: wit::Lease) -> Option<k8s::Placement> {
        let Placement { backend, namespace, api_version, workload_uid, pod_name, pod_uid, pod_ip, sandbox } =
            placement::placement(&neutral(lease))?;
        Some(k8s::Placement {
            backend: backend_to_wit(backend),
            namespace,
            api_version,
            workload_uid,
            sandbox: sandbox.map(|s| k8s::ClaimedSandbox {
                api_version: s.api_version,
                name: s.name,
                uid: s.uid,
                warm: s.warm,
            }),
            pod_name,
            pod_uid,
            pod_ip,
        })
    }
}

export!(Component);
