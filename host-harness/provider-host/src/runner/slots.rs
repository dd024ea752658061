//! How many calls run at once beyond the host's call slots: commands' share of them, and each
//! lease's own limit on commands in flight.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

/// How many of `slots` call slots commands may hold at once: half, so a run's long commands
/// never keep its acquire, renew or release waiting (at least one either way).
pub(super) fn exec_share(slots: u32) -> usize {
    usize::try_from((slots / 2).max(1)).unwrap_or(1)
}

/// The per-lease limit on commands in flight: a semaphore per lease id, made when the lease's
/// first command comes and dropped once none of its commands holds or waits for a slot.
pub(super) struct LeaseSlots {
    per_lease: usize,
    leases: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl LeaseSlots {
    pub(super) fn new(per_lease: u32) -> Self {
        Self { per_lease: usize::try_from(per_lease.max(1)).unwrap_or(1), leases: Mutex::default() }
    }

    /// One of the lease's slots, waiting in the order asked while its others are taken.
    pub(super) async fn acquire(&self, lease_id: &str) -> Result<OwnedSemaphorePermit, AcquireError> {
        let semaphore = {
            let mut leases = self.leases.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Forget the leases nobody holds or waits for: only the map keeps their semaphore.
            leases.retain(|_, s| Arc::strong_count(s) > 1);
            Arc::clone(leases.entry(lease_id.to_string()).or_insert_with(|| Arc::new(Semaphore::new(self.per_lease))))
        };
        semaphore.acquire_owned().await
    }
}
