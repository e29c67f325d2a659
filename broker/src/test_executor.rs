//! For unit tests: runs a test body on a fresh glommio executor (its own thread, so thread-local
//! state such as a core's memory budgets starts empty).

/// Runs `f` on a fresh glommio executor and waits for it.
pub fn run<F: std::future::Future<Output = ()> + 'static>(f: impl FnOnce() -> F + Send + 'static) {
    glommio::LocalExecutorBuilder::default()
        .spawn(f)
        .expect("a test executor starts")
        .join()
        .expect("the test body completes");
}
