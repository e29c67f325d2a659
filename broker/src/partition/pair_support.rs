//! What the leader-and-follower tests (`delete_tests`, `restart_tests`) share: two [`Partition`]s
//! of `t-0` on one executor, and a follower fetch handed to the leader by hand (no network).

use std::collections::BTreeMap;
use std::rc::Rc;

use bytes::Bytes;
use spool_storage::records::BatchBuilder;
use spool_storage::{Durability, LogConfig, PartitionLog};

use super::Partition;
use crate::requests::TopicPartition;

pub(super) const LEADER: i32 = 1;
pub(super) const FOLLOWER: i32 = 2;

/// Broker `me`'s replica of `t-0`, its log in `dir`.
pub(super) async fn replica(dir: &std::path::Path, me: i32) -> Rc<Partition> {
    let (log, _) = PartitionLog::open(dir, LogConfig::default()).await.unwrap();
    Partition::new(
        TopicPartition::new("t", 0),
        log,
        me,
        Durability::Replicated,
        false,
    )
}

/// A batch of one record, `v-{i}`.
pub(super) fn one_record_batch(i: u64) -> Bytes {
    let mut b = BatchBuilder::new(0);
    b.push(0, None, Some(Bytes::from(format!("v-{i}"))));
    b.build().unwrap().freeze()
}

/// One fetch of the follower's, served by the leader and applied.
pub(super) async fn fetch_once(leader: &Partition, follower: &Partition) {
    let (to, fetch) = follower.next_replica_fetch().expect("the follower fetches");
    assert_eq!(to, LEADER);
    let answer = leader
        .serve_replica_fetch(&fetch, &BTreeMap::new(), 1 << 20, 0)
        .await;
    follower
        .on_replica_answer(leader.leader_epoch(), &answer, 0)
        .await
        .unwrap();
}
