//! One segment on disk: its files, its in-memory index, its page-cache reader, and (while it is
//! the active segment) its writer. Plus the small file helpers the log uses.
//!
//! A segment is named by its 20-digit base offset: `<base>.log`, `<base>.index`,
//! `<base>.timeindex`, `<base>.txnindex` (aborted transactions, `txn_index`) and `<base>.txnsnap`
//! (the transactions open at its base, `txn_tracker`). Reads go through a buffered (page-cache) descriptor so the broker can
//! splice from it; the writer appends with O_DIRECT. Because an O_DIRECT write invalidates the
//! cached pages it covers, the two views agree once a write has completed — which is why a read
//! that reaches bytes not yet written asks the writer to flush first ([`Segment::ensure_written`]).

use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::{BufferedFile, Directory, OpenOptions};

use crate::batch::{BatchHeader, HEADER_BYTES};
use crate::error::LogError;
use crate::index::SegmentIndex;
use crate::scan::{ScanStop, Scanner, Step};
use crate::writer::SegmentWriter;

/// Window used to scan and to walk batch headers.
pub(crate) const SCAN_WINDOW_BYTES: usize = 4 << 20;
pub(crate) const HEADER_WINDOW_BYTES: usize = 64 << 10;

pub(crate) fn segment_file(dir: &Path, base_offset: u64, ext: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{ext}"))
}

/// Parses `00000000000000000042.log` into 42.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// What the log keeps in memory of one segment's file: enough to skip the file on a fetch it
/// cannot answer, and to append to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TxnIndexMeta {
    pub entries: u64,
    /// The smallest first offset of its entries (`u64::MAX` without entries).
    pub min_first_offset: u64,
    /// Bytes written to the file (0: no file yet).
    pub file_bytes: u64,
    /// An append to the file failed: its entries are incomplete until the log is reopened.
    pub failed: bool,
}

impl Default for TxnIndexMeta {
    fn default() -> Self {
        Self {
            entries: 0,
            min_first_offset: u64::MAX,
            file_bytes: 0,
            failed: false,
        }
    }
}

pub(crate) struct Segment {
    pub base_offset: u64,
    pub log_path: PathBuf,
    pub index: RefCell<SegmentIndex>,
    pub reader: RefCell<Rc<BufferedFile>>,
    pub writer: RefCell<Option<Rc<SegmentWriter>>>,
    /// Wall-clock ms of the first append in this process, for `segment.ms`.
    pub first_append_ms: Cell<Option<i64>>,
    /// The summary of its aborted-transaction index file (`txn_index`).
    pub txn_index: Cell<TxnIndexMeta>,
}

impl Segment {
    pub fn new(
        base_offset: u64,
        log_path: PathBuf,
        index: SegmentIndex,
        reader: BufferedFile,
    ) -> Rc<Self> {
        Rc::new(Self {
            base_offset,
            log_path,
            index: RefCell::new(index),
            reader: RefCell::new(Rc::new(reader)),
            writer: RefCell::new(None),
            first_append_ms: Cell::new(None),
            txn_index: Cell::new(TxnIndexMeta::default()),
        })
    }

    pub fn dir(&self) -> &Path {
        self.log_path.parent().unwrap_or(Path::new("."))
    }

    pub fn writer(&self) -> Option<Rc<SegmentWriter>> {
        self.writer.borrow().clone()
    }

    pub fn reader(&self) -> Rc<BufferedFile> {
        Rc::clone(&self.reader.borrow())
    }

    pub fn size_bytes(&self) -> u64 {
        self.index.borrow().size_bytes
    }

    pub fn next_offset(&self) -> u64 {
        self.index.borrow().next_offset
    }

    /// Makes sure file bytes below `end` are in the file (the active segment may still stage them).
    /// A writer that went offline after a failed write cannot flush, but everything it wrote
    /// before stays readable: only a read past that point fails.
    pub async fn ensure_written(&self, end: u64) -> Result<(), LogError> {
        if let Some(w) = self.writer() {
            if w.written_end() < end {
                if let Err(e) = w.flush().await {
                    if w.written_end() < end {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    pub fn corrupt(&self, position: u64, reason: impl Into<String>) -> LogError {
        LogError::Corrupt {
            file: self.log_path.clone(),
            position,
            reason: reason.into(),
        }
    }

    /// Persists the index files (no fsync: a lost or torn index is detected and rebuilt).
    pub async fn write_index_files(&self) -> Result<(), LogError> {
        let (offsets, times) = {
            let idx = self.index.borrow();
            (idx.encode_offsets(), idx.encode_times())
        };
        write_file_atomically(
            &segment_file(self.dir(), self.base_offset, "index"),
            offsets,
            false,
        )
        .await?;
        write_file_atomically(
            &segment_file(self.dir(), self.base_offset, "timeindex"),
            times,
            false,
        )
        .await
    }
}

/// Opens a segment's page-cache descriptor (read-write, so recovery can truncate it).
pub(crate) async fn open_reader(path: &Path) -> Result<BufferedFile, LogError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .buffered_open(path)
        .await
        .map_err(|e| LogError::io("opening", path, e))
}

/// Reads up to `len` bytes at `pos` (fewer at end of file).
pub(crate) async fn read_at(
    file: &BufferedFile,
    path: &Path,
    pos: u64,
    len: usize,
) -> Result<Vec<u8>, LogError> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        let got = file
            .read_at(pos + out.len() as u64, len - out.len())
            .await
            .map_err(|e| LogError::io("reading", path, e))?;
        if got.is_empty() {
            break;
        }
        out.extend_from_slice(&got);
    }
    Ok(out)
}

/// Scans a segment file from the start, in bounded windows. Returns the rebuilt index, the stop
/// reason and the bytes scanned.
pub(crate) async fn scan_file(
    file: &BufferedFile,
    path: &Path,
    base_offset: u64,
    index_interval_bytes: u64,
    max_batch_bytes: usize,
) -> Result<(SegmentIndex, ScanStop, u64), LogError> {
    let file_bytes = file
        .file_size()
        .await
        .map_err(|e| LogError::io("stat", path, e))?;
    let mut scanner = Scanner::new(base_offset, index_interval_bytes, max_batch_bytes);
    let mut from = 0u64;
    let mut want = SCAN_WINDOW_BYTES;
    let mut scanned = 0u64;
    loop {
        let window = read_at(file, path, from, want).await?;
        scanned += window.len() as u64;
        let eof = from + window.len() as u64 >= file_bytes || window.len() < want;
        match scanner.feed(&window, from, eof) {
            Step::Done(stop) => return Ok((scanner.index, stop, scanned)),
            Step::NeedMore { from: f, at_least } => {
                from = f;
                want = at_least.max(SCAN_WINDOW_BYTES);
            }
        }
    }
}

/// Whether every byte of `file` from `pos` on is zero (never-written, preallocated space).
pub(crate) async fn zero_from(
    file: &BufferedFile,
    path: &Path,
    mut pos: u64,
) -> Result<bool, LogError> {
    loop {
        let w = read_at(file, path, pos, SCAN_WINDOW_BYTES).await?;
        if w.is_empty() {
            return Ok(true);
        }
        if w.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += w.len() as u64;
    }
}

/// Walks batch headers of one file forward from a position, reading windows through the page
/// cache. Only the length and header are checked here; a copying read checks CRCs.
pub(crate) struct HeaderCursor {
    file: Rc<BufferedFile>,
    window: Vec<u8>,
    window_pos: u64,
    pub position: u64,
    end: u64,
}

impl HeaderCursor {
    pub fn new(file: Rc<BufferedFile>, position: u64, end: u64) -> Self {
        Self {
            file,
            window: Vec::new(),
            window_pos: position,
            position,
            end,
        }
    }

    /// The header at the cursor (without advancing), or `None` at the end.
    pub async fn peek(
        &mut self,
        seg: &Segment,
        max_batch_bytes: usize,
    ) -> Result<Option<BatchHeader>, LogError> {
        if self.position >= self.end {
            return Ok(None);
        }
        let rel = self.fill(seg, HEADER_BYTES).await?;
        let h = BatchHeader::parse(&self.window[rel..])
            .map_err(|e| seg.corrupt(self.position, e.to_string()))?;
        let total = h.total_bytes() as u64;
        if h.batch_length < crate::batch::MIN_BATCH_LENGTH
            || h.total_bytes() > max_batch_bytes
            || self.position + total > self.end
            || h.magic != crate::batch::MAGIC_V2
        {
            return Err(seg.corrupt(self.position, format!("bad batch header {h:?}")));
        }
        Ok(Some(h))
    }

    /// The `n` bytes at the cursor (without advancing): a small batch's whole bytes, read from
    /// the same window as its header unless it ends past it. Fewer than `n` bytes left in the
    /// file is corruption (the caller asks only for a batch its header said is there).
    pub async fn peek_bytes(&mut self, seg: &Segment, n: usize) -> Result<&[u8], LogError> {
        let rel = self.fill(seg, n).await?;
        match self.window.get(rel..rel + n) {
            Some(bytes) => Ok(bytes),
            None => Err(seg.corrupt(
                self.position,
                format!("file ends inside a batch of {n} bytes"),
            )),
        }
    }

    pub fn advance(&mut self, h: &BatchHeader) {
        self.position += h.total_bytes() as u64;
    }

    /// Makes the window hold the `n` bytes at the cursor if the file has them (reading a new
    /// window of at least `n` bytes from the cursor when it does not), and returns where the
    /// cursor lies in the window.
    async fn fill(&mut self, seg: &Segment, n: usize) -> Result<usize, LogError> {
        let in_window = self.position >= self.window_pos
            && (self.position - self.window_pos) as usize + n <= self.window.len();
        if !in_window {
            let left =
                usize::try_from(self.end.saturating_sub(self.position)).unwrap_or(usize::MAX);
            let want = HEADER_WINDOW_BYTES.min(left).max(n);
            self.window = read_at(&self.file, &seg.log_path, self.position, want).await?;
            self.window_pos = self.position;
        }
        Ok((self.position - self.window_pos) as usize)
    }
}

/// Writes `bytes` to `path` through a temporary file and a rename, so readers see the old or the
/// new content, never a torn one. With `sync`, the data and the directory entry are durable.
pub(crate) async fn write_file_atomically(
    path: &Path,
    bytes: Vec<u8>,
    sync: bool,
) -> Result<(), LogError> {
    let tmp = path.with_extension(format!(
        "{}.tmp",
        path.extension().and_then(|e| e.to_str()).unwrap_or("")
    ));
    let f = BufferedFile::create(&tmp)
        .await
        .map_err(|e| LogError::io("creating", &tmp, e))?;
    let len = bytes.len();
    let n = f
        .write_at(bytes, 0)
        .await
        .map_err(|e| LogError::io("writing", &tmp, e))?;
    if n != len {
        return Err(LogError::io(
            "short write",
            &tmp,
            std::io::Error::other("short write"),
        ));
    }
    if sync {
        f.fdatasync()
            .await
            .map_err(|e| LogError::io("fdatasync", &tmp, e))?;
    }
    f.close()
        .await
        .map_err(|e| LogError::io("closing", &tmp, e))?;
    glommio::io::rename(&tmp, path)
        .await
        .map_err(|e| LogError::io("renaming", &tmp, e))?;
    if sync {
        sync_dir(path.parent().unwrap_or(Path::new("."))).await?;
    }
    Ok(())
}

/// fsyncs a directory, making created, renamed and removed entries durable.
pub(crate) async fn sync_dir(dir: &Path) -> Result<(), LogError> {
    let d = Directory::open(dir)
        .await
        .map_err(|e| LogError::io("opening dir", dir, e))?;
    d.sync()
        .await
        .map_err(|e| LogError::io("fsync dir", dir, e))?;
    d.close()
        .await
        .map_err(|e| LogError::io("closing dir", dir, e))
}

/// Reads a small whole file, `None` if it does not exist.
pub(crate) async fn read_small_file(path: &Path) -> Result<Option<Vec<u8>>, LogError> {
    match BufferedFile::open(path).await {
        Ok(f) => {
            let size = f
                .file_size()
                .await
                .map_err(|e| LogError::io("stat", path, e))?;
            let data = read_at(&f, path, 0, size as usize).await?;
            f.close()
                .await
                .map_err(|e| LogError::io("closing", path, e))?;
            Ok(Some(data))
        }
        Err(e) => {
            let e: std::io::Error = e.into();
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(None)
            } else {
                Err(LogError::io("opening", path, e))
            }
        }
    }
}

pub(crate) async fn remove_if_exists(path: &Path) -> Result<(), LogError> {
    match glommio::io::remove(path).await {
        Ok(()) => Ok(()),
        Err(e) => {
            let e: std::io::Error = e.into();
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(LogError::io("removing", path, e))
            }
        }
    }
}
