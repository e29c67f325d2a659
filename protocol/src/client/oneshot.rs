//! A one-shot result slot usable from blocking code (`wait`) and from async code (`.await`), on
//! any thread: how the producer hands each record's delivery result back to its caller.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

struct State<T> {
    value: Option<T>,
    done: bool,
    waker: Option<Waker>,
}

struct Inner<T> {
    state: Mutex<State<T>>,
    ready: Condvar,
}

/// The sending half. Dropping it unfilled wakes the receiver with `None`.
pub struct Sender<T> {
    inner: Option<Arc<Inner<T>>>,
}

/// The receiving half: `wait()` blocks; `.await` suspends.
pub struct Receiver<T> {
    inner: Arc<Inner<T>>,
}

pub fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let inner = Arc::new(Inner {
        state: Mutex::new(State {
            value: None,
            done: false,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Sender {
            inner: Some(inner.clone()),
        },
        Receiver { inner },
    )
}

fn lock<T>(inner: &Inner<T>) -> std::sync::MutexGuard<'_, State<T>> {
    // A poisoned slot still holds a coherent Option: recover it rather than panic.
    inner
        .state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn finish<T>(inner: &Inner<T>, value: Option<T>) {
    let waker = {
        let mut s = lock(inner);
        s.value = value;
        s.done = true;
        s.waker.take()
    };
    inner.ready.notify_all();
    if let Some(w) = waker {
        w.wake();
    }
}

impl<T> Sender<T> {
    pub fn send(mut self, value: T) {
        if let Some(inner) = self.inner.take() {
            finish(&inner, Some(value));
        }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        if let Some(inner) = self.inner.take() {
            finish(&inner, None);
        }
    }
}

impl<T> Receiver<T> {
    /// Blocks until the value arrives; `None` when the sender was dropped.
    pub fn wait(self) -> Option<T> {
        let mut s = lock(&self.inner);
        while !s.done {
            s = self
                .inner
                .ready
                .wait(s)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        s.value.take()
    }

    /// Blocks at most `timeout`; `Err(self)` when it ran out.
    pub fn wait_timeout(self, timeout: Duration) -> Result<Option<T>, Self> {
        let deadline = std::time::Instant::now() + timeout;
        {
            let mut s = lock(&self.inner);
            while !s.done {
                let now = std::time::Instant::now();
                if now >= deadline {
                    drop(s);
                    return Err(self);
                }
                s = self
                    .inner
                    .ready
                    .wait_timeout(s, deadline - now)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
            if let Some(v) = s.value.take() {
                return Ok(Some(v));
            }
        }
        Ok(None)
    }

    /// Whether the value (or the sender's drop) has arrived.
    pub fn is_ready(&self) -> bool {
        lock(&self.inner).done
    }
}

impl<T> Future for Receiver<T> {
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut s = lock(&self.inner);
        if s.done {
            return Poll::Ready(s.value.take());
        }
        s.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_crosses_threads() {
        let (tx, rx) = channel();
        let t = std::thread::spawn(move || tx.send(5));
        assert_eq!(rx.wait(), Some(5));
        t.join().unwrap();
    }

    #[test]
    fn dropped_sender_yields_none() {
        let (tx, rx) = channel::<u8>();
        drop(tx);
        assert_eq!(futures_lite::future::block_on(rx), None);
    }
}
