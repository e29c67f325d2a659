//! The writer's own tests: appends landing in order, a dropped sync, group commit.

use super::*;

fn cfg(
    write_buffer_bytes: usize,
    writes_in_flight_max: usize,
    preallocate_bytes: u64,
) -> LogConfig {
    LogConfig {
        write_buffer_bytes,
        writes_in_flight_max,
        preallocate_bytes,
        ..LogConfig::default()
    }
}

use crate::test_util::run;

/// A fresh segment at `path`: 4 KiB staging, two writes in flight, no preallocation (so an
/// append does no I/O of its own until a staging buffer fills).
pub(super) async fn small_writer_at(path: PathBuf) -> Rc<SegmentWriter> {
    SegmentWriter::open(path, 0, 0, &[], &cfg(4096, 2, 0), Rc::default())
        .await
        .unwrap()
}

/// [`small_writer_at`] `s.log` in `dir`.
async fn small_writer(dir: &std::path::Path) -> Rc<SegmentWriter> {
    small_writer_at(dir.join("s.log")).await
}

#[test]
fn partial_blocks_are_rewritten_and_everything_lands_in_order() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg.log");
        let w = SegmentWriter::open(path.clone(), 0, 0, &[], &cfg(8192, 3, 16384), Rc::default())
            .await
            .unwrap();
        let mut expect = Vec::new();
        for i in 0..200u32 {
            let chunk: Vec<u8> = (0..(i * 37 % 900 + 1)).map(|j| (i + j) as u8).collect();
            let at = w.append(&chunk, i as u64 + 1).await.unwrap();
            assert_eq!(at, expect.len() as u64);
            expect.extend_from_slice(&chunk);
            if i % 7 == 0 {
                w.sync_to(expect.len() as u64).await.unwrap();
                assert!(w.synced_end() >= expect.len() as u64);
            }
        }
        let end = w.seal().await.unwrap();
        assert_eq!(end, expect.len() as u64);
        let on_disk = std::fs::read(&path).unwrap();
        assert_eq!(on_disk, expect);
    });
}

#[test]
fn a_sync_dropped_half_way_does_not_stop_the_next() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let w = small_writer(dir.path()).await;
        w.append(&[7; 100], 1).await.unwrap();
        {
            // Polled once, it has taken the sync and yielded; then its task goes away.
            let mut first = std::pin::pin!(w.sync_to(100));
            assert!(futures_lite::future::poll_once(&mut first).await.is_none());
            assert!(w.sync_running.get(), "the first sync is running");
        }
        assert!(!w.sync_running.get(), "dropped, it no longer runs");
        w.append(&[8; 100], 2).await.unwrap();
        // Had the dropped sync kept its flag, this would wait forever; the bound only turns
        // that hang into a failure.
        let second = futures_lite::future::or(async { Some(w.sync_to(200).await) }, async {
            glommio::timer::sleep(std::time::Duration::from_secs(30)).await;
            None
        })
        .await;
        assert!(matches!(second, Some(Ok(()))), "{second:?}");
        assert_eq!(w.synced_end(), 200);
    });
}

#[test]
fn concurrent_syncs_share_fdatasyncs() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let w = small_writer(dir.path()).await;
        let mut tasks = Vec::new();
        for i in 0..32u8 {
            let at = w.append(&[i; 100], u64::from(i) + 1).await.unwrap();
            let w2 = Rc::clone(&w);
            tasks.push(glommio::spawn_local(
                async move { w2.sync_to(at + 100).await },
            ));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(w.synced_end(), 3200);
        assert_eq!(w.synced_mark(), 32);
        // The first sync starts alone; everyone who arrived while it ran shares the next.
        assert!(
            w.fdatasync_count() < 32,
            "{} fdatasyncs for 32 callers",
            w.fdatasync_count()
        );
    });
}

/// An append whose bytes exactly fill the staging buffer is written out inside `append`, before
/// its mark is recorded. A sync for that mark must still return: the write had carried the
/// previous mark, nothing was left to submit, and the sync looped on fdatasyncs forever
/// (found by `a_log_cut_at_any_byte_recovers_every_whole_batch` hanging in CI, 2026-12-07).
#[test]
fn a_sync_for_an_append_that_filled_the_staging_buffer_returns() {
    run(|| async {
        let dir = tempfile::tempdir().unwrap();
        let w = small_writer(dir.path()).await;
        w.append(&[1; 100], 1).await.unwrap();
        // The 4 KiB staging buffer, filled to its last byte by this append.
        w.append(&[2; 4096 - 100], 2).await.unwrap();
        let synced = crate::test_util::fused(w.sync_mark(2)).await;
        assert!(
            matches!(synced, Some(Ok(()))),
            "the sync for mark 2 never returned: {synced:?}"
        );
        assert!(w.synced_end() >= 4096);
        assert_eq!(w.synced_mark(), 2);
    });
}

/// One step of [`appends_and_syncs_in_any_order_all_return_and_land`].
#[derive(Debug, Clone)]
enum Step {
    /// Append this many bytes.
    Append(usize),
    /// Append exactly what the staging buffer still has room for (a buffer filled to its last
    /// byte inside `append`, the case that once made a sync loop forever).
    FillBuffer,
    /// Wait for an fdatasync covering the last append's mark.
    Sync,
    /// Write out what is staged, without an fdatasync.
    Flush,
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        4 => (1usize..6000).prop_map(Step::Append),
        2 => Just(Step::FillBuffer),
        2 => Just(Step::Sync),
        1 => Just(Step::Flush),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

    /// Appends of any size (buffers filled exactly among them), syncs and flushes in any order:
    /// every sync returns (a fuse fails one that does not) covering its mark, and the file holds
    /// exactly the appended bytes after the seal.
    #[test]
    fn appends_and_syncs_in_any_order_all_return_and_land(
        steps in proptest::collection::vec(step(), 1..40)
    ) {
        run(move || async move {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.log");
            let w = small_writer_at(path.clone()).await;
            let mut expect: Vec<u8> = Vec::new();
            let mut mark = 0u64;
            for s in steps {
                let len = match s {
                    Step::Append(n) => n,
                    Step::FillBuffer => 4096 - expect.len() % 4096,
                    Step::Sync => {
                        let synced = crate::test_util::fused(w.sync_mark(mark)).await;
                        assert!(
                            matches!(synced, Some(Ok(()))),
                            "a sync for mark {mark} never returned: {synced:?}"
                        );
                        assert!(w.synced_mark() >= mark);
                        assert!(w.synced_end() >= expect.len() as u64);
                        continue;
                    }
                    Step::Flush => {
                        w.flush().await.unwrap();
                        continue;
                    }
                };
                let bytes: Vec<u8> = (0..len).map(|i| (mark as usize * 31 + i) as u8).collect();
                mark += 1;
                let at = w.append(&bytes, mark).await.unwrap();
                assert_eq!(at, expect.len() as u64);
                expect.extend_from_slice(&bytes);
            }
            assert_eq!(w.seal().await.unwrap(), expect.len() as u64);
            assert_eq!(std::fs::read(&path).unwrap(), expect);
        });
    }
}
