//! The writer's zeros ahead of the log end (`prewrite`): they never overwrite an append, a data
//! write that meets a zero write in flight waits for it (shown with a zero write held by a test
//! gate), sealing trims them, and a reopened segment goes on.

use std::cell::Cell;
use std::rc::Rc;

use super::SegmentWriter;
use crate::config::LogConfig;
use crate::test_util::run;

/// 8 KiB staging (so zero chunks are 8 KiB), `prewrite_bytes` of lead, 64 KiB fallocate steps.
fn cfg(prewrite_bytes: u64) -> LogConfig {
    LogConfig {
        write_buffer_bytes: 8192,
        writes_in_flight_max: 3,
        preallocate_bytes: 65536,
        prewrite_bytes,
        ..LogConfig::default()
    }
}

async fn open(path: &std::path::Path, end: u64, tail: &[u8], c: &LogConfig) -> Rc<SegmentWriter> {
    SegmentWriter::open(path.to_path_buf(), end, end, tail, c, Rc::default())
        .await
        .unwrap()
}

/// Bytes `i` of a test log: never zero, so a zero write landing on data shows.
fn byte(i: usize) -> u8 {
    (i % 251) as u8 + 1
}

/// Appends of mixed sizes, some syncs: returns what was appended.
async fn append_mixed(w: &Rc<SegmentWriter>, from: usize, rounds: u32) -> Vec<u8> {
    let mut expect = Vec::new();
    for i in 0..rounds {
        // Mostly small appends (the zeros keep their lead), now and then one bigger than the
        // whole lead (the data may overtake a zero write still in flight).
        let len = if i % 17 == 16 {
            20_000
        } else {
            (i as usize * 131) % 3000 + 1
        };
        let at = from + expect.len();
        let chunk: Vec<u8> = (at..at + len).map(byte).collect();
        let pos = w.append(&chunk, (at + len) as u64).await.unwrap();
        assert_eq!(pos, at as u64);
        expect.extend_from_slice(&chunk);
        if i % 2 == 0 {
            w.sync_to((from + expect.len()) as u64).await.unwrap();
        }
    }
    expect
}

#[test]
fn zeros_ahead_never_overwrite_appends_and_seal_trims_them() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let w = open(&path, 0, &[], &cfg(16384)).await;
        let expect = append_mixed(&w, 0, 300).await;
        w.sync_to(expect.len() as u64).await.unwrap();
        w.zeros_idle().await;
        // Before the seal: the data, then zeros up to the preallocated end.
        let on_disk = std::fs::read(&path).unwrap();
        let bad = (0..expect.len()).find(|&i| on_disk[i] != expect[i]);
        assert_eq!(bad, None, "the file differs from the appends");
        assert!(on_disk[expect.len()..].iter().all(|&b| b == 0));
        // Whether a data write here overtakes a zero write still in flight depends on the
        // disk's timing; `a_data_write_meeting_a_held_zero_write_waits_for_it` makes it happen.
        let zero_writes = w.st.borrow().zero_writes;
        assert!(zero_writes > 10, "zeros were written ahead: {zero_writes}");
        let end = w.seal().await.unwrap();
        assert_eq!(end, expect.len() as u64);
        assert_eq!(
            std::fs::read(&path).unwrap(),
            expect,
            "trimmed to the log end"
        );
    });
}

/// The guard itself, shown: a zero write held in flight (a test gate) while an append runs
/// into its range. The data write must wait for it; without the wait the held zeros would land
/// last, over the data, and the file check below fails (checked by removing the wait).
#[test]
fn a_data_write_meeting_a_held_zero_write_waits_for_it() {
    run(|| async {
        let (open_gate, gate) = glommio::channels::local_channel::new_bounded(1);
        super::zeros::ZERO_GATE.with(|g| *g.borrow_mut() = Some(Rc::new(gate)));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let w = open(&path, 0, &[], &cfg(16384)).await;
        // Small synced appends until a zero write is under way (and held).
        let mut expect: Vec<u8> = Vec::new();
        for _ in 0..200 {
            if w.st.borrow().zeroing.is_some() {
                break;
            }
            let at = expect.len();
            let chunk: Vec<u8> = (at..at + 100).map(byte).collect();
            w.append(&chunk, (at + 100) as u64).await.unwrap();
            expect.extend_from_slice(&chunk);
            w.sync_to(expect.len() as u64).await.unwrap();
        }
        let zeroing = w.st.borrow().zeroing;
        let (_, z1) = zeroing.expect("a zero write started after small syncs");
        // One append across the whole held range, synced, in a task of its own.
        let at = expect.len();
        let len = z1 as usize - at + 5000;
        let chunk: Vec<u8> = (at..at + len).map(byte).collect();
        expect.extend_from_slice(&chunk);
        let done = Rc::new(Cell::new(false));
        let task = {
            let (w, done) = (Rc::clone(&w), Rc::clone(&done));
            glommio::spawn_local(async move {
                w.append(&chunk, (at + len) as u64).await.unwrap();
                w.sync_to((at + len) as u64).await.unwrap();
                done.set(true);
            })
        };
        // Until the data stops at the zeros (or, were the guard gone, is durable past them):
        // a bound of 10 s on waiting, not a timing assertion.
        for _ in 0..10_000 {
            if done.get() || w.st.borrow().zero_waits > 0 {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        assert!(
            !done.get(),
            "the data became durable while zeros were in flight over it"
        );
        drop(open_gate);
        task.await;
        w.zeros_idle().await;
        super::zeros::ZERO_GATE.with(|g| *g.borrow_mut() = None);
        let on_disk = std::fs::read(&path).unwrap();
        let bad = (0..expect.len()).find(|&i| on_disk[i] != expect[i]);
        assert_eq!(bad, None, "the file differs from the appends");
        assert!(
            w.st.borrow().zero_waits > 0,
            "the data write waited for the zeros"
        );
    });
}

#[test]
fn a_reopened_segment_goes_on_with_its_zeros() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let c = cfg(16384);
        let w = open(&path, 0, &[], &c).await;
        let first = append_mixed(&w, 0, 60).await;
        w.sync_to(first.len() as u64).await.unwrap();
        w.zeros_idle().await;
        drop(w);
        // As recovery reopens it: at the log end, with the partial last block's bytes.
        let end = first.len();
        let block = end / 4096 * 4096;
        let w = open(&path, end as u64, &first[block..], &c).await;
        let second = append_mixed(&w, end, 60).await;
        w.seal().await.unwrap();
        let mut expect = first;
        expect.extend_from_slice(&second);
        assert_eq!(std::fs::read(&path).unwrap(), expect);
    });
}

#[test]
fn no_zeros_when_off_or_when_syncs_are_large() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let off = dir.path().join("off.log");
        let w = open(&off, 0, &[], &cfg(0)).await;
        let expect = append_mixed(&w, 0, 40).await;
        w.zeros_idle().await;
        assert_eq!(w.st.borrow().zero_writes, 0, "nothing zeroed");
        assert_eq!(w.seal().await.unwrap(), expect.len() as u64);

        // Syncs that each cover more than `prewrite::SYNC_BYTES_MAX`: the zeros stop paying.
        let big = dir.path().join("big.log");
        let w = open(&big, 0, &[], &cfg(16384)).await;
        let mut at = 0usize;
        for _ in 0..12 {
            let chunk: Vec<u8> = (at..at + 200_000).map(byte).collect();
            w.append(&chunk, (at + 200_000) as u64).await.unwrap();
            at += 200_000;
            w.sync_to(at as u64).await.unwrap();
        }
        w.zeros_idle().await;
        let zeroed_before = w.st.borrow().zeroed_end;
        let chunk: Vec<u8> = (at..at + 100).map(byte).collect();
        w.append(&chunk, (at + 100) as u64).await.unwrap();
        assert!(w.st.borrow().zeroing.is_none(), "no zero write started");
        assert_eq!(w.st.borrow().zeroed_end, zeroed_before);
        w.seal().await.unwrap();
    });
}
