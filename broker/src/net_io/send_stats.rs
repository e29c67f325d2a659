//! What this core's connections sent from segment files, counted per piece: cached pieces
//! spliced, cold pieces read, the reactor's time inside file splices and the wait for cold
//! pieces ([`FileSendStats`]); totals since start, and an interval logged at debug level.

use std::cell::RefCell;

/// What this core's connections sent from files: pieces spliced from the page cache, pieces
/// that were cold (sent the [`ColdRanges`] way; with `splice`, nothing is checked and every
/// piece counts as cached), and the wall time the reactor spent inside file → pipe splices —
/// time in which no other task of the core ran.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileSendStats {
    pub cached_pieces: u64,
    pub cached_bytes: u64,
    pub cold_pieces: u64,
    pub cold_bytes: u64,
    pub reactor_splice_ns: u64,
    /// The longest single file → pipe splice on the reactor.
    pub reactor_splice_max_ns: u64,
    /// Wall time cold pieces took to come off the disk (io_uring reads, or splices on the
    /// blocking thread), while the reactor ran other tasks; and the longest one.
    pub cold_wait_ns: u64,
    pub cold_wait_max_ns: u64,
}

impl FileSendStats {
    fn add(&mut self, other: &Self) {
        self.cached_pieces += other.cached_pieces;
        self.cached_bytes += other.cached_bytes;
        self.cold_pieces += other.cold_pieces;
        self.cold_bytes += other.cold_bytes;
        self.reactor_splice_ns += other.reactor_splice_ns;
        self.reactor_splice_max_ns = self.reactor_splice_max_ns.max(other.reactor_splice_max_ns);
        self.cold_wait_ns += other.cold_wait_ns;
        self.cold_wait_max_ns = self.cold_wait_max_ns.max(other.cold_wait_max_ns);
    }
}

/// The probe that owns those counters: totals since start, and the interval logged at debug
/// level (target `spool_broker::net_io`) at most once per [`PROBE_LOG_INTERVAL`].
#[derive(Default)]
struct FileSendProbe {
    total: FileSendStats,
    interval: FileSendStats,
    interval_from: Option<std::time::Instant>,
}

const PROBE_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

thread_local! {
    static PROBE: RefCell<FileSendProbe> = RefCell::new(FileSendProbe::default());
}

/// This core's totals (executors are threads, so each core has its own).
pub fn file_send_stats() -> FileSendStats {
    PROBE.with(|p| p.borrow().total)
}

pub(super) fn record(delta: FileSendStats) {
    PROBE.with(|p| {
        let mut p = p.borrow_mut();
        p.total.add(&delta);
        p.interval.add(&delta);
        p.interval_from.get_or_insert_with(std::time::Instant::now);
    });
}

pub(super) fn count(cold: bool, bytes: usize) {
    let mut d = FileSendStats::default();
    if cold {
        d.cold_pieces = 1;
        d.cold_bytes = bytes as u64;
    } else {
        d.cached_pieces = 1;
        d.cached_bytes = bytes as u64;
    }
    record(d);
}

pub(super) fn nanos(elapsed: std::time::Duration) -> u64 {
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

pub(super) fn note_reactor_splice(elapsed: std::time::Duration) {
    let ns = nanos(elapsed);
    record(FileSendStats {
        reactor_splice_ns: ns,
        reactor_splice_max_ns: ns,
        ..FileSendStats::default()
    });
}

pub(super) fn note_cold_wait(elapsed: std::time::Duration) {
    let ns = nanos(elapsed);
    record(FileSendStats {
        cold_wait_ns: ns,
        cold_wait_max_ns: ns,
        ..FileSendStats::default()
    });
}

/// Logs and resets the interval once it is [`PROBE_LOG_INTERVAL`] old.
pub(super) fn maybe_log_interval() {
    PROBE.with(|p| {
        let mut p = p.borrow_mut();
        let Some(from) = p.interval_from else { return };
        let elapsed = from.elapsed();
        if elapsed < PROBE_LOG_INTERVAL {
            return;
        }
        let i = std::mem::take(&mut p.interval);
        p.interval_from = None;
        tracing::debug!(
            interval_ms = elapsed.as_millis() as u64,
            cached_pieces = i.cached_pieces,
            cached_bytes = i.cached_bytes,
            cold_pieces = i.cold_pieces,
            cold_bytes = i.cold_bytes,
            reactor_splice_us = i.reactor_splice_ns / 1000,
            reactor_splice_max_us = i.reactor_splice_max_ns / 1000,
            cold_wait_us = i.cold_wait_ns / 1000,
            cold_wait_max_us = i.cold_wait_max_ns / 1000,
            "file sends"
        );
    });
}
