//! The glommio producer's transactions: each call asks the core
//! (`crate::client::producer`'s `txn`) and waits, at most its timeout, for the driver task to
//! carry it out (the same contract as the blocking producer's).

use std::time::{Duration, Instant};

use super::{Producer, State};
use crate::client::{ClientError, TopicPartition};

impl Producer {
    /// Finds the transaction coordinator and takes the transactional id's producer id and
    /// epoch (fencing an older instance). Waits at most `timeout_ms`.
    pub async fn init_transactions(&self, timeout_ms: u64) -> Result<(), ClientError> {
        self.wake();
        self.wait_txn(timeout_ms, "init_transactions", |s| {
            s.core.transactions_initialized()
        })
        .await
    }

    pub fn begin_transaction(&self) -> Result<(), ClientError> {
        self.inner.state.borrow_mut().core.begin_transaction()
    }

    /// Sends what the transaction queued and commits it, at most `timeout_ms`. An error means
    /// it did not commit: abort it (unless the producer is fenced).
    pub async fn commit_transaction(&self, timeout_ms: u64) -> Result<(), ClientError> {
        self.inner.state.borrow_mut().core.commit_transaction()?;
        self.wake();
        self.wait_txn(timeout_ms, "commit_transaction", |s| {
            s.core.take_transaction_outcome()
        })
        .await
    }

    /// Commits `offsets` (each partition's next offset to read) of `group_id` inside the open
    /// transaction: they count only if it commits. Waits at most `timeout_ms` for the group's
    /// coordinator to take them.
    pub async fn send_offsets_to_transaction(
        &self,
        group_id: &str,
        offsets: Vec<(TopicPartition, i64)>,
        timeout_ms: u64,
    ) -> Result<(), ClientError> {
        self.inner
            .state
            .borrow_mut()
            .core
            .send_offsets_to_transaction(group_id, offsets)?;
        self.wake();
        self.wait_txn(timeout_ms, "send_offsets_to_transaction", |s| {
            s.core.take_offsets_outcome()
        })
        .await
    }

    /// Aborts the transaction: records not sent yet fail, the rest are aborted with it.
    pub async fn abort_transaction(&self, timeout_ms: u64) -> Result<(), ClientError> {
        self.inner.state.borrow_mut().core.abort_transaction()?;
        self.wake();
        let r = self
            .wait_txn(timeout_ms, "abort_transaction", |s| {
                s.core.take_transaction_outcome()
            })
            .await;
        match r {
            Err(ClientError::Transaction(m)) if m == "aborted" => Ok(()),
            other => other,
        }
    }

    async fn wait_txn(
        &self,
        timeout_ms: u64,
        what: &str,
        mut done: impl FnMut(&mut State) -> Option<Result<(), ClientError>>,
    ) -> Result<(), ClientError> {
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        loop {
            // The borrow ends before the await below.
            let answer = done(&mut self.inner.state.borrow_mut());
            if let Some(r) = answer {
                return r;
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(ClientError::Timeout {
                    what: what.into(),
                    timeout_ms,
                });
            }
            futures_lite::future::or(
                self.inner.txn_progress.changed(),
                glommio::timer::sleep(deadline - now),
            )
            .await;
        }
    }
}
