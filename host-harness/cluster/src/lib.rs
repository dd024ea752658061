//! An embedded Kubernetes cluster for demos and tests: a real API server on loopback (HTTPS,
//! bearer tokens, discovery, OpenAPI, watch, deletion semantics) plus simulated controllers
//! (agent-sandbox, Job, kubelet and scheduler, garbage collector) that are ordinary clients.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let cluster = embedded_cluster::EmbeddedCluster::start(Default::default()).await?;
//! let client = cluster.client().await?;
//! # let _ = client; Ok(()) }
//! ```

pub mod admin;
pub mod admission;
pub mod apiserver;
pub mod authorization;
pub mod behaviour;
pub mod clock;
pub mod cluster;
pub mod controllers;
pub mod conversion;
pub mod core_validation;
pub mod crd_schema;
pub mod defaults;
pub mod deletion;
pub mod discovery;
pub mod faults;
pub mod field_error;
pub mod impersonation;
mod json;
pub use sandbox_contract::k8s::names;
pub mod openapi;
pub mod patch;
mod pod_log;
pub mod protobuf;
use sandbox_contract::k8s::quantity;
pub mod rbac;
pub mod request;
pub mod request_info;
pub mod request_log;
pub mod resources;
pub mod selectors;
pub mod server;
pub mod status;
pub mod store;
pub mod strategic_merge;
pub mod strategy;
pub mod table;
pub mod tls;
pub mod tokens;
pub mod typed;
pub mod watch;

pub use cluster::{ADMIN_USER, ClusterConfig, EmbeddedCluster, PROVIDER_USER, VIEWER_USER};
pub use controllers::ControllerKind;
pub use resources::SandboxVersions;
