//! Test helpers shared by the I/O tests.

/// Runs `f` to completion on a fresh glommio executor (the I/O layer's tests need one).
pub(crate) fn run<F: std::future::Future<Output = ()> + 'static>(
    f: impl FnOnce() -> F + Send + 'static,
) {
    glommio::LocalExecutorBuilder::default()
        .spawn(f)
        .expect("a test executor starts")
        .join()
        .expect("the test body completes");
}

/// `f`'s output, or `None` if it has not finished within 20 s: a fuse that turns a hang (a sync
/// that never returns) into a test failure. Not a timing assertion: anything that finishes at
/// all finishes far sooner.
pub(crate) async fn fused<T>(f: impl std::future::Future<Output = T>) -> Option<T> {
    futures_lite::future::or(async { Some(f.await) }, async {
        glommio::timer::sleep(std::time::Duration::from_secs(20)).await;
        None
    })
    .await
}
