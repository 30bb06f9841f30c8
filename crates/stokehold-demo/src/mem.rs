//! Resident memory of this process, read from `/proc/self/status` (Linux).
//!
//! The demo measures what caching a dataset really costs by reading the resident set size (RSS)
//! before and after building the cache: RSS counts the pages the process has touched, so it shows
//! padding, per-element allocations and allocator slack that a sum of buffer lengths would hide.

/// The resident set size of this process in bytes, or `None` where `/proc` is not available.
pub fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vmrss(&status)
}

/// Parses the `VmRSS:` line of a `/proc/<pid>/status` text into bytes (the kernel writes kB).
pub fn parse_vmrss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let mut fields = line["VmRSS:".len()..].split_whitespace();
    let value: u64 = fields.next()?.parse().ok()?;
    let scale = match fields.next() {
        Some("kB") | None => 1024,
        Some("mB") | Some("MB") => 1024 * 1024,
        Some(_) => return None,
    };
    value.checked_mul(scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_vmrss_line() {
        let text = "Name:\tstokehold\nVmPeak:\t  20000 kB\nVmRSS:\t   12345 kB\nThreads:\t3\n";
        assert_eq!(parse_vmrss(text), Some(12345 * 1024));
    }

    #[test]
    fn missing_or_malformed_line_is_none() {
        assert_eq!(parse_vmrss("Name:\tx\nVmSize:\t10 kB\n"), None);
        assert_eq!(parse_vmrss("VmRSS:\tlots kB\n"), None);
        assert_eq!(parse_vmrss("VmRSS:\t10 pages\n"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn touching_memory_raises_rss() {
        const SIZE: usize = 64 << 20;
        let before = rss_bytes().expect("/proc/self/status on Linux");
        // Writing every byte faults every page in, so they count as resident.
        let buf = vec![1u8; SIZE];
        let after = rss_bytes().unwrap();
        assert_eq!(buf.iter().map(|&b| b as usize).sum::<usize>(), SIZE);
        // Other tests run in this process at the same time and may free memory meanwhile, so ask
        // for half of the buffer only.
        assert!(
            after >= before + (SIZE as u64) / 2,
            "before {before}, after {after}"
        );
    }
}
