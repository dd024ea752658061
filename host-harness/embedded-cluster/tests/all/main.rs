//! The embedded cluster's integration tests, in one binary: the cluster and its dependencies
//! are linked once instead of once per file (each link is about 100 MB of a debug build). A
//! module holds the scenarios of one component; `cargo test -p embedded-cluster --test all
//! kubelet::` runs one of them.

mod common;

mod admission;
mod apiserver;
mod deletion;
mod faults;
mod job_controller;
mod kubectl;
mod kubelet;
mod node_client;
mod pid_namespace;
mod pod_exec;
mod rbac;
mod sandbox_controller;
mod service_account_tokens;
mod warm_pool;
mod watch;
