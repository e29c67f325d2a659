//! A small filesystem of its own (an ext4 image on a loop device, root only), for full-disk
//! tests and the fault harness's disk-full nemesis: a broker's data dir on it fills up long
//! before the machine's disk does.
//!
//! Promises: [`SmallDisk::mount`] says why when it cannot mount (not root, no loop devices);
//! dropping it unmounts the filesystem and removes the image, also when a test panics — so a
//! broker using it must be stopped first (declare the disk before the broker).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A mounted loop filesystem (module docs).
pub struct SmallDisk {
    mount_point: PathBuf,
    _dir: tempfile::TempDir,
}

impl SmallDisk {
    /// Makes and mounts a `size_mib` MiB ext4 filesystem.
    pub fn mount(size_mib: u64) -> Result<Self, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let image = dir.path().join("disk.img");
        let mount_point = dir.path().join("mnt");
        std::fs::create_dir(&mount_point).map_err(|e| e.to_string())?;
        let f = std::fs::File::create(&image).map_err(|e| e.to_string())?;
        f.set_len(size_mib << 20).map_err(|e| e.to_string())?;
        run(Command::new("mkfs.ext4").args(["-q", "-F"]).arg(&image))?;
        run(Command::new("mount")
            .args(["-o", "loop"])
            .arg(&image)
            .arg(&mount_point))?;
        Ok(Self {
            mount_point,
            _dir: dir,
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.mount_point
    }

    /// Fills what is left of it with `name` (written until the filesystem refuses more);
    /// returns the bytes written. Removing the file frees the space again.
    pub fn fill(&self, name: &str) -> Result<u64, String> {
        let path = self.mount_point.join(name);
        let mut f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let chunk = vec![0u8; 1 << 20];
        let mut written = 0u64;
        loop {
            match f.write(&chunk) {
                Ok(0) => break,
                Ok(n) => written += n as u64,
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
                Err(e) => return Err(format!("{}: {e}", path.display())),
            }
        }
        // What the page cache holds is not yet taken from the filesystem: sync it so the space
        // is really gone.
        let _ = f.sync_all();
        Ok(written)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount_point).status();
    }
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
