//! Blocking file-system calls, run off the reactor.
//!
//! A glommio executor runs every task of its core on one thread, so one blocking syscall there
//! (a `std::fs` call that walks a directory, resolves a path or waits for the disk) stalls every
//! partition and connection of that core. What io_uring cannot do asynchronously goes through
//! these helpers instead: they run the call on the executor's blocking thread pool
//! (`glommio::executor().spawn_blocking`) and wait for it without blocking the reactor.
//!
//! Promises: the closure runs on another thread, exactly once; its result (or its panic) comes
//! back to the awaiting task. Must be called from a task on a glommio executor.
//!
//! Never: used for the data path's hot loops — the pool is one thread per executor (glommio's
//! default, pinned to the executor's CPU), so calls from one core run one after another. It is
//! for the rare, slow metadata calls: opening a partition's directory, removing a topic's.

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;

/// Runs `f` on the executor's blocking thread pool and returns what it returns; a panic in `f`
/// resumes on the awaiting task (glommio's pool would otherwise lose the result and the thread).
pub async fn run_blocking<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let outcome = glommio::executor()
        .spawn_blocking(move || panic::catch_unwind(AssertUnwindSafe(f)))
        .await;
    match outcome {
        Ok(value) => value,
        Err(payload) => panic::resume_unwind(payload),
    }
}

/// `std::fs::remove_dir_all(path)` on the blocking pool: removes a directory and everything
/// under it (e.g. a deleted topic's partition directory). A missing `path` is an error of kind
/// `NotFound`, as with the std call.
pub async fn remove_dir_all(path: PathBuf) -> std::io::Result<()> {
    run_blocking(move || std::fs::remove_dir_all(&path)).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_util::run;

    #[test]
    fn run_blocking_runs_on_another_thread_and_returns_its_value() {
        run(|| async {
            let reactor = std::thread::current().id();
            let (value, thread) = run_blocking(|| (6 * 7, std::thread::current().id())).await;
            assert_eq!(value, 42);
            assert_ne!(
                thread, reactor,
                "the closure must not run on the reactor thread"
            );
        });
    }

    #[test]
    fn run_blocking_passes_a_panic_back_to_the_caller_and_keeps_the_pool_usable() {
        run(|| async {
            let caught = glommio::spawn_local(async {
                // A panic inside the closure, caught by the spawned task's own unwinding.
                let r = std::panic::AssertUnwindSafe(run_blocking(|| -> u32 {
                    panic!("planted panic in a blocking call")
                }));
                futures_lite::FutureExt::catch_unwind(r).await
            })
            .await;
            let payload = caught.expect_err("the panic must reach the awaiting task");
            let msg = payload.downcast_ref::<&str>().copied().unwrap_or_default();
            assert_eq!(msg, "planted panic in a blocking call");
            // The pool's thread survived: a second call still completes.
            assert_eq!(run_blocking(|| 1 + 1).await, 2);
        });
    }

    #[test]
    fn remove_dir_all_removes_a_tree_and_reports_a_missing_one() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().join("topic-0");
        std::fs::create_dir_all(root.join("nested/deeper")).expect("mkdir");
        std::fs::write(root.join("00000000000000000000.log"), b"batches").expect("write");
        std::fs::write(root.join("nested/deeper/file"), b"x").expect("write");
        let r = root.clone();
        run(move || async move {
            remove_dir_all(r.clone()).await.expect("removes the tree");
            assert!(!r.exists(), "the directory is gone");
            let again = remove_dir_all(r)
                .await
                .expect_err("a second removal has nothing to remove");
            assert_eq!(again.kind(), std::io::ErrorKind::NotFound);
        });
        assert!(tmp.path().exists(), "only the named directory was removed");
    }
}
