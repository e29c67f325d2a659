//! State the client executors share for one run: settings, the run id, the common start instant,
//! and the few cross-thread signals (consumers positioned, producers finished). Everything else
//! stays on its executor.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cli::Settings;
use crate::stats::Live;

pub struct Shared {
    pub settings: Settings,
    /// Distinguishes this run's messages from any other's in the same topic.
    pub run_id: u32,
    t0: Instant,
    epoch_at_t0_us: u64,
    /// ns after `t0` + 1 at which the load started; 0 while unset.
    start_ns_plus_1: AtomicU64,
    pub consumers_ready: AtomicUsize,
    pub producers_done: AtomicUsize,
    pub consumed_total: AtomicU64,
    pub lives: Vec<Arc<Live>>,
}

pub fn epoch_now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

impl Shared {
    pub fn new(settings: Settings) -> Self {
        let t0 = Instant::now();
        let epoch_at_t0_us = epoch_now_us();
        let lives = (0..settings.opts.cores)
            .map(|_| Arc::new(Live::default()))
            .collect();
        Self {
            settings,
            run_id: (epoch_at_t0_us ^ (u64::from(std::process::id()) << 20)) as u32,
            t0,
            epoch_at_t0_us,
            start_ns_plus_1: AtomicU64::new(0),
            consumers_ready: AtomicUsize::new(0),
            producers_done: AtomicUsize::new(0),
            consumed_total: AtomicU64::new(0),
            lives,
        }
    }

    /// Microseconds since the Unix epoch at `at` (on this process's monotonic clock).
    pub fn epoch_us(&self, at: Instant) -> u64 {
        self.epoch_at_t0_us + at.saturating_duration_since(self.t0).as_micros() as u64
    }

    /// The load's start: fixed by the first caller, the same for every executor.
    pub fn start(&self) -> Instant {
        let mine = Instant::now().saturating_duration_since(self.t0).as_nanos() as u64 + 1;
        let v = match self.start_ns_plus_1.compare_exchange(
            0,
            mine,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => mine,
            Err(set) => set,
        };
        self.t0 + Duration::from_nanos(v - 1)
    }

    /// The start if the load began, without fixing it.
    pub fn started(&self) -> Option<Instant> {
        match self.start_ns_plus_1.load(Ordering::Acquire) {
            0 => None,
            v => Some(self.t0 + Duration::from_nanos(v - 1)),
        }
    }

    /// Results before this instant are not counted (the warm-up).
    pub fn measure_from(&self) -> Instant {
        self.start() + self.settings.warmup
    }
}

/// Counts one consumer as ready exactly once — when it is positioned, or when it gives up — so
/// producers waiting for consumers can never wait forever.
pub struct ReadyGuard<'a> {
    counter: &'a AtomicUsize,
    marked: bool,
}

impl<'a> ReadyGuard<'a> {
    pub fn new(counter: &'a AtomicUsize) -> Self {
        Self {
            counter,
            marked: false,
        }
    }

    pub fn mark(&mut self) {
        if !self.marked {
            self.marked = true;
            self.counter.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for ReadyGuard<'_> {
    fn drop(&mut self) {
        self.mark();
    }
}
