//! A process's memory as the kernel reports it (`/proc/PID/status`), for the tests that bound a
//! broker's memory under an attack.

/// `VmRSS` (now) or `VmHWM` (the peak) of process `pid`, in bytes.
pub fn status_bytes(pid: u32, field: &str) -> usize {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("reading status");
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().strip_suffix("kB")?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"));
    kib * 1024
}
