//! What the host's call deadline rules out: a fixed delay as long as the deadline, which the
//! host would end every time. The deadline comes from the `deadline` import, so
//! `validate-config` refuses such a config before any lifecycle call; a stall past the deadline
//! is how a config asks for an overrun on purpose.

use std::time::Duration;

use super::checker::{Checker, ptr};
use super::{Config, operation_path};

/// Records the config's problems with the host's deadline; whether there were none.
pub(super) fn check(c: &mut Checker, config: &Config, call_timeout: Option<Duration>) -> bool {
    let Some(timeout) = call_timeout else {
        return true;
    };
    let timeout_millis = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    let mut fits = true;
    for (operation, behaviour) in &config.operations {
        if let Some(delay) = behaviour.delay_millis.filter(|d| *d >= timeout_millis) {
            fits = false;
            c.error(
                &ptr(&operation_path(*operation), "delayMillis"),
                format!(
                    "{delay} ms does not fit the host's call deadline of {timeout_millis} ms: the host would end every \
                     {} call. Set it below {timeout_millis}, or use a stall past-deadline to overrun on purpose.",
                    operation.as_str()
                ),
            );
        }
    }
    fits
}
