//! Per-version glue: each released contract version's generated host traits, implemented over
//! the one host implementation ([`crate::kube_host::KubeHost`], the `log` router, the call's
//! deadline), and the version's exports (declared with [`exports!`], each type-checked when a
//! call runs it) called and converted to the contract's serde types.
//!
//! A new contract version adds a module here, with its `exports!`, and a variant to [`Bound`]
//! and [`BoundPre`]; old ones stay as they are, so a component built against them keeps loading.

mod exports;
pub(crate) mod since_v0_1_0;
pub(crate) mod since_v0_2_0;
pub(crate) mod since_v0_3_0;
pub(crate) mod since_v0_4_0;

use wasmtime::Store;
use wasmtime::component::{Component, InstancePre};

use crate::records::{Backend, ClaimedSandbox, Lease, ProviderError};
use crate::state::CallState;

pub(crate) use exports::exports;

/// A linked component, bound to the contract version it was built against: its `InstancePre`
/// and where that version's exports are in it.
pub(crate) enum BoundPre {
    SinceV0_1_0(InstancePre<CallState>, since_v0_1_0::ExportIndices),
    SinceV0_2_0(InstancePre<CallState>, since_v0_2_0::ExportIndices),
    SinceV0_3_0(InstancePre<CallState>, since_v0_3_0::ExportIndices),
    SinceV0_4_0(InstancePre<CallState>, since_v0_4_0::ExportIndices),
}

/// An instantiated component of one call.
pub(crate) enum Bound {
    SinceV0_1_0(since_v0_1_0::Exports),
    SinceV0_2_0(since_v0_2_0::Exports),
    SinceV0_3_0(since_v0_3_0::Exports),
    SinceV0_4_0(since_v0_4_0::Exports),
}

impl BoundPre {
    /// Binds a pre-instantiated component to the newest contract version whose exports it has
    /// (by name: [`Self::check`] checks their types).
    pub(crate) fn new(pre: InstancePre<CallState>) -> Result<Self, String> {
        let component: &Component = pre.component();
        let as_0_4 = match since_v0_4_0::ExportIndices::new(component) {
            Ok(indices) => return Ok(Self::SinceV0_4_0(pre, indices)),
            Err(e) => e,
        };
        let as_0_3 = match since_v0_3_0::ExportIndices::new(component) {
            Ok(indices) => return Ok(Self::SinceV0_3_0(pre, indices)),
            Err(e) => e,
        };
        let as_0_2 = match since_v0_2_0::ExportIndices::new(component) {
            Ok(indices) => return Ok(Self::SinceV0_2_0(pre, indices)),
            Err(e) => e,
        };
        match since_v0_1_0::ExportIndices::new(component) {
            Ok(indices) => Ok(Self::SinceV0_1_0(pre, indices)),
            Err(as_0_1) => Err(format!(
                "not contract 0.4.0 ({as_0_4:?}), 0.3.0 ({as_0_3:?}), 0.2.0 ({as_0_2:?}) nor 0.1.0 ({as_0_1:?})"
            )),
        }
    }

    /// The contract version, for reports.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Self::SinceV0_1_0(..) => "0.1.0",
            Self::SinceV0_2_0(..) => "0.2.0",
            Self::SinceV0_3_0(..) => "0.3.0",
            Self::SinceV0_4_0(..) => "0.4.0",
        }
    }

    /// The engine the component was compiled with.
    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        self.instance_pre().engine()
    }

    fn instance_pre(&self) -> &InstancePre<CallState> {
        match self {
            Self::SinceV0_1_0(pre, _)
            | Self::SinceV0_2_0(pre, _)
            | Self::SinceV0_3_0(pre, _)
            | Self::SinceV0_4_0(pre, _) => pre,
        }
    }

    /// A fresh instance in `store`, its exports not yet type-checked (each is when called).
    pub(crate) async fn instantiate(&self, store: &mut Store<CallState>) -> wasmtime::Result<Bound> {
        let instance = self.instance_pre().instantiate_async(&mut *store).await?;
        Ok(match self {
            Self::SinceV0_1_0(_, indices) => Bound::SinceV0_1_0(indices.bind(instance)),
            Self::SinceV0_2_0(_, indices) => Bound::SinceV0_2_0(indices.bind(instance)),
            Self::SinceV0_3_0(_, indices) => Bound::SinceV0_3_0(indices.bind(instance)),
            Self::SinceV0_4_0(_, indices) => Bound::SinceV0_4_0(indices.bind(instance)),
        })
    }

    /// Type-checks every export of an instance in `store`, once per component, when it is
    /// loaded (calls check only the export they run). `Ok(Err)` is a component whose exports
    /// do not have its version's types.
    pub(crate) async fn check(&self, store: &mut Store<CallState>) -> wasmtime::Result<Result<(), String>> {
        let checked = match self.instantiate(&mut *store).await? {
            Bound::SinceV0_1_0(exports) => exports.check(&mut *store),
            Bound::SinceV0_2_0(exports) => exports.check(&mut *store),
            Bound::SinceV0_3_0(exports) => exports.check(&mut *store),
            Bound::SinceV0_4_0(exports) => exports.check(&mut *store),
        };
        Ok(checked.map_err(|e| format!("not contract {}: {e}", self.version())))
    }
}

/// Runs the same export call on whichever version is bound: `$guest` is that version's
/// `provider` interface, and `.into()` conversions resolve to that version's types. The second
/// form gives the versions with a neutral lease (0.3.0 on) their own expression, for calls whose
/// results it converts with a further call (a lease's placement): `$world` is the instance and
/// `$glue` that version's module here (`glue::lease`).
macro_rules! on_each_version {
    ($bound:expr, $guest:ident => $call:expr) => {
        $crate::versions::on_each_version!($bound, $guest => $call, neutral world, _glue => {
            let $guest = world.provider();
            $call
        })
    };
    ($bound:expr, $guest:ident => $call:expr, neutral $world:ident, $glue:ident => $neutral:expr) => {
        match $bound {
            $crate::versions::Bound::SinceV0_1_0(world) => {
                let $guest = world.provider();
                $call
            }
            $crate::versions::Bound::SinceV0_2_0(world) => {
                let $guest = world.provider();
                $call
            }
            $crate::versions::Bound::SinceV0_3_0($world) => {
                #[allow(unused_imports)]
                use $crate::versions::since_v0_3_0 as $glue;
                $neutral
            }
            $crate::versions::Bound::SinceV0_4_0($world) => {
                #[allow(unused_imports)]
                use $crate::versions::since_v0_4_0 as $glue;
                $neutral
            }
        }
    };
}
pub(crate) use on_each_version;

/// The `log` and `kube` imports of a version older than the host's own types: its records
/// converted to the current ones (an older version only lacks cases and functions, so each of
/// its values has one). Expanded where `kube` and `log` name that version's interfaces,
/// `current` the host's `kube`, and `old_error` turns a current error into the version's;
/// `$extra` are the version's `kube` functions beyond 0.1.0's.
macro_rules! older_kube {
    ({ $($extra:tt)* }) => {
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

        impl log::Host for CallState {
            async fn emit(&mut self, level: log::Level, message: String, fields: Vec<log::Field>) -> wasmtime::Result<()> {
                let level = match level {
                    log::Level::Trace => crate::bindings::log::Level::Trace,
                    log::Level::Debug => crate::bindings::log::Level::Debug,
                    log::Level::Info => crate::bindings::log::Level::Info,
                    log::Level::Warn => crate::bindings::log::Level::Warn,
                    log::Level::Error => crate::bindings::log::Level::Error,
                };
                let fields: Vec<crate::bindings::log::Field> =
                    fields.into_iter().map(|f| crate::bindings::log::Field { key: f.key, value: f.value }).collect();
                crate::log_host::emit(self.call, level, &message, &fields);
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
            ) -> wasmtime::Result<Result<wasmtime::component::Resource<crate::kube_watch::WatchStream>, kube::KubeError>> {
                Ok(self.open_watch(resource(rt), namespace, watch_options(options)).await?.map_err(old_error))
            }

            async fn served_versions(&mut self, group: String) -> wasmtime::Result<Result<Vec<String>, kube::KubeError>> {
                Ok(self.kube.served_versions(&group).await.map_err(old_error))
            }

            $($extra)*
        }

        impl kube::HostWatch for CallState {
            async fn next(
                &mut self,
                watch: wasmtime::component::Resource<crate::kube_watch::WatchStream>,
                timeout_ms: u32,
            ) -> wasmtime::Result<Result<Option<kube::WatchEvent>, kube::KubeError>> {
                let next = self.next_event(watch, std::time::Duration::from_millis(u64::from(timeout_ms))).await?;
                Ok(next.map(|event| event.map(old_event)).map_err(old_error))
            }

            async fn drop(&mut self, watch: wasmtime::component::Resource<crate::kube_watch::WatchStream>) -> wasmtime::Result<()> {
                self.close_watch(watch)
            }
        }
    };
}
pub(crate) use older_kube;

/// A lease's placement as a version with a neutral lease reports it, in the host's terms.
pub(crate) struct Placed {
    pub(crate) backend: Backend,
    pub(crate) namespace: String,
    pub(crate) api_version: String,
    pub(crate) workload_uid: String,
    pub(crate) pod_name: Option<String>,
    pub(crate) pod_uid: Option<String>,
    pub(crate) pod_ip: Option<String>,
    pub(crate) sandbox: Option<ClaimedSandbox>,
}

/// The lease a host stores: the neutral lease with the placement the provider reported for it.
/// A lease without one cannot be shown, checked or cleaned up by the host: the provider's error.
pub(crate) fn placed_lease(
    provider_lease_id: String,
    expires_at: Option<i64>,
    reusable: bool,
    metadata: String,
    placed: Option<Placed>,
) -> Result<Lease, ProviderError> {
    let Some(p) = placed else {
        return Err(ProviderError::internal(format!(
            "the provider returned lease {} without saying where it runs (kubernetes.placement-of gave none); \
             this is a bug in the provider",
            contract::quote(&provider_lease_id)
        )));
    };
    Ok(Lease {
        provider_lease_id,
        backend: p.backend,
        namespace: p.namespace,
        api_version: p.api_version,
        workload_uid: p.workload_uid,
        pod_name: p.pod_name,
        pod_uid: p.pod_uid,
        pod_ip: p.pod_ip,
        claimed_sandbox: p.sandbox,
        expires_at,
        reusable,
        metadata,
    })
}

/// The calls of a version with a neutral lease that read its `kubernetes` export: the
/// description with its backends, and a lease (or resume outcome) with its placement. Expanded
/// where `Exports`, `wit`, `backend` and `placed` name that version's.
macro_rules! neutral_lease_glue {
    () => {
        /// The provider's description, with the backends its `kubernetes` export names.
        pub(crate) async fn describe(world: &Exports, store: &mut Store<CallState>) -> wasmtime::Result<ProviderInfo> {
            let i = world.provider().call_describe(&mut *store).await?;
            let backends = world.kubernetes().call_backends(&mut *store).await?;
            Ok(ProviderInfo {
                driver_key: i.driver_key,
                display_name: i.display_name,
                version: i.version,
                config_schema: i.config_schema,
                reusable_leases: i.reusable_leases,
                backends: backends.into_iter().map(backend).collect(),
                access: i.access.into_iter().map(Into::into).collect(),
            })
        }

        /// A lease the provider returned, with the placement it reports for it (asked in the
        /// same instance as the export that returned the lease).
        pub(crate) async fn lease(
            world: &Exports,
            store: &mut Store<CallState>,
            l: wit::Lease,
        ) -> wasmtime::Result<Result<Lease, ProviderError>> {
            let placement = world.kubernetes().call_placement_of(&mut *store, &l).await?;
            Ok($crate::versions::placed_lease(
                l.provider_lease_id,
                l.expires_at,
                l.reusable,
                l.metadata,
                placement.map(placed),
            ))
        }

        /// A `resume-outcome` with its lease's placement.
        pub(crate) async fn outcome(
            world: &Exports,
            store: &mut Store<CallState>,
            o: wit::ResumeOutcome,
        ) -> wasmtime::Result<Result<ResumeOutcome, ProviderError>> {
            Ok(match o {
                wit::ResumeOutcome::Resumable(l) => lease(world, store, l).await?.map(ResumeOutcome::Resumable),
                wit::ResumeOutcome::Expired(reason) => Ok(ResumeOutcome::Expired(reason)),
            })
        }
    };
}
pub(crate) use neutral_lease_glue;

/// `old_error` for a version whose `kube-error` has every current case (0.2.0 on): the same
/// case, field for field. Expanded where `kube` names the version's and `current` the host's.
macro_rules! same_kube_errors {
    () => {
        /// A current error as this version names it: the same cases.
        fn old_error(error: current::KubeError) -> kube::KubeError {
            use current::KubeError as E;
            match error {
                E::NotFound(m) => kube::KubeError::NotFound(m),
                E::AlreadyExists(m) => kube::KubeError::AlreadyExists(m),
                E::Conflict(m) => kube::KubeError::Conflict(m),
                E::Gone(m) => kube::KubeError::Gone(m),
                E::Invalid(m) => kube::KubeError::Invalid(m),
                E::Forbidden(m) => kube::KubeError::Forbidden(m),
                E::Denied(m) => kube::KubeError::Denied(m),
                E::NotOwned(m) => kube::KubeError::NotOwned(m),
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
    };
}
pub(crate) use same_kube_errors;
