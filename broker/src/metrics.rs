//! Per-core metrics (the broker's probe): request counts, bytes, and latency histograms, rendered
//! as Prometheus text with a `core` label. Each core owns its own; the admin endpoint gathers them
//! over the mesh, so nothing here is shared or locked.

use std::cell::{Cell, RefCell};
use std::fmt::Write;

use hdrhistogram::Histogram;
use spool_storage::sync_probe::{SyncStats, SYNC_BUCKETS_US};

pub struct CoreMetrics {
    core: usize,
    pub produce_requests: Cell<u64>,
    pub produce_bytes: Cell<u64>,
    pub fetch_requests: Cell<u64>,
    pub fetch_bytes: Cell<u64>,
    pub request_errors: Cell<u64>,
    pub connections: Cell<u64>,
    /// Client connections closed for sending nothing for `--connections-max-idle-ms`.
    pub connections_closed_idle: Cell<u64>,
    /// Client connections closed for a frame not complete within `--request-read-timeout-ms`.
    pub connections_closed_read_timeout: Cell<u64>,
    /// Client connections closed for taking no byte of a response for
    /// `--connections-max-idle-ms`.
    pub connections_closed_write_timeout: Cell<u64>,
    /// Client connections closed at accept: the broker was at `--max-connections`.
    pub connections_refused_max: Cell<u64>,
    /// Client connections closed at accept: their address was at `--max-connections-per-ip`.
    pub connections_refused_per_ip: Cell<u64>,
    /// ISR changes this core's leaders had committed that removed or added members.
    pub isr_shrinks: Cell<u64>,
    pub isr_expands: Cell<u64>,
    produce_latency_us: RefCell<Histogram<u64>>,
    fetch_latency_us: RefCell<Histogram<u64>>,
}

/// Bucket bounds (seconds) of the exported latency histograms.
const BUCKETS_S: [f64; 12] = [
    0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 5.0,
];

/// `spool_log_fdatasync_seconds`: cumulative buckets at the probe's bounds.
fn render_syncs(s: &mut String, c: usize, syncs: &SyncStats) {
    let mut below = 0;
    for (bound_us, n) in SYNC_BUCKETS_US.iter().zip(syncs.finished) {
        below += n;
        let le = *bound_us as f64 / 1e6;
        let _ = writeln!(
            s,
            "spool_log_fdatasync_seconds_bucket{{core=\"{c}\",le=\"{le}\"}} {below}"
        );
    }
    let count = syncs.finished_count();
    let _ = writeln!(
        s,
        "spool_log_fdatasync_seconds_bucket{{core=\"{c}\",le=\"+Inf\"}} {count}"
    );
    let sum_s = syncs.sum_us as f64 / 1e6;
    let _ = writeln!(s, "spool_log_fdatasync_seconds_sum{{core=\"{c}\"}} {sum_s}");
    let _ = writeln!(
        s,
        "spool_log_fdatasync_seconds_count{{core=\"{c}\"}} {count}"
    );
}

fn histogram() -> Histogram<u64> {
    // 1 µs .. 60 s at 2 significant digits: a fixed, small allocation.
    Histogram::new_with_bounds(1, 60_000_000, 2).expect("static histogram bounds are valid")
}

impl CoreMetrics {
    pub fn new(core: usize) -> Self {
        Self {
            core,
            produce_requests: Cell::new(0),
            produce_bytes: Cell::new(0),
            fetch_requests: Cell::new(0),
            fetch_bytes: Cell::new(0),
            request_errors: Cell::new(0),
            connections: Cell::new(0),
            connections_closed_idle: Cell::new(0),
            connections_closed_read_timeout: Cell::new(0),
            connections_closed_write_timeout: Cell::new(0),
            connections_refused_max: Cell::new(0),
            connections_refused_per_ip: Cell::new(0),
            isr_shrinks: Cell::new(0),
            isr_expands: Cell::new(0),
            produce_latency_us: RefCell::new(histogram()),
            fetch_latency_us: RefCell::new(histogram()),
        }
    }

    pub fn add(cell: &Cell<u64>, n: u64) {
        cell.set(cell.get().saturating_add(n));
    }

    pub fn record_produce(&self, bytes: u64, latency_us: u64) {
        Self::add(&self.produce_requests, 1);
        Self::add(&self.produce_bytes, bytes);
        let _ = self
            .produce_latency_us
            .borrow_mut()
            .record(latency_us.clamp(1, 60_000_000));
    }

    pub fn record_fetch(&self, bytes: u64, latency_us: u64) {
        Self::add(&self.fetch_requests, 1);
        Self::add(&self.fetch_bytes, bytes);
        let _ = self
            .fetch_latency_us
            .borrow_mut()
            .record(latency_us.clamp(1, 60_000_000));
    }

    /// This core's lines of the Prometheus exposition (HELP/TYPE lines come from [`header`]).
    pub fn render(&self, partitions: usize, log_bytes: u64, log_syncs: &SyncStats) -> String {
        let c = self.core;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "spool_produce_requests_total{{core=\"{c}\"}} {}",
            self.produce_requests.get()
        );
        let _ = writeln!(
            s,
            "spool_produce_bytes_total{{core=\"{c}\"}} {}",
            self.produce_bytes.get()
        );
        let _ = writeln!(
            s,
            "spool_fetch_requests_total{{core=\"{c}\"}} {}",
            self.fetch_requests.get()
        );
        let _ = writeln!(
            s,
            "spool_fetch_bytes_total{{core=\"{c}\"}} {}",
            self.fetch_bytes.get()
        );
        let _ = writeln!(
            s,
            "spool_request_errors_total{{core=\"{c}\"}} {}",
            self.request_errors.get()
        );
        let _ = writeln!(
            s,
            "spool_connections{{core=\"{c}\"}} {}",
            self.connections.get()
        );
        let _ = writeln!(
            s,
            "spool_connections_closed_idle_total{{core=\"{c}\"}} {}",
            self.connections_closed_idle.get()
        );
        let _ = writeln!(
            s,
            "spool_connections_closed_read_timeout_total{{core=\"{c}\"}} {}",
            self.connections_closed_read_timeout.get()
        );
        let _ = writeln!(
            s,
            "spool_connections_closed_write_timeout_total{{core=\"{c}\"}} {}",
            self.connections_closed_write_timeout.get()
        );
        for (reason, n) in [
            ("max_connections", &self.connections_refused_max),
            ("max_connections_per_ip", &self.connections_refused_per_ip),
        ] {
            let _ = writeln!(
                s,
                "spool_connections_refused_total{{core=\"{c}\",reason=\"{reason}\"}} {}",
                n.get()
            );
        }
        let _ = writeln!(
            s,
            "spool_isr_shrinks_total{{core=\"{c}\"}} {}",
            self.isr_shrinks.get()
        );
        let _ = writeln!(
            s,
            "spool_isr_expands_total{{core=\"{c}\"}} {}",
            self.isr_expands.get()
        );
        s.push_str(&crate::request_memory::render(c));
        s.push_str(&crate::frame_pins::render(c));
        s.push_str(&crate::response_memory::render(c));
        let _ = writeln!(s, "spool_partitions{{core=\"{c}\"}} {partitions}");
        let _ = writeln!(s, "spool_log_bytes{{core=\"{c}\"}} {log_bytes}");
        let _ = writeln!(
            s,
            "spool_log_fdatasyncs{{core=\"{c}\"}} {}",
            log_syncs.issued
        );
        render_syncs(&mut s, c, log_syncs);
        for (name, h) in [
            ("produce", &self.produce_latency_us),
            ("fetch", &self.fetch_latency_us),
        ] {
            let h = h.borrow();
            for b in BUCKETS_S {
                let n = h.count_between(0, (b * 1e6) as u64);
                let _ = writeln!(
                    s,
                    "spool_{name}_latency_seconds_bucket{{core=\"{c}\",le=\"{b}\"}} {n}"
                );
            }
            let _ = writeln!(
                s,
                "spool_{name}_latency_seconds_bucket{{core=\"{c}\",le=\"+Inf\"}} {}",
                h.len()
            );
            let sum_s = h.mean() * h.len() as f64 / 1e6;
            let _ = writeln!(
                s,
                "spool_{name}_latency_seconds_sum{{core=\"{c}\"}} {sum_s}"
            );
            let _ = writeln!(
                s,
                "spool_{name}_latency_seconds_count{{core=\"{c}\"}} {}",
                h.len()
            );
        }
        s
    }
}

/// HELP and TYPE lines, once per exposition.
pub fn header() -> &'static str {
    "# HELP spool_produce_requests_total Produce requests (per partition) handled by this core.\n\
# TYPE spool_produce_requests_total counter\n\
# HELP spool_produce_bytes_total Record bytes appended by this core.\n\
# TYPE spool_produce_bytes_total counter\n\
# HELP spool_fetch_requests_total Fetch requests (per partition) handled by this core.\n\
# TYPE spool_fetch_requests_total counter\n\
# HELP spool_fetch_bytes_total Record bytes returned by fetches on this core.\n\
# TYPE spool_fetch_bytes_total counter\n\
# HELP spool_request_errors_total Requests answered with an error code.\n\
# TYPE spool_request_errors_total counter\n\
# HELP spool_connections Open client connections (native and Kafka ports) on this core.\n\
# TYPE spool_connections gauge\n\
# HELP spool_connections_closed_idle_total Client connections closed after --connections-max-idle-ms with nothing read, written or in flight.\n\
# TYPE spool_connections_closed_idle_total counter\n\
# HELP spool_connections_closed_read_timeout_total Client connections closed for a frame not complete within --request-read-timeout-ms of its first byte.\n\
# TYPE spool_connections_closed_read_timeout_total counter\n\
# HELP spool_connections_closed_write_timeout_total Client connections closed for taking no byte of a response for --connections-max-idle-ms.\n\
# TYPE spool_connections_closed_write_timeout_total counter\n\
# HELP spool_connections_refused_total Client connections closed as soon as accepted, past --max-connections or --max-connections-per-ip.\n\
# TYPE spool_connections_refused_total counter\n\
# HELP spool_request_memory_bytes Bytes of client request frames held now (charged to this core's --request-memory-bytes share).\n\
# TYPE spool_request_memory_bytes gauge\n\
# HELP spool_request_memory_capacity_bytes This core's share of --request-memory-bytes.\n\
# TYPE spool_request_memory_capacity_bytes gauge\n\
# HELP spool_request_memory_waiting_connections Connections on this core waiting (not reading) for request memory.\n\
# TYPE spool_request_memory_waiting_connections gauge\n\
# HELP spool_request_memory_kept_bytes Bytes of produce request frames kept on this core because partitions' tail caches hold their batches uncopied (charged to --request-memory-bytes too).\n\
# TYPE spool_request_memory_kept_bytes gauge\n\
# HELP spool_request_memory_kept_bound_bytes This core's bound on kept frames: a quarter of its request memory, less room for the largest frame.\n\
# TYPE spool_request_memory_kept_bound_bytes gauge\n\
# HELP spool_produce_frames_copied_total Produce frames whose batches were copied out because kept frames had reached the bound.\n\
# TYPE spool_produce_frames_copied_total counter\n\
# HELP spool_response_memory_bytes Bytes of fetch pieces and copies held now for responses (charged to this core's --response-memory-bytes share).\n\
# TYPE spool_response_memory_bytes gauge\n\
# HELP spool_response_memory_capacity_bytes This core's share of --response-memory-bytes.\n\
# TYPE spool_response_memory_capacity_bytes gauge\n\
# HELP spool_response_memory_waiting Responses on this core waiting for response memory.\n\
# TYPE spool_response_memory_waiting gauge\n\
# HELP spool_partitions Partitions owned by this core.\n\
# TYPE spool_partitions gauge\n\
# HELP spool_log_bytes Bytes of log owned by this core.\n\
# TYPE spool_log_bytes gauge\n\
# HELP spool_log_fdatasyncs fdatasyncs of the segment files of the partitions this core owns now, since each was opened (a partition leaving the core takes its count with it).\n\
# TYPE spool_log_fdatasyncs gauge\n\
# HELP spool_log_fdatasync_seconds How long the finished fdatasyncs of the segment files of the partitions this core owns now took (Kafka's LogFlushRateAndTimeMs); like spool_log_fdatasyncs, a partition leaving the core takes its counts with it.\n\
# TYPE spool_log_fdatasync_seconds histogram\n\
# HELP spool_produce_latency_seconds Produce latency per partition request, append to acknowledgement.\n\
# TYPE spool_produce_latency_seconds histogram\n\
# HELP spool_fetch_latency_seconds Fetch latency per request, long-poll wait included.\n\
# TYPE spool_fetch_latency_seconds histogram\n"
}
