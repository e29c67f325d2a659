//! The blocking producer's transactions: each call asks the core
//! (`crate::client::producer`'s `txn`) and waits, at most its timeout, for the driver thread to
//! carry it out.

use std::time::{Duration, Instant};

use std::sync::PoisonError;

use super::{Producer, State};
use crate::client::{ClientError, TopicPartition};

impl Producer {
    /// Finds the transaction coordinator and takes the transactional id's producer id and
    /// epoch (fencing an older instance, whose open transaction the coordinator aborts). Waits
    /// at most `timeout_ms`.
    pub fn init_transactions(&self, timeout_ms: u64) -> Result<(), ClientError> {
        self.wake();
        self.wait_txn(timeout_ms, "init_transactions", |s| {
            s.core.transactions_initialized()
        })
    }

    /// Opens a transaction (after [`Producer::init_transactions`]).
    pub fn begin_transaction(&self) -> Result<(), ClientError> {
        self.shared.lock().core.begin_transaction()
    }

    /// Sends what the transaction queued and commits it; returns once the coordinator
    /// answered, at most `timeout_ms`. An error means the transaction did not commit: abort it
    /// (unless the producer is fenced).
    pub fn commit_transaction(&self, timeout_ms: u64) -> Result<(), ClientError> {
        self.shared.lock().core.commit_transaction()?;
        self.wake();
        self.wait_outcome(timeout_ms, "commit_transaction")
    }

    /// Commits `offsets` (each partition's next offset to read) of `group_id` inside the open
    /// transaction: they count only if it commits. Waits at most `timeout_ms` for the group's
    /// coordinator to take them.
    pub fn send_offsets_to_transaction(
        &self,
        group_id: &str,
        offsets: Vec<(TopicPartition, i64)>,
        timeout_ms: u64,
    ) -> Result<(), ClientError> {
        self.shared
            .lock()
            .core
            .send_offsets_to_transaction(group_id, offsets)?;
        self.wake();
        self.wait_txn(timeout_ms, "send_offsets_to_transaction", |s| {
            s.core.take_offsets_outcome()
        })
    }

    /// Aborts the transaction: records not sent yet fail, the rest are aborted with it.
    pub fn abort_transaction(&self, timeout_ms: u64) -> Result<(), ClientError> {
        self.shared.lock().core.abort_transaction()?;
        self.wake();
        match self.wait_outcome(timeout_ms, "abort_transaction") {
            // The core reports an abort as the transaction's failure: here it is what was asked.
            Err(ClientError::Transaction(m)) if m == "aborted" => Ok(()),
            other => other,
        }
    }

    fn wait_outcome(&self, timeout_ms: u64, what: &str) -> Result<(), ClientError> {
        self.wait_txn(timeout_ms, what, |s| s.core.take_transaction_outcome())
    }

    /// Waits until `done` says something, at most `timeout_ms`.
    fn wait_txn(
        &self,
        timeout_ms: u64,
        what: &str,
        mut done: impl FnMut(&mut State) -> Option<Result<(), ClientError>>,
    ) -> Result<(), ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let mut state = self.shared.lock();
        loop {
            if let Some(r) = done(&mut state) {
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: what.into(),
                    timeout_ms,
                });
            }
            state = self
                .shared
                .txn_progress
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}
