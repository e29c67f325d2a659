//! One loadgen consumer task: owns the partitions `i` with `i % consumers == id`. In `e2e` it
//! positions at the log end before the producers start, records end-to-end latency from the
//! payload's send time, feeds the verifier, and after the producers finish reads until it reaches
//! the log end measured then (or `--drain-timeout`). In `consume` it reads from the earliest
//! offset to the end measured at start (a catch-up read), or until `--messages`/`--duration`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use spool_protocol::client::consumer::{ConsumerConfig, SeekTo};
use spool_protocol::client::glommio_io::Consumer;
use spool_protocol::client::TopicPartition;

use crate::cli::{Bound, Kind};
use crate::core_state::CoreState;
use crate::payload::Header;
use crate::shared::{epoch_now_us, ReadyGuard, Shared};
use crate::stats::{record, Live};

/// Bound on resolving one partition's position (ListOffsets, leader discovery).
const POSITION_TIMEOUT_MS: u64 = 30_000;
const POLL_MS: u64 = 100;
/// Records taken per poll.
const MAX_POLL_RECORDS: usize = 10_000;

fn config(name: String) -> ConsumerConfig {
    ConsumerConfig {
        client_id: name,
        ..ConsumerConfig::default()
    }
}

/// The log end of each partition now (a separate consumer, so the reading one keeps its place).
pub async fn end_offsets(
    brokers: &[&str],
    tps: &[TopicPartition],
) -> Result<HashMap<TopicPartition, i64>, String> {
    let mut probe = Consumer::new(brokers, config("loadgen-probe".into()))
        .map_err(|e| format!("end-offset probe: {e}"))?;
    probe.assign(tps.iter().cloned());
    let mut ends = HashMap::new();
    for tp in tps {
        probe
            .seek(tp, SeekTo::Latest)
            .map_err(|e| format!("seek {tp}: {e}"))?;
    }
    for tp in tps {
        let end = probe
            .position(tp, POSITION_TIMEOUT_MS)
            .await
            .map_err(|e| format!("end offset of {tp}: {e}"))?;
        ends.insert(tp.clone(), end);
    }
    Ok(ends)
}

async fn caught_up(
    consumer: &mut Consumer,
    ends: &HashMap<TopicPartition, i64>,
) -> Result<bool, String> {
    for (tp, end) in ends {
        let pos = consumer
            .position(tp, POSITION_TIMEOUT_MS)
            .await
            .map_err(|e| format!("position of {tp}: {e}"))?;
        if pos < *end {
            return Ok(false);
        }
    }
    Ok(true)
}

pub async fn run(
    id: usize,
    sh: Arc<Shared>,
    st: Rc<RefCell<CoreState>>,
    live: Arc<Live>,
) -> Result<(), String> {
    let mut ready = ReadyGuard::new(&sh.consumers_ready);
    let s = &sh.settings;
    let o = &s.opts;
    let brokers = s.brokers();
    let tps: Vec<TopicPartition> = (0..o.partitions)
        .filter(|i| *i as usize % o.consumers == id)
        .map(|i| TopicPartition::new(o.topic.clone(), i))
        .collect();
    if tps.is_empty() {
        return Ok(());
    }
    // Catch-up reads stop at the end measured before reading, and their clock starts before
    // the seek (fetching begins as soon as the position resolves).
    let mut ends = if s.kind == Kind::Consume {
        let ends = end_offsets(&brokers, &tps).await?;
        sh.start();
        Some(ends)
    } else {
        None
    };
    let mut consumer = Consumer::new(&brokers, config(format!("loadgen-c{id}")))
        .map_err(|e| format!("consumer {id}: {e}"))?;
    consumer.max_poll_records = MAX_POLL_RECORDS;
    consumer.assign(tps.iter().cloned());
    let seek_to = if s.kind == Kind::E2e {
        SeekTo::Latest
    } else {
        SeekTo::Earliest
    };
    for tp in &tps {
        consumer
            .seek(tp, seek_to)
            .map_err(|e| format!("seek {tp}: {e}"))?;
        consumer
            .position(tp, POSITION_TIMEOUT_MS)
            .await
            .map_err(|e| format!("consumer {id} position of {tp}: {e}"))?;
    }
    ready.mark();
    let measure_from = sh.measure_from();
    let deadline = match s.bound {
        Bound::Duration(d) if s.kind == Kind::Consume => Some(measure_from + d),
        _ => None,
    };
    let mut drain_deadline: Option<Instant> = None;
    loop {
        let records = consumer
            .poll(POLL_MS)
            .await
            .map_err(|e| format!("consumer {id} poll: {e}"))?;
        let now = Instant::now();
        let now_us = epoch_now_us();
        // `consume --messages N` counts no more than N records, all consumers together.
        let wanted = match s.bound {
            Bound::Messages(n) if s.kind == Kind::Consume => {
                n.saturating_sub(sh.consumed_total.load(Ordering::Relaxed)) as usize
            }
            _ => usize::MAX,
        };
        let records = &records[..records.len().min(wanted)];
        let got = records.len() as u64;
        {
            let mut st = st.borrow_mut();
            let counted = now >= measure_from;
            for r in records {
                let bytes = r.value.as_ref().map_or(0, |v| v.len()) as u64;
                let header = r.value.as_deref().and_then(Header::decode);
                Live::add(&live.consumed_msgs, 1);
                Live::add(&live.consumed_bytes, bytes);
                if counted {
                    st.totals.consumed_msgs += 1;
                    st.totals.consumed_bytes += bytes;
                    st.totals.touch(now);
                }
                if s.kind == Kind::E2e {
                    if let Some(h) = header.filter(|h| h.run_id == sh.run_id) {
                        let latency_us = now_us.saturating_sub(h.send_time_us);
                        live.record_e2e(latency_us);
                        if counted {
                            record(&mut st.totals.latencies.e2e_us, latency_us);
                        }
                    }
                }
                if o.verify {
                    st.verifier.observe(r.partition, header);
                }
            }
        }
        let total = sh.consumed_total.fetch_add(got, Ordering::Relaxed) + got;
        match s.kind {
            Kind::Consume => {
                if let Bound::Messages(n) = s.bound {
                    if total >= n {
                        break;
                    }
                }
                if deadline.is_some_and(|d| now >= d) {
                    break;
                }
            }
            _ => {
                if sh.producers_done.load(Ordering::Acquire) < o.producers {
                    continue;
                }
                if ends.is_none() {
                    ends = Some(end_offsets(&brokers, &tps).await?);
                    drain_deadline = Some(Instant::now() + s.drain_timeout);
                }
            }
        }
        if got < MAX_POLL_RECORDS as u64 {
            if let Some(ends) = &ends {
                if caught_up(&mut consumer, ends).await? {
                    break;
                }
            }
        }
        if drain_deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(format!(
                "consumer {id}: did not reach the log end within --drain-timeout {:.0} s",
                s.drain_timeout.as_secs_f64()
            ));
        }
    }
    Ok(())
}
