//! The internal port (`--internal-port`, 9094) on core 0 of a clustered broker (DESIGN §7): other
//! brokers' raft messages go into this node's raft; their calls to the active controller
//! (registration, heartbeats, forwarded metadata changes) are answered on the same connection,
//! each with its request's correlation id.
//!
//! A peer's bytes are input like any other: a frame over the limit, one that fails the verifier
//! or does not decode closes only its connection, after a log line. Answers queue on a bounded
//! channel per connection; calls are served concurrently, at most [`CALLS_PER_CONNECTION_MAX`] at
//! once (more wait in the socket).

use std::rc::Rc;

use futures_lite::AsyncWriteExt;
use glommio::channels::local_channel;
use glommio::net::TcpStream;
use glommio::sync::Semaphore;
use spool_protocol::frame;
use spool_protocol::internal::{self, ForwardAnswer, InternalFrame, InternalMessage};

use crate::net_io;
use crate::peers::internal_limits;
use crate::shard::Shard;

/// Calls one peer connection may have in flight.
pub const CALLS_PER_CONNECTION_MAX: usize = 64;

pub async fn serve(shard: Rc<Shard>, stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let _ = stream.set_nodelay(true);
    let (mut reader, mut writer, _) = net_io::split(stream);
    let (tx, rx) = local_channel::new_bounded::<bytes::Bytes>(CALLS_PER_CONNECTION_MAX);
    let writer_task = glommio::spawn_local(async move {
        while let Some(bytes) = rx.recv().await {
            if writer.write_all(&bytes).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
    });
    let tx = Rc::new(tx);
    let calls = Rc::new(Semaphore::new(CALLS_PER_CONNECTION_MAX as u64));
    let limits = internal_limits();
    let mut warned_cluster = false;
    loop {
        let read = crate::frame_io::read_frame(&mut reader, |p| {
            frame::frame_bytes_from_prefix(p, &limits)
        });
        let bytes = match futures_lite::future::or(
            async { Some(read.await) },
            shard.stopped_signal(),
        )
        .await
        {
            None | Some(Ok(None)) => break,
            Some(Ok(Some(b))) => b,
            Some(Err(e)) => {
                tracing::info!(%peer, "closing an internal connection: {e}");
                break;
            }
        };
        let frame = match internal::decode(&bytes, &limits) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(%peer, "closing an internal connection: an undecodable frame: {e}");
                break;
            }
        };
        let Some(controller) = shard.controller.borrow().clone() else {
            break;
        };
        let InternalFrame {
            from_node,
            correlation_id,
            message,
            cluster_id,
        } = frame;
        if let InternalMessage::Raft(messages) = message {
            // A node of another cluster (started with that cluster's data directory) must not
            // vote or append here, nor this cluster there: drop its raft messages. Its
            // registration is refused by the active controller, which stops it.
            let ours = shard.cluster_id();
            if let Some(ours) = ours.filter(|o| !cluster_id.is_empty() && *o != cluster_id) {
                if !warned_cluster {
                    warned_cluster = true;
                    tracing::warn!(%peer, from_node, theirs = %cluster_id, %ours, "dropping raft messages from a node of another cluster");
                }
                continue;
            }
            let shard = Rc::clone(&shard);
            glommio::spawn_local(async move {
                controller.step_raft(&shard, from_node, messages).await;
            })
            .detach();
            continue;
        }
        let Ok(permit) = Rc::clone(&calls).acquire_static_permit(1).await else {
            break;
        };
        let (shard, tx) = (Rc::clone(&shard), Rc::clone(&tx));
        glommio::spawn_local(async move {
            let _permit = permit;
            let answer = match message {
                InternalMessage::RegisterBroker(r) => InternalMessage::RegisterBrokerAnswer(
                    controller.register(&shard, r, from_node).await,
                ),
                InternalMessage::Heartbeat(h) => {
                    InternalMessage::HeartbeatAnswer(controller.heartbeat(&shard, h).await)
                }
                InternalMessage::Forward(op) => {
                    InternalMessage::ForwardAnswer(controller.serve_forward(&shard, op).await)
                }
                // Answers arrive on the connections this node opened (`crate::peers`), never
                // here; one sent here is answered as "not the controller" and ignored.
                _ => InternalMessage::ForwardAnswer(ForwardAnswer::NotController),
            };
            let frame = InternalFrame {
                from_node: shard.config.node_id,
                correlation_id,
                message: answer,
                cluster_id: shard.cluster_id().unwrap_or_default(),
            };
            match internal::encode(&frame) {
                Ok(bytes) => {
                    let _ = tx.send(bytes).await;
                }
                Err(e) => tracing::error!("encoding an internal answer: {e}"),
            }
        })
        .detach();
    }
    drop(tx);
    writer_task.await;
}
