//! Taking turns at one client's state between the application's thread and a background thread
//! (the blocking consumer's heartbeat thread, as in Kafka's Java client).
//!
//! The application always goes first: [`Turns::enter`] announces it, wakes the background
//! thread out of its network wait (through the waker it was given), and holds the state for the
//! whole call; the background thread runs its step only while no application call is waiting or
//! under way, and each of its steps waits on the network at most [`AWAY_WAIT_MAX_MS`]. So an
//! application call waits for the lock at most about one such step, and the background thread
//! never sees the state half-way through a call.
//!
//! Never: the background thread holding the state while an application call waits beyond its
//! current step; a lost wake-up (the predicate is checked under the lock, the notification is
//! sent after every turn).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Longest one background step waits on the network before it looks whether the application
/// wants its turn (the application also wakes it at once; this bounds a missed wake-up).
pub(crate) const AWAY_WAIT_MAX_MS: u64 = 100;

pub(crate) struct Turns<S> {
    state: Mutex<S>,
    /// Application calls waiting for the state (the background thread yields to them).
    waiting: AtomicUsize,
    stop: AtomicBool,
    turn_over: Condvar,
}

/// The application's turn: the state, until dropped.
pub(crate) struct Turn<'a, S> {
    guard: Option<MutexGuard<'a, S>>,
    turns: &'a Turns<S>,
}

impl<S> Deref for Turn<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        // Some until drop.
        self.guard
            .as_deref()
            .expect("a turn holds its guard until dropped")
    }
}

impl<S> DerefMut for Turn<'_, S> {
    fn deref_mut(&mut self) -> &mut S {
        self.guard
            .as_deref_mut()
            .expect("a turn holds its guard until dropped")
    }
}

impl<S> Drop for Turn<'_, S> {
    fn drop(&mut self) {
        drop(self.guard.take());
        self.turns.turn_over.notify_all();
    }
}

fn lock<S>(m: &Mutex<S>) -> MutexGuard<'_, S> {
    // A panic on the other side (a listener's, say) leaves the state as consistent as the
    // cores keep it between inputs; the application still gets to close.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl<S: Send + 'static> Turns<S> {
    pub(crate) fn new(state: S) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(state),
            waiting: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            turn_over: Condvar::new(),
        })
    }

    /// The application's turn; `wake` interrupts the background thread's network wait.
    pub(crate) fn enter(&self, wake: impl FnOnce()) -> Turn<'_, S> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        wake();
        let guard = lock(&self.state);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        Turn {
            guard: Some(guard),
            turns: self,
        }
    }

    /// Starts the background thread: `step` runs whenever no application call waits or runs,
    /// and should wait on the network at most [`AWAY_WAIT_MAX_MS`].
    pub(crate) fn spawn(
        self: &Arc<Self>,
        name: &str,
        mut step: impl FnMut(&mut S) + Send + 'static,
    ) -> std::io::Result<JoinHandle<()>> {
        let turns = Arc::clone(self);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let mut guard = lock(&turns.state);
                loop {
                    if turns.stop.load(Ordering::SeqCst) {
                        return;
                    }
                    if turns.waiting.load(Ordering::SeqCst) > 0 {
                        // Releases the state; back once a turn is over (or after the bound, in
                        // case a notification raced with the count).
                        guard = match turns.turn_over.wait_timeout_while(
                            guard,
                            Duration::from_millis(AWAY_WAIT_MAX_MS),
                            |_| {
                                turns.waiting.load(Ordering::SeqCst) > 0
                                    && !turns.stop.load(Ordering::SeqCst)
                            },
                        ) {
                            Ok((g, _)) => g,
                            Err(p) => p.into_inner().0,
                        };
                        continue;
                    }
                    step(&mut guard);
                }
            })
    }

    /// Stops the background thread at its next look (the caller wakes its network wait).
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.turn_over.notify_all();
    }
}
