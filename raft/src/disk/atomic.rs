//! Durable small-file replacement: write `<name>.tmp`, fdatasync it, rename over `<name>`, fsync
//! the directory — so a reader after any crash sees either the whole old file or the whole new
//! one.
//!
//! Owns: that sequence, and the directory fsync helper. Blocking `std::fs` I/O (see
//! [`crate::disk`] for why that is acceptable here).

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

use super::faults;

/// Fsyncs a directory so a rename or create inside it is durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    faults::step("directory fsync")?;
    File::open(dir)?.sync_all()
}

/// Replaces `path` with `bytes` atomically and durably.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = Path::new(&tmp_name);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(tmp)?;
        faults::write_all(&mut f, bytes, "write of a replacement file")?;
        faults::step("fdatasync of a replacement file")?;
        f.sync_data()?;
    }
    faults::step("rename of a replacement file")?;
    fs::rename(tmp, path)?;
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => sync_dir(dir),
        _ => sync_dir(Path::new(".")),
    }
}
