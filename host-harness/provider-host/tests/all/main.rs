//! The host's integration tests, one binary (one link) for all of them.

mod hostile;
mod kube_exec;
mod kube_host;
mod ownership;
mod reference_provider;
mod runner;
mod serve;
mod support;
mod write_guard;
