//! DeleteRecords across a leader and a follower [`Partition`] on one executor, the follower's
//! fetches handed to the leader by hand (no network): the leader answers only once the
//! follower has reported a log start at or past the offset, the follower follows the leader's
//! log start, and after a failover the new leader starts where the deletion left the log.

use std::rc::Rc;

use spool_protocol::ErrorCode;

use super::pair_support::{fetch_once, one_record_batch, replica, FOLLOWER, LEADER};
use super::Committed;
use crate::requests::EARLIEST_TIMESTAMP;
use crate::test_executor::run;

fn committed(leader: i32, leader_epoch: i32, broker_epoch: i64) -> Committed {
    Committed {
        leader,
        leader_epoch,
        partition_epoch: leader_epoch,
        replicas: vec![LEADER, FOLLOWER],
        isr: vec![LEADER, FOLLOWER],
        min_insync_replicas: 1,
        broker_epoch,
    }
}

/// Waits (a bounded number of 1 ms turns, for the deleting task's file I/O) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..10_000 {
        if cond() {
            return;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("{what}: not within 10 s");
}

#[test]
fn the_leader_answers_once_the_follower_follows_and_a_failover_keeps_the_start() {
    run(|| async {
        let (ld, fd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let leader = replica(ld.path(), LEADER).await;
        let follower = replica(fd.path(), FOLLOWER).await;
        leader.learn(&committed(LEADER, 1, 10), 0).await;
        follower.learn(&committed(LEADER, 1, 20), 0).await;
        for i in 0..10 {
            let r = leader
                .produce(one_record_batch(i), 1, 1000, 1 << 20, 0, None)
                .await;
            assert_eq!(r.error, ErrorCode::None);
        }
        // Twice: the follower copies the records, then reports its end (the HW moves to 10).
        fetch_once(&leader, &follower).await;
        fetch_once(&leader, &follower).await;
        assert_eq!(leader.high_watermark(), 10);

        assert_eq!(
            follower.delete_records(1, 1000).await,
            Err(ErrorCode::NotLeaderOrFollower)
        );
        assert_eq!(
            leader.delete_records(11, 1000).await,
            Err(ErrorCode::OffsetOutOfRange),
            "past the high watermark"
        );
        assert_eq!(
            leader.delete_records(-2, 1000).await,
            Err(ErrorCode::OffsetOutOfRange)
        );

        let l = Rc::clone(&leader);
        let deleting = glommio::spawn_local(async move { l.delete_records(4, 60_000).await });
        until("the leader's log start moved", || {
            leader.log.log_start_offset() == 4
        })
        .await;
        assert_eq!(
            leader.low_watermark(),
            Some(0),
            "the follower has not followed yet"
        );
        fetch_once(&leader, &follower).await;
        assert_eq!(follower.log.log_start_offset(), 4, "the follower followed");
        assert_eq!(
            leader.low_watermark(),
            Some(0),
            "…but has not reported it yet"
        );
        fetch_once(&leader, &follower).await;
        assert_eq!(leader.low_watermark(), Some(4));
        assert_eq!(deleting.await, Ok(4), "answered at the new low watermark");

        // -1: the high watermark. The follower stops fetching: the answer times out, though
        // the leader's own log start is durable.
        assert_eq!(
            leader.delete_records(-1, 20).await,
            Err(ErrorCode::RequestTimedOut)
        );
        assert_eq!(leader.log.log_start_offset(), 10);
        fetch_once(&leader, &follower).await;
        assert_eq!(follower.log.log_start_offset(), 10);

        // Failover: the follower leads; its earliest offset is where the deletion left it.
        follower.learn(&committed(FOLLOWER, 2, 20), 0).await;
        assert!(follower.is_leader());
        let earliest = follower.list_offsets(EARLIEST_TIMESTAMP, false).await;
        assert_eq!((earliest.error, earliest.offset), (ErrorCode::None, 10));
    });
}
