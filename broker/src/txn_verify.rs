//! KIP-890 part 1 between brokers: a partition leader's question to a transactional id's
//! coordinator — may this producer's first transactional batch of a transaction be appended
//! here? — asked on the partition's owner core before the append (`crate::partition`'s
//! `verify` keeps the answer valid until the append), through the mesh when this broker
//! coordinates the id, over the internal port otherwise (`VerifyTxn`); [`serve`] answers
//! another broker's question.
//!
//! Promises: a batch is verified only by the coordinator's own durable state
//! (`spool_core::txn::verify`). A coordinator that cannot be asked now (moving, loading,
//! unreachable) makes the produce fail with NOT_ENOUGH_REPLICAS, which every client retries
//! (Kafka answers so too, for the clients that know nothing of verification); a refusal is
//! INVALID_TXN_STATE (no Ongoing transaction holds the partition) or INVALID_PRODUCER_EPOCH
//! (the producer is fenced), and nothing is appended.
//!
//! Knows no shard: it is handed the core's [`Local`], [`Router`] and [`Services`] (the shard
//! calls it from its own produce).

use std::rc::Rc;

use spool_protocol::internal::{InternalMessage, VerifyTxn};
use spool_protocol::ErrorCode;

use crate::calls::Services;
use crate::local::Local;
use crate::peers::Peers;
use crate::requests::TopicPartition;
use crate::router::{self, Router};
use crate::txn::calls::{TxnAnswer, TxnCall};
use crate::txn::{coordinator_partition, TRANSACTION_STATE_TOPIC};

/// How long one verification over the internal port may take.
const VERIFY_CALL_TIMEOUT_MS: u64 = 5_000;

/// Longest transactional id looked up (the fronts' limit).
const TRANSACTIONAL_ID_BYTES_MAX: usize = 1024;

/// One core's means to ask: its state, its mesh, the shard answering its own calls, and its
/// connections to other brokers.
pub struct Asker<'a, S: Services> {
    pub local: &'a Local,
    pub router: &'a Router,
    pub services: &'a Rc<S>,
    pub peers: &'a Peers,
}

impl<S: Services> Asker<'_, S> {
    /// Asks `q`'s coordinator; the code the produce gets (module docs), NONE to append.
    pub async fn verify(&self, q: VerifyTxn) -> ErrorCode {
        let code = match self.coordinator_now(&q.transactional_id) {
            Err(code) => code,
            Ok((node, core)) if node == self.local.config.node_id => {
                self.ask_core(core, q.clone()).await
            }
            Ok((node, _)) => {
                self.peers.learn_addresses(&self.local.image.borrow());
                let question = InternalMessage::VerifyTxn(q.clone());
                match self
                    .peers
                    .call(node, question, VERIFY_CALL_TIMEOUT_MS)
                    .await
                {
                    Ok(InternalMessage::VerifyTxnAnswer(code)) => code,
                    Ok(_) => ErrorCode::CoordinatorNotAvailable,
                    Err(e) => {
                        tracing::debug!(node, "VerifyTxn: {e}");
                        ErrorCode::CoordinatorNotAvailable
                    }
                }
            }
        };
        let answer = match code {
            ErrorCode::None => ErrorCode::None,
            ErrorCode::InvalidTxnState | ErrorCode::InvalidProducerIdMapping => {
                ErrorCode::InvalidTxnState
            }
            ErrorCode::ProducerFenced | ErrorCode::InvalidProducerEpoch => {
                ErrorCode::InvalidProducerEpoch
            }
            _ => ErrorCode::NotEnoughReplicas,
        };
        if answer != ErrorCode::None {
            tracing::debug!(topic = %q.topic, partition = q.partition, transactional_id = %q.transactional_id, producer_id = q.producer_id, producer_epoch = q.producer_epoch, ?code, "transactional batch not verified");
        }
        answer
    }

    /// Another broker's question: answered by this broker's coordinator core for the id, or
    /// NOT_COORDINATOR when this broker does not lead the id's partition.
    pub async fn serve(&self, q: VerifyTxn) -> ErrorCode {
        match self.coordinator_now(&q.transactional_id) {
            Ok((node, core)) if node == self.local.config.node_id => self.ask_core(core, q).await,
            Ok(_) => ErrorCode::NotCoordinator,
            Err(code) => code,
        }
    }

    /// Where the id is coordinated now, without creating `__transaction_state`:
    /// INVALID_TXN_STATE when the topic does not exist (so no transaction can),
    /// COORDINATOR_NOT_AVAILABLE while its partition has no leader.
    fn coordinator_now(&self, transactional_id: &str) -> Result<(i32, usize), ErrorCode> {
        if transactional_id.is_empty() || transactional_id.len() > TRANSACTIONAL_ID_BYTES_MAX {
            return Err(ErrorCode::InvalidTxnState);
        }
        let partitions = self
            .local
            .partition_count(TRANSACTION_STATE_TOPIC)
            .ok_or(ErrorCode::InvalidTxnState)?;
        let tp = TopicPartition::new(
            TRANSACTION_STATE_TOPIC,
            coordinator_partition(transactional_id, partitions),
        );
        router::leader_and_owner(&self.local.image.borrow(), self.router, &tp)
            .ok_or(ErrorCode::CoordinatorNotAvailable)
    }

    async fn ask_core(&self, core: usize, q: VerifyTxn) -> ErrorCode {
        let call = TxnCall::Verify {
            transactional_id: q.transactional_id,
            producer_id: q.producer_id,
            producer_epoch: q.producer_epoch,
            tp: TopicPartition::new(q.topic, q.partition),
        };
        match self.router.call(self.services, core, call).await {
            Ok(TxnAnswer::Done(Ok(()))) => ErrorCode::None,
            Ok(TxnAnswer::Done(Err(code)) | TxnAnswer::Refused(code)) => code,
            Ok(_) => ErrorCode::UnknownServerError,
            Err(_) => ErrorCode::CoordinatorNotAvailable,
        }
    }
}
