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
