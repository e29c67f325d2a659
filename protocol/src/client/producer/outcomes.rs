//! How a batch ends: delivered (each record's report), sent back to go again, or failed (and,
//! with idempotence, the producer id given up) — the answers to produce requests and the
//! rules that sort their errors (module docs of [`super`]: ordering and renumbering).

use tracing::{debug, warn};

use super::ProducerCore;
use crate::client::accumulator::{ClosedBatch, PendingRecord, RecordId};
use crate::client::net::backoff_ms;
use crate::client::{ClientError, RecordMetadata};
use crate::codec::Response;
use crate::wire::ResponseBodyT;
use crate::ErrorCode;

use super::DeliveryReport;

impl ProducerCore {
    /// Fails `id`, a record or a unit of `records` records.
    pub(super) fn fail_one(&mut self, id: RecordId, records: u32, error: ClientError) {
        self.txn_record_failed(&error);
        // A report waits for the driver to hand it out.
        self.drive_needed = true;
        self.stats.records_failed += u64::from(records);
        self.reports.push(DeliveryReport {
            id,
            result: Err(error),
        });
    }

    pub(super) fn fail_records(
        &mut self,
        records: &[PendingRecord],
        reserved_bytes: usize,
        error: &ClientError,
    ) {
        self.acc.release(reserved_bytes);
        for r in records {
            self.fail_one(r.id, r.records, error.clone());
        }
    }

    /// Fails an in-flight batch for good.
    pub(super) fn fail_batch(&mut self, batch: ClosedBatch, error: ClientError) {
        self.pipes.resolved(&batch);
        self.fail_resolved(batch, error);
    }

    /// Fails a batch the pipelines already count as resolved.
    pub(super) fn fail_resolved(&mut self, batch: ClosedBatch, error: ClientError) {
        warn!(tp = %batch.tp, %error, records = batch.records.len(), "produce failed");
        self.fail_records(&batch.records, batch.reserved_bytes, &error);
        let current = batch.stamp.map(|(id, epoch, _)| (id, epoch)) == self.producer;
        // A transactional producer keeps its id: the transaction is aborted, then a new epoch
        // is taken (`txn`).
        if self.config.idempotent() && current && self.txn.is_none() {
            // The partition's sequence is now unknown to us: start over with a fresh producer id,
            // as Kafka's idempotent producer does. (A batch of an id already replaced changes
            // nothing: its successor is in use.)
            self.producer = None;
            self.sequences.clear();
        }
    }

    pub(super) fn complete_batch(
        &mut self,
        batch: ClosedBatch,
        base_offset: i64,
        log_append_time_ms: i64,
    ) {
        self.pipes.resolved(&batch);
        self.acc.release(batch.reserved_bytes);
        let topic: std::sync::Arc<str> = std::sync::Arc::from(batch.tp.topic.as_str());
        self.reports.reserve(batch.records.len());
        // Records of the entries before this one: its (first) record's offset delta.
        let mut before = 0i64;
        for r in &batch.records {
            self.stats.records_delivered += u64::from(r.records);
            let offset = if base_offset >= 0 {
                base_offset.saturating_add(before)
            } else {
                -1
            };
            before += i64::from(r.records);
            self.reports.push(DeliveryReport {
                id: r.id,
                result: Ok(RecordMetadata {
                    topic: std::sync::Arc::clone(&topic),
                    partition: batch.tp.partition,
                    offset,
                    timestamp_ms: if log_append_time_ms >= 0 {
                        log_append_time_ms
                    } else {
                        r.timestamp_ms
                    },
                }),
            });
        }
    }

    /// A batch came back with `code` (or its connection died): retry or fail it.
    pub(super) fn batch_error(&mut self, mut batch: ClosedBatch, code: ErrorCode, now_ms: u64) {
        if code.invalidates_metadata() {
            self.metadata.request_refresh();
            // Resend only once fresher metadata has arrived, so the retry goes to the new leader
            // rather than straight back to the one that refused it.
            batch.stale_metadata_version = Some(self.metadata.version());
        }
        let expired = now_ms >= batch.created_ms + self.config.delivery_timeout_ms;
        // OUT_OF_ORDER_SEQUENCE_NUMBER says the batch is not written. Behind an earlier batch
        // of the partition still unresolved — or sent while one was: a broker may take two
        // requests of one connection out of order — it goes again, alone, once nothing is
        // ahead (no backoff: it is held until then anyway); refused alone, it fails. Under a
        // producer id since replaced it goes again renumbered.
        let (retriable, behind) = match code {
            ErrorCode::OutOfOrderSequenceNumber if self.config.idempotent() => {
                let stale = batch.stamp.map(|(id, epoch, _)| (id, epoch)) != self.producer;
                batch.restamp = stale;
                let behind = self.pipes.earlier_unresolved(&batch) || batch.sent_behind;
                (stale || behind, behind && !stale)
            }
            _ => (code.is_retriable(), false),
        };
        if retriable && batch.attempts <= self.config.retries && !expired {
            self.stats.batch_retries += 1;
            batch.retry_at_ms = if behind {
                now_ms
            } else {
                now_ms
                    + backoff_ms(
                        batch.attempts,
                        self.config.retry_backoff_ms,
                        self.config.retry_backoff_max_ms,
                    )
            };
            debug!(tp = %batch.tp, %code, attempts = batch.attempts, retry_at_ms = batch.retry_at_ms, "retrying batch");
            self.pipes.requeue(batch);
        } else if expired {
            let e = ClientError::Timeout {
                what: format!("delivery to {}", batch.tp),
                timeout_ms: self.config.delivery_timeout_ms,
            };
            self.fail_batch(batch, e);
        } else {
            let e = ClientError::broker(code, format!("produce to {}", batch.tp));
            self.fail_batch(batch, e);
        }
    }

    pub(super) fn on_produce_response(
        &mut self,
        batches: Vec<ClosedBatch>,
        response: Response,
        now_ms: u64,
    ) {
        let frame_error = ErrorCode::from(response.header.error_code);
        let ResponseBodyT::ProduceResponse(body) = response.header.body else {
            let code = if frame_error.is_ok() {
                ErrorCode::UnknownServerError
            } else {
                frame_error
            };
            for b in batches {
                self.batch_error(b, code, now_ms);
            }
            return;
        };
        for b in batches {
            let result = body
                .responses
                .iter()
                .flatten()
                .filter(|t| t.name == b.tp.topic)
                .flat_map(|t| t.partitions.iter().flatten())
                .find(|p| p.index == b.tp.partition);
            match result {
                Some(p) => {
                    let code = ErrorCode::from(p.error_code);
                    if code.is_ok() || code == ErrorCode::DuplicateSequenceNumber {
                        self.complete_batch(b, p.base_offset, p.log_append_time_ms);
                    } else {
                        self.batch_error(b, code, now_ms);
                    }
                }
                None => self.batch_error(b, ErrorCode::UnknownServerError, now_ms),
            }
        }
    }
}
