//! The writer's zeros ahead of the log end (module docs of `super` and of [`crate::prewrite`]):
//! starting the next zero write when one is due, waiting for the one in flight, and the per-core
//! buffer of zeros they are written from. A child of `writer` so it shares the writer's state;
//! split off only to keep that file short.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};

use glommio::io::{DmaBuffer, DmaFile};

use super::{align_up, SegmentWriter};
use crate::core_writes;
use crate::prewrite;

impl SegmentWriter {
    /// Starts the next zero write ahead of the log end, if one is due ([`crate::prewrite`]).
    pub(super) fn prewrite(self: &Rc<Self>) {
        if self.prewrite_bytes == 0 {
            return;
        }
        let (start, end) = {
            let mut st = self.st.borrow_mut();
            if st.zeroing.is_some()
                || st.zeros_stopped
                || st.offline.is_some()
                || !prewrite::worth_it(st.sync_bytes_avg)
            {
                return;
            }
            let Some(range) = prewrite::next_zero_range(
                st.logical_end(),
                st.zeroed_end,
                st.preallocated_end,
                self.prewrite_bytes,
                self.write_buffer_bytes as u64,
            ) else {
                return;
            };
            // The rule's promise, checked against what is really in flight: no data write
            // (submitted or still to land) reaches into the range.
            assert!(
                range.0 >= align_up(st.logical_end())
                    && st.in_flight.iter().all(|&(_, end, _)| end <= range.0),
                "zero range {range:?} meets data (end {}, in flight {:?})",
                st.logical_end(),
                st.in_flight
            );
            // Set before anything else runs: a data write recorded from now on checks it.
            st.zeroing = Some(range);
            range
        };
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            let len = (end - start) as usize;
            #[cfg(test)]
            held_by_test().await;
            let res = match core_writes::acquire().await {
                Ok(slot) => {
                    let res = me.file.write_rc_at(zeros(&me.file, len), start).await;
                    drop(slot);
                    res.map_err(|e| e.to_string())
                }
                Err(e) => Err(e.to_string()),
            };
            {
                let mut st = me.st.borrow_mut();
                st.zeroing = None;
                match res {
                    Ok(n) if n >= len => {
                        st.zeroed_end = st.zeroed_end.max(end);
                        st.zero_writes += 1;
                    }
                    other => {
                        st.zeros_stopped = true;
                        tracing::warn!(segment = %me.path.display(), start, end, result = ?other, "a zero write ahead of the log end failed; no more for this segment");
                    }
                }
            }
            let waiters: Vec<Waker> = me.zero_waiters.borrow_mut().drain(..).collect();
            for waker in waiters {
                waker.wake();
            }
        })
        .detach();
    }

    /// Resolves once no zero write is in flight.
    pub(super) async fn zeros_idle(&self) {
        std::future::poll_fn(|cx| {
            if self.st.borrow().zeroing.is_none() {
                Poll::Ready(())
            } else {
                self.zero_waiters.borrow_mut().push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await;
    }
}

#[cfg(test)]
thread_local! {
    /// Tests only: while set, each zero write waits, before it is submitted, until this
    /// channel yields or closes, so a test can hold one in flight while data catches up.
    pub(super) static ZERO_GATE: RefCell<Option<Rc<glommio::channels::local_channel::LocalReceiver<()>>>> =
        const { RefCell::new(None) };
}

#[cfg(test)]
async fn held_by_test() {
    let gate = ZERO_GATE.with(|g| g.borrow().clone());
    if let Some(gate) = gate {
        let _ = gate.recv().await;
    }
}

thread_local! {
    /// One buffer of zeros per chunk size this core writes ahead with (in practice one or two
    /// sizes: `write_buffer_bytes`), shared by every zero write: zeroing a fresh megabyte per
    /// write cost the broker 11 % of its samples.
    static ZEROS: RefCell<Vec<Rc<DmaBuffer>>> = const { RefCell::new(Vec::new()) };
}

/// Most chunk sizes [`ZEROS`] keeps (a bound; beyond it a buffer is made for the write).
const ZERO_BUFFERS_MAX: usize = 4;

/// `len` bytes of zeros to write from.
fn zeros(file: &DmaFile, len: usize) -> Rc<DmaBuffer> {
    ZEROS.with(|cell| {
        let mut cache = cell.borrow_mut();
        if let Some(buf) = cache.iter().find(|b| b.len() == len) {
            return Rc::clone(buf);
        }
        let mut buf = file.alloc_dma_buffer(len);
        buf.as_bytes_mut().fill(0);
        let buf = Rc::new(buf);
        if cache.len() < ZERO_BUFFERS_MAX {
            cache.push(Rc::clone(&buf));
        }
        buf
    })
}
