//! Whether a partition appends a transaction marker (Kafka's WriteTxnMarkers, one partition's
//! share), sans-IO: the one rule the broker's partitions and the simulator's both apply, under
//! the partition's append turn.
//!
//! The hazard it closes: a coordinator gives up on a marker call to another broker after a
//! timeout and sends the marker again. The first copy is not dead: it may sit in a TCP
//! connection that a cut link stalled, and arrive after the retry was answered, the transaction
//! completed and the producer's next transaction opened here. Appended then, the old decision
//! would end the new transaction — commit what its producer will abort, or abort what it will
//! commit. Kafka's markers cannot tell the two transactions apart (same producer id and epoch
//! until KIP-890 part 2's epoch bump per transaction).
//!
//! spool's markers can: each carries its **decision offset**, the offset in
//! `__transaction_state` of the Prepare record that decided its transaction (spool-storage's
//! `control`). A producer's transactions share one coordinator partition and each is decided
//! after the one before completed, so its decision offsets only grow, across coordinator moves
//! too (a new coordinator replays the same log and the same offsets). The rules, after the
//! producer-epoch and coordinator-epoch fences of [`ProducerStateTable::check_marker_from`]:
//! - a decision offset below the producer's last marker here: an older transaction's copy —
//!   refused (TRANSACTION_COORDINATOR_FENCED: its sender is no longer the transaction's
//!   coordinator in any sense that counts), nothing appended;
//! - equal to it: this transaction's marker is already here (the retry of a call whose answer
//!   was lost). If the producer opened a transaction here after that marker, this copy is late
//!   and refused as above; otherwise it is answered as the marker already in the log
//!   ([`MarkerVerdict::AlreadyWritten`]: the caller waits for that one's replication);
//! - above it, or no marker known, or a marker without a decision offset (Kafka's layout, older
//!   spool): appended, as before.
//!
//! What it cannot see: a producer the table forgot (its bound, or a restart whose tail scan did
//! not reach the producer's last marker) has no last marker, so a late copy for it is appended
//! as before this rule.

use spool_error_code::ErrorCode;

use super::partition_txns::PartitionTxns;
use crate::producer_state::ProducerStateTable;

/// What to do with a marker that passed every fence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerVerdict {
    /// Append it.
    Append,
    /// This transaction's marker is already in the log at `offset`: answer as for it.
    AlreadyWritten { offset: u64 },
}

/// The verdict on a marker of (`producer_id`, `producer_epoch`) from `coordinator_epoch`,
/// deciding the transaction whose Prepare record is at `decision_offset` (negative: unknown).
pub fn marker_verdict(
    producers: &ProducerStateTable,
    txns: &PartitionTxns,
    producer_id: i64,
    producer_epoch: i16,
    coordinator_epoch: i32,
    decision_offset: i64,
) -> Result<MarkerVerdict, ErrorCode> {
    producers.check_marker_from(producer_id, producer_epoch, coordinator_epoch)?;
    if decision_offset < 0 || planted_stale_marker_appended() {
        return Ok(MarkerVerdict::Append);
    }
    let Some(last) = producers.last_marker(producer_id) else {
        return Ok(MarkerVerdict::Append);
    };
    if decision_offset > last.decision_offset {
        return Ok(MarkerVerdict::Append);
    }
    let reopened = txns
        .open_txn(producer_id)
        .is_some_and(|t| t.first_offset > last.offset);
    if decision_offset < last.decision_offset || reopened {
        return Err(ErrorCode::TransactionCoordinatorFenced);
    }
    Ok(MarkerVerdict::AlreadyWritten {
        offset: last.offset,
    })
}

/// Whether this thread plants `stale-marker-appended` (`crate::planted`): every marker is
/// appended, as before this rule.
#[cfg(feature = "planted-bugs")]
fn planted_stale_marker_appended() -> bool {
    crate::planted::thread_planted(crate::planted::PlantedBug::StaleMarkerAppended)
}

#[cfg(not(feature = "planted-bugs"))]
fn planted_stale_marker_appended() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRODUCER: i64 = 7;
    const EPOCH: i16 = 2;

    /// A partition where the producer's transaction decided at `decision` has its marker at 20
    /// (after data at 10..=14).
    fn marked(decision: i64) -> (ProducerStateTable, PartitionTxns) {
        let mut producers = ProducerStateTable::new(100);
        let mut txns = PartitionTxns::new(0);
        producers.on_append(PRODUCER, EPOCH, 0, 4, 10, 14);
        txns.on_batch(PRODUCER, EPOCH, true, 10, 14);
        producers.on_marker(PRODUCER, EPOCH, 20);
        producers.note_marker(PRODUCER, 1, decision, 20);
        txns.on_marker(PRODUCER, EPOCH, true, 20);
        (producers, txns)
    }

    fn verdict(
        p: &ProducerStateTable,
        t: &PartitionTxns,
        decision: i64,
    ) -> Result<MarkerVerdict, ErrorCode> {
        marker_verdict(p, t, PRODUCER, EPOCH, 1, decision)
    }

    #[test]
    fn a_newer_transactions_marker_is_appended() {
        let (p, t) = marked(500);
        assert_eq!(verdict(&p, &t, 501), Ok(MarkerVerdict::Append));
        assert_eq!(verdict(&p, &t, 9_000), Ok(MarkerVerdict::Append));
    }

    #[test]
    fn a_retry_of_the_last_marker_is_answered_as_the_one_in_the_log() {
        let (p, t) = marked(500);
        assert_eq!(
            verdict(&p, &t, 500),
            Ok(MarkerVerdict::AlreadyWritten { offset: 20 })
        );
    }

    #[test]
    fn an_older_transactions_marker_is_refused() {
        let (p, t) = marked(500);
        assert_eq!(
            verdict(&p, &t, 499),
            Err(ErrorCode::TransactionCoordinatorFenced)
        );
    }

    #[test]
    fn a_late_copy_is_refused_once_the_next_transaction_opened_here() {
        let (mut p, mut t) = marked(500);
        // The producer's next transaction writes here after the marker at 20.
        p.on_append(PRODUCER, EPOCH, 5, 9, 30, 34);
        t.on_batch(PRODUCER, EPOCH, true, 30, 34);
        assert_eq!(
            verdict(&p, &t, 500),
            Err(ErrorCode::TransactionCoordinatorFenced),
            "the copy would end the open transaction"
        );
        assert_eq!(
            t.open_txn(PRODUCER).map(|o| o.first_offset),
            Some(30),
            "still open"
        );
        // Its own marker is appended.
        assert_eq!(verdict(&p, &t, 640), Ok(MarkerVerdict::Append));
    }

    #[test]
    fn markers_that_do_not_say_their_transaction_are_appended_as_before() {
        let (p, t) = marked(500);
        assert_eq!(verdict(&p, &t, -1), Ok(MarkerVerdict::Append));
        // Nothing known of the producer: appended.
        let fresh = ProducerStateTable::new(100);
        assert_eq!(
            verdict(&fresh, &PartitionTxns::new(0), 3),
            Ok(MarkerVerdict::Append)
        );
        // Its last marker said nothing either.
        let mut q = ProducerStateTable::new(100);
        q.on_marker(PRODUCER, EPOCH, 20);
        q.note_marker(PRODUCER, 1, -1, 20);
        assert_eq!(
            verdict(&q, &PartitionTxns::new(0), 3),
            Ok(MarkerVerdict::Append)
        );
    }

    #[test]
    fn the_epoch_fences_come_first() {
        let (p, t) = marked(500);
        assert_eq!(
            marker_verdict(&p, &t, PRODUCER, EPOCH - 1, 1, 900),
            Err(ErrorCode::InvalidProducerEpoch)
        );
        assert_eq!(
            marker_verdict(&p, &t, PRODUCER, EPOCH, 0, 900),
            Err(ErrorCode::TransactionCoordinatorFenced)
        );
    }

    #[test]
    fn the_last_decision_only_grows() {
        let (mut p, t) = marked(500);
        // A replay in a different order never lowers it.
        p.note_marker(PRODUCER, 1, 400, 25);
        assert_eq!(
            p.last_marker(PRODUCER)
                .map(|m| (m.decision_offset, m.offset)),
            Some((500, 20))
        );
        assert_eq!(
            verdict(&p, &t, 500),
            Ok(MarkerVerdict::AlreadyWritten { offset: 20 })
        );
    }
}
