//! The `txn` workload's librdkafka producer (through the `rdkafka` crate, on the Kafka port): the
//! same transactions as spool's producer in [`super::txn_workload`] — records
//! [`txn_value`]`(id, txn, i)` over every partition, every [`ABORT_EVERY`]-th flushed and aborted
//! on purpose — so the Kafka port's coordinator path (FindCoordinator, InitProducerId,
//! AddPartitionsToTxn, EndTxn) runs under the nemeses too.
//!
//! Outcomes, as librdkafka reports them: commit_transaction Ok → committed; an abort on purpose
//! → aborted (commit was never asked for); a failed commit → unknown (it may have been prepared
//! before the error), after which the producer aborts if it can and is made anew when it
//! cannot (a fatal error: its successor's InitProducerId fences it and settles the
//! transaction).

use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use super::history::{txn_value, TxnAttempt, TxnOutcome};
use super::txn_workload::{
    record, stopped, ABORT_EVERY, CALL_TIMEOUT_MS, RECORDS_PER_TXN, TXNS_PER_S, TXN_TIMEOUT_MS,
};
use super::workload::Shared;

type TxnProducer = ThreadedProducer<DefaultProducerContext>;

/// Starts librdkafka's producer `id` (transactional id `faults-txn-<id>`).
pub fn producer(
    id: u32,
    bootstrap: &[String],
    topic: &str,
    partitions: i32,
    shared: &Shared,
) -> JoinHandle<Result<(), String>> {
    let (bootstrap, topic, shared) = (bootstrap.join(","), topic.to_string(), shared.clone());
    std::thread::spawn(move || {
        run(id, &bootstrap, &topic, partitions, &shared);
        Ok(())
    })
}

fn connect(id: u32, bootstrap: &str) -> Result<TxnProducer, String> {
    let p: TxnProducer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("client.id", format!("faults-txn-rdkafka-{id}"))
        .set("transactional.id", format!("faults-txn-{id}"))
        .set("transaction.timeout.ms", TXN_TIMEOUT_MS.to_string())
        .set("linger.ms", "2")
        .set("request.timeout.ms", "5000")
        .set("topic.metadata.refresh.interval.ms", "1000")
        .create()
        .map_err(|e| format!("rdkafka producer: {e}"))?;
    p.init_transactions(call_timeout())
        .map_err(|e| format!("init_transactions: {e}"))?;
    Ok(p)
}

fn call_timeout() -> Duration {
    Duration::from_millis(CALL_TIMEOUT_MS)
}

fn run(id: u32, bootstrap: &str, topic: &str, partitions: i32, shared: &Shared) {
    let start = Instant::now();
    let mut txn = 0u64;
    while !stopped(shared) {
        let Ok(producer) = connect(id, bootstrap) else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        while !stopped(shared) {
            let due = start + Duration::from_micros(txn * 1_000_000 / TXNS_PER_S);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if producer.begin_transaction().is_err() {
                break;
            }
            let mut queued = 0u64;
            let mut send_failed = false;
            for i in 0..RECORDS_PER_TXN {
                let value = txn_value(id, txn, i);
                let record = BaseRecord::<(), str>::to(topic)
                    .payload(&value)
                    .partition((i % partitions.max(1) as u64) as i32);
                match producer.send(record) {
                    Ok(()) => queued += 1,
                    Err(_) => {
                        send_failed = true;
                        break;
                    }
                }
            }
            let abort = send_failed || txn % ABORT_EVERY == ABORT_EVERY - 1;
            let (outcome, remake) = if abort {
                // Written first, so the log holds what read_committed must hide.
                let _ = producer.flush(call_timeout());
                let ok = producer.abort_transaction(call_timeout()).is_ok();
                (TxnOutcome::Aborted, !ok)
            } else {
                match producer.commit_transaction(call_timeout()) {
                    Ok(()) => (TxnOutcome::Committed, false),
                    Err(e) => {
                        let aborted = producer.abort_transaction(call_timeout()).is_ok();
                        (
                            TxnOutcome::Unknown {
                                error: e.to_string(),
                            },
                            !aborted,
                        )
                    }
                }
            };
            record(
                shared,
                TxnAttempt {
                    producer: id,
                    txn,
                    records: queued,
                    outcome,
                    done_ms: shared.now_ms(),
                },
            );
            txn += 1;
            if remake {
                break;
            }
        }
    }
}
