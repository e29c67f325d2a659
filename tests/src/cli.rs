//! Running the `spool` command-line tools against a broker under test: `--brokers` filled in,
//! stdin fed, output captured, bounded in time.

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use crate::broker::{clear_spool_env, Broker};
use crate::process::{run_to_end, Finished};

/// Bound on one CLI command (they take well under a second on an idle machine).
pub const CLI_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `spool --brokers <broker> <args…>` with `stdin`; returns its exit status and output.
pub fn spool(broker: &Broker, args: &[&str], stdin: &str) -> Finished {
    static RUNS: AtomicU32 = AtomicU32::new(0);
    let scratch = broker
        .scratch()
        .join(format!("cli-{}", RUNS.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir_all(&scratch).expect("creating a CLI scratch directory");
    let mut cmd = Command::new(crate::binary::spool_binary());
    cmd.arg("--brokers").arg(broker.bootstrap()).args(args);
    clear_spool_env(&mut cmd);
    run_to_end(&mut cmd, stdin.as_bytes(), &scratch, CLI_TIMEOUT)
}

/// Like [`spool`], and the command must succeed; returns its stdout.
pub fn spool_ok(broker: &Broker, args: &[&str], stdin: &str) -> String {
    let f = spool(broker, args, stdin);
    assert!(
        f.status.success(),
        "spool {args:?} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        f.status,
        f.stdout,
        f.stderr
    );
    f.stdout
}
