//! What the unit tests share: a fake clock with a settable host deadline, a log that keeps its
//! lines, a provider over them, configs, requests and stored-lease round trips.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use contract::{AcquireRequest, EnvVar, Lease, LeaseRef};
use serde_json::Value;

use crate::Provider;
use crate::clock::Clock;
use crate::log::{Level, Log};

/// The fake wall clock's start.
pub const NOW: i64 = 1_796_032_916_000;
/// An env value that must never show anywhere.
pub const SECRET_VALUE: &str = "sk-live-7f3a9c1e5b2d";

/// Time that moves only when told to or slept through; a sleep also uses up the host's deadline.
#[derive(Clone, Default)]
pub struct FakeClock {
    now: Rc<Cell<i64>>,
    remaining: Rc<Cell<Option<Duration>>>,
    timeout: Rc<Cell<Option<Duration>>>,
    sleeps: Rc<RefCell<Vec<Duration>>>,
}

impl FakeClock {
    /// Moves the wall clock forward.
    pub fn advance_millis(&self, millis: i64) {
        self.now.set(self.now.get() + millis);
    }

    /// A host deadline of `timeout` for every call, all of it left.
    pub fn set_host_deadline(&self, timeout: Duration) {
        self.timeout.set(Some(timeout));
        self.remaining.set(Some(timeout));
    }

    /// Every sleep so far.
    pub fn sleeps(&self) -> Vec<Duration> {
        self.sleeps.borrow().clone()
    }
}

impl Clock for FakeClock {
    fn now_millis(&self) -> i64 {
        self.now.get()
    }

    fn sleep(&self, duration: Duration) {
        self.sleeps.borrow_mut().push(duration);
        self.advance_millis(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX));
        self.remaining.set(self.remaining.get().map(|left| left.saturating_sub(duration)));
    }

    fn call_remaining(&self) -> Option<Duration> {
        self.remaining.get()
    }

    fn call_timeout(&self) -> Option<Duration> {
        self.timeout.get()
    }
}

/// A log that keeps every line as `message key=value ...`.
#[derive(Clone, Default)]
pub struct MemoryLog(Rc<RefCell<Vec<String>>>);

impl Log for MemoryLog {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.0.borrow_mut().push(format!("{level:?} {message} {}", fields.join(" ")));
    }
}

/// A clock at [`NOW`] without a host deadline, and a log.
pub struct Env {
    pub clock: FakeClock,
    pub log: MemoryLog,
}

impl Env {
    pub fn new() -> Self {
        let clock = FakeClock::default();
        clock.advance_millis(NOW);
        Self { clock, log: MemoryLog::default() }
    }

    /// A provider over this environment.
    pub fn provider(&self) -> Provider<FakeClock, MemoryLog> {
        Provider::new(self.clock.clone(), self.log.clone())
    }

    /// Every log line, joined.
    pub fn log_text(&self) -> String {
        self.log.0.borrow().join("\n")
    }
}

/// The normalized form of a config.
pub fn config_with(config: Value) -> String {
    let validation = crate::config::validate(&config.to_string(), None);
    validation.normalized_config.unwrap_or_else(|| panic!("test config must be valid: {:?}", validation.errors))
}

/// The normalized empty config.
pub fn config() -> String {
    config_with(serde_json::json!({}))
}

/// An acquire request for `acquisition_id`.
pub fn request(config: &str, acquisition_id: &str) -> AcquireRequest {
    AcquireRequest {
        config: config.to_string(),
        run_id: "run-1".into(),
        acquisition_id: acquisition_id.into(),
        agent_id: None,
        requested_expires_at: None,
        env: vec![EnvVar { name: "MODE".into(), value: "test".into(), secret: false }],
        reusable: false,
    }
}

/// The lease as a host stores it and hands it back, through its JSON.
pub fn stored(lease: &Lease, config: &str) -> LeaseRef {
    let text = serde_json::to_string(lease).expect("a lease serializes");
    LeaseRef { lease: serde_json::from_str(&text).expect("and parses back"), config: config.to_string() }
}
