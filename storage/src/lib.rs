//! spool-storage: the partition log.
//!
//! Owns everything between a validated RecordBatch and the disk: the batch codec, segments with
//! their sparse indexes, the O_DIRECT writer with group commit, crash recovery, retention and
//! compaction. It knows nothing of the network or of replication beyond the seams replication
//! needs (leader epochs, truncation).
//!
//! Pure, runtime-free parts (tested without an executor): [`batch`], [`records`], [`control`]
//! (transaction markers), [`index`], [`scan`], [`epoch`], [`retention`], [`compaction`], [`tail`],
//! [`txn_tracker`] (open transactions). [`txn_index`] is the per-segment aborted-transaction
//! index (its codec pure, its file glommio).
//! The glommio layer: [`writer`] (one segment's O_DIRECT appends) and [`log`] (the partition log
//! that drives everything).
//! [`blocking`] runs the few `std::fs` calls io_uring cannot do (directory listing, locking,
//! recursive removal) on glommio's blocking pool, so no storage call blocks a reactor.

pub mod batch;
pub mod blocking;
pub mod compaction;
mod compaction_txn;
pub mod config;
pub mod control;
pub mod core_writes;
pub mod epoch;
pub mod error;
pub mod free_space;
pub mod index;
pub mod log;
pub mod poll_probe;
pub mod prewrite;
pub mod records;
pub mod retention;
pub mod scan;
mod segment;
pub mod sync_probe;
pub mod tail;
pub mod txn_index;
pub mod txn_tracker;
pub mod writer;

#[cfg(test)]
pub(crate) mod test_util;

pub use blocking::{remove_dir_all, run_blocking};
pub use config::{CleanupPolicy, Durability, LogConfig};
pub use error::LogError;
pub use log::{AppendInfo, OpenStats, PartitionLog, ReadChunk, ReadSlice};
pub use txn_index::AbortedTxnEntry;
pub use txn_tracker::OpenTxnEntry;
