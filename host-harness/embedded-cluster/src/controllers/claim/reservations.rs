//! Which pool members claims of this controller are adopting, so that a burst of claims
//! reconciled at once picks distinct members instead of all racing for the oldest one (the
//! optimistic locks would still keep them apart, at the cost of a conflict per loser).
//! upstream gets the same from its in-memory queue of warm Sandboxes, from which each claim
//! pops its own.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a reservation outlives its adoption at most: long enough for the caches to show
/// the member moved, short enough that a lost one costs nothing lasting.
const HOLD: Duration = Duration::from_secs(30);

/// Member uid -> (claim uid, when reserved).
#[derive(Default)]
pub struct Reservations {
    held: Mutex<HashMap<String, (String, Instant)>>,
}

impl Reservations {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Instant)>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Reserves a member for a claim; false if another claim holds it.
    pub fn reserve(&self, member: &str, claim: &str) -> bool {
        let mut held = self.lock();
        match held.get(member) {
            Some((holder, since)) if holder != claim && since.elapsed() < HOLD => false,
            _ => {
                held.insert(member.to_string(), (claim.to_string(), Instant::now()));
                true
            }
        }
    }

    /// Gives a member back (its adoption failed).
    pub fn release(&self, member: &str) {
        self.lock().remove(member);
    }

    /// The members other claims hold, after dropping what expired or what `still_in_pool` says
    /// has left its pool (the adoption is visible, nothing more to guard).
    pub fn held_by_others(&self, claim: &str, still_in_pool: impl Fn(&str) -> bool) -> HashSet<String> {
        let mut held = self.lock();
        held.retain(|member, (_, since)| since.elapsed() < HOLD && still_in_pool(member));
        held.iter().filter(|(_, (holder, _))| holder != claim).map(|(member, _)| member.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_member_is_held_by_one_claim_until_released_or_moved() {
        let r = Reservations::default();
        assert!(r.reserve("m1", "a"));
        assert!(r.reserve("m1", "a"), "the holder may reserve again");
        assert!(!r.reserve("m1", "b"));
        assert_eq!(r.held_by_others("b", |_| true), HashSet::from(["m1".to_string()]));
        assert!(r.held_by_others("a", |_| true).is_empty(), "a claim's own reservation does not hide it");
        r.release("m1");
        assert!(r.reserve("m1", "b"));
        assert!(r.held_by_others("a", |_| false).is_empty(), "a member that left its pool is forgotten");
        assert!(r.reserve("m1", "a"));
    }
}
