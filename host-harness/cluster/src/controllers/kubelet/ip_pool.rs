//! Pod IP addresses: one per live pod, unique on the cluster, handed out again once freed.
//!
//! A real cluster's IPAM plugin guarantees that no two running pods share an address; tests of
//! a sandbox provider (which may route to a sandbox by pod IP) need the same guarantee, and a
//! long test run must not exhaust a small range, hence the reuse.

use std::collections::BTreeSet;

/// The first host number handed out (`.1` is conventionally the gateway).
const FIRST_HOST: u8 = 2;
/// The last host number handed out (`.255` is the broadcast address).
const LAST_HOST: u8 = 254;

/// Addresses `<prefix>2` to `<prefix>254`, lowest free first.
#[derive(Debug)]
pub(crate) struct IpPool {
    prefix: String,
    in_use: BTreeSet<u8>,
}

impl IpPool {
    /// A pool over `prefix` (for example `10.244.0.`).
    pub(crate) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_string(), in_use: BTreeSet::new() }
    }

    /// The lowest free address, now taken; `None` once the range is exhausted, which a real
    /// kubelet reports as a sandbox that cannot be created (the pod stays `ContainerCreating`).
    pub(crate) fn allocate(&mut self) -> Option<String> {
        let host = (FIRST_HOST..=LAST_HOST).find(|h| !self.in_use.contains(h))?;
        self.in_use.insert(host);
        Some(self.address(host))
    }

    /// Takes an address a pod already carries (written by an earlier kubelet process), so it is
    /// not handed to another pod; false if it is outside the pool or already taken.
    pub(crate) fn reserve(&mut self, ip: &str) -> bool {
        match self.host_of(ip) {
            Some(host) => self.in_use.insert(host),
            None => false,
        }
    }

    /// Returns an address to the pool; unknown addresses are ignored.
    pub(crate) fn release(&mut self, ip: &str) {
        if let Some(host) = self.host_of(ip) {
            self.in_use.remove(&host);
        }
    }

    fn address(&self, host: u8) -> String {
        format!("{}{host}", self.prefix)
    }

    fn host_of(&self, ip: &str) -> Option<u8> {
        let host: u8 = ip.strip_prefix(&self.prefix)?.parse().ok()?;
        (FIRST_HOST..=LAST_HOST).contains(&host).then_some(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_unique_addresses_lowest_first() {
        let mut pool = IpPool::new("10.244.0.");
        assert_eq!(pool.allocate().as_deref(), Some("10.244.0.2"));
        assert_eq!(pool.allocate().as_deref(), Some("10.244.0.3"));
    }

    #[test]
    fn reuses_freed_addresses() {
        let mut pool = IpPool::new("10.244.0.");
        let a = pool.allocate().unwrap_or_default();
        let _b = pool.allocate();
        pool.release(&a);
        assert_eq!(pool.allocate(), Some(a));
    }

    #[test]
    fn exhausts_and_recovers() {
        let mut pool = IpPool::new("10.1.");
        let all: Vec<String> = std::iter::from_fn(|| pool.allocate()).collect();
        assert_eq!(all.len(), 253);
        assert_eq!(pool.allocate(), None);
        pool.release("10.1.77");
        assert_eq!(pool.allocate().as_deref(), Some("10.1.77"));
    }

    #[test]
    fn reserve_adopts_existing_addresses_once() {
        let mut pool = IpPool::new("10.244.0.");
        assert!(pool.reserve("10.244.0.2"));
        assert!(!pool.reserve("10.244.0.2"));
        assert!(!pool.reserve("192.168.1.2"));
        assert!(!pool.reserve("10.244.0.255"));
        assert_eq!(pool.allocate().as_deref(), Some("10.244.0.3"));
        pool.release("not-an-ip");
    }
}
