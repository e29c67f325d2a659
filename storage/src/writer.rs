//! One active segment's appends on a glommio DMA (O_DIRECT) file, with group commit.
//!
//! Owns the segment's write side: an aligned staging buffer (`write_buffer_bytes`) that appends are
//! copied into; a full buffer is written as one large aligned write, with up to
//! `writes_in_flight_max` writes in flight (the disk wants ~1 MiB writes at queue depth 2-4,
//! DESIGN §12), and within the core's bound across all its segments ([`crate::core_writes`]). A flush writes the partial last block zero-padded and keeps it staged, so the next
//! write rewrites that block with more data; a write touching a block that an earlier write still
//! in flight also covers waits for it, so an older copy can never land last.
//!
//! Group commit: [`SegmentWriter::sync_mark`] returns once an fdatasync has covered the caller's
//! append (named by the mark it passed, the log's next offset). One sync runs at a time; callers
//! that arrive while it runs wait for it to finish and then either find themselves covered or
//! start the next sync, which covers everyone who appended meanwhile.
//!
//! Space is preallocated in `preallocate_bytes` steps (fallocate) while a step is a small share of
//! the free space ([`crate::free_space`]; exactly what an append needs beyond that), so an
//! fdatasync rarely has size metadata to write and a full disk shows up as [`LogError::DiskFull`]
//! at preallocation, before anything is acknowledged. A failed write takes the writer offline
//! (its tail is unknown until recovery); it never pretends the bytes are there.
//!
//! Zeros ahead (`prewrite_bytes`, [`crate::prewrite`]): the writer keeps the blocks just past the
//! log end written with zeros, so the fdatasyncs that acknowledge appends flush data, not extent
//! metadata too. One zero write per segment is in flight at a time, outside the segment's own
//! write slots but inside the core's; a data write that would touch its range waits for it, and
//! sealing waits for it before the file is trimmed. A zero write that fails only stops the zeros
//! for this segment: the blocks stay preallocated, and appends work as without them.
//!
//! Never does: DMA reads (glommio's polled-read probe fails on this disk, DESIGN §12 — reads go
//! through the page cache in `log`), or holding a `RefCell` borrow across an `.await`.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Instant;

use glommio::io::{DmaBuffer, DmaFile, OpenOptions};
use glommio::sync::Semaphore;

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::config::{LogConfig, BLOCK_BYTES};
use crate::core_writes;
use crate::error::LogError;
use crate::free_space;
use crate::sync_probe::SyncProbe;

fn align_down(v: u64) -> u64 {
    v / BLOCK_BYTES * BLOCK_BYTES
}

fn align_up(v: u64) -> u64 {
    v.div_ceil(BLOCK_BYTES) * BLOCK_BYTES
}

/// Takes the writer offline for `reason` (the first one stays): its tail on disk is unknown, so
/// every later append and sync is refused until the log is opened again and recovered. Said
/// once, at error level, because nothing else will say it: a follower only retries quietly.
fn go_offline(st: &mut State, path: &std::path::Path, reason: String) {
    if st.offline.is_none() {
        tracing::error!(segment = %path.display(), %reason, "a segment write failed: its log refuses appends until it is reopened");
        st.offline = Some(reason);
    }
}

struct State {
    staging: DmaBuffer,
    staged_bytes: usize,
    /// Aligned file position of `staging[0]`.
    stage_pos: u64,
    /// Writes submitted and not yet completed, in submission order: (start, end, done).
    in_flight: VecDeque<(u64, u64, bool)>,
    /// Every byte below this is in the file (its write completed).
    written_end: u64,
    /// Every byte below this is durable.
    synced_end: u64,
    /// The caller's mark (the log's next offset) after the last append, at the last
    /// submission, and at the last fdatasync: group commit is tracked in marks, so a caller
    /// waits exactly for the sync covering its own batch.
    mark: u64,
    submitted_mark: u64,
    synced_mark: u64,
    preallocated_end: u64,
    /// Zeros written so far end here (`prewrite`); beyond it the blocks may be unwritten.
    zeroed_end: u64,
    /// The zero write in flight, if any: data writes into this range wait for it.
    zeroing: Option<(u64, u64)>,
    /// A zero write failed: no more for this segment.
    zeros_stopped: bool,
    /// Bytes each fdatasync covered, averaged (1/8 weight to the newest): the zeros pay only
    /// while syncs are small ([`prewrite::worth_it`]).
    sync_bytes_avg: u64,
    /// The preallocated end at which a step for the zeros' lead did not fit: not tried again
    /// (an fstatvfs per append) until the preallocation moves.
    ahead_refused_at: Option<u64>,
    /// Zero writes completed, and data writes that waited for one (the appends overtook them).
    zero_writes: u64,
    zero_waits: u64,
    offline: Option<String>,
}

impl State {
    fn logical_end(&self) -> u64 {
        self.stage_pos + self.staged_bytes as u64
    }
}

pub struct SegmentWriter {
    path: PathBuf,
    file: Rc<DmaFile>,
    st: RefCell<State>,
    write_slots: Rc<Semaphore>,
    writes_in_flight_max: u64,
    sync_running: Cell<bool>,
    sync_generation: Cell<u64>,
    sync_waiters: RefCell<Vec<Waker>>,
    write_buffer_bytes: usize,
    preallocate_bytes: u64,
    prewrite_bytes: u64,
    zero_waiters: RefCell<Vec<Waker>>,
    syncs: Rc<SyncProbe>,
}

impl SegmentWriter {
    /// Opens (creating if needed) the segment for appends at `logical_end`; the bytes of the
    /// partial last block, `tail_block`, are what the file holds in `[align_down(end), end)`.
    pub async fn open(
        path: PathBuf,
        logical_end: u64,
        initial_mark: u64,
        tail_block: &[u8],
        config: &LogConfig,
        syncs: Rc<SyncProbe>,
    ) -> Result<Rc<Self>, LogError> {
        let (write_buffer_bytes, writes_in_flight_max, preallocate_bytes) = (
            config.write_buffer_bytes,
            config.writes_in_flight_max,
            config.preallocate_bytes,
        );
        let stage_pos = align_down(logical_end);
        assert_eq!(
            tail_block.len() as u64,
            logical_end - stage_pos,
            "tail block is the partial block"
        );
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .dma_open(&path)
            .await
            .map_err(|e| LogError::io("opening segment for append", &path, e))?;
        let file_bytes = file
            .file_size()
            .await
            .map_err(|e| LogError::io("stat", &path, e))?;
        let mut staging = file.alloc_dma_buffer(write_buffer_bytes);
        staging.as_bytes_mut()[..tail_block.len()].copy_from_slice(tail_block);
        let w = Rc::new(Self {
            path,
            file: Rc::new(file),
            st: RefCell::new(State {
                staging,
                staged_bytes: tail_block.len(),
                stage_pos,
                in_flight: VecDeque::new(),
                written_end: logical_end,
                synced_end: logical_end,
                mark: initial_mark,
                submitted_mark: initial_mark,
                synced_mark: initial_mark,
                preallocated_end: align_down(file_bytes),
                // What lies past the end after a restart is unknown: written again if needed.
                zeroed_end: align_up(logical_end),
                zeroing: None,
                zeros_stopped: false,
                sync_bytes_avg: 0,
                ahead_refused_at: None,
                zero_writes: 0,
                zero_waits: 0,
                offline: None,
            }),
            write_slots: Rc::new(Semaphore::new(writes_in_flight_max as u64)),
            writes_in_flight_max: writes_in_flight_max as u64,
            sync_running: Cell::new(false),
            sync_generation: Cell::new(0),
            sync_waiters: RefCell::new(Vec::new()),
            write_buffer_bytes,
            preallocate_bytes,
            prewrite_bytes: config.prewrite_bytes,
            zero_waiters: RefCell::new(Vec::new()),
            syncs,
        });
        Ok(w)
    }

    pub fn logical_end(&self) -> u64 {
        self.st.borrow().logical_end()
    }

    pub fn written_end(&self) -> u64 {
        self.st.borrow().written_end
    }

    /// fdatasyncs issued so far through the shared counter (group commit makes this far fewer
    /// than `sync_to` calls).
    pub fn fdatasync_count(&self) -> u64 {
        self.syncs.issued_count()
    }

    pub fn synced_end(&self) -> u64 {
        self.st.borrow().synced_end
    }

    fn check_online(&self) -> Result<(), LogError> {
        match &self.st.borrow().offline {
            Some(reason) => Err(LogError::Offline {
                dir: self.path.clone(),
                reason: reason.clone(),
            }),
            None => Ok(()),
        }
    }

    /// Makes sure the file has space for `end`, a preallocation step at a time. When a whole step
    /// would take more than its share of what is free ([`crate::free_space`]), or fails (the disk
    /// is nearly full), it reserves just what `end` needs, so the space that is left is still
    /// used but not hoarded; only when even that fails is the append refused (DiskFull).
    async fn reserve(&self, end: u64) -> Result<(), LogError> {
        let prealloc = self.st.borrow().preallocated_end;
        if self.preallocate_bytes == 0 {
            return Ok(());
        }
        if end <= prealloc {
            // Room for the zeros' lead too, while a whole step fits; never required.
            let tried = self.st.borrow().ahead_refused_at == Some(prealloc);
            if self.prewrite_bytes > 0 && end + self.prewrite_bytes > prealloc && !tried {
                let step = align_up(prealloc + self.preallocate_bytes);
                let fits = free_space::available_bytes(self.file.as_raw_fd())
                    .is_ok_and(|free| free_space::step_fits(step - prealloc, free));
                let took = fits && self.file.pre_allocate(step, false).await.is_ok();
                let mut st = self.st.borrow_mut();
                if took {
                    st.preallocated_end = st.preallocated_end.max(step);
                } else {
                    st.ahead_refused_at = Some(prealloc);
                }
            }
            return Ok(());
        }
        let step = align_up(end.max(prealloc + self.preallocate_bytes));
        // Unknown free space (fstatvfs failed) takes the step, as before the rule existed.
        let whole_step = free_space::available_bytes(self.file.as_raw_fd())
            .map_or(true, |free| free_space::step_fits(step - prealloc, free));
        let target = if whole_step && self.file.pre_allocate(step, false).await.is_ok() {
            step
        } else {
            let exact = align_up(end);
            self.file
                .pre_allocate(exact, false)
                .await
                .map_err(|e| LogError::io("preallocating", &self.path, e))?;
            exact
        };
        let mut st = self.st.borrow_mut();
        st.preallocated_end = st.preallocated_end.max(target);
        Ok(())
    }

    /// Copies `bytes` to the end of the segment; full staging buffers are written out. `mark`
    /// (non-decreasing) names the end of these bytes for [`SegmentWriter::sync_mark`]. Returns
    /// the file position the bytes start at. Callers serialize appends.
    pub async fn append(self: &Rc<Self>, bytes: &[u8], mark: u64) -> Result<u64, LogError> {
        self.append_parts(&[bytes], mark).await
    }

    /// [`Self::append`] of the concatenation of `parts` (a batch whose stamped header lies apart
    /// from its body, `log`): each part is copied into the staging once, nothing joined first.
    pub async fn append_parts(
        self: &Rc<Self>,
        parts: &[&[u8]],
        mark: u64,
    ) -> Result<u64, LogError> {
        self.check_online()?;
        let start = self.logical_end();
        let total: usize = parts.iter().map(|p| p.len()).sum();
        self.reserve(start + total as u64).await?;
        for part in parts {
            self.stage(part).await?;
        }
        {
            let mut st = self.st.borrow_mut();
            st.mark = st.mark.max(mark);
        }
        self.prewrite();
        Ok(start)
    }

    /// Copies `bytes` behind what is staged, writing out each buffer it fills.
    async fn stage(self: &Rc<Self>, bytes: &[u8]) -> Result<(), LogError> {
        let mut rest = bytes;
        while !rest.is_empty() {
            let full = {
                let mut st = self.st.borrow_mut();
                let room = self.write_buffer_bytes - st.staged_bytes;
                let n = room.min(rest.len());
                let at = st.staged_bytes;
                st.staging.as_bytes_mut()[at..at + n].copy_from_slice(&rest[..n]);
                st.staged_bytes += n;
                rest = &rest[n..];
                st.staged_bytes == self.write_buffer_bytes
            };
            if full {
                self.submit_staged().await?;
            }
        }
        Ok(())
    }

    /// Writes out what is staged: whole blocks leave the buffer; a partial last block is written
    /// padded and stays staged to be rewritten.
    async fn submit_staged(self: &Rc<Self>) -> Result<(), LogError> {
        loop {
            match self.submit_staged_once().await? {
                Submitted::Done => return Ok(()),
                // Its range meets the zero write in flight: after that, and not before.
                Submitted::BehindZeros => {
                    self.st.borrow_mut().zero_waits += 1;
                    self.zeros_idle().await;
                }
                // An earlier write of its first block is still in flight: after that one, so
                // writes of one block complete in order (an older copy never lands last).
                Submitted::BehindWrite => self.drain().await?,
            }
        }
    }

    async fn submit_staged_once(self: &Rc<Self>) -> Result<Submitted, LogError> {
        let permit = self
            .write_slots
            .acquire_static_permit(1)
            .await
            .map_err(|e| LogError::io("write slot", &self.path, e))?;
        // Then the core's share: the disk sees a few writes in flight per core, not per segment.
        let core_write = core_writes::acquire()
            .await
            .map_err(|e| LogError::io("core write slot", &self.path, e))?;
        let (buf, pos, end) = {
            let mut st = self.st.borrow_mut();
            if st.staged_bytes == 0 || st.written_end >= st.logical_end() && st.in_flight.is_empty()
            {
                return Ok(Submitted::Done);
            }
            // A previous write that ended in a partial block overlaps this one's first block.
            // Looked at only now, with the slots held: another flush (a sync's, a reader's,
            // `durability = replicated`'s) may have written that block while this one waited
            // for a slot, and checked before the wait, both writes of it were in flight at once.
            if st
                .in_flight
                .back()
                .is_some_and(|&(_, end, done)| !done && end > st.stage_pos)
            {
                return Ok(Submitted::BehindWrite);
            }
            let padded_end = st.stage_pos + align_up(st.staged_bytes as u64);
            if st
                .zeroing
                .is_some_and(|(z0, z1)| st.stage_pos < z1 && padded_end > z0)
            {
                return Ok(Submitted::BehindZeros);
            }
            let staged = st.staged_bytes;
            let whole = align_down(staged as u64) as usize;
            let partial = staged - whole;
            let mut next = self.file.alloc_dma_buffer(self.write_buffer_bytes);
            next.as_bytes_mut()[..partial].copy_from_slice(&st.staging.as_bytes()[whole..staged]);
            let mut buf = std::mem::replace(&mut st.staging, next);
            let padded = align_up(staged as u64) as usize;
            // Never write stale bytes past the logical end: the pad is zeros, which recovery
            // reads as unwritten space.
            buf.as_bytes_mut()[staged..padded].fill(0);
            buf.trim_to_size(padded);
            let pos = st.stage_pos;
            let end = pos + staged as u64;
            st.stage_pos += whole as u64;
            st.staged_bytes = partial;
            assert!(
                st.in_flight
                    .iter()
                    .all(|&(_, e, done)| done || align_up(e) <= pos),
                "a write of block {pos} while an earlier write of it is in flight"
            );
            st.in_flight.push_back((pos, end, false));
            st.submitted_mark = st.mark;
            (buf, pos, end)
        };
        let me = Rc::clone(self);
        glommio::spawn_local(async move {
            let res = me.file.write_at(buf, pos).await;
            let mut st = me.st.borrow_mut();
            match res {
                Ok(n) if n as u64 >= end - pos => {}
                Ok(n) => go_offline(
                    &mut st,
                    &me.path,
                    format!("short write of {n} bytes at {pos}"),
                ),
                Err(e) => go_offline(&mut st, &me.path, format!("write at {pos} failed: {e}")),
            }
            if let Some(entry) = st
                .in_flight
                .iter_mut()
                .find(|e| e.0 == pos && e.1 == end && !e.2)
            {
                entry.2 = true;
            }
            while st.in_flight.front().is_some_and(|e| e.2) {
                if let Some((_, e, _)) = st.in_flight.pop_front() {
                    st.written_end = st.written_end.max(e);
                }
            }
            drop(st);
            drop(core_write);
            drop(permit);
        })
        .detach();
        Ok(Submitted::Done)
    }

    /// Waits until every submitted write has completed.
    async fn drain(&self) -> Result<(), LogError> {
        let all = self
            .write_slots
            .acquire_permit(self.writes_in_flight_max)
            .await
            .map_err(|e| LogError::io("draining writes", &self.path, e))?;
        drop(all);
        self.check_online()
    }

    /// Writes everything staged to the file (no fdatasync); returns the written end and the mark
    /// it covers.
    pub async fn flush(self: &Rc<Self>) -> Result<(u64, u64), LogError> {
        self.check_online()?;
        if self.written_end() < self.logical_end() {
            self.submit_staged().await?;
        }
        self.drain().await?;
        // Read right after the drain, before any other task runs: every write submitted so
        // far has completed.
        let mut st = self.st.borrow_mut();
        // With every appended byte written, every recorded mark is covered — also the mark of
        // an append whose bytes filled the staging buffer and were written inside `append`,
        // before that mark was recorded (the write carried the previous one). Without this, a
        // sync for that mark found nothing left to submit and looped on fdatasyncs until
        // another append came (`writer_tests.rs`).
        if st.written_end >= st.logical_end() {
            st.submitted_mark = st.submitted_mark.max(st.mark);
        }
        Ok((st.written_end, st.submitted_mark))
    }

    /// Returns once an fdatasync has covered every byte below `end`.
    pub async fn sync_to(self: &Rc<Self>, end: u64) -> Result<(), LogError> {
        self.sync_where(|st| st.synced_end >= end).await
    }

    /// Returns once an fdatasync has covered every append whose mark is `<= mark` (group commit).
    pub async fn sync_mark(self: &Rc<Self>, mark: u64) -> Result<(), LogError> {
        self.sync_where(|st| st.synced_mark >= mark).await
    }

    pub fn synced_mark(&self) -> u64 {
        self.st.borrow().synced_mark
    }

    async fn sync_where(self: &Rc<Self>, covered: impl Fn(&State) -> bool) -> Result<(), LogError> {
        loop {
            if covered(&self.st.borrow()) {
                return Ok(());
            }
            if self.sync_running.get() {
                // Someone else's sync is in flight: wait for it, then look again. (A lock would
                // let the task that just synced barge back in with one batch at a time.)
                let generation = self.sync_generation.get();
                SyncDone {
                    writer: self,
                    generation,
                }
                .await;
                continue;
            }
            self.sync_running.set(true);
            let running = RunningSync { writer: self };
            // Let tasks woken by the previous sync append first, so this sync covers them too.
            futures_lite::future::yield_now().await;
            let res = self.sync_now().await;
            drop(running);
            res?;
        }
    }

    async fn sync_now(self: &Rc<Self>) -> Result<(), LogError> {
        let (target_end, target_mark) = self.flush().await?;
        self.syncs.issued();
        let started = Instant::now();
        let synced = self.file.fdatasync().await;
        self.syncs.finished(started.elapsed());
        synced.map_err(|e| {
            let reason = format!("fdatasync failed: {e}");
            go_offline(&mut self.st.borrow_mut(), &self.path, reason);
            LogError::io("fdatasync", &self.path, e)
        })?;
        let mut st = self.st.borrow_mut();
        let covered = target_end.saturating_sub(st.synced_end);
        st.sync_bytes_avg = (st.sync_bytes_avg * 7 + covered) / 8;
        st.synced_end = st.synced_end.max(target_end);
        st.synced_mark = st.synced_mark.max(target_mark);
        Ok(())
    }

    /// Syncs everything, trims the file to its logical size (dropping preallocated space) and
    /// closes it. The segment is then read-only.
    pub async fn seal(self: &Rc<Self>) -> Result<u64, LogError> {
        let end = self.logical_end();
        self.sync_to(end).await?;
        // A zero write landing after the trim would grow the file again.
        self.zeros_idle().await;
        self.file
            .truncate(end)
            .await
            .map_err(|e| LogError::io("trimming", &self.path, e))?;
        self.file
            .fdatasync()
            .await
            .map_err(|e| LogError::io("fdatasync", &self.path, e))?;
        Ok(end)
    }
}

/// What one attempt to write out the staging did.
enum Submitted {
    Done,
    BehindZeros,
    /// The write in flight ends inside this one's first block.
    BehindWrite,
}

/// The sync this task runs, ended when it is dropped: finished, failed, or dropped half-way
/// because the future running it was (a produce whose connection closed, a replica fetch
/// session torn down when its leader changed). Without it a dropped sync left `sync_running`
/// set, and every later sync of the segment waited forever for one that no longer ran — a
/// deposed leader's role change among them, which froze the broker's metadata (the fault
/// harness's pause runs, README item 5).
struct RunningSync<'a> {
    writer: &'a SegmentWriter,
}

impl Drop for RunningSync<'_> {
    fn drop(&mut self) {
        let w = self.writer;
        w.sync_running.set(false);
        w.sync_generation.set(w.sync_generation.get() + 1);
        let waiters: Vec<std::task::Waker> = w.sync_waiters.borrow_mut().drain(..).collect();
        for waker in waiters {
            waker.wake();
        }
    }
}

/// Resolves once the sync that was running when it was made has finished.
struct SyncDone<'a> {
    writer: &'a SegmentWriter,
    generation: u64,
}

impl Future for SyncDone<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.writer.sync_generation.get() != self.generation {
            return Poll::Ready(());
        }
        self.writer
            .sync_waiters
            .borrow_mut()
            .push(cx.waker().clone());
        Poll::Pending
    }
}

#[path = "writer_zeros.rs"]
mod zeros;

#[cfg(test)]
#[path = "writer_flush_tests.rs"]
mod flush_tests;

#[cfg(test)]
#[path = "writer_prewrite_tests.rs"]
mod prewrite_tests;

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
