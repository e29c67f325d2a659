//! Crash safety of `__raft/`:
//! - the raft log cut at any byte reopens as a valid prefix holding every entry whose frame was
//!   completely written (and the cut is made durable);
//! - damaged bytes anywhere never panic the reader;
//! - appends that overwrite a suffix (a follower's conflict) and compaction keep the file and
//!   what reopening returns in agreement;
//! - a controller whose log got a torn tail reopens with the same image; one whose committed
//!   entries are gone refuses to open with an error naming the file.

use std::fs::OpenOptions;
use std::io::Write;

use proptest::prelude::*;
use raft::eraftpb::Entry;
use spool_raft::disk::entry_log::EntryLog;
use spool_raft::disk::DiskError;
use spool_raft::{Controller, ControllerError, CreateTopicRequest};

fn entry(index: u64, term: u64, data_bytes: usize) -> Entry {
    Entry {
        index,
        term,
        data: vec![(index % 251) as u8; data_bytes].into(),
        context: vec![1, 2, 3].into(),
        ..Default::default()
    }
}

/// A log built from batches: each batch starts at `last + 1 - overlap` (overlap > 0 is a
/// follower truncating a conflicting suffix). Returns the final expected entries.
fn build(path: &std::path::Path, batches: &[(usize, u64, usize)]) -> Vec<Entry> {
    let (mut log, rec) = EntryLog::open(path).expect("open");
    assert!(rec.entries.is_empty());
    let mut expected: Vec<Entry> = Vec::new();
    for (term, &(len, overlap, data_bytes)) in (2u64..).zip(batches) {
        let last = expected.last().map_or(0, |e| e.index);
        let start = (last + 1).saturating_sub(overlap).max(1);
        let batch: Vec<Entry> = (0..len as u64)
            .map(|i| entry(start + i, term, data_bytes))
            .collect();
        log.append(&batch).expect("append");
        expected.retain(|e| e.index < start);
        expected.extend(batch);
    }
    expected
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn a_cut_at_any_byte_recovers_a_valid_prefix(
        batches in prop::collection::vec((1..6usize, 0..3u64, 0..40usize), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let expected = build(&path, &batches);
        let full = std::fs::read(&path).expect("read");
        {
            let (_, rec) = EntryLog::open(&path).expect("reopen whole");
            prop_assert_eq!(&rec.entries, &expected);
            prop_assert_eq!(rec.truncated_bytes, 0);
        }
        let cut = cut.index(full.len() + 1);
        std::fs::write(&path, &full[..cut]).expect("cut");
        let (mut log, rec) = EntryLog::open(&path).expect("reopen cut");
        // Entry i's frame ends at the start of entry i + 1 (or the end of the file).
        let mut whole = 0;
        let mut pos = 0usize;
        for e in &expected {
            let frame = 8 + protobuf::Message::compute_size(e) as usize;
            if pos + frame <= cut {
                whole += 1;
            }
            pos += frame;
        }
        prop_assert_eq!(&rec.entries[..], &expected[..whole]);
        prop_assert_eq!(std::fs::metadata(&path).expect("stat").len() as usize,
            full.len().min(cut) - rec.truncated_bytes as usize);
        // The recovered log accepts the next entry and reads back whole.
        let next = rec.entries.last().map_or(1, |e| e.index + 1);
        log.append(&[entry(next, 99, 5)]).expect("append after recovery");
        drop(log);
        let (_, again) = EntryLog::open(&path).expect("reopen");
        prop_assert_eq!(again.truncated_bytes, 0);
        prop_assert_eq!(again.entries.len(), whole + 1);
    }

    #[test]
    fn damaged_bytes_never_panic_and_yield_a_prefix(
        batches in prop::collection::vec((1..6usize, 0..2u64, 0..20usize), 1..5),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1..=255u8), 1..4),
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let expected = build(&path, &batches);
        let mut bytes = std::fs::read(&path).expect("read");
        for (at, mask) in flips {
            let i = at.index(bytes.len());
            bytes[i] ^= mask;
        }
        std::fs::write(&path, &bytes).expect("write");
        let (_, rec) = EntryLog::open(&path).expect("open damaged");
        prop_assert!(rec.entries.len() <= expected.len());
        prop_assert_eq!(&rec.entries[..], &expected[..rec.entries.len()]);
    }

    #[test]
    fn compaction_keeps_exactly_the_later_entries(
        n in 1..30u64,
        through in 0..35u64,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("log");
        let expected = build(&path, &[(n as usize, 0, 10)]);
        let (mut log, _) = EntryLog::open(&path).expect("open");
        log.compact_through(through).expect("compact");
        let kept: Vec<Entry> = expected.into_iter().filter(|e| e.index > through).collect();
        prop_assert_eq!(log.first_index(), kept.first().map(|e| e.index));
        drop(log);
        let (_, rec) = EntryLog::open(&path).expect("reopen");
        prop_assert_eq!(rec.entries, kept);
    }
}

fn controller_with_topics(dir: &std::path::Path, topics: usize) -> spool_raft::MetadataImage {
    let (mut c, _) = Controller::open(dir, 1, 1).expect("open");
    let id = c
        .register_broker(&spool_raft::RegisterBrokerRequest {
            broker_id: 1,
            incarnation_id: spool_raft::Uuid128 { high: 1, low: 1 },
            listeners: vec![],
            rack: None,
            cluster_id: None,
            registered_session_live: false,
            previous_broker_epoch: -1,
        })
        .expect("register");
    c.poll().expect("poll");
    let _ = id;
    let epoch = c.image().broker(1).expect("b").broker_epoch;
    let hb = spool_raft::HeartbeatRequest {
        broker_id: 1,
        broker_epoch: epoch,
        current_metadata_offset: c.applied_index() as i64,
        want_fence: false,
        want_shutdown: false,
    };
    c.heartbeat(&hb).expect("hb");
    c.poll().expect("poll");
    for i in 0..topics {
        c.create_topic(&CreateTopicRequest::new(format!("t{i}"), 2))
            .expect("create");
        c.poll().expect("poll");
    }
    assert_eq!(c.image().topic_count(), topics);
    c.image().clone()
}

#[test]
fn a_torn_tail_on_the_controller_log_is_cut_and_the_image_survives() {
    let dir = tempfile::tempdir().expect("tempdir");
    let image = controller_with_topics(dir.path(), 4);
    let log_path = dir.path().join("__raft").join("log");
    let mut f = OpenOptions::new()
        .append(true)
        .open(&log_path)
        .expect("open log");
    // Half a frame: a length and CRC promising more bytes than follow.
    f.write_all(&[200, 0, 0, 0, 1, 2, 3, 4, 9, 9])
        .expect("tear");
    drop(f);
    let (c, reopened) = Controller::open(dir.path(), 1, 1).expect("reopen");
    assert_eq!(reopened, image);
    assert!(c.is_leader());
}

#[test]
fn losing_committed_entries_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    controller_with_topics(dir.path(), 3);
    let log_path = dir.path().join("__raft").join("log");
    let len = std::fs::metadata(&log_path).expect("stat").len();
    let f = OpenOptions::new()
        .write(true)
        .open(&log_path)
        .expect("open");
    f.set_len(len / 2).expect("cut");
    drop(f);
    match Controller::open(dir.path(), 1, 1) {
        Err(ControllerError::Disk(DiskError::Corrupt { file, .. })) => {
            assert!(file.ends_with("__raft/state"), "{}", file.display());
        }
        Err(e) => panic!("unexpected error {e}"),
        Ok(_) => panic!("opened a log that lost committed entries"),
    }
}

#[test]
fn a_damaged_state_file_is_an_error_not_a_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    controller_with_topics(dir.path(), 1);
    let state = dir.path().join("__raft").join("state");
    let mut bytes = std::fs::read(&state).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&state, bytes).expect("write");
    assert!(matches!(
        Controller::open(dir.path(), 1, 1),
        Err(ControllerError::Disk(DiskError::Corrupt { .. }))
    ));
}
