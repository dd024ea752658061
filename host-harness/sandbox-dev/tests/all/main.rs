//! The `sandbox-dev` binary from outside, one test binary (one link) for all of it.

mod cli;
mod demo;
