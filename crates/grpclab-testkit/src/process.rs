//! A process seen from outside, as a test asserting on a server it started sees it: its peak
//! memory and sockets from `/proc`, signals through `kill`.

use std::process::Command;

/// The process's peak resident memory so far (VmHWM), in KiB; `None` once it has gone.
pub fn peak_rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmHWM:")
}

/// The process's resident memory now (VmRSS), in KiB; `None` once it has gone.
pub fn rss_kib(pid: u32) -> Option<u64> {
    status_kib(pid, "VmRSS:")
}

/// One `/proc/PID/status` field in KiB.
fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The process's open sockets (listening ones included); 0 once it has gone.
pub fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|entries| {
            entries
                .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
                .filter(|target| target.to_string_lossy().starts_with("socket:"))
                .count()
        })
        .unwrap_or(0)
}

/// Sends signal `name` (TERM, INT, KILL) to `pid`; a failed `kill` fails the test.
pub fn signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{name} {pid} failed");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_a_peak_and_its_sockets_are_counted() {
        let me = std::process::id();
        assert!(peak_rss_kib(me).is_some_and(|kib| kib > 0));
        assert!(rss_kib(me).is_some_and(|kib| kib > 0 && kib <= peak_rss_kib(me).unwrap()));
        let before = open_sockets(me);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(open_sockets(me), before + 1);
        drop(listener);
        assert_eq!(peak_rss_kib(u32::MAX), None);
    }
}
