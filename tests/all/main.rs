//! The end-to-end scenarios, in one binary: a module per subject (the component's imports,
//! lifecycle, reuse, claims, execute, failures, policy, ownership, pod security, bad input, the
//! contract suite, what the repository ships);
//! `cargo test -p tests --test all reuse::` runs one of them.

mod bad_input;
mod claim;
mod component;
mod contract;
mod execute;
mod failures;
mod lifecycle;
mod ownership;
mod pod_security;
mod policy;
mod repository;
mod reuse;
