//! Stopping the broker on a fault it must not run past: a metadata-log write that failed
//! (`spool_raft::Controller::storage_failure`). Owns the exit status that says so, which a
//! supervisor — or the fault harness — tells apart from a crash. Never does: anything graceful
//! (a controlled shutdown needs the controller that just failed).

/// The exit status of a broker stopped by [`metadata_storage_failed`] (sysexits'
/// EX_IOERR), so a supervisor — or the fault harness — can tell it from a crash.
pub const EXIT_METADATA_STORAGE_FAILED: i32 = 74;

/// Stops the process: a write to the metadata log failed (a full or failing disk), so raft's
/// state here may be ahead of what is on disk, and raft-rs cannot persist that batch again.
/// Going on would leave this broker's cores behind the cluster's metadata for good; stopping
/// loses nothing (everything acknowledged was synced), and the restart recovers from what is
/// durable — Kafka's broker shuts down too when its metadata log directory fails. Not
/// graceful on purpose: a controlled shutdown needs the controller.
pub fn metadata_storage_failed(why: &str) -> ! {
    tracing::error!(
        "the metadata log could not be written ({why}): stopping this broker; start it again once its disk has space or is replaced"
    );
    eprintln!("spool: the metadata log could not be written ({why}): stopping");
    std::process::exit(EXIT_METADATA_STORAGE_FAILED)
}
