//! A tiny slog `Drain` that forwards raft-rs's log lines to `tracing` (target `spool_raft::raft_rs`).
//!
//! Owns: level mapping (critical/error → error, warning → warn, info → info, debug → debug,
//! trace → trace) and flattening slog's key/value pairs into the message.
//! Never does: filter (tracing's subscriber decides), allocate when the level is disabled.

use std::fmt::{self, Write as _};

use slog::{Drain, Level, OwnedKVList, Record, Serializer, KV};

/// Forwards every slog record to tracing.
#[derive(Debug, Clone, Copy, Default)]
pub struct TracingDrain;

/// A slog logger for raft-rs that writes through tracing.
pub fn raft_logger() -> slog::Logger {
    slog::Logger::root(TracingDrain, slog::o!())
}

struct KvLine(String);

impl Serializer for KvLine {
    fn emit_arguments(&mut self, key: slog::Key, val: &fmt::Arguments<'_>) -> slog::Result {
        // Writing to a String cannot fail.
        let _ = write!(self.0, " {key}={val}");
        Ok(())
    }
}

fn enabled(level: Level) -> bool {
    match level {
        Level::Critical | Level::Error => {
            tracing::enabled!(target: "spool_raft::raft_rs", tracing::Level::ERROR)
        }
        Level::Warning => tracing::enabled!(target: "spool_raft::raft_rs", tracing::Level::WARN),
        Level::Info => tracing::enabled!(target: "spool_raft::raft_rs", tracing::Level::INFO),
        Level::Debug => tracing::enabled!(target: "spool_raft::raft_rs", tracing::Level::DEBUG),
        Level::Trace => tracing::enabled!(target: "spool_raft::raft_rs", tracing::Level::TRACE),
    }
}

impl Drain for TracingDrain {
    type Ok = ();
    type Err = slog::Never;

    fn log(&self, record: &Record<'_>, values: &OwnedKVList) -> Result<(), slog::Never> {
        if !enabled(record.level()) {
            return Ok(());
        }
        let mut kv = KvLine(String::new());
        // Serializing into a String cannot fail; a failure would only lose key/values.
        let _ = record.kv().serialize(record, &mut kv);
        let _ = values.serialize(record, &mut kv);
        let msg = record.msg();
        let kv = kv.0;
        match record.level() {
            Level::Critical | Level::Error => {
                tracing::error!(target: "spool_raft::raft_rs", "{msg}{kv}")
            }
            Level::Warning => tracing::warn!(target: "spool_raft::raft_rs", "{msg}{kv}"),
            Level::Info => tracing::info!(target: "spool_raft::raft_rs", "{msg}{kv}"),
            Level::Debug => tracing::debug!(target: "spool_raft::raft_rs", "{msg}{kv}"),
            Level::Trace => tracing::trace!(target: "spool_raft::raft_rs", "{msg}{kv}"),
        }
        Ok(())
    }
}
