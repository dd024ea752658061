//! The wasmtime host of sandbox-provider components.
//!
//! A [`ProviderHost`] loads a component of the `kubernetes-provider` world (any released
//! contract version, `versions/`) once (compiled, or precompiled from an on-disk cache) and
//! runs each lifecycle call on a fresh instance with a memory cap and a deadline. The host is
//! the security boundary: the component's `kube` import is served by [`KubeHost`] through
//! `kube::Client`, checked against the intersection of the operator's [`Policy`] and what the
//! component declares ([`capabilities`]), and against ownership ([`ownership`], signed with
//! the operator's key when there is one: [`owner_signature`]); its `log` import goes into
//! `tracing` (target `provider`); its WASI is empty apart from clocks and random. [`rbac`]
//! turns the effective policy into a least-privilege Role, [`network_policy`]
//! into the NetworkPolicy that isolates the sandboxes.
//!
//! ```no_run
//! # async fn run(client: kube::Client) -> Result<(), provider_host::HostError> {
//! use provider_host::{ComponentSource, HostOptions, Policy, ProviderHost};
//! let options = HostOptions { policy: Policy::kubernetes_default(["agents"]), ..Default::default() };
//! let host = ProviderHost::load(ComponentSource::File("provider.wasm".into()), client, options).await?;
//! println!("{}", host.describe().await?.driver_key);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

#[allow(missing_docs)]
pub mod bindings;
pub mod call_time;
pub mod capabilities;
pub mod compile_cache;
mod config_fields;
pub mod created_objects;
pub mod discovery_cache;
pub mod engine;
pub mod error;
pub mod inventory;
mod kube_client;
mod kube_errors;
mod kube_exec;
pub mod kube_host;
mod kube_transport;
mod kube_url;
pub mod kube_watch;
pub mod kubeconfig;
pub mod lease_scope;
pub mod limits;
mod log_host;
pub mod metrics;
pub mod network_policy;
pub mod owner_signature;
pub mod ownership;
pub mod pod_security_ceiling;
mod pod_watch;
pub mod policy;
mod proven_pods;
pub mod rbac;
pub mod records;
pub mod runner;
pub mod serve;
mod state;
mod versions;
pub mod warm_pool_ceiling;
mod wasi;
pub mod write_access;
mod write_guard;

pub use capabilities::Grants;
pub use compile_cache::CacheOutcome;
pub use engine::HostEngine;
pub use error::HostError;
pub use kube_client::client_from_config;
pub use kube_host::KubeHost;
pub use kube_watch::WatchStream;
pub use limits::Limits;
pub use policy::{AccessRule, AccessVerb, Policy};
pub use runner::{ComponentSource, HostOptions, InstanceCounts, InstantiateTimes, ProviderHost};
