//! One `spool consume --group … --format json` process under test: a consumer-group member whose
//! every printed record (stdout) and rebalance callback (stderr) is read on background threads into
//! a shared [`Output`], stamped with a process-wide sequence number so that tests can order lines
//! across members ("printed after member C started", "before C's first assignment").
//!
//! The lines are parsed by [`crate::group_output`]; a line that breaks the contract's formats
//! lands in [`Output::malformed`] (the tests report it); every stderr line is also kept verbatim
//! for failure messages.
//!
//! Promises: every wait has a deadline and fails the test with each member's state rather than
//! hanging; a member that exits while a test waits on it fails the wait at once; the process is
//! signalled only by its own PID and killed and reaped when the [`GroupConsumer`] drops.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use spool_protocol::client::TopicPartition;

use crate::broker::{clear_spool_env, Broker};
use crate::process;

pub use crate::group_output::{parse_event, parse_record, parse_tp, Event, Output, Printed};

/// Bound on a member's exit after SIGTERM or after `-n N` records (commit + leave included).
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(30);
/// How often [`wait_until`] re-evaluates its condition; the deadline bounds the wait.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Stderr lines shown per member when a wait fails.
const STDERR_TAIL_LINES: usize = 40;

/// Stamps every line read from any member, in reading order.
static SEQ: AtomicU64 = AtomicU64::new(1);

/// A point in the process-wide order of lines read: lines stamped later were read after this call.
pub fn mark() -> u64 {
    SEQ.fetch_add(1, Ordering::SeqCst)
}

/// How to run a member; `Default` is the CLI's defaults except a 6 s session (the usual broker
/// minimum), a 1 s heartbeat and a 500 ms auto-commit, so tests move quickly.
#[derive(Debug, Clone)]
pub struct MemberOptions {
    pub group_instance_id: Option<String>,
    /// `range`, `roundrobin` or `cooperative-sticky`; `None` = the CLI's default.
    pub assignor: Option<String>,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub auto_commit_interval_ms: u64,
    /// `-n N`: stop (commit, leave, exit 0) after N records.
    pub num: Option<u64>,
    pub extra_args: Vec<String>,
}

impl Default for MemberOptions {
    fn default() -> Self {
        Self {
            group_instance_id: None,
            assignor: None,
            session_timeout_ms: 6_000,
            heartbeat_interval_ms: 1_000,
            auto_commit_interval_ms: 500,
            num: None,
            extra_args: Vec::new(),
        }
    }
}

impl MemberOptions {
    /// The `spool consume` arguments (after `--brokers`).
    pub fn args(&self, topic: &str, group: &str) -> Vec<String> {
        let mut a: Vec<String> = ["consume", topic, "--group", group, "--format", "json"]
            .map(String::from)
            .to_vec();
        let mut flag = |name: &str, value: String| {
            a.push(name.to_owned());
            a.push(value);
        };
        if let Some(id) = &self.group_instance_id {
            flag("--group-instance-id", id.clone());
        }
        if let Some(s) = &self.assignor {
            flag("--assignor", s.clone());
        }
        flag("--session-timeout-ms", self.session_timeout_ms.to_string());
        flag(
            "--heartbeat-interval-ms",
            self.heartbeat_interval_ms.to_string(),
        );
        flag(
            "--auto-commit-interval-ms",
            self.auto_commit_interval_ms.to_string(),
        );
        if let Some(n) = self.num {
            flag("-n", n.to_string());
        }
        a.extend(self.extra_args.iter().cloned());
        a
    }
}

/// A running (or finished) group member.
pub struct GroupConsumer {
    label: String,
    command_line: String,
    child: Mutex<Child>,
    out: Arc<Mutex<Output>>,
    readers: Mutex<Vec<JoinHandle<()>>>,
}

impl GroupConsumer {
    /// Starts `spool --brokers <broker> consume <topic> --group <group> …`; `label` names it in
    /// failure messages.
    pub fn start(
        broker: &Broker,
        label: &str,
        topic: &str,
        group: &str,
        opts: &MemberOptions,
    ) -> Self {
        let args = opts.args(topic, group);
        let mut cmd = Command::new(crate::binary::spool_binary());
        cmd.arg("--brokers")
            .arg(broker.bootstrap())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        clear_spool_env(&mut cmd);
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting member {label}: {e}"));
        let out = Arc::new(Mutex::new(Output::default()));
        let stdout = child.stdout.take().expect("a piped stdout");
        let stderr = child.stderr.take().expect("a piped stderr");
        let readers = vec![
            spawn_reader(stdout, out.clone(), Stream::Stdout),
            spawn_reader(stderr, out.clone(), Stream::Stderr),
        ];
        Self {
            label: label.to_owned(),
            command_line: format!("spool {}", args.join(" ")),
            child: Mutex::new(child),
            out,
            readers: Mutex::new(readers),
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Runs `f` on the output so far (under the lock: keep it short).
    pub fn with<R>(&self, f: impl FnOnce(&Output) -> R) -> R {
        f(&self.out.lock().expect("member output"))
    }

    /// A copy of the output so far.
    pub fn snapshot(&self) -> Output {
        self.with(Output::clone)
    }

    pub fn owned(&self) -> BTreeSet<TopicPartition> {
        self.with(Output::owned)
    }

    /// The exit status, once the process has exited.
    pub fn exit_status(&self) -> Option<ExitStatus> {
        let mut child = self.child.lock().expect("member child");
        child.try_wait().ok().flatten()
    }

    /// SIGKILL: no commit, no LeaveGroup. Returns once the process is reaped and its output read.
    pub fn kill9(&self) {
        let status = self.signal_and_wait(libc::SIGKILL);
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "member {} exited on its own around kill -9 ({status})\n{}",
            self.label,
            self.summary()
        );
    }

    /// SIGTERM (commit, leave unless static, exit 0); returns the exit status once reaped and read.
    pub fn terminate(&self) -> ExitStatus {
        self.signal_and_wait(libc::SIGTERM)
    }

    /// SIGSTOP: the member stays in the group (until its session times out) but does nothing.
    pub fn pause(&self) {
        self.signal_running(libc::SIGSTOP);
    }

    /// SIGCONT after [`GroupConsumer::pause`].
    pub fn resume(&self) {
        self.signal_running(libc::SIGCONT);
    }

    fn signal_running(&self, sig: libc::c_int) {
        let status = process::signal(&mut self.child.lock().expect("member child"), sig);
        if let Some(status) = status {
            panic!(
                "member {} had exited ({status}) before signal {sig}\n{}",
                self.label,
                self.summary()
            );
        }
    }

    /// Waits for the process to exit on its own (`-n N`); its output is read completely then.
    pub fn wait_exit(&self) -> ExitStatus {
        let status = {
            let mut child = self.child.lock().expect("member child");
            process::wait_until(&mut child, Instant::now() + EXIT_TIMEOUT)
        };
        let Some(status) = status else {
            panic!(
                "member {} still running {EXIT_TIMEOUT:?} after it should have exited\n{}",
                self.label,
                self.summary()
            );
        };
        self.join_readers();
        status
    }

    fn signal_and_wait(&self, sig: libc::c_int) -> ExitStatus {
        let status = {
            let mut child = self.child.lock().expect("member child");
            if let Some(status) = process::signal(&mut child, sig) {
                drop(child);
                panic!(
                    "member {} had exited ({status}) before signal {sig}\n{}",
                    self.label,
                    self.summary()
                );
            }
            process::wait_until(&mut child, Instant::now() + EXIT_TIMEOUT)
        };
        let Some(status) = status else {
            panic!(
                "member {} still running {EXIT_TIMEOUT:?} after signal {sig}\n{}",
                self.label,
                self.summary()
            );
        };
        self.join_readers();
        status
    }

    /// Waits for the reader threads: after the process exits its pipes close, so they end.
    fn join_readers(&self) {
        let readers = std::mem::take(&mut *self.readers.lock().expect("member readers"));
        for r in readers {
            r.join().expect("a member's reader thread");
        }
    }

    /// The member's state for failure messages: command line, status, owned partitions, counts,
    /// and the last stderr lines.
    pub fn summary(&self) -> String {
        let status = self
            .exit_status()
            .map_or_else(|| "running".to_owned(), |s| s.to_string());
        self.with(|o| {
            let from = o.stderr.len().saturating_sub(STDERR_TAIL_LINES);
            format!(
                "--- member {} ({status}): {}\n  owned {:?}, {} records printed, {} malformed \
                 lines {:?}\n  stderr tail:\n    {}",
                self.label,
                self.command_line,
                o.owned()
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>(),
                o.records.len(),
                o.malformed.len(),
                o.malformed.iter().take(3).collect::<Vec<_>>(),
                o.stderr[from..].join("\n    ")
            )
        })
    }
}

impl Drop for GroupConsumer {
    fn drop(&mut self) {
        if let Ok(mut child) = self.child.lock() {
            process::kill_and_reap(&mut child);
        }
    }
}

/// Waits until `cond` holds, re-checking every few milliseconds, for at most `timeout`. Fails
/// with `what` and every member's state when the deadline passes, or at once when one of
/// `members` has exited (unless `cond` already holds) — a dead member cannot make progress.
/// Members that are meant to exit are simply left out of `members`.
pub fn wait_until(
    what: &str,
    timeout: Duration,
    members: &[&GroupConsumer],
    mut cond: impl FnMut() -> bool,
) {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return;
        }
        let dead: Vec<&str> = members
            .iter()
            .filter(|m| m.exit_status().is_some())
            .map(|m| m.label())
            .collect();
        let timed_out = Instant::now() >= deadline;
        if !dead.is_empty() || timed_out {
            // The last lines may have arrived just now.
            if cond() {
                return;
            }
            let why = if timed_out {
                format!("not after {timeout:?}")
            } else {
                format!("member(s) {dead:?} exited")
            };
            let states: Vec<String> = members.iter().map(|m| m.summary()).collect();
            panic!("waiting for {what}: {why}\n{}", states.join("\n"));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Fails listing every member's malformed lines, if any member printed one.
pub fn assert_well_formed(members: &[&GroupConsumer]) {
    for m in members {
        let bad = m.with(|o| o.malformed.clone());
        assert!(
            bad.is_empty(),
            "member {} broke the output contract: {bad:?}",
            m.label()
        );
    }
}

#[derive(Clone, Copy)]
enum Stream {
    Stdout,
    Stderr,
}

fn spawn_reader(
    pipe: impl Read + Send + 'static,
    out: Arc<Mutex<Output>>,
    stream: Stream,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(pipe);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match reader.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let line = String::from_utf8_lossy(&buf);
            let line = line.trim_end_matches(['\n', '\r']);
            let seq = mark();
            let mut o = out.lock().expect("member output");
            match stream {
                Stream::Stdout => match parse_record(line, seq) {
                    Ok(r) => o.records.push(r),
                    Err(e) => o.malformed.push(format!("stdout {line:?}: {e}")),
                },
                Stream::Stderr => {
                    o.stderr.push(line.to_owned());
                    match parse_event(line, seq) {
                        Ok(Some(e)) => o.events.push(e),
                        Ok(None) => {}
                        Err(e) => o.malformed.push(format!("stderr {line:?}: {e}")),
                    }
                }
            }
        }
        let mut o = out.lock().expect("member output");
        match stream {
            Stream::Stdout => o.stdout_closed = true,
            Stream::Stderr => o.stderr_closed = true,
        }
    })
}
