//! KIP-890 and marker fencing on one leader [`Partition`]: a transactional batch opening a transaction is
//! appended only under a verification token, and a marker appended between the verification
//! and the append voids the token (the batch belonged to the transaction the marker ended); a
//! deposed coordinator's marker, or a late copy of an older transaction's, is refused.

use bytes::Bytes;
use spool_protocol::ErrorCode;
use spool_storage::records::BatchBuilder;

use super::pair_support::{replica, LEADER};
use super::Committed;
use crate::test_executor::run;

const PRODUCER: i64 = 42;
const EPOCH: i16 = 0;

fn alone() -> Committed {
    Committed {
        leader: LEADER,
        leader_epoch: 1,
        partition_epoch: 1,
        replicas: vec![LEADER],
        isr: vec![LEADER],
        min_insync_replicas: 1,
        broker_epoch: 10,
    }
}

/// A transactional batch of one record at `sequence`.
fn txn_batch(sequence: i32) -> Bytes {
    let mut b = BatchBuilder::new(0);
    b.producer_id = PRODUCER;
    b.producer_epoch = EPOCH;
    b.base_sequence = sequence;
    b.transactional = true;
    b.push(0, None, Some(Bytes::from(format!("t-{sequence}"))));
    b.build().unwrap().freeze()
}

#[test]
fn a_transaction_opens_only_under_a_token_no_marker_voided() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let p = replica(dir.path(), LEADER).await;
        p.learn(&alone(), 0).await;

        assert_eq!(
            p.needs_verification(&txn_batch(0)).await,
            Ok(Some((PRODUCER, EPOCH)))
        );
        let r = p.produce(txn_batch(0), -1, 1000, 1 << 20, 0, None).await;
        assert_eq!(r.error, ErrorCode::InvalidTxnState, "no token: {r:?}");
        assert_eq!(p.log.log_end_offset(), 0, "nothing appended");

        let v = p.begin_verification(PRODUCER, EPOCH);
        let r = p.produce(txn_batch(0), -1, 1000, 1 << 20, 0, Some(v)).await;
        p.end_verification(v);
        assert_eq!(r.error, ErrorCode::None, "{r:?}");
        assert_eq!(
            p.needs_verification(&txn_batch(1)).await,
            Ok(None),
            "the transaction is open here: no more checks"
        );
        let r = p.produce(txn_batch(1), -1, 1000, 1 << 20, 0, None).await;
        assert_eq!(r.error, ErrorCode::None, "{r:?}");

        // Verified, then the coordinator's abort marker lands before the append.
        let late = p.begin_verification(PRODUCER, EPOCH);
        assert_eq!(
            p.write_marker(PRODUCER, EPOCH, false, 0, -1).await,
            ErrorCode::None
        );
        let end = p.log.log_end_offset();
        let r = p
            .produce(txn_batch(2), -1, 1000, 1 << 20, 0, Some(late))
            .await;
        p.end_verification(late);
        assert_eq!(r.error, ErrorCode::InvalidTxnState, "voided token: {r:?}");
        assert_eq!(p.log.log_end_offset(), end, "nothing appended");
        assert_eq!(
            p.last_stable_offset(),
            p.high_watermark(),
            "no transaction left hanging"
        );

        assert_eq!(
            p.needs_verification(
                &[txn_batch(3), {
                    let mut b = BatchBuilder::new(0);
                    b.producer_id = PRODUCER + 1;
                    b.producer_epoch = EPOCH;
                    b.base_sequence = 0;
                    b.transactional = true;
                    b.push(0, None, None);
                    b.build().unwrap().freeze()
                }]
                .concat()
                .into()
            )
            .await,
            Err(ErrorCode::InvalidRecord),
            "two transactional producers in one partition's batches"
        );
    });
}

#[test]
fn a_deposed_coordinators_marker_is_refused_also_after_a_restart() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        {
            let p = replica(dir.path(), LEADER).await;
            p.learn(&alone(), 0).await;
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, true, 5, -1).await,
                ErrorCode::None
            );
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, false, 4, -1).await,
                ErrorCode::TransactionCoordinatorFenced,
                "coordinator epoch 4 was deposed by 5"
            );
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, true, 6, -1).await,
                ErrorCode::None
            );
            p.log.close().await.unwrap();
        }
        let p = replica(dir.path(), LEADER).await;
        p.learn(&alone(), 0).await;
        assert_eq!(
            p.write_marker(PRODUCER, EPOCH, false, 5, -1).await,
            ErrorCode::TransactionCoordinatorFenced,
            "rebuilt from the log's markers"
        );
        assert_eq!(
            p.write_marker(PRODUCER, EPOCH, false, 6, -1).await,
            ErrorCode::None
        );
    });
}

/// A coordinator gave up on a marker call and wrote the marker again; the first copy lands
/// after the producer's next transaction opened here. Without decision offsets it would abort
/// that transaction (or commit it early).
#[test]
fn a_late_copy_of_an_older_transactions_marker_never_ends_the_next_one() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let next_first_offset;
        {
            let p = replica(dir.path(), LEADER).await;
            p.learn(&alone(), 0).await;
            let v = p.begin_verification(PRODUCER, EPOCH);
            let r = p.produce(txn_batch(0), -1, 1000, 1 << 20, 0, Some(v)).await;
            p.end_verification(v);
            assert_eq!(r.error, ErrorCode::None, "{r:?}");
            // Transaction A, decided at offset 100 of __transaction_state, aborted.
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, false, 1, 100).await,
                ErrorCode::None
            );
            let after_a = p.log.log_end_offset();
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, false, 1, 100).await,
                ErrorCode::None,
                "a retry is answered as the marker already here"
            );
            assert_eq!(p.log.log_end_offset(), after_a, "and not appended again");

            // Transaction B opens here.
            let v = p.begin_verification(PRODUCER, EPOCH);
            let r = p.produce(txn_batch(1), -1, 1000, 1 << 20, 0, Some(v)).await;
            p.end_verification(v);
            assert_eq!(r.error, ErrorCode::None, "{r:?}");
            next_first_offset = after_a;
            assert_eq!(p.last_stable_offset(), next_first_offset, "B is open");

            // The late copy of A's abort.
            let end = p.log.log_end_offset();
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, false, 1, 100).await,
                ErrorCode::TransactionCoordinatorFenced
            );
            assert_eq!(
                p.write_marker(PRODUCER, EPOCH, true, 1, 99).await,
                ErrorCode::TransactionCoordinatorFenced,
                "an older transaction's"
            );
            assert_eq!(p.log.log_end_offset(), end, "nothing appended");
            assert_eq!(p.last_stable_offset(), next_first_offset, "B still open");
            p.log.close().await.unwrap();
        }
        // After a restart the producer's last marker and B are rebuilt from the log.
        let p = replica(dir.path(), LEADER).await;
        p.learn(&alone(), 0).await;
        assert_eq!(
            p.write_marker(PRODUCER, EPOCH, false, 1, 100).await,
            ErrorCode::TransactionCoordinatorFenced,
            "refused after a restart too"
        );
        assert_eq!(p.last_stable_offset(), next_first_offset, "B still open");
        // B's own marker ends it.
        assert_eq!(
            p.write_marker(PRODUCER, EPOCH, true, 1, 180).await,
            ErrorCode::None
        );
        assert_eq!(p.last_stable_offset(), p.high_watermark(), "B committed");
    });
}
