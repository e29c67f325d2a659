//! Flushes that meet at one block: the writer never has two writes of one block in flight.

use super::tests::small_writer_at as writer_at;
use super::*;
use crate::test_util::run;

/// Two flushes waiting for the core's write slots at once (a sync's and a reader's, or
/// `durability = replicated`'s): the second must not write the partial block while the first's
/// write of it is in flight, or an older copy of the block could land last. With the check made
/// before waiting for the slots (as before 2026-12-07), the writer's assertion fires here.
#[test]
fn two_flushes_waiting_for_slots_write_the_last_block_one_after_the_other() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.log");
        let w = writer_at(path.clone()).await;
        let other = writer_at(dir.path().join("other.log")).await;
        core_writes::set_limit(2);
        w.append(&[1; 100], 1).await.unwrap();
        // Two full buffers of another segment take the core's two write slots.
        other.append(&[9; 4096], 1).await.unwrap();
        other.append(&[9; 4096], 2).await.unwrap();
        assert_eq!(core_writes::in_flight(), 2);
        let mut first = std::pin::pin!(w.flush());
        assert!(futures_lite::future::poll_once(&mut first).await.is_none());
        w.append(&[2; 100], 2).await.unwrap();
        let mut second = std::pin::pin!(w.flush());
        assert!(futures_lite::future::poll_once(&mut second).await.is_none());
        let (a, b) = futures_lite::future::zip(first, second).await;
        a.unwrap();
        b.unwrap();
        assert_eq!(w.written_end(), 200);
        assert_eq!(w.seal().await.unwrap(), 200);
        let mut expect = vec![1u8; 100];
        expect.extend_from_slice(&[2; 100]);
        assert_eq!(std::fs::read(&path).unwrap(), expect);
    });
}
