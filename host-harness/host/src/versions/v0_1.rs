//! Contract 0.1.0 (frozen): the same host implementation behind the old interfaces. What 0.2.0
//! added is absent here (no deadline import, no `check-namespace`), and its new cases are
//! folded into the nearest old ones: a host refusal (`denied`, `not-owned`) reads as
//! `forbidden`, as it did in 0.1.0; a provider of 0.1.0 declares no access.

use std::time::Duration;

use wasmtime::component::Resource;

use crate::bindings::v0_1_0::paperclip::sandbox_provider::{kube, log, types as wit};
use crate::bindings::{kube as current, log as current_log};
use crate::kube_watch::WatchStream;
use crate::log_host;
use crate::records::{
    AcquireRequest, Backend, ConfigProblem, DeleteOutcome, DestroyReport, Diagnostic, EnvVar, ErrorDetail,
    InvalidConfigDetail, Lease, LeaseRef, ObjectReport, ProbeResult, ProviderError, ProviderInfo, ResumeOutcome,
    Severity, Validation, provider_errors, shared_records,
};
use crate::state::CallState;

shared_records!();

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

fn resource(r: kube::ResourceType) -> current::ResourceType {
    current::ResourceType { group: r.group, version: r.version, plural: r.plural }
}

fn patch_type(t: kube::PatchType) -> current::PatchType {
    match t {
        kube::PatchType::Merge => current::PatchType::Merge,
        kube::PatchType::Json => current::PatchType::Json,
        kube::PatchType::Strategic => current::PatchType::Strategic,
    }
}

fn delete_options(o: kube::DeleteOptions) -> current::DeleteOptions {
    current::DeleteOptions {
        propagation: o.propagation.map(|p| match p {
            kube::Propagation::Background => current::Propagation::Background,
            kube::Propagation::Foreground => current::Propagation::Foreground,
            kube::Propagation::Orphan => current::Propagation::Orphan,
        }),
        precondition_uid: o.precondition_uid,
        precondition_resource_version: o.precondition_resource_version,
        grace_period_seconds: o.grace_period_seconds,
    }
}

fn list_options(o: kube::ListOptions) -> current::ListOptions {
    current::ListOptions {
        label_selector: o.label_selector,
        field_selector: o.field_selector,
        limit: o.limit,
        continue_token: o.continue_token,
        resource_version: o.resource_version,
    }
}

fn watch_options(o: kube::WatchOptions) -> current::WatchOptions {
    current::WatchOptions {
        label_selector: o.label_selector,
        field_selector: o.field_selector,
        resource_version: o.resource_version,
        timeout_seconds: o.timeout_seconds,
        allow_bookmarks: o.allow_bookmarks,
    }
}

fn old_event(e: current::WatchEvent) -> kube::WatchEvent {
    match e {
        current::WatchEvent::Added(o) => kube::WatchEvent::Added(o),
        current::WatchEvent::Modified(o) => kube::WatchEvent::Modified(o),
        current::WatchEvent::Deleted(o) => kube::WatchEvent::Deleted(o),
        current::WatchEvent::Bookmark(rv) => kube::WatchEvent::Bookmark(rv),
    }
}

impl wit::Host for CallState {}

impl log::Host for CallState {
    async fn emit(&mut self, level: log::Level, message: String, fields: Vec<log::Field>) -> wasmtime::Result<()> {
        let level = match level {
            log::Level::Trace => current_log::Level::Trace,
            log::Level::Debug => current_log::Level::Debug,
            log::Level::Info => current_log::Level::Info,
            log::Level::Warn => current_log::Level::Warn,
            log::Level::Error => current_log::Level::Error,
        };
        let fields: Vec<current_log::Field> =
            fields.into_iter().map(|f| current_log::Field { key: f.key, value: f.value }).collect();
        log_host::emit(self.call, level, &message, &fields);
        Ok(())
    }
}

impl kube::Host for CallState {
    async fn get(
        &mut self,
        rt: kube::ResourceType,
        namespace: Option<String>,
        name: String,
    ) -> wasmtime::Result<Result<String, kube::KubeError>> {
        Ok(self.kube.get(&resource(rt), namespace.as_deref(), &name).await.map_err(old_error))
    }

    async fn create(
        &mut self,
        rt: kube::ResourceType,
        namespace: Option<String>,
        body: String,
    ) -> wasmtime::Result<Result<String, kube::KubeError>> {
        Ok(self.kube.create(&resource(rt), namespace.as_deref(), &body).await.map_err(old_error))
    }

    async fn patch(
        &mut self,
        rt: kube::ResourceType,
        namespace: Option<String>,
        name: String,
        kind: kube::PatchType,
        body: String,
        subresource: Option<String>,
    ) -> wasmtime::Result<Result<String, kube::KubeError>> {
        let rt = resource(rt);
        let result = self.kube.patch(&rt, namespace.as_deref(), &name, patch_type(kind), &body, subresource.as_deref());
        Ok(result.await.map_err(old_error))
    }

    async fn delete(
        &mut self,
        rt: kube::ResourceType,
        namespace: Option<String>,
        name: String,
        options: kube::DeleteOptions,
    ) -> wasmtime::Result<Result<(), kube::KubeError>> {
        let options = delete_options(options);
        Ok(self.kube.delete(&resource(rt), namespace.as_deref(), &name, &options).await.map_err(old_error))
    }

    async fn list(
        &mut self,
        rt: kube::ResourceType,
        namespace: Option<String>,
        options: kube::ListOptions,
    ) -> wasmtime::Result<Result<String, kube::KubeError>> {
        let options = list_options(options);
        Ok(self.kube.list(&resource(rt), namespace.as_deref(), &options).await.map_err(old_error))
    }

    async fn open_watch(
        &mut self,
        rt: kube::ResourceType,
        namespace: Option<String>,
        options: kube::WatchOptions,
    ) -> wasmtime::Result<Result<Resource<WatchStream>, kube::KubeError>> {
        Ok(self.open_watch(resource(rt), namespace, watch_options(options)).await?.map_err(old_error))
    }

    async fn served_versions(&mut self, group: String) -> wasmtime::Result<Result<Vec<String>, kube::KubeError>> {
        Ok(self.kube.served_versions(&group).await.map_err(old_error))
    }
}

impl kube::HostWatch for CallState {
    async fn next(
        &mut self,
        watch: Resource<WatchStream>,
        timeout_ms: u32,
    ) -> wasmtime::Result<Result<Option<kube::WatchEvent>, kube::KubeError>> {
        let next = self.next_event(watch, Duration::from_millis(u64::from(timeout_ms))).await?;
        Ok(next.map(|event| event.map(old_event)).map_err(old_error))
    }

    async fn drop(&mut self, watch: Resource<WatchStream>) -> wasmtime::Result<()> {
        self.close_watch(watch)
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
