//! Per-version glue: each released contract version's generated host traits, implemented over
//! the one host implementation ([`crate::kube_host::KubeHost`], the `log` router, the call's
//! deadline), and the version's exports called and converted to the contract's serde types.
//!
//! A new contract version adds a module here and a variant to [`Bound`]; old ones stay as they
//! are, so a component built against them keeps loading.

pub(crate) mod v0_1;
pub(crate) mod v0_2;

use crate::bindings::{v0_1_0, v0_2_0};
use crate::state::CallState;

/// A linked component, bound to the contract version it was built against.
pub(crate) enum BoundPre {
    V0_1(v0_1_0::KubernetesProviderPre<CallState>),
    V0_2(v0_2_0::KubernetesProviderPre<CallState>),
}

/// An instantiated component of one call.
pub(crate) enum Bound {
    V0_1(v0_1_0::KubernetesProvider),
    V0_2(v0_2_0::KubernetesProvider),
}

impl BoundPre {
    /// Binds a pre-instantiated component to the newest contract version it exports.
    pub(crate) fn new(pre: wasmtime::component::InstancePre<CallState>) -> Result<Self, String> {
        match v0_2_0::KubernetesProviderPre::new(pre.clone()) {
            Ok(bound) => Ok(Self::V0_2(bound)),
            Err(newest) => v0_1_0::KubernetesProviderPre::new(pre)
                .map(Self::V0_1)
                .map_err(|oldest| format!("not contract 0.2.0 ({newest:?}) nor 0.1.0 ({oldest:?})")),
        }
    }

    /// The contract version, for reports.
    pub(crate) fn version(&self) -> &'static str {
        match self {
            Self::V0_1(_) => "0.1.0",
            Self::V0_2(_) => "0.2.0",
        }
    }

    /// The engine the component was compiled with.
    pub(crate) fn engine(&self) -> &wasmtime::Engine {
        match self {
            Self::V0_1(pre) => pre.engine(),
            Self::V0_2(pre) => pre.engine(),
        }
    }

    /// A fresh instance in `store`.
    pub(crate) async fn instantiate(&self, store: &mut wasmtime::Store<CallState>) -> wasmtime::Result<Bound> {
        Ok(match self {
            Self::V0_1(pre) => Bound::V0_1(pre.instantiate_async(store).await?),
            Self::V0_2(pre) => Bound::V0_2(pre.instantiate_async(store).await?),
        })
    }
}

/// Runs the same export call on whichever version is bound: `$guest` is that version's
/// `provider` interface, and `.into()` conversions resolve to that version's types.
macro_rules! on_each_version {
    ($bound:expr, $guest:ident => $call:expr) => {
        match $bound {
            $crate::versions::Bound::V0_1(world) => {
                let $guest = world.paperclip_sandbox_provider_provider();
                $call
            }
            $crate::versions::Bound::V0_2(world) => {
                let $guest = world.paperclip_sandbox_provider_provider();
                $call
            }
        }
    };
}
pub(crate) use on_each_version;
