//! A version's exports, each type-checked when a call runs it rather than all of them on every
//! instance.
//!
//! wasmtime's generated bindings bind a fresh instance with their `load`, which looks up and
//! type-checks every export of the world (`Instance::get_typed_func` on each, comparing record
//! field names and variant cases one by one), though the `InstancePre` always holds the same
//! component. A call runs one export (two with a neutral lease's `placement-of`), and those
//! checks were the largest part of an instance's cost: measured with `perf` on the provider,
//! about 38 % of an instantiation, the rest being wasmtime's own instance set-up.
//!
//! So [`exports!`] declares, per version, each export with the Rust types its generated
//! bindings give it, and makes:
//! - `ExportIndices`, found by name once per component (`Component::get_export_index`); a
//!   component without one of them is not of that version;
//! - `Exports`, an instance with those indices, whose `call_*` methods mirror the generated
//!   ones: each looks up its own function and type-checks it (`Instance::get_typed_func`, no
//!   `unsafe`), then calls it as the generated code does.
//!
//! Every export is still type-checked once, when the component is loaded
//! ([`crate::versions::BoundPre::check`]), so a component whose exports do not have the
//! version's types fails to load, naming the export, instead of at the call that runs it.

/// Declares a version's export interfaces (see the module docs). Each interface is
/// `accessor: Struct = "package/interface@version" { getter / call_getter("export-name")(args) -> result; }`,
/// with the argument and result types of the version's generated bindings.
macro_rules! exports {
    ($(
        $iface:ident: $Iface:ident = $iface_name:literal {
            $( $func:ident / $call:ident($export:literal)($($arg:ident: $ty:ty),*) -> $ret:ty; )*
        }
    )*) => {
        /// Where each of this version's exports is in one component: found once, by name.
        #[derive(Clone, Copy)]
        pub(crate) struct ExportIndices {
            $( $iface: $Iface, )*
        }

        impl ExportIndices {
            /// The component's exports of this version; an error names the first one missing.
            pub(crate) fn new(component: &wasmtime::component::Component) -> wasmtime::Result<Self> {
                Ok(Self { $( $iface: $Iface::new(component)?, )* })
            }

            /// This version's exports in `instance`, an instance of the same component.
            pub(crate) fn bind(self, instance: wasmtime::component::Instance) -> Exports {
                Exports { instance, indices: self }
            }
        }

        /// An instance's exports of this version, each type-checked when called.
        pub(crate) struct Exports {
            instance: wasmtime::component::Instance,
            indices: ExportIndices,
        }

        impl Exports {
            /// Type-checks every export, as a call would the one it runs: `Err` says which
            /// export does not have this version's types, and how.
            pub(crate) fn check(&self, mut store: impl wasmtime::AsContextMut) -> Result<(), String> {
                $($(
                    self.$iface().$func(&mut store).map_err(|e| {
                        format!("export `{}` of `{}`: {e:#}", $export, $iface_name)
                    })?;
                )*)*
                Ok(())
            }

            $(
                #[doc = concat!("The `", $iface_name, "` export.")]
                pub(crate) fn $iface(&self) -> InstanceOf<'_, $Iface> {
                    InstanceOf { instance: self.instance, indices: &self.indices.$iface }
                }
            )*
        }

        /// One exported interface of an instance.
        pub(crate) struct InstanceOf<'a, I> {
            instance: wasmtime::component::Instance,
            indices: &'a I,
        }

        $(
            #[doc = concat!("Where the functions of `", $iface_name, "` are in one component.")]
            #[derive(Clone, Copy)]
            pub(crate) struct $Iface {
                $( $func: wasmtime::component::ComponentExportIndex, )*
            }

            impl $Iface {
                fn new(component: &wasmtime::component::Component) -> wasmtime::Result<Self> {
                    let instance = component
                        .get_export_index(None, $iface_name)
                        .ok_or_else(|| wasmtime::format_err!("no exported instance named `{}`", $iface_name))?;
                    let lookup = |name: &str| {
                        component.get_export_index(Some(&instance), name).ok_or_else(|| {
                            wasmtime::format_err!("instance export `{}` does not have export `{name}`", $iface_name)
                        })
                    };
                    Ok(Self { $( $func: lookup($export)?, )* })
                }
            }

            impl InstanceOf<'_, $Iface> {
                $(
                    #[doc = concat!("The `", $export, "` function, type-checked now.")]
                    pub(crate) fn $func<S: wasmtime::AsContextMut>(
                        &self,
                        store: S,
                    ) -> wasmtime::Result<wasmtime::component::TypedFunc<($($ty,)*), ($ret,)>> {
                        self.instance.get_typed_func(store, &self.indices.$func)
                    }

                    #[doc = concat!("Calls `", $export, "`.")]
                    pub(crate) async fn $call<S: wasmtime::AsContextMut>(
                        &self,
                        mut store: S,
                        $($arg: $ty),*
                    ) -> wasmtime::Result<$ret>
                    where
                        <S as wasmtime::AsContext>::Data: Send,
                    {
                        let (ret,) = self.$func(&mut store)?.call_async(&mut store, ($($arg,)*)).await?;
                        Ok(ret)
                    }
                )*
            }
        )*
    };
}
pub(crate) use exports;
