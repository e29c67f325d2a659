//! The process-wide "please stop" flag set by SIGTERM and SIGINT, shared by `spool serve` (every
//! core polls it) and the long-running CLI commands (`spool consume --group` commits and leaves),
//! and the "stop now" flag that follows it in `spool serve`: a clustered broker first hands its
//! leaderships away ([`crate::controlled_shutdown`]) while every core keeps serving, and only
//! once core 0 [`release`]s them do the cores stop.
//!
//! Promise: the handler only stores to an atomic, so it is async-signal-safe; nothing else happens
//! inside the signal context. A stop asked for from inside the process ([`request`], [`fail`])
//! is released at once: the process must stop, not wait on a controller first.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

static STOP: AtomicBool = AtomicBool::new(false);
/// Set once the cores may stop (after the controlled shutdown, or at once).
static RELEASED: AtomicBool = AtomicBool::new(false);
/// Why the process stops on its own, when it does (the first reason wins).
static FAILURE: OnceLock<String> = OnceLock::new();

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Routes SIGTERM and SIGINT to the flag (instead of killing the process).
pub fn install() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: `on_signal` has the C ABI `signal` expects and only stores to an atomic, which
        // is async-signal-safe.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Whether a stop was asked for (by a signal or by [`request`]).
pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Asks for a stop from inside the process (a core that cannot start, say), without a
/// controlled shutdown first.
pub fn request() {
    STOP.store(true, Ordering::SeqCst);
    release();
}

/// Lets the cores stop: the controlled shutdown is over (or there is none).
pub fn release() {
    RELEASED.store(true, Ordering::SeqCst);
}

/// Whether the cores may stop now.
pub fn released() -> bool {
    RELEASED.load(Ordering::SeqCst)
}

/// Stops the process because it must not run on (the quorum refused it, say): the broker
/// shuts down cleanly and `spool serve` then exits non-zero with `reason`.
pub fn fail(reason: String) {
    tracing::error!("stopping: {reason}");
    let _ = FAILURE.set(reason);
    request();
}

/// The reason given to [`fail`], if any.
pub fn failure() -> Option<&'static str> {
    FAILURE.get().map(String::as_str)
}
