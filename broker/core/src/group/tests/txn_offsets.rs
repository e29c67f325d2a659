//! TxnOffsetCommit: staged until the transaction's marker, committed or dropped by it, live
//! and on replay.

use super::*;

impl H {
    fn txn_commit(&mut self, producer_id: i64, offset: i64) -> Vec<ErrorCode> {
        let a = CommitArgs {
            group_id: GROUP.into(),
            generation: -1,
            member_id: String::new(),
            group_instance_id: None,
            offsets: vec![("t".into(), 0, value(offset))],
            producer: Some((producer_id, 0)),
        };
        let id = self.send(|id| Input::Commit(id, a));
        match self.answers.get(&id) {
            Some(Response::Commit(r)) => r.iter().map(|x| x.2).collect(),
            other => panic!("not a commit answer: {other:?}"),
        }
    }
}

#[test]
fn txn_offsets_count_only_once_their_transaction_commits() {
    let mut h = H::new(0);
    let p = crate::group::coordinator_partition(GROUP, 4);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    assert_eq!(h.txn_commit(7, 9), vec![ErrorCode::None]);
    assert_eq!(h.committed(), Some(5), "staged, not committed");
    assert_eq!(h.txn_log.len(), 1, "written as a transactional batch");
    assert!(h.log.len() == 1, "the plain commit only");
    // Another producer's abort decides nothing of producer 7's.
    h.c.on_txn_marker(p, 8, false);
    assert_eq!(h.committed(), Some(5));
    h.c.on_txn_marker(p, 7, true);
    assert_eq!(h.committed(), Some(9), "committed with its transaction");
    assert_eq!(h.txn_commit(7, 12), vec![ErrorCode::None]);
    h.c.on_txn_marker(p, 7, false);
    assert_eq!(
        h.committed(),
        Some(9),
        "an aborted transaction's offsets are gone"
    );
    h.c.on_txn_marker(p, 7, true);
    assert_eq!(
        h.committed(),
        Some(9),
        "a later commit marker does not bring them back"
    );
}

#[test]
fn txn_offsets_replay_as_their_markers_decided_them() {
    let mut h = H::new(0);
    let p = crate::group::coordinator_partition(GROUP, 4);
    assert_eq!(h.txn_commit(7, 9), vec![ErrorCode::None]);
    assert_eq!(h.txn_commit(8, 4), vec![ErrorCode::None]);
    let (_, _, k9, v9) = h.txn_log[0].clone();
    let (_, _, k4, v4) = h.txn_log[1].clone();
    let mut r = Coordinator::new(config(0), 7);
    r.begin_load(p);
    r.load_record(p, &k9, v9.as_deref(), Some(7)).unwrap();
    r.load_record(p, &k4, v4.as_deref(), Some(8)).unwrap();
    r.on_txn_marker(p, 8, false);
    r.on_txn_marker(p, 7, true);
    r.finish_load(p, 0);
    let got = r
        .fetch_offsets(GROUP, Some(vec![("t".into(), vec![0])]))
        .unwrap();
    assert_eq!(got[0].2.as_ref().map(|v| v.offset), Some(9));
    // Still open at the end of the log: not committed.
    let mut open = Coordinator::new(config(0), 7);
    open.begin_load(p);
    open.load_record(p, &k9, v9.as_deref(), Some(7)).unwrap();
    open.finish_load(p, 0);
    let got = open
        .fetch_offsets(GROUP, Some(vec![("t".into(), vec![0])]))
        .unwrap();
    assert!(
        got[0].2.is_none(),
        "an open transaction's offsets are not committed"
    );
}

#[test]
fn a_stable_fetch_waits_out_an_undecided_transactional_offset() {
    let mut h = H::new(0);
    let p = crate::group::coordinator_partition(GROUP, 4);
    assert_eq!(h.commit("", -1, 5), vec![ErrorCode::None]);
    let fetch = |h: &H, stable: bool| {
        let got =
            h.c.fetch_offsets_stable(GROUP, Some(vec![("t".into(), vec![0, 1])]), stable)
                .unwrap();
        got.into_iter()
            .map(|o| (o.partition, o.committed.map(|v| v.offset), o.error))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        fetch(&h, true),
        vec![(0, Some(5), ErrorCode::None), (1, None, ErrorCode::None)]
    );
    assert_eq!(h.txn_commit(7, 9), vec![ErrorCode::None]);
    assert_eq!(
        fetch(&h, true),
        vec![
            (0, None, ErrorCode::UnstableOffsetCommit),
            (1, None, ErrorCode::None)
        ],
        "partition 0 waits for producer 7's marker"
    );
    assert_eq!(
        fetch(&h, false),
        vec![(0, Some(5), ErrorCode::None), (1, None, ErrorCode::None)],
        "without require_stable: the committed offset"
    );
    h.c.on_txn_marker(p, 7, true);
    assert_eq!(
        fetch(&h, true),
        vec![(0, Some(9), ErrorCode::None), (1, None, ErrorCode::None)]
    );
}

#[test]
fn a_group_holding_only_staged_offsets_outlives_the_empty_group_retention() {
    // A group created by a TxnOffsetCommit has no members and no committed offsets until the
    // marker lands; a transaction may stay open past the empty-group retention (its timeout is
    // up to 15 minutes), and the staged offsets must still be there for its commit marker.
    let mut h = H::new(0);
    let p = crate::group::coordinator_partition(GROUP, 4);
    assert_eq!(h.txn_commit(7, 42), vec![ErrorCode::None]);
    h.advance(coordinator::EMPTY_GROUP_RETENTION_MS + 1);
    assert!(
        h.c.group(GROUP).is_some(),
        "dropped while a transaction holds its offsets"
    );
    h.c.on_txn_marker(p, 7, true);
    assert_eq!(h.committed(), Some(42), "committed with its transaction");

    // Decided by an abort instead, nothing is left to keep: the group goes at the next tick.
    let mut h = H::new(0);
    assert_eq!(h.txn_commit(8, 50), vec![ErrorCode::None]);
    h.advance(coordinator::EMPTY_GROUP_RETENTION_MS + 1);
    h.c.on_txn_marker(p, 8, false);
    h.advance(1);
    assert_eq!(
        h.state(),
        GroupState::Dead,
        "an aborted transaction's group"
    );
}
