//! An embedded Kubernetes cluster for demos and tests: a real API server on loopback (HTTPS,
//! bearer tokens, discovery, OpenAPI, watch, deletion semantics) plus simulated controllers
//! (agent-sandbox's Sandbox, template, warm pool and claim controllers, Job, kubelet and
//! scheduler, garbage collector) that are ordinary clients.
//!
//! ```no_run
//! # async fn demo() -> anyhow::Result<()> {
//! let cluster = embedded_cluster::EmbeddedCluster::start(Default::default()).await?;
//! let client = cluster.client().await?;
//! # let _ = client; Ok(()) }
//! ```

pub mod access_review;
mod admin;
mod admission;
mod apiserver;
mod authorization;
pub mod behaviour;
pub mod clock;
mod cluster;
pub mod controllers;
mod conversion;
mod core_validation;
mod crd_schema;
mod defaults;
mod deletion;
mod discovery;
mod fanout;
pub mod faults;
mod field_error;
mod impersonation;
mod json;
use contract::k8s::names;
mod openapi;
mod patch;
mod pod_exec;
mod pod_log;
mod protobuf;
use contract::k8s::quantity;
mod rbac;
mod remote_command;
mod request;
mod request_info;
pub mod request_log;
mod resources;
use contract::k8s::selectors;
mod server;
mod status;
mod store;
mod strategic_merge;
mod strategy;
mod table;
pub mod tls;
mod tokens;
mod typed;
mod watch;

pub use cluster::{ADMIN_USER, ClusterConfig, EmbeddedCluster, PROVIDER_USER, VIEWER_USER};
pub use controllers::ControllerKind;
pub use controllers::kubelet::pid_namespace::PodProcess;
pub use resources::SandboxVersions;
