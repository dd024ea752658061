//! Pod IP addresses: one per live pod, unique on the cluster, handed out again once freed.
//!
//! A real cluster's IPAM plugin guarantees that no two running pods share an address; tests of
//! a sandbox provider (which may route to a sandbox by pod IP) need the same guarantee, and a
//! long test run must not exhaust a small range, hence the reuse.

use std::collections::BTreeSet;

/// Host numbers per third octet: `.1` to `.254` (`.0` and `.255` are skipped).
const PER_OCTET: u32 = 254;
/// The number of host numbers in the /16 (third octets 0 to 255).
const HOSTS: u32 = 256 * PER_OCTET;

/// Addresses in the /16 `<prefix>0.2` to `<prefix>255.254` (the prefix is the first two
/// octets, `10.244.`), lowest free first; `<prefix>0.1` is left to the gateway.
#[derive(Debug)]
pub(crate) struct IpPool {
    prefix: String,
    in_use: BTreeSet<u32>,
}

impl IpPool {
    /// A pool over `prefix` (the first two octets, for example `10.244.`).
    pub(crate) fn new(prefix: &str) -> Self {
        Self { prefix: prefix.to_string(), in_use: BTreeSet::new() }
    }

    /// The lowest free address, now taken; `None` once the range is exhausted, which a real
    /// kubelet reports as a sandbox that cannot be created (the pod stays `ContainerCreating`).
    pub(crate) fn allocate(&mut self) -> Option<String> {
        let host = (1..HOSTS).find(|h| !self.in_use.contains(h))?;
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

    fn address(&self, host: u32) -> String {
        format!("{}{}.{}", self.prefix, host / PER_OCTET, host % PER_OCTET + 1)
    }

    fn host_of(&self, ip: &str) -> Option<u32> {
        let (third, fourth) = ip.strip_prefix(&self.prefix)?.split_once('.')?;
        let (third, fourth): (u32, u32) = (third.parse().ok()?, fourth.parse().ok()?);
        if third > 255 || !(1..=PER_OCTET).contains(&fourth) {
            return None;
        }
        let host = third * PER_OCTET + fourth - 1;
        (1..HOSTS).contains(&host).then_some(host)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_unique_addresses_lowest_first() {
        let mut pool = IpPool::new("10.244.");
        assert_eq!(pool.allocate().as_deref(), Some("10.244.0.2"));
        assert_eq!(pool.allocate().as_deref(), Some("10.244.0.3"));
    }

    #[test]
    fn reuses_freed_addresses() {
        let mut pool = IpPool::new("10.244.");
        let a = pool.allocate().unwrap_or_default();
        let _b = pool.allocate();
        pool.release(&a);
        assert_eq!(pool.allocate(), Some(a));
    }

    #[test]
    fn crosses_into_the_next_octet_past_254() {
        let mut pool = IpPool::new("10.1.");
        let all: Vec<String> = (0..300).filter_map(|_| pool.allocate()).collect();
        assert_eq!(all.len(), 300);
        assert_eq!(all[252], "10.1.0.254");
        assert_eq!(all[253], "10.1.1.1");
        assert_eq!(all.iter().collect::<BTreeSet<_>>().len(), 300, "addresses are unique");
        pool.release("10.1.0.77");
        assert_eq!(pool.allocate().as_deref(), Some("10.1.0.77"));
    }

    #[test]
    fn reserve_adopts_existing_addresses_once() {
        let mut pool = IpPool::new("10.244.");
        assert!(pool.reserve("10.244.0.2"));
        assert!(!pool.reserve("10.244.0.2"));
        assert!(!pool.reserve("192.168.1.2"));
        assert!(!pool.reserve("10.244.0.255"));
        assert!(!pool.reserve("10.244.0.1"), "the gateway is never handed out");
        assert_eq!(pool.allocate().as_deref(), Some("10.244.0.3"));
        pool.release("not-an-ip");
    }
}
