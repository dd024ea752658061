//! Per-call limits: the memory a guest may use, how long one call may run, how long one
//! Kubernetes request may take, how many calls and watches may be open at once, and how large
//! an input the host passes in and a body the host sends out may be.
//!
//! Every call gets a fresh store, so a limit that fires ends only that store: the host keeps
//! running and the next call starts clean. Fuel is not a limit here: a wall-clock deadline (epoch
//! ticks plus a `tokio` timeout) is what a caller actually cares about and costs less; a
//! benchmark may have it counted (`count_guest_instructions`).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

use crate::error::HostError;

/// How often the epoch ticker advances; also how late a runaway guest may be stopped.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The longest `exec-timeout-ms` taken: a day.
const MAX_EXEC_TIMEOUT_MS: u64 = 24 * 60 * 60 * 1000;

/// Limits applied to every provider call. Serde so a host config file can set them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default, deny_unknown_fields)]
pub struct Limits {
    /// Linear memory a guest instance may grow to, in bytes.
    pub memory_bytes: u64,
    /// Wall-clock deadline of one exported call, in milliseconds (the contract's 30 s budget).
    pub call_timeout_ms: u64,
    /// Deadline of one Kubernetes request made for the guest, in milliseconds; kept well below
    /// the call deadline so a hung API server surfaces as a typed `timeout` the provider can
    /// handle instead of killing the whole call.
    pub kube_request_timeout_ms: u64,
    /// Watches one call may hold open at once.
    pub max_open_watches: u32,
    /// Calls that may run at once; also the size of the instance pool. Further calls wait.
    pub max_concurrent_calls: u32,
    /// Largest input (config, request, lease) the host passes to a guest, in bytes; larger
    /// ones are refused before any instance is made.
    pub max_input_bytes: u64,
    /// Largest body (of a create or a patch) the host sends to the cluster for a guest, in
    /// bytes; a larger one is refused before it is parsed. kube-apiserver refuses request
    /// bodies over 3 MiB, so a larger one could never succeed, and parsing and re-encoding it
    /// would cost the host several copies of it.
    pub max_body_bytes: u64,
    /// Longest a command of `execute` may run, in milliseconds: its call's deadline is the
    /// command's timeout (at most this) plus `call-timeout-ms` for the rest of the call.
    pub exec_timeout_ms: u64,
    /// Commands of `execute` one lease (by its `provider-lease-id`) may run at once; more wait,
    /// in the order they came, for one of them to end. Commands share half of
    /// `max-concurrent-calls`; a per-lease limit below that share keeps one run's flood of
    /// commands from taking it all, so another run's command starts at once (with the
    /// defaults, two runs' commands always run side by side). Waiting, not refusing: a run's
    /// commands then run in the order it sent them, and its client needs no retry loop.
    pub max_executes_per_lease: u32,
    /// Bytes kept of each of a command's stdout and stderr; the rest is read and dropped, and
    /// the output says it was truncated.
    pub max_exec_output_bytes: u32,
    /// Keep `max-concurrent-calls` instance slots reserved (wasmtime's pooling allocator, with
    /// copy-on-write memory images), so a fresh instance per call costs microseconds. Off, each
    /// call allocates its instance on demand: slower, but nothing is reserved up front (for
    /// hosts whose address space is limited).
    pub pooling: bool,
    /// Count the WebAssembly instructions each call's guest runs (wasmtime's fuel, never
    /// exhausted here), for [`crate::ProviderHost::guest_instructions`]: the guest's own work
    /// as a figure that does not move with the machine's load, for benchmarks. Not a limit and
    /// not settable from a config file: the count slows the guest's code.
    #[serde(skip)]
    pub count_guest_instructions: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_bytes: 64 * 1024 * 1024,
            call_timeout_ms: 30_000,
            kube_request_timeout_ms: 10_000,
            max_open_watches: 8,
            max_concurrent_calls: 16,
            max_input_bytes: 4 * 1024 * 1024,
            max_body_bytes: 3 * 1024 * 1024,
            exec_timeout_ms: 600_000,
            max_executes_per_lease: 4,
            max_exec_output_bytes: 1024 * 1024,
            pooling: true,
            count_guest_instructions: false,
        }
    }
}

impl Limits {
    /// The call deadline as a duration.
    pub fn call_timeout(&self) -> Duration {
        Duration::from_millis(self.call_timeout_ms)
    }

    /// `max-exec-output-bytes` as a size.
    pub fn max_exec_output_usize(&self) -> usize {
        usize::try_from(self.max_exec_output_bytes).unwrap_or(usize::MAX)
    }

    /// The longest command of `execute` as a duration.
    pub fn exec_timeout(&self) -> Duration {
        Duration::from_millis(self.exec_timeout_ms)
    }

    /// The per-request deadline as a duration.
    pub fn kube_request_timeout(&self) -> Duration {
        Duration::from_millis(self.kube_request_timeout_ms)
    }

    /// Refuses settings that cannot work, before any engine is built.
    pub fn validate(&self) -> Result<(), HostError> {
        let problem = if self.memory_bytes < 1024 * 1024 {
            Some("memory-bytes must be at least 1 MiB (a Rust component needs more than that to start)")
        } else if self.memory_bytes > 4 * 1024 * 1024 * 1024 {
            Some("memory-bytes must be at most 4 GiB (32-bit linear memory)")
        } else if self.call_timeout_ms == 0 {
            Some("call-timeout-ms must be positive")
        } else if self.kube_request_timeout_ms == 0 {
            Some("kube-request-timeout-ms must be positive")
        } else if self.max_concurrent_calls == 0 {
            Some("max-concurrent-calls must be positive")
        } else if self.max_executes_per_lease == 0 {
            Some("max-executes-per-lease must be positive (a lease with no command slot could never run a command)")
        } else if self.max_input_bytes == 0 {
            Some("max-input-bytes must be positive")
        } else if self.max_body_bytes == 0 {
            Some("max-body-bytes must be positive")
        } else if self.exec_timeout_ms == 0 || self.exec_timeout_ms > MAX_EXEC_TIMEOUT_MS {
            Some("exec-timeout-ms must be between 1 and 86400000 (a day; longer work belongs in a Job of its own)")
        } else if self.max_exec_output_bytes == 0 || self.max_exec_output_bytes > 64 * 1024 * 1024 {
            Some("max-exec-output-bytes must be between 1 and 64 MiB (both streams pass through the guest's memory)")
        } else {
            None
        };
        problem.map_or(Ok(()), |p| Err(HostError::Config(p.to_string())))
    }

    /// The memory cap as `usize` for wasmtime (validated to fit on 64-bit hosts).
    pub(crate) fn memory_bytes_usize(&self) -> usize {
        usize::try_from(self.memory_bytes).unwrap_or(usize::MAX)
    }

    /// The body limit as `usize`, to compare with a body's length.
    pub(crate) fn max_body_bytes_usize(&self) -> usize {
        usize::try_from(self.max_body_bytes).unwrap_or(usize::MAX)
    }
}

/// The store's resource limiter: wasmtime's [`StoreLimits`] plus a record of the first memory
/// growth it refused, so a trap that follows (a Rust guest aborts when allocation fails) is
/// reported as [`HostError::MemoryLimit`] and not as an anonymous trap.
pub(crate) struct CallLimiter {
    inner: StoreLimits,
    refused_memory: Option<usize>,
}

impl CallLimiter {
    /// A limiter enforcing `limits.memory_bytes`.
    pub(crate) fn new(limits: &Limits) -> Self {
        Self { inner: StoreLimitsBuilder::new().memory_size(limits.memory_bytes_usize()).build(), refused_memory: None }
    }

    /// The size of the first refused memory growth, if any.
    pub(crate) fn refused_memory(&self) -> Option<usize> {
        self.refused_memory
    }
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        let allowed = self.inner.memory_growing(current, desired, maximum)?;
        if !allowed && self.refused_memory.is_none() {
            self.refused_memory = Some(desired);
        }
        Ok(allowed)
    }

    fn table_growing(&mut self, current: usize, desired: usize, maximum: Option<usize>) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }

    fn instances(&self) -> usize {
        self.inner.instances()
    }

    fn tables(&self) -> usize {
        self.inner.tables()
    }

    fn memories(&self) -> usize {
        self.inner.memories()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_contract_budget() {
        let limits = Limits::default();
        assert_eq!(limits.call_timeout(), Duration::from_secs(30));
        assert_eq!(limits.memory_bytes, 64 << 20);
        assert_eq!(limits.max_body_bytes, 3 << 20, "kube-apiserver's request body limit");
        assert!(limits.kube_request_timeout() < limits.call_timeout());
        assert!(limits.validate().is_ok());
    }

    #[test]
    fn nonsense_limits_are_refused() {
        let limits = Limits { max_concurrent_calls: 0, ..Limits::default() };
        assert!(matches!(limits.validate(), Err(HostError::Config(m)) if m.contains("max-concurrent-calls")));
        let limits = Limits { max_body_bytes: 0, ..Limits::default() };
        assert!(matches!(limits.validate(), Err(HostError::Config(m)) if m.contains("max-body-bytes")));
        let limits = Limits { exec_timeout_ms: 0, ..Limits::default() };
        assert!(matches!(limits.validate(), Err(HostError::Config(m)) if m.contains("exec-timeout-ms")));
        let limits = Limits { exec_timeout_ms: u64::MAX, ..Limits::default() };
        assert!(matches!(limits.validate(), Err(HostError::Config(m)) if m.contains("exec-timeout-ms")));
        let limits = Limits { max_exec_output_bytes: 0, ..Limits::default() };
        assert!(matches!(limits.validate(), Err(HostError::Config(m)) if m.contains("max-exec-output-bytes")));
    }

    #[test]
    fn limits_read_from_kebab_case_json_with_defaults() {
        let limits: Limits = serde_json::from_str(r#"{"call-timeout-ms": 5000}"#).expect("parses");
        assert_eq!(limits.call_timeout_ms, 5000);
        assert_eq!(limits.memory_bytes, Limits::default().memory_bytes);
        assert!(serde_json::from_str::<Limits>(r#"{"call-timeout": 5}"#).is_err());
    }

    #[test]
    fn the_limiter_remembers_the_first_refused_growth() {
        let mut limiter = CallLimiter::new(&Limits { memory_bytes: 2 << 20, ..Limits::default() });
        assert!(limiter.memory_growing(0, 1 << 20, None).expect("no error"));
        assert!(!limiter.memory_growing(1 << 20, 3 << 20, None).expect("no error"));
        assert!(!limiter.memory_growing(1 << 20, 5 << 20, None).expect("no error"));
        assert_eq!(limiter.refused_memory(), Some(3 << 20));
    }
}
