//! How many client connections (native and Kafka ports together) the broker keeps open:
//! `--max-connections` across the whole broker and `--max-connections-per-ip` (Kafka's
//! `max.connections.per.ip`) per client address across the whole broker; a connection past
//! either is closed as soon as it is accepted (counted in `/metrics` by the core that accepted
//! it). Also the open-files limit these defaults are sized from, raised at start-up.
//!
//! Whole-broker figures without a lock: one [`ConnectionGate`] shared by every core (an `Arc`),
//! touched once when a connection is accepted and once when it closes, never per request.
//! - The total is one atomic counter, taken with a compare-and-swap loop: exact, never past the
//!   limit.
//! - Per address: a count-min sketch of two rows of [`PER_IP_BUCKETS`] atomic counters, each
//!   row indexed by its own keyed hash of the address (keys drawn per process, so a client cannot
//!   choose addresses that collide). An address's count is the smaller of its two counters.
//!   Without a collision that is its exact count; distinct addresses sharing *both* counters
//!   would be counted together, which can only refuse early, never admit past the limit. One
//!   race is allowed for: two connections from the same address accepted at the same instant on
//!   two cores, at the limit, may both be admitted (each core adds to the rows before it looks),
//!   so the bound can be exceeded by at most one per core for that instant.
//!
//! Defaults: `--max-connections` is half the open-files limit ([`default_max_connections`]),
//! leaving the other half for segment files, the internal port and the admin port; per
//! address there is no bound of its own unless one is set (Kafka's default too: clients behind
//! one NAT share an address). The internal and admin ports are not counted here.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Counters per row of the per-address sketch (two rows: 128 KiB, allocated once at start-up).
pub const PER_IP_BUCKETS: usize = 16_384;
/// The largest `--max-connections-per-ip` (the sketch counts in `u32`).
pub const PER_IP_LIMIT_MAX: usize = 1 << 30;

/// Why a connection was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    MaxConnections,
    MaxConnectionsPerIp,
}

/// The whole broker's client-connection counts and limits (see the module doc).
pub struct ConnectionGate {
    max_connections: usize,
    per_ip_max: Option<u32>,
    open: AtomicUsize,
    rows: [Box<[AtomicU32]>; 2],
    keys: [RandomState; 2],
}

/// One admitted connection; dropping it (when the connection's task ends) gives its place back.
pub struct Permit {
    gate: Arc<ConnectionGate>,
    /// The sketch counters this connection added to, when a per-address bound is set.
    buckets: Option<[usize; 2]>,
}

impl ConnectionGate {
    pub fn new(max_connections: usize, per_ip_max: Option<usize>) -> Self {
        assert!(max_connections > 0, "validated by config");
        let row = || (0..PER_IP_BUCKETS).map(|_| AtomicU32::new(0)).collect();
        Self {
            max_connections,
            per_ip_max: per_ip_max
                .map(|n| u32::try_from(n.min(PER_IP_LIMIT_MAX)).unwrap_or(u32::MAX)),
            open: AtomicUsize::new(0),
            rows: [row(), row()],
            keys: [RandomState::new(), RandomState::new()],
        }
    }

    pub fn max_connections(&self) -> usize {
        self.max_connections
    }

    /// Client connections open now, across the broker.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Admits a connection from `ip`, or says which limit it is past.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<Permit, Refused> {
        // Relaxed: these are counters whose only promise is their own bound; nothing else is
        // published through them.
        let max = self.max_connections;
        if self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .is_err()
        {
            return Err(Refused::MaxConnections);
        }
        let Some(limit) = self.per_ip_max else {
            return Ok(Permit {
                gate: Arc::clone(self),
                buckets: None,
            });
        };
        let buckets = [self.bucket(0, ip), self.bucket(1, ip)];
        let after = [0, 1].map(|r| self.rows[r][buckets[r]].fetch_add(1, Ordering::Relaxed) + 1);
        // Dropping the permit undoes both rows and the total.
        let permit = Permit {
            gate: Arc::clone(self),
            buckets: Some(buckets),
        };
        if after[0].min(after[1]) > limit {
            return Err(Refused::MaxConnectionsPerIp);
        }
        Ok(permit)
    }

    fn bucket(&self, row: usize, ip: IpAddr) -> usize {
        (self.keys[row].hash_one(ip) % PER_IP_BUCKETS as u64) as usize
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        let g = &self.gate;
        if let Some(b) = self.buckets {
            for (row, bucket) in b.into_iter().enumerate() {
                let prev = g.rows[row][bucket].fetch_sub(1, Ordering::Relaxed);
                debug_assert!(prev > 0, "a per-address counter released below zero");
            }
        }
        let prev = g.open.fetch_sub(1, Ordering::Relaxed);
        debug_assert!(prev > 0, "the connection count released below zero");
    }
}

/// `--max-connections` when it is not set: half the open-files limit, at least one.
pub fn default_max_connections(open_files_limit: u64) -> usize {
    usize::try_from(open_files_limit / 2)
        .unwrap_or(usize::MAX)
        .max(1)
}

/// The open-files limit after start-up raised it: the soft limit before, and now.
#[derive(Debug, Clone, Copy)]
pub struct OpenFilesLimit {
    pub soft_before: u64,
    pub soft_now: u64,
    pub hard: u64,
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (capped at the kernel's `fs.nr_open` when
/// the hard limit is unlimited, the most a process can have). A failure leaves the soft limit
/// as it was, which is what is then reported and sized from.
pub fn raise_open_files_limit() -> Result<OpenFilesLimit, String> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a pointer to a live, owned, properly
    // aligned local; nothing else aliases it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(format!(
            "getrlimit(RLIMIT_NOFILE): {}",
            std::io::Error::last_os_error()
        ));
    }
    let soft_before = lim.rlim_cur;
    let hard = lim.rlim_max;
    let target = if hard == libc::RLIM_INFINITY {
        std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .unwrap_or(1 << 20)
    } else {
        hard
    };
    if target <= soft_before {
        return Ok(OpenFilesLimit {
            soft_before,
            soft_now: soft_before,
            hard,
        });
    }
    let raised = libc::rlimit {
        rlim_cur: target,
        rlim_max: hard,
    };
    // SAFETY: setrlimit only reads the `rlimit` behind a pointer to a live, owned local.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        tracing::warn!(
            "could not raise the open-files limit from {soft_before} to {target}: {}",
            std::io::Error::last_os_error()
        );
        return Ok(OpenFilesLimit {
            soft_before,
            soft_now: soft_before,
            hard,
        });
    }
    Ok(OpenFilesLimit {
        soft_before,
        soft_now: target,
        hard,
    })
}

/// A per-core, per-listener line about refused connections: the first refusal at once, then at
/// most one line per [`REFUSAL_LOG_INTERVAL_MS`] with how many were refused since — a flood of
/// connections does not flood the log.
pub struct RefusalLog {
    last_logged_ms: Option<u64>,
    unlogged: u64,
}

/// The least time between two refusal lines of one listener on one core.
pub const REFUSAL_LOG_INTERVAL_MS: u64 = 10_000;

impl RefusalLog {
    pub const fn new() -> Self {
        Self {
            last_logged_ms: None,
            unlogged: 0,
        }
    }

    /// Notes one refusal; returns how many refusals the line to write now covers, if one is due.
    pub fn note(&mut self, now_ms: u64) -> Option<u64> {
        self.unlogged += 1;
        let due = self
            .last_logged_ms
            .is_none_or(|t| now_ms.saturating_sub(t) >= REFUSAL_LOG_INTERVAL_MS);
        if !due {
            return None;
        }
        self.last_logged_ms = Some(now_ms);
        Some(std::mem::take(&mut self.unlogged))
    }
}

impl Default for RefusalLog {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(last: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, last))
    }

    #[test]
    fn total_is_exact_and_given_back_on_drop() {
        let g = Arc::new(ConnectionGate::new(2, None));
        let a = g.admit(ip(1)).expect("first");
        let _b = g.admit(ip(2)).expect("second");
        assert_eq!(g.admit(ip(3)).err(), Some(Refused::MaxConnections));
        assert_eq!(g.open(), 2);
        drop(a);
        assert_eq!(g.open(), 1);
        let _c = g.admit(ip(3)).expect("a place was given back");
    }

    #[test]
    fn per_ip_bounds_one_address_not_the_others() {
        let g = Arc::new(ConnectionGate::new(100, Some(2)));
        let held: Vec<_> = (0..2).map(|_| g.admit(ip(1)).expect("within")).collect();
        assert_eq!(g.admit(ip(1)).err(), Some(Refused::MaxConnectionsPerIp));
        // A refusal gives back what it took.
        assert_eq!(g.open(), 2);
        // Other addresses are not held back (with 16 Ki buckets per row, the chance that two
        // of a few addresses share both counters is negligible; the keys are random).
        let others: Vec<_> = (2..50)
            .map(|i| g.admit(ip(i)).expect("another address"))
            .collect();
        drop(held);
        let _again = g.admit(ip(1)).expect("places given back");
        assert_eq!(g.open(), others.len() + 1);
    }

    #[test]
    fn refusal_log_is_rate_limited() {
        let mut log = RefusalLog::new();
        assert_eq!(log.note(0), Some(1));
        assert_eq!(log.note(1), None);
        assert_eq!(log.note(2), None);
        assert_eq!(log.note(REFUSAL_LOG_INTERVAL_MS), Some(3));
    }

    #[test]
    fn default_leaves_half_the_files() {
        assert_eq!(default_max_connections(20_000), 10_000);
        assert_eq!(default_max_connections(1), 1);
    }
}
