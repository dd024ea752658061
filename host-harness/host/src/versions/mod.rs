//! Per-version glue: each released contract version's generated host traits, implemented over
//! the one host implementation ([`crate::kube_host::KubeHost`], the `log` router, the call's
//! deadline), and the version's exports called and converted to the contract's serde types.
//!
//! A new contract version adds a module here and a variant to [`Bound`]; old ones stay as they
//! are, so a component built against them keeps loading.

pub(crate) mod v0_1;
pub(crate) mod v0_2;
pub(crate) mod v0_3;

use crate::bindings::{v0_1_0, v0_2_0, v0_3_0};
use crate::state::CallState;

/// A linked component, bound to the contract version it was built against.
pub(crate) enum BoundPre {
    V0_1(v0_1_0::KubernetesProviderPre<CallState>),
    V0_2(v0_2_0::KubernetesProviderPre<CallState>),
    V0_3(v0_3_0::KubernetesProviderPre<CallState>),
}

/// An instantiated component of one call.
pub(crate) enum Bound {
    V0_1(v0_1_0::KubernetesProvider),
    V0_2(v0_2_0::KubernetesProvider),
    V0_3(v0_3_0::KubernetesProvider),
}

impl BoundPre {
    /// Binds a pre-instantiated component to the newest contract version it exports.
    pub(crate) fn new(pre: wasmtime::component::InstancePre<CallState>) -> Result<Self, String> {
        let newest = match v0_3_0::KubernetesProviderPre::new(pre.clone()) {
            Ok(bound) => return Ok(Self::V0_3(bound)),
            Err(e) => e,
        };
        let middle = match v0_2_0::KubernetesProviderPre::new(pre.clone()) {
            Ok(bound) => return Ok(Self::V0_2(bound)),
            Err(e) => e,
        };
        v0_1_0::KubernetesProviderPre::new(pre)
            .map(Self::V0_1)
            .map_err(|oldest| format!("not contract 0.3.0 ({newest:?}), 0.2.0 ({middle:?}) nor 0.1.0 ({oldest:?})"))
    }

    /// The contract version, for reports.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Self::V0_1(_) => "0.1.0",
            Self::V0_2(_) => "0.2.0",
            Self::V0_3(_) => "0.3.0",
        }
    }

    /// The engine the component was compiled with.
    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        match self {
            Self::V0_1(pre) => pre.engine(),
            Self::V0_2(pre) => pre.engine(),
            Self::V0_3(pre) => pre.engine(),
        }
    }

    /// A fresh instance in `store`.
    pub(crate) async fn instantiate(&self, store: &mut wasmtime::Store<CallState>) -> wasmtime::Result<Bound> {
        Ok(match self {
            Self::V0_1(pre) => Bound::V0_1(pre.instantiate_async(store).await?),
            Self::V0_2(pre) => Bound::V0_2(pre.instantiate_async(store).await?),
            Self::V0_3(pre) => Bound::V0_3(pre.instantiate_async(store).await?),
        })
    }
}

/// Runs the same export call on whichever version is bound: `$guest` is that version's
/// `provider` interface, and `.into()` conversions resolve to that version's types. The second
/// form gives the newest version its own expression (`$world` is its instance), for calls
/// whose results it converts with a further call (a lease's placement).
macro_rules! on_each_version {
    ($bound:expr, $guest:ident => $call:expr) => {
        $crate::versions::on_each_version!($bound, $guest => $call, newest world => {
            let $guest = world.paperclip_sandbox_provider_provider();
            $call
        })
    };
    ($bound:expr, $guest:ident => $call:expr, newest $world:ident => $newest:expr) => {
        match $bound {
            $crate::versions::Bound::V0_1(world) => {
                let $guest = world.paperclip_sandbox_provider_provider();
                $call
            }
            $crate::versions::Bound::V0_2(world) => {
                let $guest = world.paperclip_sandbox_provider_provider();
                $call
            }
            $crate::versions::Bound::V0_3($world) => $newest,
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
