//! raft-rs's slog output arrives in `tracing` (target `spool_raft::raft_rs`), key/values included.

use std::io::Write;
use std::sync::{Arc, Mutex};

use spool_raft::{MetadataRaft, RaftConfig, RecoveredState};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // A poisoned lock only means another test thread panicked; the bytes are still fine.
        let mut v = self.0.lock().unwrap_or_else(|p| p.into_inner());
        v.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn raft_rs_logs_reach_tracing() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let raft = MetadataRaft::new(
            &RaftConfig::single_voter(7, 7),
            RecoveredState {
                incarnation: 1,
                ..Default::default()
            },
        )
        .expect("node");
        assert!(raft.is_leader());
    });
    let text = String::from_utf8(captured.0.lock().expect("lock").clone()).expect("utf8");
    assert!(text.contains("spool_raft::raft_rs"), "{text}");
    assert!(text.contains("became leader"), "{text}");
    assert!(text.contains("term=1"), "{text}");
}
