//! One `spool serve` process under test: started in a fresh temporary directory on its own
//! loopback address and free ports (native, admin and Kafka), ready only when its native port
//! answers ApiVersions (tests of the Kafka port also wait for that one:
//! [`Broker::wait_kafka_ready`]), and stopped with SIGKILL ([`Broker::kill9`]) or SIGTERM
//! ([`Broker::terminate`], which insists on exit code 0), then restarted on the same data
//! directory, address and ports.
//!
//! Promises: every wait is bounded (a broker that never becomes ready, or never exits, fails the
//! test with its log); the process is killed by its PID when the `Broker` drops, so no test leaves
//! a broker behind, even when it panics (the log's tail is printed then). Only the process this
//! struct started is ever signalled.
//!
//! The temporary directory is made under `TMPDIR` (default `/tmp`); it must be a file system
//! that takes O_DIRECT, as the broker's segment files need it.

use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::process;
use crate::wire::RawConn;

/// Bound on start-up (to a broker answering ApiVersions), generous for a machine busy compiling.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on a SIGTERM shutdown; the broker itself gives connections 10 s to drain.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(30);
/// How often start-up probes the native port (the deadline above bounds the wait).
const PROBE_INTERVAL: Duration = Duration::from_millis(20);
/// Lines of the broker's log shown when a test fails.
const LOG_TAIL_LINES: usize = 40;

/// How to run the broker.
#[derive(Debug, Clone)]
pub struct BrokerOptions {
    /// `--cores`; by default 2, or 1 on a one-core machine.
    pub cores: usize,
    /// More `spool serve` flags, e.g. `["--max-message-bytes", "4096"]`.
    pub extra_args: Vec<String>,
    /// Where the data lives (default: `data/` in the broker's scratch directory).
    pub data_dir: Option<PathBuf>,
    /// The address and (native, admin, Kafka) ports to use, when the caller chose them (a
    /// cluster names its voters' addresses before any of them starts); default: fresh ones.
    pub address: Option<(Ipv4Addr, [u16; 3])>,
}

impl Default for BrokerOptions {
    fn default() -> Self {
        Self {
            cores: available_cores().min(2),
            extra_args: Vec::new(),
            data_dir: None,
            address: None,
        }
    }
}

impl BrokerOptions {
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.extra_args.push(a.into());
        self
    }
}

pub struct Broker {
    /// Holds `data/`, the logs of every start, and scratch files of CLI runs.
    scratch: tempfile::TempDir,
    data_dir: PathBuf,
    ip: Ipv4Addr,
    native_port: u16,
    admin_port: u16,
    /// The Kafka listener's port (`--kafka-port`), advertised as itself on `ip`.
    kafka_port: u16,
    options: BrokerOptions,
    child: Option<Child>,
    /// Starts so far; start `n` logs to `broker-<n>.log`.
    starts: u32,
}

impl Broker {
    /// Starts a broker with the default options.
    pub fn start() -> Self {
        Self::start_with(BrokerOptions::default())
    }

    /// Starts a broker and waits until it answers ApiVersions. Panics with its log otherwise.
    pub fn start_with(options: BrokerOptions) -> Self {
        let scratch = tempfile::Builder::new()
            .prefix("spool-test-")
            .tempdir()
            .expect("creating a temporary directory");
        let (ip, ports) = match options.address {
            Some((ip, ports)) => (ip, ports.to_vec()),
            None => {
                let ip = crate::addr::next_address();
                (ip, crate::addr::free_ports(ip, 3))
            }
        };
        let mut broker = Self {
            data_dir: options
                .data_dir
                .clone()
                .unwrap_or_else(|| scratch.path().join("data")),
            scratch,
            ip,
            native_port: ports[0],
            admin_port: ports[1],
            kafka_port: ports[2],
            options,
            child: None,
            starts: 0,
        };
        broker.launch();
        broker
    }

    /// `host:port` of the native listener, as the clients and the CLI take it.
    pub fn bootstrap(&self) -> String {
        self.native_addr().to_string()
    }

    pub fn native_addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.native_port))
    }

    pub fn admin_addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.admin_port))
    }

    /// The Kafka listener, which advertises this same address in Metadata.
    pub fn kafka_addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.kafka_port))
    }

    /// `host:port` of the Kafka listener, as Kafka clients take it (`bootstrap.servers`, `-b`).
    pub fn kafka_bootstrap(&self) -> String {
        self.kafka_addr().to_string()
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    pub fn native_port(&self) -> u16 {
        self.native_port
    }

    pub fn admin_port(&self) -> u16 {
        self.admin_port
    }

    pub fn kafka_port(&self) -> u16 {
        self.kafka_port
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// A directory for the test's own files; removed with the broker.
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// The running process's id (for reading its `/proc` entries), if it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Whether the process is alive (not exited, not killed).
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// How the process ended, if it exited by itself (then it is reaped, and
    /// [`Broker::restart`] may start it again); `None` while it runs, or when it was stopped.
    pub fn exited_by_itself(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        Some(status)
    }

    /// The current (or last) start's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path(self.starts)).unwrap_or_default()
    }

    /// `GET /metrics` from the admin port.
    pub fn metrics(&self) -> String {
        crate::http::get(self.admin_addr(), "/metrics")
            .unwrap_or_else(|e| panic!("metrics: {e}\n{}", self.log_tail()))
    }

    /// SIGSTOP: the process stays, answers nothing, sends nothing (a long pause, a hung host).
    pub fn pause(&mut self) {
        self.signal_running(libc::SIGSTOP);
    }

    /// SIGCONT after [`Broker::pause`].
    pub fn resume(&mut self) {
        self.signal_running(libc::SIGCONT);
    }

    fn signal_running(&mut self, sig: libc::c_int) {
        let child = self.child.as_mut().expect("a running broker");
        if let Some(status) = process::signal(child, sig) {
            panic!(
                "the broker had exited ({status}) before signal {sig}\n{}",
                self.log_tail()
            );
        }
    }

    /// SIGKILL: no shutdown, no flush, no clean marker. Returns once the process is reaped *and*
    /// its listening sockets are gone: the kernel tears a dead process's io_uring instance down
    /// asynchronously, and the listener a pending accept holds stays in LISTEN for a few
    /// milliseconds after the reap (measured: 10–15 ms in about half of the kills here).
    pub fn kill9(&mut self) {
        self.kill9_reap_only();
        let deadline = Instant::now() + STOP_TIMEOUT;
        for addr in self.listener_addrs() {
            while std::net::TcpStream::connect_timeout(&addr, PROBE_INTERVAL).is_ok() {
                assert!(
                    Instant::now() < deadline,
                    "{addr} still accepts connections {STOP_TIMEOUT:?} after the broker was killed"
                );
                std::thread::sleep(PROBE_INTERVAL);
            }
        }
    }

    /// SIGKILL and reap, without waiting for the kernel to close the dead broker's sockets (see
    /// [`Broker::kill9`]): what a supervisor that restarts at once sees.
    pub fn kill9_reap_only(&mut self) {
        let mut child = self.child.take().expect("kill9: the broker is not running");
        if let Some(status) = process::signal(&mut child, libc::SIGKILL) {
            panic!(
                "broker exited on its own before kill9 ({status})\n{}",
                self.log_tail()
            );
        }
        let status = process::wait_until(&mut child, Instant::now() + STOP_TIMEOUT)
            .unwrap_or_else(|| panic!("pid {} survived SIGKILL", child.id()));
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "broker exited on its own around kill9 ({status})\n{}",
            self.log_tail()
        );
    }

    /// SIGTERM, then waits for the exit, which must be a clean one (code 0).
    pub fn terminate(&mut self) {
        let mut child = self
            .child
            .take()
            .expect("terminate: the broker is not running");
        if let Some(status) = process::signal(&mut child, libc::SIGTERM) {
            panic!(
                "broker exited on its own before SIGTERM ({status})\n{}",
                self.log_tail()
            );
        }
        let Some(status) = process::wait_until(&mut child, Instant::now() + STOP_TIMEOUT) else {
            process::kill_and_reap(&mut child);
            panic!(
                "broker still running {STOP_TIMEOUT:?} after SIGTERM\n{}",
                self.log_tail()
            );
        };
        assert_eq!(
            status.code(),
            Some(0),
            "broker did not exit cleanly after SIGTERM ({status})\n{}",
            self.log_tail()
        );
    }

    /// Starts the broker again on the same data directory, address and ports.
    pub fn restart(&mut self) {
        assert!(
            self.child.is_none(),
            "restart: stop the broker first (kill9 or terminate)"
        );
        self.launch();
    }

    fn log_path(&self, start: u32) -> PathBuf {
        self.scratch.path().join(format!("broker-{start}.log"))
    }

    /// The `spool serve` command line for this broker (also used to start rivals on purpose).
    pub fn serve_command(&self) -> Command {
        let mut cmd = Command::new(crate::binary::spool_binary());
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(&self.data_dir)
            .arg("--host")
            .arg(self.ip.to_string())
            .arg("--native-port")
            .arg(self.native_port.to_string())
            .arg("--admin-port")
            .arg(self.admin_port.to_string())
            .arg("--kafka-port")
            .arg(self.kafka_port.to_string())
            .arg("--cores")
            .arg(self.options.cores.to_string())
            .args(&self.options.extra_args);
        clear_spool_env(&mut cmd);
        cmd
    }

    fn launch(&mut self) {
        self.starts += 1;
        let log_path = self.log_path(self.starts);
        let log = std::fs::File::create(&log_path).expect("creating the broker log");
        let log2 = log.try_clone().expect("cloning the broker log handle");
        let child = self
            .serve_command()
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .expect("starting spool serve");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Every address the broker listens on.
    fn listener_addrs(&self) -> [SocketAddr; 3] {
        [self.native_addr(), self.admin_addr(), self.kafka_addr()]
    }

    /// Waits (at most [`START_TIMEOUT`]) until the Kafka port accepts connections; call after a
    /// start or restart of a broker whose Kafka port a test uses. Panics with the log otherwise.
    pub fn wait_kafka_ready(&self) {
        let deadline = Instant::now() + START_TIMEOUT;
        while let Err(e) = std::net::TcpStream::connect_timeout(&self.kafka_addr(), PROBE_INTERVAL)
        {
            assert!(
                Instant::now() < deadline,
                "the Kafka port {} refuses connections {START_TIMEOUT:?} after start ({e})\n{}",
                self.kafka_addr(),
                self.log_tail()
            );
            std::thread::sleep(PROBE_INTERVAL);
        }
    }

    /// Polls until a fresh connection gets an ApiVersions answer; fails fast if the process dies.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            let child = self.child.as_mut().expect("a launched child");
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                panic!(
                    "spool serve exited during start-up ({status})\n{}",
                    self.log_tail()
                );
            }
            let probe = RawConn::connect(self.native_addr()).and_then(|mut c| c.api_versions());
            let Err(last_error) = probe else {
                return;
            };
            if Instant::now() >= deadline {
                let threads = self
                    .child
                    .as_ref()
                    .map_or_else(String::new, |c| threads(c.id()));
                panic!(
                    "broker not ready after {START_TIMEOUT:?} (last probe: {last_error})\n\
                     threads (name state wchan):\n{threads}\n{}",
                    self.log_tail()
                );
            }
            std::thread::sleep(PROBE_INTERVAL);
        }
    }

    /// The last lines of the current start's log, labelled, for failure messages.
    pub fn log_tail(&self) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        let from = lines.len().saturating_sub(LOG_TAIL_LINES);
        format!(
            "--- broker log ({}) ---\n{}",
            self.log_path(self.starts).display(),
            lines[from..].join("\n")
        )
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            process::kill_and_reap(&mut child);
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_tail());
        }
    }
}

/// Each thread of process `pid` as "name state wait-channel", from /proc: where a broker that
/// never became ready is stuck.
fn threads(pid: u32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return String::from("(no /proc entry)");
    };
    let read = |path: std::path::PathBuf| std::fs::read_to_string(path).unwrap_or_default();
    tasks
        .flatten()
        .filter_map(|t| {
            let stat = read(t.path().join("stat"));
            // A thread that exited between the listing and this read has nothing left to show.
            if stat.is_empty() {
                return None;
            }
            // The state follows the parenthesised name: "pid (name) S ...".
            let state = stat
                .rsplit_once(") ")
                .and_then(|(_, rest)| rest.get(..1))
                .unwrap_or("?");
            // Either may vanish too if the thread exits meanwhile: keep the columns anyway.
            let or_dash = |s: String| {
                let s = s.trim().to_string();
                if s.is_empty() {
                    "-".to_string()
                } else {
                    s
                }
            };
            Some(format!(
                "  {} {state} {}",
                or_dash(read(t.path().join("comm"))),
                or_dash(read(t.path().join("wchan")))
            ))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// This machine's cores (the most `--cores` accepts).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Removes `SPOOL_*` settings inherited from the developer's shell: the command line alone
/// decides how the broker (or CLI) under test runs.
pub fn clear_spool_env(cmd: &mut Command) {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SPOOL_") {
            cmd.env_remove(k);
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn threads_lists_this_process() {
        let listed = super::threads(std::process::id());
        assert!(
            !listed.is_empty() && !listed.contains("no /proc"),
            "{listed}"
        );
        assert!(
            listed.lines().all(|l| l.split_whitespace().count() >= 2),
            "{listed}"
        );
    }
}
