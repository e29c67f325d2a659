//! spool-storage: the partition log.
//!
//! Owns everything between a validated RecordBatch and the disk: the batch codec, segments with
//! their sparse indexes, the O_DIRECT writer with group commit, crash recovery, retention and
//! compaction. It knows nothing of the network or of replication beyond the seams replication
//! needs (leader epochs, truncation).

pub mod batch;
pub mod records;
