//! Child processes with bounded waits: signalling by PID (only children this harness started),
//! waiting for exit up to a deadline, and running a command to completion with its output
//! captured in files (files, not pipes, so a chatty child never blocks on a full pipe).

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a wait looks at the child again. A poll interval, not a synchronization guess: the
/// deadline is what bounds the wait.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// Sends `signal` to `child` unless it has already exited; returns its exit status then (and
/// sends nothing). Reaping only ever happens through `child`, so while `try_wait` says "running"
/// the PID is still this child's and cannot name another process.
pub fn signal(child: &mut Child, signal: libc::c_int) -> Option<ExitStatus> {
    if let Ok(Some(status)) = child.try_wait() {
        return Some(status);
    }
    let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
    // SAFETY: kill(2) on the PID of a child that has not been reaped (checked just above): it
    // cannot name another process. No memory is involved.
    let rc = unsafe { libc::kill(pid, signal) };
    assert_eq!(
        rc,
        0,
        "kill({pid}, {signal}) failed: {}",
        std::io::Error::last_os_error()
    );
    None
}

/// Waits for `child` to exit, at most until `deadline`; `None` when it is still running then.
pub fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() >= deadline => return None,
            Ok(None) => std::thread::sleep(POLL_INTERVAL),
            Err(e) => panic!("waiting for pid {}: {e}", child.id()),
        }
    }
}

/// Kills `child` with SIGKILL (if it still runs) and reaps it.
pub fn kill_and_reap(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // `Child::kill` sends SIGKILL to this child's PID only.
        let _ = child.kill();
    }
    let _ = child.wait();
}

/// What a finished command left behind.
#[derive(Debug)]
pub struct Finished {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `cmd` with `stdin` fed to it, stdout and stderr captured in files under `scratch`, for at
/// most `timeout`. Panics (killing the child) when it runs longer: every test must end.
pub fn run_to_end(cmd: &mut Command, stdin: &[u8], scratch: &Path, timeout: Duration) -> Finished {
    let out_path = scratch.join("stdout");
    let err_path = scratch.join("stderr");
    let out = std::fs::File::create(&out_path).expect("creating a stdout capture file");
    let err = std::fs::File::create(&err_path).expect("creating a stderr capture file");
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {cmd:?}: {e}"));
    // Fed from a thread, so a child that reads slowly (or not at all) cannot block this one; a
    // child that exits early breaks the pipe, and its exit status tells the story then.
    let feeder = child.stdin.take().map(|mut pipe| {
        let data = stdin.to_vec();
        std::thread::spawn(move || {
            let _ = pipe.write_all(&data);
        })
    });
    let status = match wait_until(&mut child, Instant::now() + timeout) {
        Some(s) => s,
        None => {
            kill_and_reap(&mut child);
            panic!(
                "{cmd:?} still running after {timeout:?}; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
    };
    if let Some(f) = feeder {
        let _ = f.join();
    }
    Finished {
        status,
        stdout: std::fs::read_to_string(&out_path).expect("reading captured stdout"),
        stderr: std::fs::read_to_string(&err_path).expect("reading captured stderr"),
    }
}
