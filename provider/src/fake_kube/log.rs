//! The fake's log: every line kept as text, for tests that read what the provider said.

use std::cell::RefCell;
use std::rc::Rc;

use crate::log::{Level, Log};

/// A log that keeps every line as text (`Info message key=value ...`).
#[derive(Clone, Default)]
pub struct MemoryLog(Rc<RefCell<Vec<String>>>);

impl MemoryLog {
    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.borrow().clone()
    }
}

impl Log for MemoryLog {
    fn emit(&self, level: Level, message: &str, fields: &[(&str, &str)]) {
        let fields: Vec<String> = fields.iter().map(|(k, v)| format!("{k}={v}")).collect();
        self.0.borrow_mut().push(format!("{level:?} {message} {}", fields.join(" ")));
    }
}
