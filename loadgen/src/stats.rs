//! Measurements: latency histograms (µs, 1 µs to 1 h, 3 significant digits) and counters. Each
//! client executor keeps its own totals (no sharing on the hot path) plus a [`Live`] block the
//! once-a-second progress thread drains; totals are merged after the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

/// Largest latency recorded (1 hour in µs); larger values are clamped to it.
pub const LATENCY_US_MAX: u64 = 3_600_000_000;

pub fn new_histogram() -> Histogram<u64> {
    // Constant bounds (low ≥ 1, high ≥ 2 × low, sigfig ≤ 5): this cannot fail.
    Histogram::new_with_bounds(1, LATENCY_US_MAX, 3).expect("constant histogram bounds are valid")
}

pub fn record(h: &mut Histogram<u64>, latency_us: u64) {
    let _ = h.record(latency_us.clamp(1, LATENCY_US_MAX));
}

/// [`record`] for `n` samples of one latency (records acknowledged together, sent together).
pub fn record_n(h: &mut Histogram<u64>, latency_us: u64, n: u64) {
    let _ = h.record_n(latency_us.clamp(1, LATENCY_US_MAX), n);
}

/// Produce and end-to-end latencies.
#[derive(Clone)]
pub struct Latencies {
    pub produce_us: Histogram<u64>,
    pub e2e_us: Histogram<u64>,
    /// `commit_transaction`'s own time (`--transactional`).
    pub commit_us: Histogram<u64>,
}

impl Default for Latencies {
    fn default() -> Self {
        Self {
            produce_us: new_histogram(),
            e2e_us: new_histogram(),
            commit_us: new_histogram(),
        }
    }
}

impl Latencies {
    pub fn merge(&mut self, other: &Latencies) {
        let _ = self.produce_us.add(&other.produce_us);
        let _ = self.e2e_us.add(&other.e2e_us);
        let _ = self.commit_us.add(&other.commit_us);
    }

    pub fn reset(&mut self) {
        self.produce_us.reset();
        self.e2e_us.reset();
        self.commit_us.reset();
    }
}

/// What the progress thread reads from one executor: counters since start (atomics) and the
/// latencies since its last read (drained under a mutex only contended once a second).
#[derive(Default)]
pub struct Live {
    pub acked_msgs: AtomicU64,
    pub acked_bytes: AtomicU64,
    pub consumed_msgs: AtomicU64,
    pub consumed_bytes: AtomicU64,
    pub errors: AtomicU64,
    pub interval: Mutex<Latencies>,
}

impl Live {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Records produce latencies into this interval's histogram, under one lock however many.
    pub fn with_produce_latencies(&self, f: impl FnOnce(&mut Histogram<u64>)) {
        if let Ok(mut l) = self.interval.lock() {
            f(&mut l.produce_us);
        }
    }

    pub fn record_e2e(&self, latency_us: u64) {
        if let Ok(mut l) = self.interval.lock() {
            record(&mut l.e2e_us, latency_us);
        }
    }
}

/// Totals of one executor over the measured window (after the warm-up).
#[derive(Clone, Default)]
pub struct Totals {
    pub latencies: Latencies,
    pub acked_msgs: u64,
    pub acked_bytes: u64,
    pub consumed_msgs: u64,
    pub consumed_bytes: u64,
    pub failed_sends: u64,
    /// First and last event counted, for the window's length.
    pub first_event: Option<Instant>,
    pub last_event: Option<Instant>,
    /// The latest acknowledgement, and the longest time between two (the failover gap: how
    /// long producers went without an acknowledgement when a leader was killed).
    pub last_ack: Option<Instant>,
    pub ack_gap_max_us: u64,
}

impl Totals {
    pub fn touch(&mut self, at: Instant) {
        self.first_event = Some(self.first_event.map_or(at, |f| f.min(at)));
        self.last_event = Some(self.last_event.map_or(at, |l| l.max(at)));
    }

    /// An acknowledgement arrived at `at`.
    pub fn on_ack(&mut self, at: Instant) {
        if let Some(last) = self.last_ack {
            let gap_us = at.saturating_duration_since(last).as_micros();
            self.ack_gap_max_us = self
                .ack_gap_max_us
                .max(gap_us.try_into().unwrap_or(u64::MAX));
        }
        self.last_ack = Some(self.last_ack.map_or(at, |l| l.max(at)));
    }

    /// Merging executors' totals keeps the largest gap any one of them saw (each executor's
    /// producers see the same failover; with `--cores 1` it is exact).
    pub fn merge(&mut self, other: &Totals) {
        self.ack_gap_max_us = self.ack_gap_max_us.max(other.ack_gap_max_us);
        self.latencies.merge(&other.latencies);
        self.acked_msgs += other.acked_msgs;
        self.acked_bytes += other.acked_bytes;
        self.consumed_msgs += other.consumed_msgs;
        self.consumed_bytes += other.consumed_bytes;
        self.failed_sends += other.failed_sends;
        for t in [other.first_event, other.last_event].into_iter().flatten() {
            self.touch(t);
        }
    }
}

/// Rate in MB/s (10^6 bytes, as fio reports MB/s) and msgs/s over `window`.
pub fn rates(msgs: u64, bytes: u64, window: Duration) -> (f64, f64) {
    let s = window.as_secs_f64();
    if s <= 0.0 {
        return (0.0, 0.0);
    }
    (msgs as f64 / s, bytes as f64 / 1e6 / s)
}

/// Milliseconds at a percentile of a µs histogram (0 when empty).
pub fn pct_ms(h: &Histogram<u64>, percentile: f64) -> f64 {
    if h.is_empty() {
        0.0
    } else {
        h.value_at_percentile(percentile) as f64 / 1000.0
    }
}

/// Prints one progress line per second to stderr until `stop` is set.
pub fn progress_loop(lives: Vec<Arc<Live>>, stop: Arc<std::sync::atomic::AtomicBool>) {
    let start = Instant::now();
    let mut prev = [0u64; 4];
    let mut window = Latencies::default();
    let mut next = start + Duration::from_secs(1);
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now < next {
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
            continue;
        }
        next += Duration::from_secs(1);
        let mut cur = [0u64; 4];
        window.reset();
        for l in &lives {
            cur[0] += l.acked_msgs.load(Ordering::Relaxed);
            cur[1] += l.acked_bytes.load(Ordering::Relaxed);
            cur[2] += l.consumed_msgs.load(Ordering::Relaxed);
            cur[3] += l.consumed_bytes.load(Ordering::Relaxed);
            if let Ok(mut i) = l.interval.lock() {
                window.merge(&i);
                i.reset();
            }
        }
        let d: Vec<u64> = cur.iter().zip(prev).map(|(c, p)| c - p).collect();
        prev = cur;
        eprintln!(
            "[{:6.1}s] produce {:>9} msg/s {:>8.1} MB/s p50 {:>7.2} p99 {:>7.2} ms | e2e p50 {:>7.2} p99 {:>7.2} ms | consume {:>9} msg/s {:>8.1} MB/s",
            start.elapsed().as_secs_f64(),
            d[0],
            d[1] as f64 / 1e6,
            pct_ms(&window.produce_us, 50.0),
            pct_ms(&window.produce_us, 99.0),
            pct_ms(&window.e2e_us, 50.0),
            pct_ms(&window.e2e_us, 99.0),
            d[2],
            d[3] as f64 / 1e6,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_counts_and_widens_the_window() {
        let t0 = Instant::now();
        let mut a = Totals {
            acked_msgs: 3,
            ..Totals::default()
        };
        a.touch(t0 + Duration::from_secs(1));
        record(&mut a.latencies.produce_us, 1000);
        let mut b = Totals {
            acked_msgs: 4,
            ..Totals::default()
        };
        b.touch(t0);
        b.touch(t0 + Duration::from_secs(5));
        record(&mut b.latencies.produce_us, 3000);
        a.merge(&b);
        assert_eq!(a.acked_msgs, 7);
        assert_eq!(a.first_event, Some(t0));
        assert_eq!(a.last_event, Some(t0 + Duration::from_secs(5)));
        assert_eq!(a.latencies.produce_us.len(), 2);
        assert!((pct_ms(&a.latencies.produce_us, 100.0) - 3.0).abs() < 0.01);
    }

    #[test]
    fn rates_and_clamping_are_sane() {
        assert_eq!(rates(10, 2_000_000, Duration::from_secs(2)), (5.0, 1.0));
        assert_eq!(rates(10, 10, Duration::ZERO), (0.0, 0.0));
        let mut h = new_histogram();
        record(&mut h, 0);
        record(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert_eq!(pct_ms(&new_histogram(), 99.0), 0.0);
    }
}
