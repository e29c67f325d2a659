//! What one loadgen producer does with a delivery report — of one record, or of a unit of
//! consecutive records sent together (`--records-per-send`): counts them, records each
//! record's latency from its own intended send time, notes the acknowledged sequences for
//! `--verify`, and keeps failures. A report touches the shared state once, however many
//! records it covers.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use spool_protocol::client::ClientError;

use crate::core_state::CoreState;
use crate::rate::Schedule;
use crate::stats::{record_n, Live};

/// When the records of one send were meant to go out.
#[derive(Debug, Clone, Copy)]
pub enum Intended {
    /// All at this instant (closed loop: the moment they were handed to the producer).
    At(Instant),
    /// Each at its own place in the producer's `--rate` schedule.
    Scheduled,
}

/// What every delivery report of one producer shares.
pub struct Delivered {
    pub producer_id: u32,
    pub st: Rc<RefCell<CoreState>>,
    pub live: Arc<Live>,
    /// Records sent and not yet reported.
    pub outstanding: Rc<Cell<u64>>,
    pub measure_from: Instant,
    /// The producer's start, from which its schedule counts.
    pub start: Instant,
    pub schedule: Schedule,
    pub message_bytes: u64,
    pub verify: bool,
}

impl Delivered {
    /// The intended send time of record `seq`.
    pub fn intended_at(&self, seq: u64, intended: Intended) -> Instant {
        match intended {
            Intended::At(t) => t,
            Intended::Scheduled => {
                let offset_ns = self.schedule.intended_offset_ns(seq).unwrap_or(0);
                self.start + Duration::from_nanos(offset_ns)
            }
        }
    }

    /// Hands `sample(latency_us, count)` the latencies of records `first_seq ..` acknowledged
    /// at `now`: one sample for all when they were meant to go at one instant, else each its own.
    fn latencies(
        &self,
        first_seq: u64,
        records: u64,
        intended: Intended,
        now: Instant,
        mut sample: impl FnMut(u64, u64),
    ) {
        let latency_us = |seq: u64| {
            let at = self.intended_at(seq, intended);
            now.saturating_duration_since(at).as_micros() as u64
        };
        match intended {
            Intended::At(_) => sample(latency_us(first_seq), records),
            Intended::Scheduled => {
                for seq in first_seq..first_seq + records {
                    sample(latency_us(seq), 1);
                }
            }
        }
    }

    /// Records `first_seq .. first_seq + records` were acknowledged, or failed, together.
    pub fn report(
        &self,
        first_seq: u64,
        records: u64,
        intended: Intended,
        result: Result<(), ClientError>,
    ) {
        let seqs = first_seq..first_seq + records;
        let mut st = self.st.borrow_mut();
        match result {
            Ok(()) => {
                let now = Instant::now();
                let bytes = self.message_bytes * records;
                Live::add(&self.live.acked_msgs, records);
                Live::add(&self.live.acked_bytes, bytes);
                self.live.with_produce_latencies(|h| {
                    self.latencies(first_seq, records, intended, now, |us, n| {
                        record_n(h, us, n)
                    });
                });
                if now >= self.measure_from {
                    let totals = &mut st.totals;
                    totals.acked_msgs += records;
                    totals.acked_bytes += bytes;
                    let h = &mut totals.latencies.produce_us;
                    self.latencies(first_seq, records, intended, now, |us, n| {
                        record_n(h, us, n)
                    });
                    totals.touch(now);
                    totals.on_ack(now);
                }
                if self.verify {
                    for seq in seqs {
                        st.acks.ack(self.producer_id, seq);
                    }
                }
            }
            Err(e) => {
                Live::add(&self.live.errors, records);
                st.totals.failed_sends += records;
                st.acks.failed_sends += records;
                let what = match records {
                    1 => format!("seq {first_seq}"),
                    _ => format!("seqs {first_seq}..{}", seqs.end),
                };
                st.error(format!("producer {} {what}: {e}", self.producer_id));
            }
        }
        self.outstanding.set(self.outstanding.get() - records);
    }
}
