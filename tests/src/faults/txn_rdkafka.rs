//! The `txn` workload's librdkafka producer (through the `rdkafka` crate, on the Kafka port): the
//! same transactions as spool's producer in [`super::txn_workload`] — records
//! `txn_value(id, txn, i)` over every partition, some flushed and aborted on purpose — so the Kafka port's coordinator path (FindCoordinator, InitProducerId,
//! AddPartitionsToTxn, EndTxn) runs under the nemeses too.
//!
//! The loop and its outcomes are `run_txns`'s, shared with spool's producer; this file is
//! librdkafka's side of `TxnClient` and its configuration.

use std::thread::JoinHandle;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use super::txn_workload::{run_txns, TxnClient, CALL_TIMEOUT_MS, TXN_TIMEOUT_MS};
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
    run_txns(id, topic, partitions, shared, || connect(id, bootstrap));
}

impl TxnClient for TxnProducer {
    fn begin(&self) -> bool {
        self.begin_transaction().is_ok()
    }

    fn send(&self, topic: &str, partition: i32, value: String) -> bool {
        let record = BaseRecord::<(), str>::to(topic)
            .payload(&value)
            .partition(partition);
        ThreadedProducer::send(self, record).is_ok()
    }

    fn flush(&self) {
        let _ = Producer::flush(self, call_timeout());
    }

    fn commit(&self) -> Result<(), String> {
        self.commit_transaction(call_timeout())
            .map_err(|e| e.to_string())
    }

    fn abort(&self) -> bool {
        self.abort_transaction(call_timeout()).is_ok()
    }

    fn close(self) {
        // librdkafka's destructor waits for nothing the workload needs.
        drop(self);
    }
}
