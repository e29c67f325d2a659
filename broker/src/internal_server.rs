//! The internal port (`--internal-port`, 9094) on core 0 of a clustered broker (DESIGN §7): other
//! brokers' raft messages go into this node's raft; their calls to the active controller
//! (registration, heartbeats, forwarded metadata changes) are answered on the same connection,
//! each with its request's correlation id; so are their followers' fetches, each partition served
//! on the core that owns it ([`crate::replica_share`]) and the records sent after the answer's
//! header as the frame's payload, and their transaction coordinators' markers
//! ([`crate::txn_markers::serve`]).
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
use std::collections::BTreeMap;

use spool_core::follower_fetch::FollowerFetch;
use spool_protocol::internal::{
    self, EpochEndOffset, ForwardAnswer, InternalFrame, InternalMessage, ReplicaFetch,
    ReplicaFetchAnswer, ReplicaFetchAnswerPartition,
};
use spool_protocol::ErrorCode;

use crate::net_io;
use crate::peers::internal_limits;
use crate::requests::{ReplicaFetchRead, ReplicaFetchShare, TopicPartition};
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
        if let InternalMessage::ReplicaFetch(fetch) = message {
            glommio::spawn_local(async move {
                let _permit = permit;
                let (answer, payload) = serve_replica_fetch(&shard, from_node, fetch).await;
                let frame = InternalFrame {
                    from_node: shard.config.node_id,
                    correlation_id,
                    message: InternalMessage::ReplicaFetchAnswer(answer),
                    cluster_id: shard.cluster_id().unwrap_or_default(),
                };
                match internal::encode_with_payload(&frame, payload, &internal_limits()) {
                    Ok(encoded) => {
                        // One buffer per answer: answers to concurrent calls share the writer.
                        let mut whole = bytes::BytesMut::with_capacity(encoded.len());
                        whole.extend_from_slice(&encoded.head);
                        for chunk in &encoded.payload {
                            whole.extend_from_slice(chunk);
                        }
                        let _ = tx.send(whole.freeze()).await;
                    }
                    Err(e) => tracing::error!("encoding a replica fetch answer: {e}"),
                }
            })
            .detach();
            continue;
        }
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
                InternalMessage::WriteTxnMarkers(m) => InternalMessage::WriteTxnMarkersAnswer(
                    crate::txn_markers::serve(&shard, m).await,
                ),
                InternalMessage::VerifyTxn(q) => {
                    InternalMessage::VerifyTxnAnswer(shard.verifier().serve(q).await)
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

/// A follower's fetch: its partitions grouped by owner core, each core's share served there
/// (concurrently), the answers put back in request order with their records as the payload.
async fn serve_replica_fetch(
    shard: &Rc<Shard>,
    from_node: i32,
    fetch: ReplicaFetch,
) -> (ReplicaFetchAnswer, Vec<bytes::Bytes>) {
    let refuse = |error| {
        (
            ReplicaFetchAnswer {
                error,
                partitions: Vec::new(),
            },
            Vec::new(),
        )
    };
    if fetch.replica_id != from_node {
        return refuse(ErrorCode::InvalidRequest);
    }
    let mut shares: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut reads: Vec<Option<ReplicaFetchRead>> = vec![None; fetch.partitions.len()];
    for (i, p) in fetch.partitions.iter().enumerate() {
        let tp = TopicPartition::new(p.topic.clone(), p.partition);
        match shard.owner(&tp) {
            Some(core) => shares.entry(core).or_default().push(i),
            None => reads[i] = Some(ReplicaFetchRead::error(ErrorCode::NotLeaderOrFollower)),
        }
    }
    let max_bytes = usize::try_from(fetch.max_bytes).unwrap_or(0);
    let max_wait_ms = u64::try_from(fetch.max_wait_ms).unwrap_or(0);
    let calls = shares.iter().map(|(&core, indexes)| {
        let share = ReplicaFetchShare {
            partitions: indexes
                .iter()
                .map(|&i| {
                    let p = &fetch.partitions[i];
                    (
                        TopicPartition::new(p.topic.clone(), p.partition),
                        FollowerFetch {
                            replica_id: fetch.replica_id,
                            replica_broker_epoch: fetch.broker_epoch,
                            current_leader_epoch: p.current_leader_epoch,
                            fetch_offset: p.fetch_offset,
                            last_fetched_epoch: p.last_fetched_epoch,
                            log_start_offset: p.log_start_offset,
                            durable_offset: p.durable_offset,
                        },
                    )
                })
                .collect(),
            max_wait_ms,
            // Each core's share may fill the budget: a fetch spanning cores answers at most
            // `cores` times it, still bounded by the frame limit below.
            max_bytes,
        };
        let me = Rc::clone(shard);
        glommio::spawn_local(async move { me.call(core, share).await })
    });
    let calls: Vec<_> = calls.collect();
    let mut answers = Vec::with_capacity(calls.len());
    for c in calls {
        answers.push(c.await);
    }
    for ((_, indexes), answer) in shares.iter().zip(answers) {
        match answer {
            Ok(share_reads) if share_reads.len() == indexes.len() => {
                for (&i, r) in indexes.iter().zip(share_reads) {
                    reads[i] = Some(r);
                }
            }
            _ => {
                for &i in indexes {
                    reads[i] = Some(ReplicaFetchRead::error(ErrorCode::RequestTimedOut));
                }
            }
        }
    }
    let mut payload = Vec::new();
    let mut payload_bytes = 0usize;
    let mut partitions = Vec::with_capacity(reads.len());
    for (p, read) in fetch.partitions.iter().zip(reads) {
        let mut read =
            read.unwrap_or_else(|| ReplicaFetchRead::error(ErrorCode::UnknownServerError));
        // The frame stays under the internal limit whatever the cores sent (the headers take
        // well under the slack left).
        if payload_bytes + read.records.len() > REPLICA_FETCH_ANSWER_BYTES_MAX {
            read.records = bytes::Bytes::new();
        }
        payload_bytes += read.records.len();
        partitions.push(ReplicaFetchAnswerPartition {
            topic: p.topic.clone(),
            partition: p.partition,
            error: read.error,
            high_watermark: read.high_watermark,
            log_start_offset: read.log_start_offset,
            log_end_offset: read.log_end_offset,
            diverging_epoch: read.diverging.map(|d| EpochEndOffset {
                epoch: d.epoch,
                end_offset: d.end_offset,
            }),
            records_bytes: read.records.len() as u32,
        });
        if !read.records.is_empty() {
            payload.push(read.records);
        }
    }
    (
        ReplicaFetchAnswer {
            error: ErrorCode::None,
            partitions,
        },
        payload,
    )
}

/// Record bytes one replica fetch answer carries at most (under the internal frame limit).
pub const REPLICA_FETCH_ANSWER_BYTES_MAX: usize = crate::peers::INTERNAL_MAX_FRAME_BYTES / 2;
