//! The follower's half of replication on one partition (DESIGN §7, REPLICATION.md "Follower
//! fetch"): what it asks its leader for, and what it does with the answer. Every decision is
//! spool-core's [`FollowerPartition`]'s; this file moves bytes between the wire and the log.
//!
//! Owns: [`Partition::next_replica_fetch`] and [`Partition::on_replica_answer`].
//! Promises: fetched batches are appended only in the role and leader epoch they were asked for,
//! under `append_turn`, each exactly at the log end with the leader's offsets and epochs
//! (`PartitionLog::append_replicated` refuses anything else); a diverging answer truncates to
//! the point the leader's epochs name, never to this replica's own high watermark; under
//! `durability = fsync` the appended batches are fdatasynced before the next fetch reports them;
//! the log start follows the leader's (capped at the log end, persisted before the next fetch
//! reports it: `delete`); a leader whose log starts past this replica's end has the log dropped
//! and restarted empty at its start (Kafka's `truncateFullyAndStartAt`), fetched from there.

use bytes::{Bytes, BytesMut};
use spool_core::follower_fetch::FollowerFetch;
use spool_core::follower_state::{BatchMeta, OutOfRange, Reporting};
use spool_protocol::ErrorCode;
use spool_storage::batch::BatchHeader;
use spool_storage::Durability;

use super::role::{Role, NO_LEADER};
use super::Partition;
use crate::requests::ReplicaFetchRead;

/// Why a fetched answer was not applied (logged by the fetcher; it fetches again).
#[derive(Debug)]
pub struct NotApplied(pub String);

impl Partition {
    /// The leader to fetch from and the fetch to send, while this replica follows a live leader
    /// and knows its own broker epoch.
    pub fn next_replica_fetch(&self) -> Option<(i32, FollowerFetch)> {
        let role = self.role.borrow();
        let Role::Follower(f) = &*role else {
            return None;
        };
        let fetch = f.next_fetch(match self.durability {
            Durability::Fsync => Reporting::Synced,
            Durability::Replicated => Reporting::LogEnd,
        });
        let leader = f.leader_id();
        let known = fetch.replica_broker_epoch.is_some_and(|e| e >= 0);
        (leader != NO_LEADER && leader != self.me && known).then_some((leader, fetch))
    }

    /// Applies the leader's answer to the fetch sent at `leader_epoch` (module docs).
    pub async fn on_replica_answer(
        &self,
        leader_epoch: i32,
        answer: &ReplicaFetchRead,
        now_ms: i64,
    ) -> Result<(), NotApplied> {
        let Ok(_turn) = self.append_turn.acquire_permit(1).await else {
            return Ok(());
        };
        let still_following =
            matches!(&*self.role.borrow(), Role::Follower(f) if f.leader_epoch() == leader_epoch);
        if !still_following {
            return Ok(());
        }
        if let Some(diverging) = answer.diverging {
            let to = match &*self.role.borrow() {
                Role::Follower(f) => f.truncation_for(diverging).offset,
                Role::Leader(_) => return Ok(()),
            };
            return self.truncate_in_turn(to).await;
        }
        match answer.error {
            ErrorCode::None => {}
            ErrorCode::OffsetOutOfRange => {
                let (start, end) = (
                    u64::try_from(answer.log_start_offset).unwrap_or(0),
                    u64::try_from(answer.log_end_offset).unwrap_or(0),
                );
                let what = match &*self.role.borrow() {
                    Role::Follower(f) => f.out_of_range(start, end),
                    Role::Leader(_) => return Ok(()),
                };
                return match what {
                    OutOfRange::TruncateTo(offset) => self.truncate_in_turn(offset).await,
                    OutOfRange::FetchFrom(_) => Ok(()),
                    OutOfRange::StartAt(offset) => self.restart_in_turn(offset).await,
                };
            }
            code => return Err(NotApplied(format!("the leader answered {code:?}"))),
        }
        let batches = split(&answer.records).map_err(NotApplied)?;
        let metas: Vec<BatchMeta> = batches.iter().map(|(h, _)| meta(h)).collect();
        if let Role::Follower(f) = &*self.role.borrow() {
            f.check_batches(&metas)
                .map_err(|e| NotApplied(format!("fetched batches refused: {e:?}")))?;
        }
        let mut appended = 0;
        let mut failed = None;
        for (_, bytes) in &batches {
            match self
                .log
                .append_replicated(BytesMut::from(&bytes[..]), now_ms)
                .await
            {
                Ok(_) => appended += 1,
                Err(e) => {
                    failed = Some(NotApplied(format!("appending a replicated batch: {e}")));
                    break;
                }
            }
        }
        // The follower state learns every batch that did land, also when a later one failed (a
        // disk filling half-way through an answer): otherwise its next fetch would ask again
        // from before them, and every answer after would start below the log's end and be
        // refused, for good (the fault harness's disk-full runs).
        let hw = u64::try_from(answer.high_watermark).unwrap_or(0);
        let end = self.log.log_end_offset();
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_appended(&metas[..appended], end, hw);
        }
        if let Some(not_applied) = failed {
            return Err(not_applied);
        }
        // DeleteRecords on the leader: its log start, followed here before the next fetch
        // reports ours (the leader's DeleteRecords waits for that report).
        self.follow_log_start(u64::try_from(answer.log_start_offset).unwrap_or(0))
            .await?;
        if self.durability == Durability::Fsync && self.log.durable_offset() < end {
            if let Err(e) = self.log.sync_to(end).await {
                return Err(NotApplied(format!("syncing replicated batches: {e}")));
            }
        }
        let synced = self.log.durable_offset();
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_synced(synced.min(f.log_end_offset()));
        }
        Ok(())
    }

    /// Cuts the log to `offset` (the caller holds `append_turn`) and tells the follower state.
    async fn truncate_in_turn(&self, offset: u64) -> Result<(), NotApplied> {
        let before = self.log.log_end_offset();
        let end = self
            .log
            .truncate_to(offset)
            .await
            .map_err(|e| NotApplied(format!("truncating to {offset}: {e}")))?;
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_truncated(end);
        }
        if end < before {
            tracing::info!(tp = %self.tp, from = before, to = end, "truncated the log to the leader's");
        }
        Ok(())
    }
}

impl Partition {
    /// The leader's log starts at `offset`, past this replica's end (it was away while retention
    /// or DeleteRecords moved the leader's start past everything it has): drops the whole log
    /// and starts it again empty there (Kafka's `truncateFullyAndStartAt`; the caller holds
    /// `append_turn`), so the next fetch asks from `offset`.
    async fn restart_in_turn(&self, offset: u64) -> Result<(), NotApplied> {
        let (start, end) = (self.log.log_start_offset(), self.log.log_end_offset());
        self.log
            .truncate_fully_and_start_at(offset)
            .await
            .map_err(|e| NotApplied(format!("restarting the log empty at {offset}: {e}")))?;
        // Pair assertion: storage did what the follower state is about to be told.
        assert_eq!(
            (self.log.log_start_offset(), self.log.log_end_offset()),
            (offset, offset),
            "{}: the restarted log",
            self.tp
        );
        if let Role::Follower(f) = &mut *self.role.borrow_mut() {
            f.on_restarted_at(offset);
        }
        tracing::warn!(
            tp = %self.tp,
            old_log_start = start,
            old_log_end = end,
            "replica restarted empty at the leader's log start {offset}: the records below were \
             deleted on the leader"
        );
        Ok(())
    }
}

fn meta(h: &BatchHeader) -> BatchMeta {
    BatchMeta {
        base_offset: h.base_offset as u64,
        last_offset: h.last_offset() as u64,
        leader_epoch: h.partition_leader_epoch,
    }
}

/// The answer's records as whole batches (a read ends at a batch boundary; a partial or
/// malformed one refuses the answer, and the fetch is retried).
fn split(records: &Bytes) -> Result<Vec<(BatchHeader, Bytes)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < records.len() {
        let h = BatchHeader::parse(&records[at..])
            .map_err(|e| format!("a fetched batch at byte {at}: {e}"))?;
        let len = h.total_bytes();
        if len == 0 || at + len > records.len() || h.base_offset < 0 {
            return Err(format!("a fetched batch at byte {at} is cut short"));
        }
        out.push((h, records.slice(at..at + len)));
        at += len;
    }
    Ok(out)
}
