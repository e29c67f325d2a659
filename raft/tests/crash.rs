//! The controller killed at any durable I/O step (`disk::faults`: a torn write, or a write,
//! fsync, truncate or rename that never happens) and reopened: it always opens, it holds every
//! change it had acknowledged, and its topics are exactly those of some prefix of the accepted
//! proposals — never a hole, never a change nobody proposed. Small snapshot intervals make
//! crashes land inside snapshot writes and log compactions too.

use std::collections::BTreeMap;

use proptest::prelude::*;
use spool_raft::disk::faults;
use spool_raft::validate::{HeartbeatRequest, RegisterBrokerRequest};
use spool_raft::{
    Controller, ControllerConfig, ControllerError, CreateTopicRequest, MetadataImage, Uuid128,
};

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

#[derive(Debug, Clone, Copy)]
enum Op {
    Create(usize, i32),
    Delete(usize),
}

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..NAMES.len(), 1..4i32).prop_map(|(n, p)| Op::Create(n, p)),
        (0..NAMES.len()).prop_map(Op::Delete),
    ]
}

type Topics = BTreeMap<String, usize>;

fn model(ops: &[Op]) -> Topics {
    let mut topics = Topics::new();
    for op in ops {
        match *op {
            Op::Create(n, p) => {
                topics.entry(NAMES[n].to_string()).or_insert(p as usize);
            }
            Op::Delete(n) => {
                topics.remove(NAMES[n]);
            }
        }
    }
    topics
}

fn topics_of(image: &MetadataImage) -> Topics {
    image
        .topics()
        .map(|t| (t.name.clone(), t.partitions.len()))
        .collect()
}

fn start_broker(c: &mut Controller) {
    c.register_broker(&RegisterBrokerRequest {
        broker_id: 1,
        incarnation_id: Uuid128 { high: 3, low: 4 },
        listeners: vec![],
        rack: None,
        cluster_id: None,
        registered_session_live: false,
        previous_broker_epoch: -1,
    })
    .expect("register");
    c.poll().expect("poll");
    let epoch = c.image().broker(1).expect("registered").broker_epoch;
    c.heartbeat(&HeartbeatRequest {
        broker_id: 1,
        broker_epoch: epoch,
        current_metadata_offset: c.applied_index() as i64,
        want_fence: false,
        want_shutdown: false,
    })
    .expect("heartbeat");
    c.poll().expect("poll");
    assert!(!c.image().broker(1).expect("registered").fenced);
}

/// A fresh directory and config, and a controller opened on it with its broker registered and
/// unfenced (fault injection off).
fn started(snapshot_every_entries: u64) -> (tempfile::TempDir, ControllerConfig, Controller) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = ControllerConfig::single_node(1, 1);
    config.raft.snapshot_every_entries = snapshot_every_entries;
    faults::disarm();
    let (mut c, _) = Controller::open_with(dir.path(), config.clone()).expect("open");
    start_broker(&mut c);
    (dir, config, c)
}

/// Proposes `op`; whether the controller accepted it.
fn propose(c: &mut Controller, op: Op) -> bool {
    match op {
        Op::Create(n, p) => c.create_topic(&CreateTopicRequest::new(NAMES[n], p)),
        Op::Delete(n) => c.delete_topic(NAMES[n]),
    }
    .is_ok()
}

/// Reopens `dir` (injection off): its topics are those of a prefix of `accepted` at least
/// `acknowledged` long, and it commits a new proposal.
fn reopened_holds(
    dir: &std::path::Path,
    config: ControllerConfig,
    accepted: &[Op],
    acknowledged: usize,
) -> Result<(), String> {
    let (mut c, image) = Controller::open_with(dir, config).map_err(|e| format!("reopen: {e}"))?;
    let got = topics_of(&image);
    if !(acknowledged..=accepted.len()).any(|k| model(&accepted[..k]) == got) {
        return Err(format!(
            "topics {got:?} are no prefix (>= {acknowledged}) of {accepted:?}"
        ));
    }
    let id = c
        .create_topic(&CreateTopicRequest::new("after", 1))
        .map_err(|e| format!("create after: {e:?}"))?;
    let polled = c.poll().map_err(|e| format!("poll after: {e}"))?;
    if !polled.committed.iter().any(|x| x.proposal == Some(id)) {
        return Err("the proposal after the reopen did not commit".into());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_crash_at_any_step_loses_nothing_acknowledged(
        ops in prop::collection::vec(any_op(), 1..20),
        crash_after_steps in 0..90u64,
        snapshot_every_entries in 2..6u64,
    ) {
        let (dir, config, mut c) = started(snapshot_every_entries);

        let mut accepted: Vec<Op> = Vec::new();
        let mut acknowledged = 0usize;
        faults::crash_after(crash_after_steps);
        for op in ops {
            if propose(&mut c, op) {
                accepted.push(op);
            }
            match c.poll() {
                Ok(polled) => {
                    for committed in &polled.committed {
                        prop_assert_eq!(committed.outcome, Ok(()));
                        if committed.proposal.is_some() {
                            acknowledged += 1;
                        }
                    }
                }
                Err(_) => {
                    prop_assert!(faults::crashed(), "only the injected crash may fail a poll");
                    break;
                }
            }
        }
        faults::disarm();
        drop(c);

        if let Err(why) = reopened_holds(dir.path(), config, &accepted, acknowledged) {
            prop_assert!(false, "{}", why);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// One durable step fails and the process lives on (a full disk that frees up): the
    /// controller stops there — every later poll refuses and `storage_failure` says why, since
    /// its raft state may be ahead of its disk — and reopening the directory, as the broker's
    /// restart does, holds every change it had acknowledged and works again.
    #[test]
    fn a_failed_write_stops_the_controller_until_it_is_reopened(
        ops in prop::collection::vec(any_op(), 1..20),
        fail_after_steps in 0..90u64,
        snapshot_every_entries in 2..6u64,
    ) {
        let (dir, config, mut c) = started(snapshot_every_entries);

        let mut accepted: Vec<Op> = Vec::new();
        let mut acknowledged = 0usize;
        let mut failed = false;
        faults::fail_once_after(fail_after_steps);
        for op in ops {
            if propose(&mut c, op) {
                accepted.push(op);
            }
            match c.poll() {
                Ok(polled) => {
                    prop_assert!(!failed, "a poll succeeded after a storage failure");
                    acknowledged += polled.committed.iter().filter(|x| x.proposal.is_some()).count();
                }
                Err(ControllerError::Disk(_)) if !failed => failed = true,
                Err(ControllerError::Failed(_)) if failed => {}
                Err(e) => prop_assert!(false, "unexpected {e}"),
            }
            prop_assert_eq!(c.storage_failure().is_some(), failed);
        }
        faults::disarm();
        drop(c);

        if let Err(why) = reopened_holds(dir.path(), config, &accepted, acknowledged) {
            prop_assert!(false, "{}", why);
        }
    }
}
