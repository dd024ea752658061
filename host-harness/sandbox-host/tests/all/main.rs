//! The `sandbox-host` binary from outside, one test binary (one link) for all of it.

mod cli;
mod reference_provider_cli;
mod secrets;
mod serve;
