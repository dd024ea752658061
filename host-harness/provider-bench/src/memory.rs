//! This process's resident memory, from `/proc/self/status` (Linux): the current size and the
//! peak since the last reset, so each load level reports its own peak.

/// Resident bytes now (`VmRSS`), or 0 where `/proc` is not there.
pub fn rss_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

/// Peak resident bytes since [`reset_peak`] (`VmHWM`), or 0 where `/proc` is not there.
pub fn peak_rss_bytes() -> u64 {
    status_kib("VmHWM:") * 1024
}

/// Starts a new peak from the current size (writing 5 to `clear_refs`, Linux 4.0+); where
/// that fails, the peak stays the process's lifetime peak.
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix(key).map(|v| v.trim().trim_end_matches("kB").trim().to_string()))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        if std::path::Path::new("/proc/self/status").exists() {
            let now = rss_bytes();
            assert!(now > 1 << 20, "a Rust test process is bigger than 1 MiB: {now}");
            assert!(peak_rss_bytes() >= now / 2);
        }
    }
}
