//! [`Peers`]' calls against a peer that closes its connection without answering.

use std::io::Read;
use std::net::TcpListener;

use spool_protocol::internal::InternalMessage;
use spool_protocol::ErrorCode;

use super::{PeerError, Peers};
use crate::cluster_config::Voter;
use crate::test_executor::run;

/// Longer than the test could take when the call fails as it should.
const CALL_TIMEOUT_MS: u64 = 20_000;

/// A peer that reads the first bytes of a connection, then closes it: the call waiting for an
/// answer fails as closed, not after its timeout (before the fix the writer, idle on an empty
/// queue, never noticed, and every such call waited its whole timeout).
#[test]
fn a_call_fails_as_soon_as_the_peer_closes_the_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a port");
    let port = listener.local_addr().expect("its address").port();
    let peer = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().expect("the call's connection");
        let mut first = [0u8; 16];
        conn.read_exact(&mut first).expect("the call's first bytes");
        // Closed here, unanswered.
    });
    run(move || async move {
        let voter = Voter {
            node_id: 2,
            host: "127.0.0.1".into(),
            port,
        };
        let peers = Peers::new(1, vec![voter], None);
        let answer = peers
            .call(
                2,
                InternalMessage::VerifyTxnAnswer(ErrorCode::None),
                CALL_TIMEOUT_MS,
            )
            .await;
        assert_eq!(answer, Err(PeerError::Closed(2)));
    });
    peer.join().expect("the peer thread");
}
