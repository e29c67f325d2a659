//! `spool-loadgen`: the load generator operators use to size a spool cluster and that the bench
//! suite (`loadgen/bench.sh`) uses to hold spool to the machine's limits. See `--help`; exit
//! status 0 on success, 1 on an error, 2 on bad flags, 3 when `--verify` finds a lost,
//! duplicated or reordered message (or a failed send).

mod cli;
mod consumer;
mod core_state;
mod cpu_time;
// The CPU-list parser the broker's `--cpuset` uses: included by path (std and libc only), so this
// crate needs no dependency on the broker.
#[path = "../../broker/src/cpuset.rs"]
mod cpuset;
mod delivered;
mod keys;
mod payload;
mod producer;
mod rate;
mod report;
mod run;
mod shared;
mod stats;
mod verify;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let settings = match cli::Settings::from_cli(cli::Cli::parse()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("spool-loadgen: {e}");
            return ExitCode::from(2);
        }
    };
    match run::run(settings) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("spool-loadgen: {e}");
            ExitCode::FAILURE
        }
    }
}
