//! KIP-890 part 1 on the coordinator's side: whether a partition leader may append a
//! producer's first transactional batch of a transaction (Kafka's AddPartitionsToTxn v4
//! `VerifyOnly`).
//!
//! A partition asks before the first transactional batch of a producer that has no open
//! transaction on it (`broker/src/partition/verify.rs`). Only durable metadata counts: the
//! partition must be in the id's transaction, the transaction Ongoing (not being prepared or
//! completed) and the producer id and epoch the current ones. So a batch the coordinator never
//! added (a hanging transaction), or a late batch of a transaction already ended or aborted
//! by its timeout (Jepsen's "late produce after abort" in Bufstream), is refused instead of
//! opening a transaction nobody will ever end.

use spool_error_code::ErrorCode;

use super::coordinator::TxnCoordinator;
use super::state::TxnState;
use crate::topic_partition::TopicPartition;

impl TxnCoordinator {
    /// NONE when (`producer_id`, `producer_epoch`) of `transactional_id` has an Ongoing
    /// transaction holding `tp`. Otherwise: INVALID_PRODUCER_ID_MAPPING (unknown id, or another
    /// producer id), PRODUCER_FENCED (an older epoch), INVALID_PRODUCER_EPOCH (a newer one than
    /// the coordinator knows: never issued here), INVALID_TXN_STATE (no Ongoing transaction, or
    /// `tp` not in it).
    pub fn verify(
        &self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        tp: &TopicPartition,
    ) -> ErrorCode {
        let Some(m) = self.describe(transactional_id) else {
            return ErrorCode::InvalidProducerIdMapping;
        };
        if m.producer_id != producer_id {
            return ErrorCode::InvalidProducerIdMapping;
        }
        if producer_epoch < m.producer_epoch {
            return ErrorCode::ProducerFenced;
        }
        if producer_epoch > m.producer_epoch {
            return ErrorCode::InvalidProducerEpoch;
        }
        if m.state != TxnState::Ongoing || !m.partitions.contains(tp) {
            return ErrorCode::InvalidTxnState;
        }
        ErrorCode::None
    }
}
