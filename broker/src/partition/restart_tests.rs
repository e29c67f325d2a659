//! A follower whose whole log lies below its leader's log start (Kafka's
//! `truncateFullyAndStartAt`), with a leader and a follower [`Partition`] on one executor and
//! the follower's fetches handed to the leader by hand: the follower was away while DeleteRecords
//! moved the leader's start past its end; its next fetch is out of range, it restarts its log
//! empty at the leader's start, fetches what follows, and is then eligible to rejoin the ISR.

use std::collections::BTreeMap;

use spool_core::isr_change::{BrokerStatus, ProposeInput};
use spool_protocol::ErrorCode;

use super::pair_support::{fetch_once, one_record_batch, replica, FOLLOWER, LEADER};
use super::{Committed, Partition};
use crate::requests::EARLIEST_TIMESTAMP;
use crate::test_executor::run;

const LEADER_BROKER_EPOCH: i64 = 10;
const FOLLOWER_BROKER_EPOCH: i64 = 20;

/// The follower is out of the ISR (it was away), so the leader's HW — and DeleteRecords —
/// moves without it.
fn committed(broker_epoch: i64) -> Committed {
    Committed {
        leader: LEADER,
        leader_epoch: 1,
        partition_epoch: 1,
        replicas: vec![LEADER, FOLLOWER],
        isr: vec![LEADER],
        min_insync_replicas: 1,
        broker_epoch,
    }
}

async fn produce(leader: &Partition, records: std::ops::Range<u64>) {
    for i in records {
        let r = leader
            .produce(one_record_batch(i), 1, 1000, 1 << 20, 0, None)
            .await;
        assert_eq!(r.error, ErrorCode::None);
    }
}

/// The ISR change the leader would ask the controller for now (both brokers registered).
fn proposed_isr(leader: &Partition) -> Option<Vec<i32>> {
    let status = |broker_epoch| BrokerStatus {
        broker_epoch,
        fenced: false,
        in_controlled_shutdown: false,
        unclean_shutdown: false,
    };
    let brokers = BTreeMap::from([
        (LEADER, status(LEADER_BROKER_EPOCH)),
        (FOLLOWER, status(FOLLOWER_BROKER_EPOCH)),
    ]);
    let input = ProposeInput {
        own_broker_epoch: LEADER_BROKER_EPOCH,
        brokers: &brokers,
        leader_epoch_start_offset: 0,
        lag_time_max_ms: 30_000,
        now_ms: 0,
    };
    leader
        .propose_isr_change(&input, 60_000)
        .map(|request| request.isr())
}

#[test]
fn a_follower_behind_the_leaders_log_start_restarts_there_and_catches_up() {
    run(|| async {
        let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let leader = replica(ld.path(), LEADER).await;
        let follower = replica(fd.path(), FOLLOWER).await;
        leader.learn(&committed(LEADER_BROKER_EPOCH), 0).await;
        follower.learn(&committed(FOLLOWER_BROKER_EPOCH), 0).await;
        produce(&leader, 0..10).await;
        fetch_once(&leader, &follower).await;
        fetch_once(&leader, &follower).await;
        assert_eq!(
            (
                follower.log.log_start_offset(),
                follower.log.log_end_offset()
            ),
            (0, 10)
        );

        // The follower is away: the leader writes on and deletes past the follower's end.
        produce(&leader, 10..30).await;
        assert_eq!(leader.high_watermark(), 30);
        assert_eq!(leader.delete_records(25, 1000).await, Ok(25));
        assert_eq!(leader.log.log_start_offset(), 25);
        assert_eq!(proposed_isr(&leader), None, "the follower is behind");

        // Back: its fetch from 10 is out of range, and it restarts empty at 25.
        fetch_once(&leader, &follower).await;
        assert_eq!(
            (
                follower.log.log_start_offset(),
                follower.log.log_end_offset()
            ),
            (25, 25)
        );
        assert_eq!(follower.log.segment_base_offsets(), vec![25]);
        assert!(follower.log.leader_epochs().entries().is_empty());
        let (_, next) = follower.next_replica_fetch().unwrap();
        assert_eq!(
            (
                next.fetch_offset,
                next.log_start_offset,
                next.last_fetched_epoch
            ),
            (25, 25, None),
            "it asks from the leader's log start, reporting nothing below"
        );

        // It fetches what follows: the leader's records, byte for byte.
        fetch_once(&leader, &follower).await;
        assert_eq!(
            (
                follower.log.log_start_offset(),
                follower.log.log_end_offset()
            ),
            (leader.log.log_start_offset(), leader.log.log_end_offset())
        );
        assert_eq!(
            follower.log.read_copy(25, 1 << 20, 30).await.unwrap(),
            leader.log.read_copy(25, 1 << 20, 30).await.unwrap()
        );
        assert_eq!(
            follower.log.leader_epochs().start_offset_of(1),
            Some(25),
            "the fetched batches' epoch, from where its log starts"
        );
        // Once its fetch reports the end, the leader asks to take it back into the ISR.
        fetch_once(&leader, &follower).await;
        assert_eq!(proposed_isr(&leader), Some(vec![LEADER, FOLLOWER]));

        // As a leader after a failover, its log starts where the leader's did.
        let mut failover = committed(FOLLOWER_BROKER_EPOCH);
        (
            failover.leader,
            failover.leader_epoch,
            failover.partition_epoch,
        ) = (FOLLOWER, 2, 2);
        failover.isr = vec![LEADER, FOLLOWER];
        follower.learn(&failover, 0).await;
        assert!(follower.is_leader());
        let earliest = follower.list_offsets(EARLIEST_TIMESTAMP, false).await;
        assert_eq!((earliest.error, earliest.offset), (ErrorCode::None, 25));
    });
}
