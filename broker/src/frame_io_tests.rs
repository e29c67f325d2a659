//! Frames read under a receive mark ([`spool_protocol::recv_lowat`]): a large frame that arrives
//! in pieces and is followed by nothing is still read whole (the mark never waits for bytes the
//! sender has not committed to), and the socket's default mark is back for the next frame,
//! however short.

use futures_lite::AsyncWriteExt;
use glommio::net::{TcpListener, TcpStream};
use glommio::timer::sleep;
use std::time::Duration;

use super::*;
use crate::net_io::split;
use crate::test_executor::run;
use spool_protocol::recv_lowat::current_mark;

/// The frame timeout the reads run under: far longer than the test needs, so a read that
/// waits for bytes that never come fails the test with a timeout instead of passing.
const FRAME_TIMEOUT_MS: u64 = 20_000;

fn frame(body_bytes: usize, seed: u8) -> Vec<u8> {
    let total = LENGTH_PREFIX_BYTES + body_bytes;
    let mut f = (total as u32).to_be_bytes().to_vec();
    f.extend((0..body_bytes).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)));
    f
}

async fn read_one(r: &mut Half) -> Bytes {
    read_frame_within(
        r,
        std::future::pending::<()>(),
        FRAME_TIMEOUT_MS,
        None,
        |p| Ok::<usize, String>(u32::from_be_bytes(p) as usize),
    )
    .await
    .expect("the frame is read whole")
    .expect("a frame, not the end of the stream")
}

#[test]
fn a_large_frame_in_pieces_then_silence_is_read_whole_and_the_next_short_frame_too() {
    run(|| async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        // 3 MiB and a bit: several marks of the largest size, then one lowered to the rest.
        let big = frame(3 * 1024 * 1024 + 12_345, 7);
        let small = frame(10, 9);
        let (big2, small2) = (big.clone(), small.clone());
        let (go_tx, go_rx) = glommio::channels::local_channel::new_bounded::<()>(1);
        let client = glommio::spawn_local(async move {
            let mut c = TcpStream::connect(addr).await.expect("connect");
            // Uneven pieces with pauses, so the reader waits in the middle of the body, and
            // nothing after the frame until the reader says it has it.
            // The last piece (100 KB, above the smallest mark) comes after a pause: a mark
            // left higher than what is still to come would wait for it forever.
            let last = big2.len() - 100_000;
            let pieces = [
                &big2[..3],
                &big2[3..100_000],
                &big2[100_000..1_300_000],
                &big2[1_300_000..last],
            ];
            for piece in pieces {
                c.write_all(piece).await.expect("write");
                sleep(Duration::from_millis(20)).await;
            }
            c.write_all(&big2[last..]).await.expect("write");
            go_rx.recv().await.expect("the reader's go-ahead");
            c.write_all(&small2).await.expect("write");
            // Held open until the reader has the short frame too.
            go_rx.recv().await;
        });
        let server = listener.accept().await.expect("accept");
        let (mut r, _w, fd) = split(server);
        let got = read_one(&mut r).await;
        assert_eq!(&got[..], &big[..]);
        assert_eq!(
            current_mark(fd).expect("getsockopt"),
            1,
            "the default mark is back after the frame"
        );
        go_tx.send(()).await.expect("go-ahead");
        let got = read_one(&mut r).await;
        assert_eq!(&got[..], &small[..]);
        drop(go_tx);
        client.await;
    });
}
